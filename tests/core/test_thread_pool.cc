#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.h"

namespace rkd {
namespace {

TEST(ThreadPool, RunsEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.thread_count(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " " << n;
    }
  }
}

TEST(ThreadPool, NestedLoopsRunSeriallyWithoutDeadlock) {
  ThreadPool pool(4);
  std::atomic<int> total{0};
  pool.parallel_for(8, [&](int64_t) { pool.parallel_for(10, [&](int64_t) { total++; }); });
  EXPECT_EQ(total.load(), 80);
}

TEST(ThreadPool, ManyConsecutiveLoops) {
  ThreadPool pool(2);
  int64_t sum = 0;
  for (int rep = 0; rep < 2000; ++rep) {
    std::vector<int64_t> part(4, 0);
    pool.parallel_for(4, [&](int64_t i) { part[static_cast<size_t>(i)] = i + rep; });
    for (auto v : part) sum += v;
  }
  EXPECT_EQ(sum, 2000 * 6 + 4 * (1999 * 2000 / 2));
}

TEST(ThreadPool, GlobalThreadCountIsSettable) {
  set_global_thread_count(3);
  EXPECT_EQ(global_thread_count(), 3);
  set_global_thread_count(1);
  EXPECT_EQ(global_thread_count(), 1);
  set_global_thread_count(0);
  EXPECT_GE(global_thread_count(), 1);
}

}  // namespace
}  // namespace rkd
