// Back-end options shared by the commands that run a model (contract in backend.h).
#include "cli/backend.h"

#include <cstdio>

#include "cli/commands.h"
#include "npu/device/driver.h"
#include "npu/lower/lower.h"
#include "npu/sim/sim.h"
#include "quant/requant.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_device.h"
#include "runtime/npu_ops.h"

namespace rkd::cli {

namespace {
bool on_npu(const BackendArgs& a) { return a.backend == "sim" || a.backend == "device"; }
std::string strategy_of(const BackendArgs& a) { return a.strategy.empty() ? npu::lower::strategy_name(npu::lower::kDefaultStrategy) : a.strategy; }
std::string device_of(const BackendArgs& a) { return a.device.empty() ? npu::device::find_default_device() : a.device; }
}  // namespace

void add_backend_options(CLI::App* c, BackendArgs& a) {
  c->add_option("--backend", a.backend,
                "cpu (float; QDQ as written), int8 (QDQ patterns on the integer kernels) or sim (int8, convolutions on the RK3588 NPU "
                "simulator, docs/npu.md) or device (the sim back end's NPU nodes on a board's NPU through its kernel driver: mainline "
                "rocket or the vendor kernels' rknpu, docs/device.md)")
      ->check(CLI::IsMember({"cpu", "int8", "sim", "device"}));
  c->add_option("--device", a.device,
                std::string("with --backend device: the NPU's device node (default ") + npu::device::kDefaultDevice +
                    ", else the first /dev/dri/card* of the rknpu driver)");
  const int cores = static_cast<int>(npu::arch::kRk3588.cores);
  c->add_option("--cores", a.cores,
                "with --backend device: NPU cores a convolution's tasks are split over, as separate jobs (1-" + std::to_string(cores) + ", default " +
                    std::to_string(cores) + ")")
      ->check(CLI::Range(1, cores));
  c->add_option("--strategy", a.strategy, "with --backend sim or device: " + strategy_help());
  c->add_option("--sim", a.sim_knobs, "with --backend sim: simulator knob NAME=VALUE (rkdeploy help sim)");
  c->add_flag("--fuse-npu-add", a.fuse_npu_add,
              "with --backend sim: fuse an Add into the convolution before it (the EW stage: one rounding instead of the int8 reference's two) "
              "instead of running it as its own DPU task");
  c->add_flag("--npu-round-trips", a.npu_round_trips,
              "with --backend sim: every NPU node in its own device memory, each input written and each output read back by the host "
              "(no device-memory chaining; the outputs are the same)");
  c->add_option("--requant", a.requant,
                "with --backend int8 or sim: requantization of every integer op, replacing the model format's "
                "(tflite_double_rounding, tflite_single_rounding, tflite_xnnpack, onnx_float, rknpu_out_cvt; docs/quantization.md)")
      ->check(CLI::IsMember(quant::requant_names()));
}

// --backend: cpu (float), int8 (integer kernels), sim (int8, NPU nodes on the RK3588 NPU
// simulator with --strategy), device (the same NPU nodes on a rocket or rknpu device:
// docs/device.md; on rocket without PPU-only tasks).
void apply_backend(const BackendArgs& a, runtime::CompileOptions& c, runtime::ExecutorOptions& e) {
  const bool npu = on_npu(a);
  c.int8 = a.backend == "int8" || npu;
  // Names parsed once here, into the typed options the runtime reads.
  if (!a.requant.empty()) c.requant = take(quant::parse_requant(a.requant));
  if (npu) {
    c.npu_strategy = a.strategy.empty() ? npu::lower::kDefaultStrategy : take(npu::lower::parse_strategy(a.strategy));
    for (const std::string& k : a.sim_knobs) check(npu::sim::set_knob(c.npu_quirks, k));
    c.npu_fuse_add = a.fuse_npu_add;
  } else if (!a.strategy.empty() || !a.sim_knobs.empty() || a.fuse_npu_add || a.npu_round_trips) {
    fail(invalid("--strategy, --sim, --fuse-npu-add and --npu-round-trips need --backend sim"));
  }
  if (a.backend == "device") {
    if (a.npu_round_trips) fail(invalid("--npu-round-trips is a simulator check: not with --backend device"));
    e.npu_device = open_npu_device(a.device, a.cores);
    c.npu_mainline = e.npu_device->mainline();
  } else if (!a.device.empty() || a.cores != npu::arch::kRk3588.cores) {
    fail(invalid("--device and --cores need --backend device"));
  }
  e.npu_chaining = !a.npu_round_trips;
}

std::shared_ptr<runtime::NpuDevice> open_npu_device(const std::string& device, int cores) {
  runtime::NpuDeviceOptions o;
  o.path = device.empty() ? npu::device::find_default_device() : device;
  o.cores = cores;
  return take(runtime::NpuDevice::open(o));
}

std::string backend_description(const BackendArgs& a) {
  if (a.backend == "sim") return "sim (strategy " + strategy_of(a) + ")";
  if (a.backend == "device") return "device " + device_of(a) + " (" + std::to_string(a.cores) + " core(s), strategy " + strategy_of(a) + ")";
  return a.backend;
}

void report_npu(const BackendArgs& a, const runtime::LoadedModel& m) {
  const runtime::FusionReport& f = m.fusion;
  if (a.backend != "sim" && a.backend != "device") return;
  const std::string where =
      a.backend == "sim" ? "the RK3588 simulator" : "the NPU device " + device_of(a) + " (" + std::to_string(a.cores) + " core(s))";
  std::fprintf(stderr, "%s\n", runtime::npu_placement_text(f, where, strategy_of(a)).c_str());
  for (const runtime::NpuOpFamily& family : runtime::npu_op_families()) {
    if (auto it = f.npu.find(family.name); it != f.npu.end())
      for (const auto& r : it->second.on_cpu) std::fprintf(stderr, "  on the CPU: %s\n", r.c_str());
  }
  std::fprintf(stderr, "npu schedule: k = %d switch(es) between the CPU and the NPU in execution order\n", runtime::npu_device_switches(*m.graph));
  if (const runtime::NpuSession* s = m.executor->npu_session()) {
    std::fprintf(stderr, "npu device memory: %s\n", runtime::npu_chaining_text(runtime::npu_chaining(*s)).c_str());
  }
}

}  // namespace rkd::cli
