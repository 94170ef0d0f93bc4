// The drivers' clients (src/npu/device) against their test doubles, which this program runs
// under (LD_PRELOAD, set by ctest): RocketDevice.* under tests/npu/fake_rocket - the error paths
// a board's kernel takes, named, and jobs ordered only by the buffers they share; RknpuDevice.*
// under tests/npu/fake_rknpu - the vendor driver's checks, named, and chains of tasks computed
// on the cores the jobs name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "npu/device/rknpu.h"
#include "npu/device/rknpu_uapi.h"
#include "npu/device/rocket.h"
#include "npu/device/rocket_uapi.h"
#include "npu/lower/eltwise.h"
#include "npu/lower/lower.h"
#include "npu/memory.h"

namespace rkd::npu::device {
namespace {

std::unique_ptr<Rocket> open_double() {
  auto r = Rocket::open();
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string()) << " (is the test running under LD_PRELOAD=libfake_rocket.so?)";
  return r.ok() ? std::move(r).value() : nullptr;
}

std::string err(const Status& s) { return s.ok() ? "ok" : s.error().to_string(); }

TEST(RocketDevice, NoDeviceNodeNamesThePathAndWhy) {
  auto r = Rocket::open("/nonexistent/accel9");
  ASSERT_FALSE(r.ok());
  const std::string m = r.error().to_string();
  EXPECT_NE(m.find("/nonexistent/accel9"), std::string::npos) << m;
  EXPECT_NE(m.find("ENOENT"), std::string::npos) << m;
  EXPECT_NE(m.find("no NPU device node"), std::string::npos) << m;
  EXPECT_NE(errno_meaning("open", EACCES).find("permission denied"), std::string::npos);
}

TEST(RocketDevice, BuffersAreMappedPageAlignedAndNotContiguous) {
  auto r = open_double();
  ASSERT_TRUE(r);
  auto a = r->create_bo(100), b = r->create_bo(8192);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->dma_address % 4096, 0u);
  EXPECT_EQ(b->dma_address % 4096, 0u);
  EXPECT_GT(b->dma_address, a->dma_address + 4096) << "the double leaves a guard page between buffers";
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a->map[i], 0);
  std::memset(a->map, 0x5a, 100);
  EXPECT_EQ(err(r->fini_bo(*a)), "ok");
  EXPECT_EQ(err(r->prep_bo(*a)), "ok");
  EXPECT_EQ(a->map[99], 0x5a);
  EXPECT_EQ(err(r->destroy_bo(*b)), "ok");
}

TEST(RocketDevice, ShortJobStructAndNonZeroReservedAreEinval) {
  auto r = open_double();
  ASSERT_TRUE(r);
  auto bo = r->create_bo(4096);
  ASSERT_TRUE(bo.ok());
  rkd_rocket_task task{static_cast<uint32_t>(bo->dma_address), 4};
  rkd_rocket_job job{};
  job.tasks = reinterpret_cast<uintptr_t>(&task);
  job.task_count = 1;
  job.task_struct_size = sizeof task;
  rkd_rocket_submit s{};
  s.jobs = reinterpret_cast<uintptr_t>(&job);
  s.job_count = 1;
  s.job_struct_size = 32;  // an older, shorter job struct
  std::string m = err(r->ioctl_named("DRM_IOCTL_ROCKET_SUBMIT", RKD_ROCKET_IOCTL_SUBMIT, &s));
  EXPECT_NE(m.find("DRM_IOCTL_ROCKET_SUBMIT: EINVAL"), std::string::npos) << m;
  EXPECT_NE(m.find("job struct size"), std::string::npos) << m;
  s.job_struct_size = sizeof job;
  s.reserved = 1;
  m = err(r->ioctl_named("DRM_IOCTL_ROCKET_SUBMIT", RKD_ROCKET_IOCTL_SUBMIT, &s));
  EXPECT_NE(m.find("EINVAL"), std::string::npos) << m;
  rkd_rocket_prep_bo p{bo->handle, 1, 0};
  m = err(r->ioctl_named("DRM_IOCTL_ROCKET_PREP_BO", RKD_ROCKET_IOCTL_PREP_BO, &p));
  EXPECT_NE(m.find("DRM_IOCTL_ROCKET_PREP_BO: EINVAL"), std::string::npos) << m;
  EXPECT_NE(m.find("reserved field must be zero"), std::string::npos) << m;
  rkd_rocket_fini_bo f{bo->handle, 7};
  m = err(r->ioctl_named("DRM_IOCTL_ROCKET_FINI_BO", RKD_ROCKET_IOCTL_FINI_BO, &f));
  EXPECT_NE(m.find("DRM_IOCTL_ROCKET_FINI_BO: EINVAL"), std::string::npos) << m;
  EXPECT_NE(err(r->ioctl_named("an unknown ioctl", _IOW('d', 0x4f, uint64_t), &f)).find("ENOTTY"), std::string::npos);
}

