// The back-end options a command that runs a model takes (run, eval): --backend cpu|int8|sim|
// device and the NPU options that go with sim and device, checked once and turned into the
// executor's compile and run options.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "npu/arch/arch.h"
#include "runtime/executor.h"
#include "runtime/model.h"
#include "runtime/npu_device.h"

namespace rkd::cli {

struct BackendArgs {
  std::string backend = "cpu";
  std::string requant;
  std::string strategy;
  std::vector<std::string> sim_knobs;
  std::string device;  // default: npu::device::kDefaultDevice
  int cores = static_cast<int>(npu::arch::kRk3588.cores);
  bool fuse_npu_add = false;
  bool npu_round_trips = false;
};

// Adds --backend, --device, --cores, --strategy, --sim, --fuse-npu-add, --npu-round-trips and
// --requant to `c`.
void add_backend_options(CLI::App* c, BackendArgs& a);
// The options' meaning as compile and executor options (opens the device for --backend
// device); a usage error when an NPU option is given without its back end.
void apply_backend(const BackendArgs& a, runtime::CompileOptions& c, runtime::ExecutorOptions& e);
// The NPU device of --device (empty: the default node) split over --cores jobs; exits with the
// named error when it cannot be opened.
std::shared_ptr<runtime::NpuDevice> open_npu_device(const std::string& device, int cores);
// With sim or device: what the NPU took and what stayed on the CPU, the switches between them
// in execution order, the device memory's traffic; to stderr.
void report_npu(const BackendArgs& a, const runtime::LoadedModel& m);
// "cpu", "int8", "sim (strategy sorted-bs-multiplier)", "device /dev/accel/accel0 (3 cores)".
std::string backend_description(const BackendArgs& a);

}  // namespace rkd::cli
