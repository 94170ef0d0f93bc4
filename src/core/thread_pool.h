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
#pragma once

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
  int64_t next_ = 0;       // guarded by mu_ for simplicity; tasks are coarse
  int64_t finished_ = 0;
  uint64_t generation_ = 0;
  int active_workers_ = 0;
  bool stop_ = false;
  std::mutex run_mu_;  // one parallel_for at a time per pool
};

void set_global_thread_count(int threads);
int global_thread_count();

}  // namespace rkd