TEST(RocketDevice, BadHandlesAreNamed) {
  auto r = open_double();
  ASSERT_TRUE(r);
  Bo ghost;
  ghost.handle = 999;
  std::string m = err(r->prep_bo(ghost));
  EXPECT_NE(m.find("ENOENT"), std::string::npos) << m;
  EXPECT_NE(m.find("no buffer object with this handle"), std::string::npos) << m;
  EXPECT_NE(m.find("buffer object 999"), std::string::npos) << m;
  EXPECT_NE(err(r->fini_bo(ghost)).find("ENOENT"), std::string::npos);
  auto bo = r->create_bo(4096);
  ASSERT_TRUE(bo.ok());
  Job j;
  j.tasks.push_back({static_cast<uint32_t>(bo->dma_address), 4});
  j.in.push_back(999);
  m = err(r->submit({j}));
  EXPECT_NE(m.find("job 0: input buffer handle 999"), std::string::npos) << m;
}

TEST(RocketDevice, TaskOutsideItsBufferIsRefusedBeforeTheKernelSeesIt) {
  auto r = open_double();
  ASSERT_TRUE(r);
  auto bo = r->create_bo(4096);
  ASSERT_TRUE(bo.ok());
  Job j;
  j.tasks.push_back({static_cast<uint32_t>(bo->dma_address + 4096 - 16), 4});  // 32 bytes, 16 past the end
  std::string m = err(r->submit({j}));
  EXPECT_NE(m.find("task 0: 4 register-command words at"), std::string::npos) << m;
  EXPECT_NE(m.find("do not lie inside one buffer object"), std::string::npos) << m;
  j.tasks[0] = {static_cast<uint32_t>(bo->dma_address), 0};
  EXPECT_NE(err(r->submit({j})).find("the kernel drops a task of no words"), std::string::npos);
  EXPECT_NE(err(r->submit({Job{}})).find("no tasks"), std::string::npos);
}

// Two LUT tasks in device memory at the arena's address: job A maps x to y, job B y to z.
struct TwoJobs {
  Bo arena, token_a, token_b;
  lower::LoweredEltwise a, b;
  lower::PlacedRegcmd ra, rb;
  lower::LutSpec sa, sb;
};

TwoJobs two_jobs(Driver& r) {
  TwoJobs t;
  t.arena = *r.create_bo(1 << 20);
  t.token_a = *r.create_bo(4096);
  t.token_b = *r.create_bo(4096);
  DeviceMemory mem(static_cast<uint32_t>(t.arena.dma_address));
  t.sa.dtype = t.sb.dtype = DType::u8;
  t.sa.C = t.sb.C = 16;
  t.sa.H = t.sb.H = 8;
  t.sa.W = t.sb.W = 8;
  for (int i = 0; i < 256; ++i) {
    t.sa.table.push_back((i * 7 + 3) % 256);
    t.sb.table.push_back(255 - i);
  }
  t.a = *lower::lower_lut(t.sa, mem);
  t.b = *lower::lower_lut(t.sb, mem, {t.a.output_maps[0].address});
  t.ra = *lower::place_regcmd(mem, t.a.tasks);
  t.rb = *lower::place_regcmd(mem, t.b.tasks);
  Tensor x = Tensor::empty(DType::u8, {1, 16, 8, 8});
  for (size_t i = 0; i < x.nbytes(); ++i) static_cast<uint8_t*>(x.raw())[i] = static_cast<uint8_t>(i * 13);
  EXPECT_EQ(err(lower::write_eltwise_input(mem, t.a, 0, x)), "ok");
  EXPECT_LE(mem.size(), t.arena.size);
  mem.adopt(t.arena.bytes());
  return t;
}

