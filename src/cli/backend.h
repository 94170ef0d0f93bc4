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
#include "workflows/backend.h"

namespace rkd::cli {

using BackendArgs = workflows::BackendChoice;

// Adds --backend, --device, --cores, --strategy, --sim, --fuse-npu-add, --npu-round-trips and
// --requant to `c`.
void add_backend_options(CLI::App* c, BackendArgs& a);
// The options' meaning as compile and executor options (workflows::configure_backend; exits
// with its error).
void apply_backend(const BackendArgs& a, runtime::CompileOptions& c, runtime::ExecutorOptions& e);
// The NPU device of --device (empty: the default node) split over --cores jobs; exits with the
// named error when it cannot be opened.
std::shared_ptr<runtime::NpuDevice> open_npu_device(const std::string& device, int cores);
// With sim or device: what the NPU took and what stayed on the CPU, the switches between them
// in execution order, the device memory's traffic; to stderr.
void report_npu(const BackendArgs& a, const runtime::LoadedModel& m);
using workflows::backend_description;

}  // namespace rkd::cli
