// fake_rocket: an LD_PRELOAD test double of the mainline `rocket` kernel driver
// (drivers/accel/rocket, Linux >= 6.18; facts: rk3588-npu.md section 6). It plays the kernel
// for the production code's real system calls - open, ioctl, mmap, close - and executes each
// task on rkdeploy's NPU simulator against the buffer objects' bytes.
//
// What it reproduces of the kernel (each a check the production code must pass):
//  - DRM_IOCTL_VERSION names the driver "rocket" (how the runtime tells it from rknpu);
//  - the UAPI structs and their sizes; SUBMIT: job_struct_size >= 40 and reserved == 0 or
//    EINVAL; an empty job array is a no-op; a job with no tasks, a task_struct_size below 8,
//    a task of no words or an unknown buffer handle is dropped silently (mainline ignores
//    rocket_ioctl_submit_job's errors; here logged to stderr as the kernel's drm_dbg);
//  - PREP_BO / FINI_BO: reserved == 0 or EINVAL, unknown handle ENOENT; PREP_BO waits for the
//    buffer's last writer until its absolute CLOCK_MONOTONIC deadline, else ETIMEDOUT (EBUSY for
//    a zero timeout);
//  - the buffers' fences: a job waits for the last writer of each buffer it lists (in or out)
//    and becomes the last writer of its out buffers; nothing else orders jobs;
//  - each task kicked alone: PC_BASE_ADDRESS = regcmd, PC_REGISTER_AMOUNTS = (count + 1) / 2 - 1
//    (the words fetched: count rounded up to even), the trailer's next-task words not followed;
//  - completion only through the DPU's interrupt: a task without the DPU in its enable mask (a
//    PPU-only pooling task) never completes, and neither does a task the simulator refuses or
//    one that reads or writes outside every mapped buffer (an IOMMU fault): after 500 ms the
//    core is reset, the job's fence is signalled, its later tasks do not run (logged);
//  - device addresses page-aligned and not contiguous (a guard page between buffers), an mmap
//    offset per buffer; the CPU's writes reach the device's view at FINI_BO (the simulator's
//    caches are told only then: a missing FINI_BO can leave stale weights in use).
//
// Scheduling: RKD_FAKE_ROCKET_CORES (default 3) core threads; submitted jobs wait until
// someone waits (PREP_BO), the file closes or 64 jobs are queued. Each job is given a random
// core when submitted (RKD_FAKE_ROCKET_SEED, default 1: which core runs which job is the seed's,
// not the host scheduler's); every core takes a random runnable job of its own, tasks of
// different jobs interleaving
// (one task group at a time on the simulator). A job that reads what another writes without a
// buffer dependency therefore usually reads it too early.
//
// Environment: RKD_FAKE_ROCKET_DEVICE (the node path claimed, default /dev/accel/accel0),
// RKD_FAKE_ROCKET_LOG (a file: one JSON line per submitted job and per job run, with its core),
// RKD_FAKE_ROCKET_STALL=1 (no job ever runs: PREP_BO times out), RKD_FAKE_ROCKET_SIM (simulator
// knobs NAME=VALUE;...), RKD_FAKE_ROCKET_TIMEOUT_MS (the reset delay, default 500),
// RKD_FAKE_ROCKET_DUMP (a directory: every submitted task's words, see do_submit).
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "npu/arch/arch.h"
#include "npu/device/rocket_uapi.h"
#include "npu/memory.h"
#include "npu/regcmd/regcmd.h"
#include "npu/sim/sim.h"
#include "npu/driver_double.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kPage = 4096;
constexpr uint32_t kDmaBase = 0x40000000u;       // not the lowering's default base: relocation is tested
constexpr uint64_t kWindow = uint64_t{1} << 30;  // the device address space of one file

using rkd::test::driver_double::env;

void logf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "fake_rocket: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

struct Bo {
  uint32_t handle = 0, size = 0;  // size: page-rounded
  uint64_t dma = 0;               // device address; memfd offset = dma - kDmaBase
  int64_t last_writer = -1;       // job id of its fence
};

struct JobRec {
  int64_t id = 0;
  std::vector<rkd_rocket_task> tasks;
  std::set<int64_t> deps;
  int core = 0;  // the core that runs it, drawn at submit time
  bool running = false, done = false;
};