Job job_of(const lower::PlacedRegcmd& p, std::vector<uint32_t> in, std::vector<uint32_t> out) {
  Job j;
  for (const auto& s : p.spans) j.tasks.push_back({s.address, static_cast<uint32_t>(s.word_count), 0});
  j.in = std::move(in);
  j.out = std::move(out);
  return j;
}

// z read back after both jobs; the expected z from the tables.
bool z_is_right(Driver& r, const TwoJobs& t) {
  EXPECT_EQ(err(r.prep_bo(t.token_a, kDefaultWaitMs)), "ok");
  EXPECT_EQ(err(r.prep_bo(t.token_b, kDefaultWaitMs)), "ok");
  EXPECT_EQ(err(r.prep_bo(t.arena, kDefaultWaitMs)), "ok");
  auto mem = DeviceMemory::external(static_cast<uint32_t>(t.arena.dma_address), t.arena.bytes());
  Tensor z = Tensor::empty(DType::u8, {1, 16, 8, 8});
  EXPECT_EQ(err(lower::read_eltwise_output(mem, t.b, 0, z)), "ok");
  for (size_t i = 0; i < z.nbytes(); ++i) {
    const int x = static_cast<uint8_t>(i * 13);
    if (static_cast<const uint8_t*>(z.raw())[i] != t.sb.table[static_cast<size_t>(t.sa.table[static_cast<size_t>(x)])]) return false;
  }
  return true;
}

TEST(RocketDevice, JobsOrderedByTheirBuffersComputeTheChain) {
  for (int seed = 1; seed <= 6; ++seed) {
    setenv("RKD_FAKE_ROCKET_SEED", std::to_string(seed).c_str(), 1);
    auto r = open_double();
    ASSERT_TRUE(r);
    TwoJobs t = two_jobs(*r);
    ASSERT_EQ(err(r->fini_bo(t.arena)), "ok");
    // B first in the array: the kernel orders by the token, not by the submission order.
    ASSERT_EQ(err(r->submit({job_of(t.rb, {t.token_a.handle}, {t.token_b.handle}), job_of(t.ra, {}, {t.token_a.handle})})), "ok");
    // ...which is wrong: B submitted first took A's token before A made it its own. Submit in
    // order (the production back end submits a producer before its readers).
    (void)z_is_right(*r, t);
    ASSERT_EQ(err(r->submit({job_of(t.ra, {}, {t.token_a.handle}), job_of(t.rb, {t.token_a.handle}, {t.token_b.handle})})), "ok");
    EXPECT_TRUE(z_is_right(*r, t)) << "seed " << seed;
  }
}

TEST(RocketDevice, TheDoubleCatchesAMissingDependency) {
  // Without B listing A's token the double runs them in a random order: some seed must give a
  // wrong z (each order is equally likely: 8 seeds all right has probability 1/256).
  int wrong = 0;
  for (int seed = 1; seed <= 8; ++seed) {
    setenv("RKD_FAKE_ROCKET_SEED", std::to_string(seed).c_str(), 1);
    auto r = open_double();
    ASSERT_TRUE(r);
    TwoJobs t = two_jobs(*r);
    ASSERT_EQ(err(r->fini_bo(t.arena)), "ok");
    ASSERT_EQ(err(r->submit({job_of(t.ra, {}, {t.token_a.handle}), job_of(t.rb, {}, {t.token_b.handle})})), "ok");
    wrong += z_is_right(*r, t) ? 0 : 1;
  }
  EXPECT_GT(wrong, 0);
}

TEST(RocketDevice, AJobThatNeverReachesACoreTimesOutNamed) {
  setenv("RKD_FAKE_ROCKET_STALL", "1", 1);
  auto r = open_double();
  unsetenv("RKD_FAKE_ROCKET_STALL");
  ASSERT_TRUE(r);
  TwoJobs t = two_jobs(*r);
  ASSERT_EQ(err(r->fini_bo(t.arena)), "ok");
  ASSERT_EQ(err(r->submit({job_of(t.ra, {}, {t.token_a.handle})})), "ok");
  const std::string m = err(r->prep_bo(t.token_a, 100));
  EXPECT_NE(m.find("DRM_IOCTL_ROCKET_PREP_BO: ETIMEDOUT"), std::string::npos) << m;
  EXPECT_NE(m.find("did not finish"), std::string::npos) << m;
  EXPECT_NE(m.find("waiting 100 ms for buffer object"), std::string::npos) << m;
}

