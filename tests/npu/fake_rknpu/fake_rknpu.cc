// fake_rknpu: an LD_PRELOAD test double of the vendor kernels' `rknpu` DRM driver (Rockchip's
// BSP drivers/rknpu; facts: rk3588-npu.md section 6). It plays the kernel for the production
// code's real system calls - open, ioctl, mmap, close - and runs each submitted task on rkdeploy's
// NPU simulator against the buffer objects' bytes, as the rocket double does for mainline.
//
// What it reproduces of the driver (each a check the client must pass):
//  - DRM_IOCTL_VERSION names the driver "rknpu"; ioctls in the DRM form ('d', 0x40 + index)
//    and the misc-device form ('r', index); unknown requests ENOTTY;
//  - ACTION: GET_HW_VERSION, GET_DRV_VERSION (0.9.8); other known actions 0; unknown EINVAL;
//  - MEM_CREATE: size 0 or unknown flags EINVAL; page-rounded buffers at device addresses
//    that are not the lowering's default and not contiguous (a guard page), a kernel object
//    address each (what SUBMIT and MEM_SYNC name); MEM_MAP: the mmap offset, unknown handle
//    EINVAL; MEM_DESTROY: unknown handle EINVAL;
//  - MEM_SYNC: an obj_addr that is no object of this file EINVAL (the kernel would dereference
//    it), a range past the object EINVAL, neither direction EINVAL; TO_DEVICE makes the CPU's
//    writes the device's (the simulator's caches are told only then: a missing sync can leave
//    stale weights in use);
//  - SUBMIT, blocking: task_number 0, no RKNPU_JOB_PC, NONBLOCK (not emulated), a core mask
//    past three cores, a task object unknown or a task range past it: EINVAL. The cores of the
//    mask read their ranges as the driver does (one or two cores: subcore_task[core], three:
//    subcore_task[core + 2]; mask 0: task_start/task_number on core 0). Per range the command
//    fetcher starts at the first entry's regcmd_addr, fetching regcfg_amount + 4 words rounded
//    up to even, and follows the trailers for task_number tasks; the job completes when the
//    last task's interrupt (DPU 0x300 with the DPU enabled, else PPU 0xc00) equals the last
//    entry's int_mask. A chain that ends early, words outside every buffer (an IOMMU fault), a
//    task the simulator refuses or an interrupt mismatch never complete: after the timeout
//    (the submit's, or RKD_FAKE_RKNPU_TIMEOUT_MS) the core is reset, task_counter 0, ETIMEDOUT;
//  - the reported hazards (facts sheet section 6) are logged as "hazard:" lines on stderr and
//    counted in the log: several non-zero subcore ranges in one SUBMIT, two SUBMITs at once.
//
// Environment: RKD_FAKE_RKNPU_DEVICE (the node claimed, default /dev/dri/card1),
// RKD_FAKE_RKNPU_LOG (a file: one JSON line per range run, with its core and task count),
// RKD_FAKE_RKNPU_STALL=1 (no job completes), RKD_FAKE_RKNPU_TIMEOUT_MS, RKD_FAKE_RKNPU_EXECUTE=0
// (check the calls, run nothing: the capture tool's tests submit register commands whose operands
// live elsewhere), RKD_FAKE_RKNPU_SIM (simulator knobs NAME=VALUE;...).
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "npu/arch/arch.h"
#include "npu/device/rknpu_uapi.h"
#include "npu/device/rocket_uapi.h"
#include "npu/memory.h"
#include "npu/regcmd/regcmd.h"
#include "npu/sim/sim.h"
#include "npu/driver_double.h"