struct File {
  int fd = -1;  // the memfd: the process mmaps BOs from it at their offsets
  uint8_t* window = nullptr;
  std::mutex m;
  std::condition_variable cv;
  std::map<uint32_t, Bo> bos;
  uint32_t next_handle = 1;
  uint64_t next_dma = kDmaBase + kPage;             // a guard page first
  std::map<int64_t, std::shared_ptr<JobRec>> jobs;  // not yet done
  std::set<int64_t> done;
  int64_t next_job = 0;
  bool flush = false, closing = false, stall = false;
  int ncores = 3;
  std::vector<std::thread> cores;
  std::mt19937_64 rng;                             // the cores' picks among their runnable jobs
  std::mt19937_64 core_rng;                        // the submitted jobs' cores (in submit order: independent of thread timing)
  rkd::test::driver_double::AddressRanges ranges;  // what a simulator access must lie in (an IOMMU's view)
  // The simulator's view of the window, its caches and its lock.
  std::mutex sim_m;
  rkd::npu::DeviceMemory mem;
  rkd::npu::sim::SimCache cache;
  rkd::npu::sim::Quirks quirks;
  int64_t runs = 0;
};

std::mutex g_m;
std::map<int, std::shared_ptr<File>> g_files;
FILE* g_log = nullptr;

void log_line(const std::string& s) {
  static std::mutex lm;
  std::lock_guard<std::mutex> l(lm);
  if (!g_log) {
    const std::string p = env("RKD_FAKE_ROCKET_LOG");
    if (p.empty()) return;
    g_log = std::fopen(p.c_str(), "a");
    if (!g_log) return;
  }
  std::fprintf(g_log, "%s\n", s.c_str());
  std::fflush(g_log);
}

std::shared_ptr<File> file_of(int fd) {
  std::lock_guard<std::mutex> l(g_m);
  auto it = g_files.find(fd);
  return it == g_files.end() ? nullptr : it->second;
}

void publish_ranges(File& f) {
  rkd::test::driver_double::AddressRanges::List r;
  for (const auto& [h, b] : f.bos) r.emplace_back(b.dma, b.dma + b.size);
  f.ranges.publish(std::move(r));
}

// Runs one job's tasks on the simulator; false when the job "timed out" (the core reset).
bool execute(File& f, const JobRec& job, int core) {
  const int64_t reset_ms = std::atoll(env("RKD_FAKE_ROCKET_TIMEOUT_MS", "500").c_str());
  auto hang = [&](size_t t, const std::string& why) {
    logf("job %lld task %zu on core %d: %s; NPU job timed out after %lld ms, core reset (the job's later tasks do not run)",
         static_cast<long long>(job.id), t, core, why.c_str(), static_cast<long long>(reset_ms));
    std::this_thread::sleep_for(std::chrono::milliseconds(reset_ms));
    return false;
  };
  size_t t = 0;
  while (t < job.tasks.size()) {
    const rkd_rocket_task& k = job.tasks[t];
    const size_t words = (static_cast<size_t>(k.regcmd_count) + 1) / 2 * 2;  // PC_REGISTER_AMOUNTS' fetch
    // A run of tasks the trailers chain exactly (task i's next address and amount are task
    // i + 1's) runs as one simulator call: the same tasks in the same order as kicking each.
    size_t n = 1;
    std::vector<rkd::npu::regcmd::DecodedTask> dec;
    {
      std::lock_guard<std::mutex> l(f.sim_m);
      for (;; ++n) {
        const rkd_rocket_task& a = job.tasks[t + n - 1];
        const size_t aw = (static_cast<size_t>(a.regcmd_count) + 1) / 2 * 2;
        auto bytes = f.mem.read(a.regcmd, aw * 8);
        if (!bytes.ok()) return hang(t + n - 1, "register commands unreadable: " + bytes.error().message);
        std::vector<uint64_t> w(aw);
        std::memcpy(w.data(), bytes->data(), aw * 8);
        auto d = rkd::npu::regcmd::decode(w);
        if (d.empty() || !d.back().has_trailer) return hang(t + n - 1, "no task trailer in its words");
        const auto& last = d.back();
        if (!(last.enable_mask & rkd::npu::arch::kDpuEnableBit)) {
          // It runs, but mainline waits for a DPU interrupt that never comes.
          if (n > 1) --n;
          else {
            auto st = rkd::npu::sim::run(f.mem, a.regcmd, aw, f.quirks, &f.cache, 1);
            (void)st;
            return hang(t, "enable mask 0x" + std::to_string(last.enable_mask) + " has no DPU: no completion interrupt on mainline");
          }
          break;
        }
        if (t + n >= job.tasks.size()) break;
        const rkd_rocket_task& b = job.tasks[t + n];
        const uint32_t amount = (b.regcmd_count + 1) / 2 - 1;
        if (last.next_is_zero_word || last.next_address != b.regcmd || last.next_amount != amount) break;
      }
      auto st = rkd::npu::sim::run(f.mem, k.regcmd, words, f.quirks, &f.cache, n);
      if (!st.ok()) return hang(t, "the simulator refused it (" + st.error().to_string() + ")");
      ++f.runs;
    }
    t += n;
    std::this_thread::yield();  // other cores' tasks interleave here
  }
  return true;
}

