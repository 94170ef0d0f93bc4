// The NPU nodes on a board's NPU through its kernel driver (docs/device.md): mainline's rocket or
// the vendor kernels' rknpu (npu/device/driver.h, told apart by the node's DRM driver name). One
// buffer object (the arena) holds the session's device memory at the address the kernel gave
// it - the lowering places everything at that base, so the register commands are the
// simulator's with the arena's addresses - and one small buffer object per job orders the
// jobs (a token: no task reads or writes it; a job lists its producers' and its readers'
// tokens as inputs and its own as output, which is all rocket orders jobs by; rknpu runs the
// jobs one after the other in submission order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "npu/arch/arch.h"
#include "npu/device/driver.h"

namespace rkd::runtime {

struct NpuDeviceOptions {
  std::string path;                                        // empty: npu::device::find_default_device()
  int cores = static_cast<int>(npu::arch::kRk3588.cores);  // jobs a convolution's tasks are split into (1 to the NPU's cores)
  int64_t wait_ms = npu::device::kDefaultWaitMs;
};

class NpuDevice {
 public:
  static Result<std::shared_ptr<NpuDevice>> open(const NpuDeviceOptions& o);
  const NpuDeviceOptions& options() const { return opt_; }
  npu::device::Driver& driver() { return *driver_; }
  // Whether the device completes PPU-only tasks (rknpu does; mainline rocket does not, so a
  // model for it is compiled with CompileOptions::npu_mainline).
  bool mainline() const { return !driver_->completes_ppu_only_tasks(); }
  // The device address the session's memory must be lowered at: the arena's, or the
  // simulator's default before there is one.
  uint32_t base() const;
  // An arena of at least `bytes` (a new one when the present one is smaller).
  Status make_arena(size_t bytes);
  const std::optional<npu::device::Bo>& arena() const { return arena_; }
  // A new token buffer object (one page).
  Result<npu::device::Bo> token();

 private:
  NpuDeviceOptions opt_;
  std::unique_ptr<npu::device::Driver> driver_;
  std::optional<npu::device::Bo> arena_;
};

}  // namespace rkd::runtime
