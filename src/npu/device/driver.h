// The NPU's kernel drivers as the runtime uses them: buffer objects mapped into the process,
// jobs of register-command tasks, waiting. Two implementations: mainline's `rocket` accel
// driver (rocket.h, Linux >= 6.18) and the vendor kernels' `rknpu` DRM driver (rknpu.h, the
// BSP kernels 5.10 / 6.1 most boards run). open_driver() tells them apart by the DRM driver
// name of the node. Every failure is an Error that names the device, the call, the errno and
// what it means for the user. No policy here: which buffers, which jobs and which order are
// the runtime's (runtime/npu_device.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace rkd::npu::device {

// The default device node: the first accel device (rocket); open_driver() looks for an rknpu
// DRM node when it does not exist (find_default_device).
inline constexpr const char* kDefaultDevice = "/dev/accel/accel0";
// Default wait for a job. rocket: the kernel resets a core whose job runs longer than 500 ms
// and then signals the job's fence; a wait that times out means the job never reached a core.
// rknpu: SUBMIT's own timeout.
inline constexpr int64_t kDefaultWaitMs = 5000;

// "0x1f000" (addresses and offsets in messages).
std::string hex(uint64_t v);
// ioctl(2), retried on EINTR and EAGAIN: 0, or the errno it failed with.
int ioctl_errno(int fd, unsigned long request, void* arg);
// What an errno from `call` means for the user (no device node, permission, ...).
std::string errno_meaning(const std::string& call, int err);

// A buffer object: its handle, device address and the process's mapping of it (obj_addr: the
// rknpu driver's kernel object, which SUBMIT and MEM_SYNC name).
struct Bo {
  uint32_t handle = 0;
  uint32_t size = 0;
  uint64_t dma_address = 0;
  uint64_t mmap_offset = 0;
  uint64_t obj_addr = 0;
  uint8_t* map = nullptr;
  std::span<uint8_t> bytes() const { return {map, size}; }
};

// One task: register commands at `regcmd` (device address), `regcmd_count` 64-bit words
// (regcmd.h: the register writes and the 4-word trailer); enable_mask, the blocks it runs (the
// trailer's PC_OPERATION_ENABLE), says which interrupt ends it.
struct Task {
  uint32_t regcmd = 0;
  uint32_t regcmd_count = 0;
  uint32_t enable_mask = 0;
};
// One job: tasks run in order on one core; it waits for the last writer of every buffer in
// `in` and `out`, and becomes the last writer of those in `out`. `core`: the core it is meant
// for (rknpu's core mask; rocket's scheduler picks the core itself).
struct Job {
  std::vector<Task> tasks;
  std::vector<uint32_t> in, out;
  int core = 0;
};

class Driver {
 public:
  virtual ~Driver() = default;
  // "rocket" or "rknpu".
  virtual const char* name() const = 0;
  const std::string& path() const { return path_; }
  // Whether a task without the DPU (a PPU-only pooling task) completes: mainline learns of a
  // task's end only through the DPU's interrupt; rknpu waits for the interrupt the task names.
  virtual bool completes_ppu_only_tasks() const = 0;
  // A buffer of `size` bytes, zero-filled, mapped into the process, at a device address below
  // 4 GiB (the NPU's address registers are 32 bits).
  virtual Result<Bo> create_bo(uint32_t size) = 0;
  virtual Status destroy_bo(Bo& bo) = 0;
  // The CPU's writes to the buffer are done (flushed for the device).
  virtual Status fini_bo(const Bo& bo) = 0;
  // Waits up to `timeout_ms` for the buffer's last writer, then makes it coherent for the CPU.
  virtual Status prep_bo(const Bo& bo, int64_t timeout_ms) = 0;
  // Checks every job (tasks inside one buffer object of this file, known handles), then
  // submits them in order.
  virtual Status submit(const std::vector<Job>& jobs, int64_t timeout_ms) = 0;

 protected:
  explicit Driver(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The DRM driver name of an open device node ("rocket", "rknpu"), or an error naming the node
// when it answers no DRM_IOCTL_VERSION.
Result<std::string> drm_driver_name(int fd, const std::string& path);
// Opens the node and the client of the driver behind it; an error names the node and why (no
// such node, permission, a driver rkdeploy does not speak).
Result<std::unique_ptr<Driver>> open_driver(const std::string& path);
// kDefaultDevice when it exists, else the first /dev/dri/card* node whose driver is rknpu,
// else kDefaultDevice (whose open then fails with the reason).
std::string find_default_device();

}  // namespace rkd::npu::device