// ---- rknpu (under tests/npu/fake_rknpu) ----

constexpr const char* kRknpuNode = "/dev/dri/card1";

std::unique_ptr<Rknpu> open_rknpu() {
  auto r = Rknpu::open(kRknpuNode);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string()) << " (is the test running under LD_PRELOAD=libfake_rknpu.so?)";
  return r.ok() ? std::move(r).value() : nullptr;
}

// The job's tasks with their enable masks (which interrupt ends each).
Job rknpu_job(const lower::PlacedRegcmd& p, const std::vector<regcmd::Task>& tasks, int core) {
  Job j;
  for (size_t i = 0; i < p.spans.size(); ++i)
    j.tasks.push_back({p.spans[i].address, static_cast<uint32_t>(p.spans[i].word_count), tasks[i].enable_mask});
  j.core = core;
  return j;
}

TEST(RknpuDevice, TheNodeIsToldFromRocketByItsDriverName) {
  auto d = open_driver(kRknpuNode);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_STREQ((*d)->name(), "rknpu");
  EXPECT_TRUE((*d)->completes_ppu_only_tasks());
  auto r = open_rknpu();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->driver_version(), 908u);
  const std::string m = open_driver("/nonexistent/card9").error().to_string();
  EXPECT_NE(m.find("NPU device /nonexistent/card9: open: ENOENT"), std::string::npos) << m;
  EXPECT_NE(m.find("rknpu driver"), std::string::npos) << m;
}

TEST(RknpuDevice, BuffersAreMappedSyncedAndNotContiguous) {
  auto r = open_rknpu();
  ASSERT_TRUE(r);
  auto a = r->create_bo(100), b = r->create_bo(8192);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->dma_address % 4096, 0u);
  EXPECT_GT(b->dma_address, a->dma_address + 4096);
  EXPECT_NE(a->obj_addr, b->obj_addr);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a->map[i], 0);
  std::memset(a->map, 0x5a, 100);
  EXPECT_EQ(err(r->fini_bo(*a)), "ok");
  EXPECT_EQ(err(r->prep_bo(*a)), "ok");
  EXPECT_EQ(a->map[99], 0x5a);
  EXPECT_EQ(err(r->destroy_bo(*b)), "ok");
}

