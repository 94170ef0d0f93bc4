#include "npu/device/rknpu.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "npu/arch/arch.h"
#include "npu/device/rknpu_uapi.h"
#include "npu/regcmd/regcmd.h"

namespace rkd::npu::device {

static_assert(sizeof(rkd_rknpu_mem_create) == 48 && sizeof(rkd_rknpu_mem_map) == 16 && sizeof(rkd_rknpu_mem_destroy) == 16 &&
              sizeof(rkd_rknpu_task) == 40 && sizeof(rkd_rknpu_submit) == 104 && sizeof(rkd_rknpu_mem_sync) == 32 && sizeof(rkd_rknpu_action) == 8);

namespace {

constexpr uint32_t kMemFlags = RKD_RKNPU_MEM_CACHEABLE | RKD_RKNPU_MEM_KERNEL_MAPPING | RKD_RKNPU_MEM_IOMMU | RKD_RKNPU_MEM_ZEROING;
constexpr int kCores = static_cast<int>(arch::kRk3588.cores);

}  // namespace

Result<std::unique_ptr<Rknpu>> Rknpu::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return invalid("rknpu device " + path + ": open: " + errno_meaning("open", e));
  }
  std::unique_ptr<Rknpu> r(new Rknpu(fd, path));
  rkd_rknpu_action a{RKD_RKNPU_GET_HW_VERSION, 0};
  RKD_TRY(r->ioctl_named("DRM_IOCTL_RKNPU_ACTION", RKD_RKNPU_ACTION_D, &a));
  r->hw_version_ = a.value;
  a = {RKD_RKNPU_GET_DRV_VERSION, 0};
  RKD_TRY(r->ioctl_named("DRM_IOCTL_RKNPU_ACTION", RKD_RKNPU_ACTION_D, &a));
  r->driver_version_ = a.value;
  return r;
}

Rknpu::~Rknpu() {
  for (const Bo& b : bos_) (void)release(b);
  if (has_tasks_) (void)release(tasks_);
  if (fd_ >= 0) ::close(fd_);
}

Status Rknpu::ioctl_named(const char* name, unsigned long request, void* arg) {
  if (const int e = ioctl_errno(fd_, request, arg)) return invalid("rknpu device " + path_ + ": " + name + ": " + errno_meaning(name, e));
  return {};
}

Status Rknpu::release(const Bo& bo) {
  if (bo.map) ::munmap(bo.map, bo.size);
  rkd_rknpu_mem_destroy d{bo.handle, 0, bo.obj_addr};
  return ioctl_named("DRM_IOCTL_RKNPU_MEM_DESTROY", RKD_RKNPU_MEM_DESTROY_D, &d);
}

Result<Bo> Rknpu::create_bo(uint32_t size) {
  rkd_rknpu_mem_create c{};
  c.flags = kMemFlags;
  c.size = size;
  RKD_TRY(ioctl_named("DRM_IOCTL_RKNPU_MEM_CREATE", RKD_RKNPU_MEM_CREATE_D, &c));
  Bo b;
  b.handle = c.handle;
  b.size = size;
  b.dma_address = c.dma_addr;
  b.obj_addr = c.obj_addr;
  rkd_rknpu_mem_map m{c.handle, 0, 0};
  if (Status st = ioctl_named("DRM_IOCTL_RKNPU_MEM_MAP", RKD_RKNPU_MEM_MAP_D, &m); !st.ok()) {
    (void)release(b);
    return st.error();
  }
  b.mmap_offset = m.offset;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(m.offset));
  if (p == MAP_FAILED) {
    const int e = errno;
    (void)release(b);
    return invalid("rknpu device " + path_ + ": mmap of buffer object " + std::to_string(c.handle) + " (" + std::to_string(size) +
                   " bytes at offset " + hex(m.offset) + "): " + errno_meaning("mmap", e));
  }
  b.map = static_cast<uint8_t*>(p);
  if (c.dma_addr + size > (uint64_t{1} << 32)) {
    (void)release(b);
    return invalid("rknpu device " + path_ + ": buffer object " + std::to_string(c.handle) + " at device address " + hex(c.dma_addr) +
                   " lies above 4 GiB: the NPU's address registers are 32 bits");
  }
  bos_.push_back(b);
  return b;
}

Status Rknpu::destroy_bo(Bo& bo) {
  for (size_t i = 0; i < bos_.size(); ++i) {
    if (bos_[i].handle != bo.handle) continue;
    bos_.erase(bos_.begin() + static_cast<long>(i));
    Status st = release(bo);
    bo.map = nullptr;
    return st;
  }
  return invalid("rknpu device " + path_ + ": no buffer object " + std::to_string(bo.handle) + " to destroy");
}

Status Rknpu::fini_bo(const Bo& bo) {
  rkd_rknpu_mem_sync s{RKD_RKNPU_MEM_SYNC_TO_DEVICE, 0, bo.obj_addr, 0, bo.size};
  return ioctl_named("DRM_IOCTL_RKNPU_MEM_SYNC", RKD_RKNPU_MEM_SYNC_D, &s);
}