void core_loop(std::shared_ptr<File> fp, int core) {
  File& f = *fp;
  std::unique_lock<std::mutex> l(f.m);
  const bool stall = f.stall;
  auto runnable = [&](const JobRec& j) {
    return j.core == core && !j.running && std::all_of(j.deps.begin(), j.deps.end(), [&](int64_t d) { return f.done.count(d) > 0; });
  };
  for (;;) {
    std::shared_ptr<JobRec> pick;
    f.cv.wait(l, [&] {
      if (f.closing) return true;
      if (stall || !f.flush) return false;
      for (auto& [id, j] : f.jobs)
        if (runnable(*j)) return true;
      return false;
    });
    if (f.closing) return;
    std::vector<std::shared_ptr<JobRec>> ready;
    for (auto& [id, j] : f.jobs)
      if (runnable(*j)) ready.push_back(j);
    pick = ready[static_cast<size_t>(f.rng() % ready.size())];
    pick->running = true;
    l.unlock();
    log_line("{\"event\":\"run\",\"job\":" + std::to_string(pick->id) + ",\"core\":" + std::to_string(core) + "}");
    execute(f, *pick, core);
    l.lock();
    pick->done = true;
    f.done.insert(pick->id);
    f.jobs.erase(pick->id);
    if (f.jobs.empty()) f.flush = false;
    f.cv.notify_all();
  }
}

int make_file() {
  auto f = std::make_shared<File>();
  if (!rkd::test::driver_double::open_window("fake-rocket", kWindow, f->fd, f->window)) return -1;
  f->mem = rkd::npu::DeviceMemory::external(kDmaBase, std::span<uint8_t>(f->window, kWindow));
  f->mem.set_mapped_check(&rkd::test::driver_double::AddressRanges::check, &f->ranges);
  f->stall = env("RKD_FAKE_ROCKET_STALL") == "1";
  const uint64_t seed = std::strtoull(env("RKD_FAKE_ROCKET_SEED", "1").c_str(), nullptr, 10);
  f->rng.seed(seed);
  f->core_rng.seed(seed ^ 0x9e3779b97f4a7c15ull);
  rkd::test::driver_double::set_knobs_from_env(f->quirks, "RKD_FAKE_ROCKET_SIM", "fake_rocket");
  f->ncores = std::max(1, std::atoi(env("RKD_FAKE_ROCKET_CORES", "3").c_str()));
  for (int c = 0; c < f->ncores; ++c) f->cores.emplace_back(core_loop, f, c);
  std::lock_guard<std::mutex> l(g_m);
  g_files[f->fd] = f;
  return f->fd;
}

bool claims(const char* path) { return path && env("RKD_FAKE_ROCKET_DEVICE", "/dev/accel/accel0") == path; }

int do_create_bo(File& f, rkd_rocket_create_bo* a) {
  if (a->size == 0) return -EINVAL;  // [INF] a zero-sized shmem object
  std::lock_guard<std::mutex> l(f.m);
  const uint64_t size = (a->size + kPage - 1) / kPage * kPage;
  if (f.next_dma + size > kDmaBase + kWindow) return -ENOMEM;
  Bo b;
  b.handle = f.next_handle++;
  b.size = static_cast<uint32_t>(size);
  b.dma = f.next_dma;
  f.next_dma += size + kPage;  // a guard page: buffers are not contiguous
  const off_t off = static_cast<off_t>(b.dma - kDmaBase);
  if (!rkd::test::driver_double::map_into_window(f.fd, f.window, b.dma - kDmaBase, size)) return -ENOMEM;  // fresh shmem pages
  f.bos[b.handle] = b;
  publish_ranges(f);
  a->handle = b.handle;
  a->dma_address = b.dma;
  a->offset = static_cast<uint64_t>(off);
  return 0;
}