TEST(RknpuDevice, MalformedCallsAreNamed) {
  auto r = open_rknpu();
  ASSERT_TRUE(r);
  auto bo = r->create_bo(4096);
  ASSERT_TRUE(bo.ok());
  rkd_rknpu_mem_create c{};
  std::string m = err(r->ioctl_named("DRM_IOCTL_RKNPU_MEM_CREATE", RKD_RKNPU_MEM_CREATE_D, &c));
  EXPECT_NE(m.find("DRM_IOCTL_RKNPU_MEM_CREATE: EINVAL"), std::string::npos) << m;
  EXPECT_NE(m.find("buffer size or flags"), std::string::npos) << m;
  rkd_rknpu_mem_sync y{RKD_RKNPU_MEM_SYNC_TO_DEVICE, 0, 0x1234, 0, 16};
  m = err(r->ioctl_named("DRM_IOCTL_RKNPU_MEM_SYNC", RKD_RKNPU_MEM_SYNC_D, &y));
  EXPECT_NE(m.find("DRM_IOCTL_RKNPU_MEM_SYNC: EINVAL"), std::string::npos) << m;
  EXPECT_NE(m.find("no such buffer object"), std::string::npos) << m;
  y = {RKD_RKNPU_MEM_SYNC_TO_DEVICE, 0, bo->obj_addr, 4000, 200};  // past the object
  EXPECT_NE(err(r->ioctl_named("DRM_IOCTL_RKNPU_MEM_SYNC", RKD_RKNPU_MEM_SYNC_D, &y)).find("EINVAL"), std::string::npos);
  rkd_rknpu_submit s{};
  s.flags = RKD_RKNPU_JOB_PC;
  s.task_obj_addr = bo->obj_addr;
  m = err(r->ioctl_named("DRM_IOCTL_RKNPU_SUBMIT", RKD_RKNPU_SUBMIT_D, &s));  // task_number 0
  EXPECT_NE(m.find("DRM_IOCTL_RKNPU_SUBMIT: EINVAL"), std::string::npos) << m;
  EXPECT_NE(m.find("no tasks"), std::string::npos) << m;
  s.task_number = 1;
  s.flags = 0;  // slave mode: the driver only runs PC jobs
  EXPECT_NE(err(r->ioctl_named("DRM_IOCTL_RKNPU_SUBMIT", RKD_RKNPU_SUBMIT_D, &s)).find("EINVAL"), std::string::npos);
  s.flags = RKD_RKNPU_JOB_PC;
  s.core_mask = 8;  // a fourth core
  EXPECT_NE(err(r->ioctl_named("DRM_IOCTL_RKNPU_SUBMIT", RKD_RKNPU_SUBMIT_D, &s)).find("EINVAL"), std::string::npos);
  s.core_mask = 1;
  s.subcore_task[0] = {102, 1};  // a 4096-byte table holds entries 0 to 101
  EXPECT_NE(err(r->ioctl_named("DRM_IOCTL_RKNPU_SUBMIT", RKD_RKNPU_SUBMIT_D, &s)).find("EINVAL"), std::string::npos);
  s.task_obj_addr = 0xdead;
  EXPECT_NE(err(r->ioctl_named("DRM_IOCTL_RKNPU_SUBMIT", RKD_RKNPU_SUBMIT_D, &s)).find("EINVAL"), std::string::npos);
  EXPECT_NE(err(r->ioctl_named("an unknown ioctl", _IOW('d', 0x4f, uint64_t), &s)).find("ENOTTY"), std::string::npos);
  // The client's own checks, before the driver sees the job.
  Job j;
  j.tasks.push_back({static_cast<uint32_t>(bo->dma_address + 4096 - 16), 4, 0});
  m = err(r->submit({j}));
  EXPECT_NE(m.find("job 0: task 0: 4 register-command words at"), std::string::npos) << m;
  EXPECT_NE(m.find("do not lie inside one buffer object"), std::string::npos) << m;
  EXPECT_NE(err(r->submit({Job{}})).find("no tasks"), std::string::npos);
}

TEST(RknpuDevice, JobsRunInOrderOnTheCoresTheyName) {
  for (int core = 0; core < 3; ++core) {
    auto r = open_rknpu();
    ASSERT_TRUE(r);
    TwoJobs t = two_jobs(*r);
    ASSERT_EQ(err(r->fini_bo(t.arena)), "ok");
    ASSERT_EQ(err(r->submit({rknpu_job(t.ra, t.a.tasks, core), rknpu_job(t.rb, t.b.tasks, core + 1)})), "ok");
    EXPECT_TRUE(z_is_right(*r, t)) << "core " << core;
  }
}

TEST(RknpuDevice, AJobThatNeverCompletesTimesOutNamed) {
  auto r = open_rknpu();
  ASSERT_TRUE(r);
  TwoJobs t = two_jobs(*r);
  ASSERT_EQ(err(r->fini_bo(t.arena)), "ok");
  setenv("RKD_FAKE_RKNPU_STALL", "1", 1);
  const std::string m = err(r->submit({rknpu_job(t.ra, t.a.tasks, 0)}, 100));
  unsetenv("RKD_FAKE_RKNPU_STALL");
  EXPECT_NE(m.find("DRM_IOCTL_RKNPU_SUBMIT: ETIMEDOUT"), std::string::npos) << m;
  EXPECT_NE(m.find("did not finish the job in time"), std::string::npos) << m;
  EXPECT_NE(m.find("job 0 (tasks 0 to"), std::string::npos) << m;
  // A PPU task's int_mask on a DPU task: the interrupt it waits for never comes.
  Job wrong = rknpu_job(t.ra, t.a.tasks, 0);
  for (Task& k : wrong.tasks) k.enable_mask = 0;
  EXPECT_NE(err(r->submit({wrong}, 100)).find("ETIMEDOUT"), std::string::npos);
}

}  // namespace
}  // namespace rkd::npu::device