Status Rknpu::prep_bo(const Bo& bo, int64_t /*timeout_ms: SUBMIT waited*/) {
  rkd_rknpu_mem_sync s{RKD_RKNPU_MEM_SYNC_FROM_DEVICE, 0, bo.obj_addr, 0, bo.size};
  return ioctl_named("DRM_IOCTL_RKNPU_MEM_SYNC", RKD_RKNPU_MEM_SYNC_D, &s);
}

Status Rknpu::submit_range(uint32_t count, int core, int64_t timeout_ms, const std::string& what) {
  RKD_TRY(fini_bo(tasks_));
  rkd_rknpu_submit s{};
  s.flags = RKD_RKNPU_JOB_PC;
  s.timeout = static_cast<uint32_t>(timeout_ms);
  s.task_start = 0;
  s.task_number = count;
  s.task_obj_addr = tasks_.obj_addr;
  s.core_mask = RKD_RKNPU_CORE0_MASK << core;
  s.subcore_task[core] = {0, count};
  Status st = ioctl_named("DRM_IOCTL_RKNPU_SUBMIT", RKD_RKNPU_SUBMIT_D, &s);
  return st.ok() ? st : st.error().with_context(what);
}

Status Rknpu::submit(const std::vector<Job>& jobs, int64_t timeout_ms) {
  auto bo_of = [&](uint64_t lo, uint64_t hi) -> const Bo* {
    for (const Bo& b : bos_)
      if (lo >= b.dma_address && hi <= b.dma_address + b.size) return &b;
    return nullptr;
  };
  size_t most = 0;
  for (const Job& j : jobs) most = std::max(most, j.tasks.size());
  const uint32_t table = static_cast<uint32_t>((most * sizeof(rkd_rknpu_task) + 4095) / 4096 * 4096);
  if (most && (!has_tasks_ || tasks_.size < table)) {
    if (has_tasks_) RKD_TRY(release(tasks_));
    has_tasks_ = false;
    RKD_ASSIGN(Bo t, create_bo(table));
    bos_.pop_back();  // the task table is not a buffer jobs may name
    tasks_ = t;
    has_tasks_ = true;
  }
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    const std::string what = "rknpu device " + path_ + ": job " + std::to_string(j);
    if (job.tasks.empty()) return invalid(what + ": no tasks (the driver refuses a task number of 0)");
    const int core = ((job.core % kCores) + kCores) % kCores;
    uint32_t n = 0;  // entries of the present run of linked tasks
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      const Task& k = job.tasks[t];
      const uint64_t lo = k.regcmd, hi = lo + uint64_t{k.regcmd_count} * 8;
      const Bo* b = bo_of(lo, hi);
      if (k.regcmd_count < 4 || !b)
        return invalid(what + ": task " + std::to_string(t) + ": " + std::to_string(k.regcmd_count) + " register-command words at " + hex(k.regcmd) +
                       (k.regcmd_count < 4 ? " (fewer than the 4-word trailer)"
                                           : " do not lie inside one buffer object (an NPU page fault: the job would hang)"));
      rkd_rknpu_task e{};
      e.enable_mask = k.enable_mask;
      e.int_mask = (k.enable_mask & arch::kDpuEnableBit) ? RKD_RKNPU_INT_DPU : RKD_RKNPU_INT_PPU;
      e.int_clear = RKD_RKNPU_INT_CLEAR_ALL;
      e.regcfg_amount = k.regcmd_count - RKD_RKNPU_PC_EXTRA_WORDS;
      e.regcmd_addr = k.regcmd;
      std::memcpy(tasks_.map + static_cast<size_t>(n) * sizeof e, &e, sizeof e);
      ++n;
      // The fetcher goes on to the address and amount in this task's trailer: the next task of
      // the job must be exactly there, else the run ends here.
      bool linked = false;
      if (t + 1 < job.tasks.size()) {
        const Task& next = job.tasks[t + 1];
        const uint8_t* words = b->map + (lo - b->dma_address);
        uint64_t w0, w1;
        std::memcpy(&w0, words + (k.regcmd_count - 4) * 8, 8);
        std::memcpy(&w1, words + (k.regcmd_count - 3) * 8, 8);
        const regcmd::Word a = regcmd::unpack(w0), m = regcmd::unpack(w1);
        linked = a.offset == arch::PC_BASE_ADDRESS.offset && a.value == next.regcmd && m.offset == arch::PC_REGISTER_AMOUNTS.offset &&
                 m.value == regcmd::register_amount(next.regcmd_count);
      }
      if (!linked) {
        RKD_TRY(submit_range(n, core, timeout_ms, what + " (tasks " + std::to_string(t + 1 - n) + " to " + std::to_string(t) + ")"));
        n = 0;
      }
    }
  }
  return {};
}

}  // namespace rkd::npu::device