int do_submit(File& f, const rkd_rocket_submit* s) {
  if (s->job_count == 0) return 0;
  if (s->job_struct_size < sizeof(rkd_rocket_job)) return -EINVAL;
  if (s->reserved != 0) return -EINVAL;
  std::unique_lock<std::mutex> l(f.m);
  for (uint32_t j = 0; j < s->job_count; ++j) {
    rkd_rocket_job job;
    std::memcpy(&job, reinterpret_cast<const uint8_t*>(s->jobs) + static_cast<size_t>(j) * s->job_struct_size, sizeof job);
    auto drop = [&](const std::string& why) { logf("SUBMIT: job %u dropped (%s); the ioctl still returns 0, as mainline's", j, why.c_str()); };
    if (job.task_count == 0) {
      drop("no tasks");
      continue;
    }
    if (job.task_struct_size < sizeof(rkd_rocket_task)) {
      drop("task_struct_size below 8");
      continue;
    }
    auto rec = std::make_shared<JobRec>();
    bool ok = true;
    for (uint32_t t = 0; t < job.task_count && ok; ++t) {
      rkd_rocket_task task;
      std::memcpy(&task, reinterpret_cast<const uint8_t*>(job.tasks) + static_cast<size_t>(t) * job.task_struct_size, sizeof task);
      if (task.regcmd_count == 0) {
        drop("task " + std::to_string(t) + " has regcmd_count 0");
        ok = false;
      }
      rec->tasks.push_back(task);
    }
    if (!ok) continue;
    auto handles = [&](uint64_t p, uint32_t n, std::vector<uint32_t>& out) {
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t h;
        std::memcpy(&h, reinterpret_cast<const uint8_t*>(p) + i * 4, 4);
        if (!f.bos.count(h)) {
          drop("buffer handle " + std::to_string(h) + " unknown (ENOENT)");
          return false;
        }
        out.push_back(h);
      }
      return true;
    };
    std::vector<uint32_t> in, out;
    if (!handles(job.in_bo_handles, job.in_bo_handle_count, in) || !handles(job.out_bo_handles, job.out_bo_handle_count, out)) continue;
    rec->id = f.next_job++;
    rec->core = static_cast<int>(f.core_rng() % static_cast<uint64_t>(f.ncores));
    for (uint32_t h : in)
      if (f.bos[h].last_writer >= 0 && !f.done.count(f.bos[h].last_writer)) rec->deps.insert(f.bos[h].last_writer);
    for (uint32_t h : out) {
      if (f.bos[h].last_writer >= 0 && !f.done.count(f.bos[h].last_writer)) rec->deps.insert(f.bos[h].last_writer);
      f.bos[h].last_writer = rec->id;
    }
    std::string line = "{\"event\":\"submit\",\"job\":" + std::to_string(rec->id) + ",\"tasks\":[";
    for (size_t t = 0; t < rec->tasks.size(); ++t) {
      if (t) line += ',';
      line += '[';
      line += std::to_string(rec->tasks[t].regcmd);
      line += ',';
      line += std::to_string(rec->tasks[t].regcmd_count);
      line += ']';
    }
    auto list = [&](const char* key, const std::vector<uint32_t>& v) {
      line += "],\"";
      line += key;
      line += "\":[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) line += ',';
        line += std::to_string(v[i]);
      }
    };
    list("in", in);
    list("out", out);
    line += "]}";
    log_line(line);
    // RKD_FAKE_ROCKET_DUMP=DIR: each task's words as the kernel would fetch them at submit
    // (DIR/jJJJJJ-tTTTT.regcmd, the job numbered in submission order): what the capture tool
    // is checked against.
    if (const std::string dump = env("RKD_FAKE_ROCKET_DUMP"); !dump.empty()) {
      std::lock_guard<std::mutex> sl(f.sim_m);
      for (size_t t = 0; t < rec->tasks.size(); ++t) {
        auto bytes = f.mem.read(rec->tasks[t].regcmd, static_cast<size_t>(rec->tasks[t].regcmd_count) * 8);
        char name[64];
        std::snprintf(name, sizeof name, "/j%06lld-t%04zu.regcmd", static_cast<long long>(rec->id), t);
        if (FILE* o = bytes.ok() ? std::fopen((dump + name).c_str(), "wb") : nullptr) {
          std::fwrite(bytes->data(), 1, bytes->size(), o);
          std::fclose(o);
        }
      }
    }
    f.jobs[rec->id] = rec;
  }
  if (f.jobs.size() >= 64) f.flush = true;
  f.cv.notify_all();
  return 0;
}

