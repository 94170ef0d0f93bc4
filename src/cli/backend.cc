// Back-end options shared by the commands that run a model (contract in backend.h).
#include "cli/backend.h"

#include <cstdio>

#include "cli/commands.h"
#include "npu/device/driver.h"
#include "quant/requant.h"
#include "runtime/npu_device.h"

namespace rkd::cli {

void add_backend_options(CLI::App* c, BackendArgs& a) {
  c->add_option("--backend", a.backend,
                "cpu (float; QDQ as written), int8 (QDQ patterns on the integer kernels) or sim (int8, convolutions on the RK3588 NPU "
                "simulator, docs/npu.md) or device (the sim back end's NPU nodes on a board's NPU through its kernel driver: mainline "
                "rocket or the vendor kernels' rknpu, docs/device.md)")
      ->check(CLI::IsMember(workflows::backend_names()));
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

void apply_backend(const BackendArgs& a, runtime::CompileOptions& c, runtime::ExecutorOptions& e) { check(workflows::configure_backend(a, c, e)); }

std::shared_ptr<runtime::NpuDevice> open_npu_device(const std::string& device, int cores) { return take(workflows::open_npu_device(device, cores)); }

void report_npu(const BackendArgs& a, const runtime::LoadedModel& m) {
  for (const std::string& line : workflows::npu_report_lines(a, m)) std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace rkd::cli
