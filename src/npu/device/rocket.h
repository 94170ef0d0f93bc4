// A client of the mainline `rocket` accel driver (rocket_uapi.h): the device node, buffer
// objects mapped into the process, job submission and waiting. Every failure is an Error that
// names the call, the errno and what it means for the user. No policy here: which buffers,
// which jobs and which order are the runtime's (runtime/npu_device.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace rkd::npu::device {

// The default device node of the first accel device.
inline constexpr const char* kDefaultDevice = "/dev/accel/accel0";
// Default PREP_BO wait. The kernel resets a core whose job runs longer than 500 ms and then
// signals the job's fence (PREP_BO returns success, the output is what the NPU left): a wait
// that times out means the job never reached a core.
inline constexpr int64_t kDefaultWaitMs = 5000;

// What an errno from `call` means for the user (no device node, permission, ...).
std::string errno_meaning(const std::string& call, int err);

// A buffer object: its handle, device address and the process's mapping of it.
struct Bo {
  uint32_t handle = 0;
  uint32_t size = 0;
  uint64_t dma_address = 0;
  uint64_t mmap_offset = 0;
  uint8_t* map = nullptr;
  std::span<uint8_t> bytes() const { return {map, size}; }
};

// One task: register commands at `regcmd` (device address), `regcmd_count` 64-bit words.
struct Task {
  uint32_t regcmd = 0;
  uint32_t regcmd_count = 0;
};
// One job: tasks run in order on one core; it waits for the last writer of every buffer in
// `in` and `out`, and becomes the last writer of those in `out`.
struct Job {
  std::vector<Task> tasks;
  std::vector<uint32_t> in, out;
};

class Rocket {
 public:
  // Opens the device node; an error names the path and why (ENOENT: no NPU driver loaded or
  // the node is elsewhere; EACCES: the user is not in the node's group; ...).
  static Result<std::unique_ptr<Rocket>> open(const std::string& path = kDefaultDevice);
  ~Rocket();
  Rocket(const Rocket&) = delete;
  Rocket& operator=(const Rocket&) = delete;

  const std::string& path() const { return path_; }
  // CREATE_BO and mmap; the buffer is zero-filled by the kernel (shmem pages).
  Result<Bo> create_bo(uint32_t size);
  // munmap and GEM_CLOSE.
  Status destroy_bo(Bo& bo);
  // FINI_BO: the CPU's writes to the buffer are done (flushed for the device).
  Status fini_bo(const Bo& bo);
  // PREP_BO: waits up to `timeout_ms` for the buffer's last writer, then makes it coherent for
  // the CPU. A timeout is an error naming the buffer.
  Status prep_bo(const Bo& bo, int64_t timeout_ms = kDefaultWaitMs);
  // Checks every job (tasks, handles of this file's buffers, each task's words inside one
  // buffer) before SUBMIT: mainline's SUBMIT drops a malformed job silently (its per-job errors
  // are not returned), so a mistake here would surface as an output never written.
  Status submit(const std::vector<Job>& jobs);

  // The raw ioctl, its failure named: for tests of the error paths and for tools.
  Status ioctl_named(const char* name, unsigned long request, void* arg);

 private:
  Rocket(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // munmap (when mapped) and GEM_CLOSE.
  Status release(uint32_t handle, uint8_t* map, size_t size);
  int fd_ = -1;
  std::string path_;
  std::vector<Bo> bos_;  // created and not destroyed: the task check's ranges
};

}  // namespace rkd::npu::device