namespace {

using rkd::test::driver_double::env;

constexpr uint64_t kPage = 4096;
constexpr uint32_t kDmaBase = 0x60000000u;       // neither the lowering's default nor the rocket double's
constexpr uint64_t kWindow = uint64_t{1} << 30;  // the device address space of one file
constexpr uint64_t kObjBase = 0xffffff8000100000ull;
constexpr uint32_t kKnownMemFlags = 0x7ff;  // RKNPU_MEM_MASK of driver 0.9.8 (bits 0..10)
constexpr uint32_t kDriverVersion = 908;    // 0.9.8: major * 10000 + minor * 100 + patch

void logf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "fake_rknpu: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

void log_line(const std::string& s) {
  static std::mutex m;
  const std::string p = env("RKD_FAKE_RKNPU_LOG");
  if (p.empty()) return;
  std::lock_guard<std::mutex> l(m);
  if (FILE* f = std::fopen(p.c_str(), "a")) {
    std::fprintf(f, "%s\n", s.c_str());
    std::fclose(f);
  }
}

struct Bo {
  uint32_t handle = 0, flags = 0;
  uint64_t size = 0, dma = 0, obj = 0;
};

struct File {
  int fd = -1;  // the memfd: the process mmaps buffers from it at their offsets
  uint8_t* window = nullptr;
  std::mutex m;
  std::map<uint32_t, Bo> bos;
  uint32_t next_handle = 1;
  uint64_t next_dma = kDmaBase + kPage;
  std::atomic<int> submitting{0};
  rkd::test::driver_double::AddressRanges ranges;
  rkd::npu::DeviceMemory mem;
  rkd::npu::sim::SimCache cache;
  rkd::npu::sim::Quirks quirks;
};

void publish_ranges(File& f) {
  rkd::test::driver_double::AddressRanges::List r;
  for (const auto& [h, b] : f.bos) r.emplace_back(b.dma, b.dma + b.size);
  f.ranges.publish(std::move(r));
}

std::mutex g_m;
std::map<int, std::shared_ptr<File>> g_files;

std::shared_ptr<File> file_of(int fd) {
  std::lock_guard<std::mutex> l(g_m);
  auto it = g_files.find(fd);
  return it == g_files.end() ? nullptr : it->second;
}

int make_file() {
  auto f = std::make_shared<File>();
  if (!rkd::test::driver_double::open_window("fake-rknpu", kWindow, f->fd, f->window)) return -1;
  f->mem = rkd::npu::DeviceMemory::external(kDmaBase, std::span<uint8_t>(f->window, kWindow));
  f->mem.set_mapped_check(&rkd::test::driver_double::AddressRanges::check, &f->ranges);
  rkd::test::driver_double::set_knobs_from_env(f->quirks, "RKD_FAKE_RKNPU_SIM", "fake_rknpu");
  std::lock_guard<std::mutex> l(g_m);
  g_files[f->fd] = f;
  return f->fd;
}

bool claims(const char* path) { return path && env("RKD_FAKE_RKNPU_DEVICE", "/dev/dri/card1") == path; }

const Bo* by_obj(const File& f, uint64_t obj) {
  for (const auto& [h, b] : f.bos)
    if (b.obj == obj) return &b;
  return nullptr;
}

int do_version(rkd_drm_version* v) { return rkd::test::driver_double::answer_drm_version(v, "rknpu", 0, 9, 8); }

int do_action(rkd_rknpu_action* a) {
  if (a->flags == RKD_RKNPU_GET_HW_VERSION) a->value = 0x46495245u;  // any stable value: the register's content is not documented
  else if (a->flags == RKD_RKNPU_GET_DRV_VERSION) a->value = kDriverVersion;
  else if (a->flags <= 23) a->value = 0;
  else return -EINVAL;
  return 0;
}

int do_mem_create(File& f, rkd_rknpu_mem_create* c) {
  if (c->size == 0 || (c->flags & ~kKnownMemFlags)) return -EINVAL;
  std::lock_guard<std::mutex> l(f.m);
  const uint64_t size = (c->size + kPage - 1) / kPage * kPage;
  if (f.next_dma + size > kDmaBase + kWindow) return -ENOMEM;
  Bo b;
  b.handle = f.next_handle++;
  b.flags = c->flags;
  b.size = size;
  b.dma = f.next_dma;
  b.obj = kObjBase + uint64_t{b.handle} * 0x1000;
  f.next_dma += size + kPage;
  if (!rkd::test::driver_double::map_into_window(f.fd, f.window, b.dma - kDmaBase, size)) return -ENOMEM;
  f.bos[b.handle] = b;
  publish_ranges(f);
  c->handle = b.handle;
  c->obj_addr = b.obj;
  c->dma_addr = b.dma;
  c->sram_size = 0;
  return 0;
}

int do_mem_map(File& f, rkd_rknpu_mem_map* m) {
  std::lock_guard<std::mutex> l(f.m);
  auto it = f.bos.find(m->handle);
  if (it == f.bos.end()) return -EINVAL;
  m->offset = it->second.dma - kDmaBase;
  return 0;
}

int do_mem_destroy(File& f, const rkd_rknpu_mem_destroy* d) {
  std::lock_guard<std::mutex> l(f.m);
  auto it = f.bos.find(d->handle);
  if (it == f.bos.end()) return -EINVAL;
  rkd::test::driver_double::unmap_from_window(f.window, it->second.dma - kDmaBase, it->second.size);
  f.bos.erase(it);
  publish_ranges(f);
  return 0;
}

int do_mem_sync(File& f, const rkd_rknpu_mem_sync* s) {
  Bo b;
  {
    std::lock_guard<std::mutex> l(f.m);
    const Bo* p = by_obj(f, s->obj_addr);
    if (!p) {
      logf("MEM_SYNC: obj_addr 0x%llx is no object of this file (the kernel would dereference it)", static_cast<unsigned long long>(s->obj_addr));
      return -EINVAL;
    }
    b = *p;
  }
  if (!(s->flags & (RKD_RKNPU_MEM_SYNC_TO_DEVICE | RKD_RKNPU_MEM_SYNC_FROM_DEVICE)) || s->offset + s->size > b.size) return -EINVAL;
  if (s->flags & RKD_RKNPU_MEM_SYNC_TO_DEVICE) f.mem.mark_written(static_cast<uint32_t>(b.dma + s->offset), static_cast<size_t>(s->size));
  return 0;
}

// One core's range of the task table: the fetcher's walk and the simulator's run. False when
// the job never completes.
bool run_range(File& f, const uint8_t* table, uint32_t start, uint32_t number, int core, std::string& why) {
  rkd_rknpu_task first, last;
  std::memcpy(&first, table + size_t{start} * sizeof first, sizeof first);
  std::memcpy(&last, table + size_t{start + number - 1} * sizeof last, sizeof last);
  if (env("RKD_FAKE_RKNPU_EXECUTE", "1") == "0") {
    // Check only: every entry's words inside one buffer.
    for (uint32_t t = start; t < start + number; ++t) {
      rkd_rknpu_task e;
      std::memcpy(&e, table + size_t{t} * sizeof e, sizeof e);
      if (!f.ranges.contains(e.regcmd_addr, e.regcmd_addr + (uint64_t{e.regcfg_amount} + RKD_RKNPU_PC_EXTRA_WORDS) * 8)) {
        why = "task entry " + std::to_string(t) + "'s words lie outside every buffer (an IOMMU fault)";
        return false;
      }
    }
    return true;
  }
  // The walk: each task's words, its trailer's next address and amount, its enable mask.
  uint64_t at = first.regcmd_addr;
  size_t words = (size_t{first.regcfg_amount} + RKD_RKNPU_PC_EXTRA_WORDS + 1) / 2 * 2;
  const size_t first_words = words;
  uint32_t enable = 0;
  for (uint32_t t = 0; t < number; ++t) {
    if (!f.ranges.contains(at, at + words * 8)) {
      why = "task " + std::to_string(t) + "'s words at device address " + std::to_string(at) + " lie outside every buffer (an IOMMU fault)";
      return false;
    }
    auto bytes = f.mem.read(static_cast<uint32_t>(at), words * 8);
    if (!bytes.ok()) {
      why = bytes.error().message;
      return false;
    }
    std::vector<uint64_t> w(words);
    std::memcpy(w.data(), bytes->data(), words * 8);
    const auto dec = rkd::npu::regcmd::decode(w);
    if (dec.empty() || !dec.back().has_trailer) {
      why = "task " + std::to_string(t) + " has no trailer in the words fetched";
      return false;
    }
    enable = dec.back().enable_mask;
    if (t + 1 < number) {
      if (dec.back().next_is_zero_word || dec.back().next_address == 0) {
        why = "the chain ends after task " + std::to_string(t) + " of " + std::to_string(number) + " (the fetcher stops: no completion)";
        return false;
      }
      at = dec.back().next_address;
      words = (size_t{dec.back().next_amount} + 1) * 2;
    }
  }
  const uint32_t raised = (enable & rkd::npu::arch::kDpuEnableBit) ? RKD_RKNPU_INT_DPU : RKD_RKNPU_INT_PPU;
  if (raised != last.int_mask) {
    char b[96];
    std::snprintf(b, sizeof b, "the last task raises interrupt 0x%x but its entry waits for int_mask 0x%x", raised, last.int_mask);
    why = b;
    return false;
  }
  auto st = rkd::npu::sim::run(f.mem, static_cast<uint32_t>(first.regcmd_addr), first_words, f.quirks, &f.cache, number);
  if (!st.ok()) {
    why = "the simulator refused it (" + st.error().to_string() + ")";
    return false;
  }
  log_line("{\"event\":\"run\",\"core\":" + std::to_string(core) + ",\"tasks\":" + std::to_string(number) + "}");
  return true;
}

int do_submit(File& f, rkd_rknpu_submit* s) {
  if (f.submitting.fetch_add(1) != 0) {
    logf("hazard: two SUBMITs at once from one process (reported to crash the vendor kernel)");
    log_line("{\"event\":\"hazard\",\"what\":\"concurrent submits\"}");
  }
  struct Leave {
    File& f;
    ~Leave() { f.submitting.fetch_sub(1); }
  } leave{f};
  if (s->task_number == 0 || !(s->flags & RKD_RKNPU_JOB_PC) || (s->core_mask & ~7u)) return -EINVAL;
  if (s->flags & RKD_RKNPU_JOB_NONBLOCK) {
    logf("SUBMIT: NONBLOCK is not emulated by this double");
    return -EINVAL;
  }
  Bo task_bo;
  {
    std::lock_guard<std::mutex> l(f.m);
    const Bo* p = by_obj(f, s->task_obj_addr);
    if (!p) {
      logf("SUBMIT: task_obj_addr 0x%llx is no object of this file (the kernel would dereference it)",
           static_cast<unsigned long long>(s->task_obj_addr));
      return -EINVAL;
    }
    task_bo = *p;
  }
  const uint8_t* table = f.window + (task_bo.dma - kDmaBase);
  struct Range {
    int core;
    uint32_t start, number;
  };
  std::vector<Range> ranges;
  const int used = std::popcount(s->core_mask);
  if (used == 0) {
    ranges.push_back({0, s->task_start, s->task_number});
  } else {
    for (int c = 0; c < 3; ++c) {
      if (!(s->core_mask & (1u << c))) continue;
      const auto& sub = s->subcore_task[used == 3 ? c + 2 : c];
      ranges.push_back({c, sub.task_start, sub.task_number});
    }
  }
  int nonzero = 0;
  for (const Range& r : ranges) {
    if (r.number == 0) continue;
    ++nonzero;
    if ((uint64_t{r.start} + r.number) * sizeof(rkd_rknpu_task) > task_bo.size) return -EINVAL;
  }
  if (nonzero > 1) {
    logf("hazard: %d non-zero subcore_task ranges in one SUBMIT (reported to crash the vendor kernel)", nonzero);
    log_line("{\"event\":\"hazard\",\"what\":\"several subcore ranges\"}");
  }
  const bool stall = env("RKD_FAKE_RKNPU_STALL") == "1";
  for (const Range& r : ranges) {
    if (r.number == 0) continue;
    std::string why = "RKD_FAKE_RKNPU_STALL";
    if (stall || !run_range(f, table, r.start, r.number, r.core, why)) {
      const std::string t = env("RKD_FAKE_RKNPU_TIMEOUT_MS");
      const long ms = t.empty() ? static_cast<long>(s->timeout) : std::atol(t.c_str());
      logf("SUBMIT on core %d: %s; job timeout after %ld ms, soft reset", r.core, why.c_str(), ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      s->task_counter = 0;
      return -ETIMEDOUT;
    }
  }
  s->task_counter = s->task_number;
  s->hw_elapse_time = 1000;
  return 0;
}

int dispatch(File& f, unsigned long req, void* arg) {
  // The misc device's requests ('r', index) are the DRM node's ('d', 0x40 + index).
  if (_IOC_TYPE(req) == 'r') req = _IOC(_IOC_DIR(req), 'd', _IOC_NR(req) + 0x40, _IOC_SIZE(req));
  if (req == RKD_DRM_IOCTL_VERSION) return do_version(static_cast<rkd_drm_version*>(arg));
  if (req == RKD_RKNPU_ACTION_D) return do_action(static_cast<rkd_rknpu_action*>(arg));
  if (req == RKD_RKNPU_MEM_CREATE_D) return do_mem_create(f, static_cast<rkd_rknpu_mem_create*>(arg));
  if (req == RKD_RKNPU_MEM_MAP_D) return do_mem_map(f, static_cast<rkd_rknpu_mem_map*>(arg));
  if (req == RKD_RKNPU_MEM_DESTROY_D) return do_mem_destroy(f, static_cast<const rkd_rknpu_mem_destroy*>(arg));
  if (req == RKD_RKNPU_MEM_SYNC_D) return do_mem_sync(f, static_cast<const rkd_rknpu_mem_sync*>(arg));
  if (req == RKD_RKNPU_SUBMIT_D) return do_submit(f, static_cast<rkd_rknpu_submit*>(arg));
  return -ENOTTY;
}

void close_file(int fd) {
  std::shared_ptr<File> f;
  {
    std::lock_guard<std::mutex> l(g_m);
    auto it = g_files.find(fd);
    if (it == g_files.end()) return;
    f = it->second;
    g_files.erase(it);
  }
  rkd::test::driver_double::close_window(f->window, kWindow);
}

}  // namespace

RKD_DRIVER_DOUBLE_ENTRY_POINTS(claims, make_file, file_of, dispatch, close_file)
