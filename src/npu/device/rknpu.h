// A client of the vendor kernels' `rknpu` DRM driver (rknpu_uapi.h; driver.h has the contract),
// the driver of the BSP kernels (5.10, 6.1) most RK3588 boards run.
//
// How it drives the driver:
//  - buffers: MEM_CREATE (cacheable, kernel-mapped, IOMMU, zeroed), MEM_MAP and mmap;
//    fini_bo is MEM_SYNC to the device, prep_bo MEM_SYNC from it; MEM_DESTROY.
//  - jobs: one SUBMIT per job, blocking (the driver returns when the job's last interrupt came
//    or its timeout passed), in the order given, so jobs run one after the other and every
//    dependency holds. A job's tasks go into a task table (40-byte entries in a kernel-mapped
//    buffer): regcfg_amount = words - 4 (the driver adds the 4-word trailer back), the
//    enable mask from the task, int_mask the DPU's (0x300) or, for a PPU-only task, the PPU's
//    (0xc00). The hardware's command fetcher walks the trailers from the first task, so a
//    job's run of tasks is cut where a trailer does not link to the next task (each piece its
//    own SUBMIT).
//  - cores: core_mask = the job's core (Job::core modulo 3) and only that core's
//    subcore_task[] range non-zero; never several cores in one SUBMIT and never two SUBMITs at
//    once from one process - both reported to crash the vendor kernel (facts sheet section 6).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "npu/device/driver.h"

namespace rkd::npu::device {

class Rknpu final : public Driver {
 public:
  // Opens the node; ACTION reads the hardware and driver versions (an error names the node
  // and why).
  static Result<std::unique_ptr<Rknpu>> open(const std::string& path);
  ~Rknpu() override;
  Rknpu(const Rknpu&) = delete;
  Rknpu& operator=(const Rknpu&) = delete;

  const char* name() const override { return "rknpu"; }
  bool completes_ppu_only_tasks() const override { return true; }
  Result<Bo> create_bo(uint32_t size) override;
  Status destroy_bo(Bo& bo) override;
  Status fini_bo(const Bo& bo) override;
  Status prep_bo(const Bo& bo, int64_t timeout_ms = kDefaultWaitMs) override;
  Status submit(const std::vector<Job>& jobs, int64_t timeout_ms = kDefaultWaitMs) override;

  uint32_t hw_version() const { return hw_version_; }
  uint32_t driver_version() const { return driver_version_; }
  // The raw ioctl, its failure named: for tests of the error paths and for tools.
  Status ioctl_named(const char* name, unsigned long request, void* arg);

 private:
  Rknpu(int fd, std::string path) : Driver(std::move(path)), fd_(fd) {}
  Status release(const Bo& bo);
  // One SUBMIT of `count` entries already in the task table, on `core`.
  Status submit_range(uint32_t count, int core, int64_t timeout_ms, const std::string& what);
  int fd_ = -1;
  uint32_t hw_version_ = 0, driver_version_ = 0;
  std::vector<Bo> bos_;  // created and not destroyed
  Bo tasks_{};           // the task table (grown on demand)
  bool has_tasks_ = false;
};

}  // namespace rkd::npu::device
