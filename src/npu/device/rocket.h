// A client of the mainline `rocket` accel driver (rocket_uapi.h; driver.h has the contract):
// the device node, buffer objects mapped into the process, job submission and waiting.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "npu/device/driver.h"

namespace rkd::npu::device {

class Rocket final : public Driver {
 public:
  // Opens the device node; an error names the path and why (ENOENT: no NPU driver loaded or
  // the node is elsewhere; EACCES: the user is not in the node's group; ...).
  static Result<std::unique_ptr<Rocket>> open(const std::string& path = kDefaultDevice);
  ~Rocket() override;
  Rocket(const Rocket&) = delete;
  Rocket& operator=(const Rocket&) = delete;

  const char* name() const override { return "rocket"; }
  bool completes_ppu_only_tasks() const override { return false; }
  // CREATE_BO and mmap; the buffer is zero-filled by the kernel (shmem pages).
  Result<Bo> create_bo(uint32_t size) override;
  // munmap and GEM_CLOSE.
  Status destroy_bo(Bo& bo) override;
  // FINI_BO: the CPU's writes to the buffer are done (flushed for the device).
  Status fini_bo(const Bo& bo) override;
  // PREP_BO: waits up to `timeout_ms` for the buffer's last writer, then makes it coherent for
  // the CPU. A timeout is an error naming the buffer.
  Status prep_bo(const Bo& bo, int64_t timeout_ms = kDefaultWaitMs) override;
  // Checks every job (tasks, handles of this file's buffers, each task's words inside one
  // buffer) before SUBMIT: mainline's SUBMIT drops a malformed job silently (its per-job errors
  // are not returned), so a mistake here would surface as an output never written.
  Status submit(const std::vector<Job>& jobs, int64_t timeout_ms = kDefaultWaitMs) override;

  // The raw ioctl, its failure named: for tests of the error paths and for tools.
  Status ioctl_named(const char* name, unsigned long request, void* arg);

 private:
  Rocket(int fd, std::string path) : Driver(std::move(path)), fd_(fd) {}
  // munmap (when mapped) and GEM_CLOSE.
  Status release(uint32_t handle, uint8_t* map, size_t size);
  int fd_ = -1;
  std::vector<Bo> bos_;  // created and not destroyed: the task check's ranges
};

}  // namespace rkd::npu::device
