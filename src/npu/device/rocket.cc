#include "npu/device/rocket.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "npu/device/rocket_uapi.h"

namespace rkd::npu::device {

static_assert(sizeof(rkd_rocket_create_bo) == 24 && sizeof(rkd_rocket_task) == 8 && sizeof(rkd_rocket_job) == 40 && sizeof(rkd_rocket_submit) == 24 &&
              sizeof(rkd_rocket_prep_bo) == 16 && sizeof(rkd_rocket_fini_bo) == 8);

Result<std::unique_ptr<Rocket>> Rocket::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return invalid("rocket device " + path + ": open: " + errno_meaning("open", e));
  }
  return std::unique_ptr<Rocket>(new Rocket(fd, path));
}

Rocket::~Rocket() {
  for (const Bo& b : bos_) (void)release(b.handle, b.map, b.size);
  if (fd_ >= 0) ::close(fd_);
}

Status Rocket::release(uint32_t handle, uint8_t* map, size_t size) {
  if (map) ::munmap(map, size);
  rkd_drm_gem_close g{handle, 0};
  return ioctl_named("DRM_IOCTL_GEM_CLOSE", RKD_DRM_IOCTL_GEM_CLOSE, &g);
}

Status Rocket::ioctl_named(const char* name, unsigned long request, void* arg) {
  if (const int e = ioctl_errno(fd_, request, arg)) return invalid("rocket device " + path_ + ": " + name + ": " + errno_meaning(name, e));
  return {};
}

Result<Bo> Rocket::create_bo(uint32_t size) {
  rkd_rocket_create_bo c{};
  c.size = size;
  RKD_TRY(ioctl_named("DRM_IOCTL_ROCKET_CREATE_BO", RKD_ROCKET_IOCTL_CREATE_BO, &c));
  Bo b;
  b.handle = c.handle;
  b.size = size;
  b.dma_address = c.dma_address;
  b.mmap_offset = c.offset;
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(c.offset));
  if (m == MAP_FAILED) {
    const int e = errno;
    (void)release(c.handle, nullptr, 0);
    return invalid("rocket device " + path_ + ": mmap of buffer object " + std::to_string(c.handle) + " (" + std::to_string(size) +
                   " bytes at offset " + hex(c.offset) + "): " + errno_meaning("mmap", e));
  }
  if (c.dma_address + size > (uint64_t{1} << 32)) {
    (void)release(c.handle, static_cast<uint8_t*>(m), size);
    return invalid("rocket device " + path_ + ": buffer object " + std::to_string(c.handle) + " at device address " + hex(c.dma_address) +
                   " lies above 4 GiB: the NPU's address registers are 32 bits");
  }
  b.map = static_cast<uint8_t*>(m);
  bos_.push_back(b);
  return b;
}

Status Rocket::destroy_bo(Bo& bo) {
  for (size_t i = 0; i < bos_.size(); ++i) {
    if (bos_[i].handle != bo.handle) continue;
    bos_.erase(bos_.begin() + static_cast<long>(i));
    Status st = release(bo.handle, bo.map, bo.size);
    bo.map = nullptr;
    return st;
  }
  return invalid("rocket device " + path_ + ": no buffer object " + std::to_string(bo.handle) + " to destroy");
}

Status Rocket::fini_bo(const Bo& bo) {
  rkd_rocket_fini_bo f{bo.handle, 0};
  return ioctl_named("DRM_IOCTL_ROCKET_FINI_BO", RKD_ROCKET_IOCTL_FINI_BO, &f);
}

Status Rocket::prep_bo(const Bo& bo, int64_t timeout_ms) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  rkd_rocket_prep_bo p{};
  p.handle = bo.handle;
  p.timeout_ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec + timeout_ms * 1000000;
  Status st = ioctl_named("DRM_IOCTL_ROCKET_PREP_BO", RKD_ROCKET_IOCTL_PREP_BO, &p);
  if (!st.ok()) return st.error().with_context("waiting " + std::to_string(timeout_ms) + " ms for buffer object " + std::to_string(bo.handle));
  return st;
}

Status Rocket::submit(const std::vector<Job>& jobs, int64_t /*timeout_ms: PREP_BO waits*/) {
  auto known = [&](uint32_t h) {
    for (const Bo& b : bos_)
      if (b.handle == h) return true;
    return false;
  };
  std::vector<rkd_rocket_job> raw(jobs.size());
  std::vector<std::vector<rkd_rocket_task>> tasks(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    const std::string what = "rocket device " + path_ + ": job " + std::to_string(j) + ": ";
    if (job.tasks.empty()) return invalid(what + "no tasks (the kernel would drop the job)");
    for (uint32_t h : job.in)
      if (!known(h)) return invalid(what + "input buffer handle " + std::to_string(h) + " is not a buffer object of this device");
    for (uint32_t h : job.out)
      if (!known(h)) return invalid(what + "output buffer handle " + std::to_string(h) + " is not a buffer object of this device");
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      const Task& k = job.tasks[t];
      const uint64_t lo = k.regcmd, hi = lo + uint64_t{k.regcmd_count} * 8;
      bool inside = false;
      for (const Bo& b : bos_) inside = inside || (lo >= b.dma_address && hi <= b.dma_address + b.size);
      if (k.regcmd_count == 0 || !inside)
        return invalid(what + "task " + std::to_string(t) + ": " + std::to_string(k.regcmd_count) + " register-command words at " + hex(k.regcmd) +
                       (k.regcmd_count == 0 ? " (the kernel drops a task of no words)"
                                            : " do not lie inside one buffer object (an NPU page fault: the job would hang)"));
      tasks[j].push_back({k.regcmd, k.regcmd_count});
    }
    raw[j].tasks = reinterpret_cast<uintptr_t>(tasks[j].data());
    raw[j].task_count = static_cast<uint32_t>(tasks[j].size());
    raw[j].task_struct_size = sizeof(rkd_rocket_task);
    raw[j].in_bo_handles = reinterpret_cast<uintptr_t>(job.in.data());
    raw[j].in_bo_handle_count = static_cast<uint32_t>(job.in.size());
    raw[j].out_bo_handles = reinterpret_cast<uintptr_t>(job.out.data());
    raw[j].out_bo_handle_count = static_cast<uint32_t>(job.out.size());
  }
  rkd_rocket_submit s{};
  s.jobs = reinterpret_cast<uintptr_t>(raw.data());
  s.job_count = static_cast<uint32_t>(raw.size());
  s.job_struct_size = sizeof(rkd_rocket_job);
  return ioctl_named("DRM_IOCTL_ROCKET_SUBMIT", RKD_ROCKET_IOCTL_SUBMIT, &s);
}

}  // namespace rkd::npu::device
