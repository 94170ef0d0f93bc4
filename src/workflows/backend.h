// The back end a model runs on (run, eval, bench; the command line's --backend and the Python
// package's backend=): cpu, int8, sim or device, and the NPU options that go with sim and
// device, checked once and turned into the executor's compile and run options.
//
// Contract:
//  - cpu: float (QDQ as written); int8: the QDQ patterns on the integer kernels; sim: int8 with
//    the NPU operation table's nodes on the RK3588 simulator (strategy, simulator knobs,
//    fuse_npu_add, npu_round_trips); device: the sim back end's NPU nodes on a board's NPU
//    through its kernel driver (device node, cores; on a mainline rocket node without PPU-only
//    tasks). docs/cli.md describes each option.
//  - configure_backend() refuses an NPU option given without its back end, an unknown back-end,
//    strategy, requantization or knob name (each named), and a device that cannot be opened.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "npu/arch/arch.h"
#include "runtime/executor.h"
#include "runtime/model.h"

namespace rkd::workflows {

// The back ends' names, in the order the documentation lists them.
const std::vector<std::string>& backend_names();

struct BackendChoice {
  std::string backend = "cpu";
  std::string requant;   // "": the model format's convention
  std::string strategy;  // "": npu::lower::kDefaultStrategy
  std::vector<std::string> sim_knobs;
  std::string device;  // "": npu::device::find_default_device()
  int cores = static_cast<int>(npu::arch::kRk3588.cores);
  bool fuse_npu_add = false;
  bool npu_round_trips = false;
};

// See the contract above; opens the device for `device`.
Status configure_backend(const BackendChoice& b, runtime::CompileOptions& c, runtime::ExecutorOptions& e);
// The NPU device node `device` (empty: the default node) split over `cores` jobs.
Result<std::shared_ptr<runtime::NpuDevice>> open_npu_device(const std::string& device, int cores);
// "cpu", "int8", "sim (strategy sorted-bs-multiplier)", "device /dev/accel/accel0 (3 core(s), strategy ...)".
std::string backend_description(const BackendChoice& b);
// With sim or device: what the NPU took and what stayed on the CPU, the switches between them in
// execution order, the device memory's traffic (lines of text; empty for cpu and int8).
std::vector<std::string> npu_report_lines(const BackendChoice& b, const runtime::LoadedModel& m);

}  // namespace rkd::workflows