int do_prep_bo(File& f, const rkd_rocket_prep_bo* p) {
  if (p->reserved != 0) return -EINVAL;
  std::unique_lock<std::mutex> l(f.m);
  auto it = f.bos.find(p->handle);
  if (it == f.bos.end()) return -ENOENT;
  const int64_t writer = it->second.last_writer;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t now_ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  const int64_t left = p->timeout_ns - now_ns;
  if (writer < 0 || f.done.count(writer)) return 0;
  if (p->timeout_ns == 0) return -EBUSY;
  f.flush = true;
  f.cv.notify_all();
  const bool ok = f.cv.wait_for(l, std::chrono::nanoseconds(std::max<int64_t>(left, 0)), [&] { return f.done.count(writer) > 0; });
  return ok ? 0 : -ETIMEDOUT;
}

int do_fini_bo(File& f, const rkd_rocket_fini_bo* p) {
  if (p->reserved != 0) return -EINVAL;
  Bo b;
  {
    std::lock_guard<std::mutex> l(f.m);
    auto it = f.bos.find(p->handle);
    if (it == f.bos.end()) return -ENOENT;
    b = it->second;
  }
  std::lock_guard<std::mutex> l(f.sim_m);
  f.mem.mark_written(static_cast<uint32_t>(b.dma), b.size);  // the CPU's writes are the device's now
  return 0;
}

int do_gem_close(File& f, const rkd_drm_gem_close* c) {
  std::lock_guard<std::mutex> l(f.m);
  auto it = f.bos.find(c->handle);
  if (it == f.bos.end()) return -EINVAL;
  rkd::test::driver_double::unmap_from_window(f.window, it->second.dma - kDmaBase, it->second.size);
  f.bos.erase(it);
  publish_ranges(f);
  return 0;
}

int do_version(rkd_drm_version* v) { return rkd::test::driver_double::answer_drm_version(v, "rocket", 1, 0, 0); }

int dispatch(File& f, unsigned long req, void* arg) {
  switch (req) {
    case RKD_DRM_IOCTL_VERSION: return do_version(static_cast<rkd_drm_version*>(arg));
    case RKD_ROCKET_IOCTL_CREATE_BO: return do_create_bo(f, static_cast<rkd_rocket_create_bo*>(arg));
    case RKD_ROCKET_IOCTL_SUBMIT: return do_submit(f, static_cast<const rkd_rocket_submit*>(arg));
    case RKD_ROCKET_IOCTL_PREP_BO: return do_prep_bo(f, static_cast<const rkd_rocket_prep_bo*>(arg));
    case RKD_ROCKET_IOCTL_FINI_BO: return do_fini_bo(f, static_cast<const rkd_rocket_fini_bo*>(arg));
    case RKD_DRM_IOCTL_GEM_CLOSE: return do_gem_close(f, static_cast<const rkd_drm_gem_close*>(arg));
    default: return -ENOTTY;
  }
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
  {
    std::unique_lock<std::mutex> l(f->m);
    // Jobs still queued finish first (the kernel keeps running them after close).
    f->flush = true;
    f->cv.notify_all();
    if (!f->stall) f->cv.wait(l, [&] { return f->jobs.empty(); });
    f->closing = true;
    f->cv.notify_all();
  }
  for (auto& t : f->cores) t.join();
  rkd::test::driver_double::close_window(f->window, kWindow);
}

}  // namespace

RKD_DRIVER_DOUBLE_ENTRY_POINTS(claims, make_file, file_of, dispatch, close_file)
