// A fixed-size pool of worker threads for data-parallel loops.
//
// Contract:
//  - parallel_for(n, fn) calls fn(i) exactly once for every i in [0, n) and returns when
//    all calls have finished. Indices are handed out dynamically (an atomic counter), so
//    uneven tasks balance; the calling thread works too. fn must not throw.
//  - A pool with thread_count() == 1 runs everything on the caller, in index order.
//  - Nested parallel_for from inside fn runs serially on the calling worker (no deadlock).
//  - set_global_thread_count(k) resizes the process-wide pool used by the kernels when
//    the caller passes none; k <= 0 means "hardware concurrency".
//  - Idle workers poll for about kSpinMicros before sleeping on a condition variable, and
//    the caller polls while the last tasks finish: the kernels' parallel loops last
//    0.1-1 ms, where a condition-variable wake-up (tens of microseconds on a VM) would be
//    a large part of the run. All state changes still happen under the mutex; polling only
//    reads atomic copies to decide when to take it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rkd {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int thread_count() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

  static ThreadPool& global();

 private:
  void worker_loop();
  void run_tasks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  static constexpr int kSpinMicros = 200;
  // Guarded by mu_ (tasks are coarse, so one lock per task is cheap). The atomics are
  // written under mu_ too; they are atomic so that polling may read them without it.
  int64_t next_ = 0;
  std::atomic<int64_t> finished_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_workers_{0};
  std::atomic<bool> stop_{false};
  std::mutex run_mu_;  // one parallel_for at a time per pool
};

void set_global_thread_count(int threads);
int global_thread_count();

}  // namespace rkd
