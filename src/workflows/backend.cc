// Back-end selection shared by the command line and the Python package (contract in backend.h).
#include "workflows/backend.h"

#include <algorithm>

#include "npu/device/driver.h"
#include "npu/lower/lower.h"
#include "npu/sim/sim.h"
#include "quant/requant.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_device.h"
#include "runtime/npu_ops.h"

namespace rkd::workflows {

namespace {
bool on_npu(const BackendChoice& b) { return b.backend == "sim" || b.backend == "device"; }
std::string strategy_of(const BackendChoice& b) { return b.strategy.empty() ? npu::lower::strategy_name(npu::lower::kDefaultStrategy) : b.strategy; }
std::string device_of(const BackendChoice& b) { return b.device.empty() ? npu::device::find_default_device() : b.device; }
}  // namespace

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names{"cpu", "int8", "sim", "device"};
  return names;
}

Status configure_backend(const BackendChoice& b, runtime::CompileOptions& c, runtime::ExecutorOptions& e) {
  const auto& names = backend_names();
  if (std::find(names.begin(), names.end(), b.backend) == names.end()) {
    return invalid("backend '" + b.backend + "': not one of cpu, int8, sim, device");
  }
  const bool npu = on_npu(b);
  c.int8 = b.backend == "int8" || npu;
  if (!b.requant.empty()) {
    RKD_ASSIGN(c.requant, quant::parse_requant(b.requant));
  }
  if (npu) {
    c.npu_strategy = npu::lower::kDefaultStrategy;
    if (!b.strategy.empty()) {
      RKD_ASSIGN(c.npu_strategy, npu::lower::parse_strategy(b.strategy));
    }
    for (const std::string& k : b.sim_knobs) RKD_TRY(npu::sim::set_knob(c.npu_quirks, k));
    c.npu_fuse_add = b.fuse_npu_add;
  } else if (!b.strategy.empty() || !b.sim_knobs.empty() || b.fuse_npu_add || b.npu_round_trips) {
    return invalid(
        "--strategy, --sim, --fuse-npu-add and --npu-round-trips (Python: strategy=, sim=, fuse_npu_add=, npu_round_trips=) need --backend sim");
  }
  if (b.backend == "device") {
    if (b.npu_round_trips) return invalid("--npu-round-trips is a simulator check: not with --backend device");
    if (b.cores < 1 || b.cores > static_cast<int>(npu::arch::kRk3588.cores)) {
      return invalid("--cores " + std::to_string(b.cores) + ": not in 1-" + std::to_string(npu::arch::kRk3588.cores));
    }
    RKD_ASSIGN(e.npu_device, open_npu_device(b.device, b.cores));
    c.npu_mainline = e.npu_device->mainline();
  } else if (!b.device.empty() || b.cores != static_cast<int>(npu::arch::kRk3588.cores)) {
    return invalid("--device and --cores (Python: device=, cores=) need --backend device");
  }
  e.npu_chaining = !b.npu_round_trips;
  return {};
}

Result<std::shared_ptr<runtime::NpuDevice>> open_npu_device(const std::string& device, int cores) {
  runtime::NpuDeviceOptions o;
  o.path = device.empty() ? npu::device::find_default_device() : device;
  o.cores = cores;
  return runtime::NpuDevice::open(o);
}

std::string backend_description(const BackendChoice& b) {
  if (b.backend == "sim") return "sim (strategy " + strategy_of(b) + ")";
  if (b.backend == "device") return "device " + device_of(b) + " (" + std::to_string(b.cores) + " core(s), strategy " + strategy_of(b) + ")";
  return b.backend;
}

std::vector<std::string> npu_report_lines(const BackendChoice& b, const runtime::LoadedModel& m) {
  std::vector<std::string> lines;
  if (!on_npu(b)) return lines;
  const runtime::FusionReport& f = m.fusion;
  const std::string where =
      b.backend == "sim" ? "the RK3588 simulator" : "the NPU device " + device_of(b) + " (" + std::to_string(b.cores) + " core(s))";
  lines.push_back(runtime::npu_placement_text(f, where, strategy_of(b)));
  for (const runtime::NpuOpFamily& family : runtime::npu_op_families()) {
    if (auto it = f.npu.find(family.name); it != f.npu.end())
      for (const auto& r : it->second.on_cpu) lines.push_back("  on the CPU: " + r);
  }
  lines.push_back("npu schedule: k = " + std::to_string(runtime::npu_device_switches(*m.graph)) +
                  " switch(es) between the CPU and the NPU in execution order");
  if (const runtime::NpuSession* s = m.executor->npu_session()) {
    lines.push_back("npu device memory: " + runtime::npu_chaining_text(runtime::npu_chaining(*s)));
  }
  return lines;
}

}  // namespace rkd::workflows
