#include "core/thread_pool.h"

#include <chrono>
#include <memory>

namespace rkd {
namespace {
thread_local bool t_inside_pool = false;

int resolve(int threads) {
  if (threads > 0) return threads;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready` for about `micros` microseconds; true if it became true.
template <typename Pred>
bool poll_for(Pred ready, int micros) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (int i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > until) return ready();
  }
}

std::mutex g_pool_mu;
std::unique_ptr<ThreadPool> g_pool;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int total = resolve(threads);
  for (int i = 1; i < total; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_tasks() {
  while (true) {
    int64_t i;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_ >= n_) return;
      i = next_++;
    }
    (*fn_)(i);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (++finished_ == n_) cv_done_.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  uint64_t seen = 0;
  while (true) {
    poll_for([&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_relaxed) != seen; }, kSpinMicros);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_workers_;
    }
    run_tasks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--active_workers_ == 0) cv_done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || t_inside_pool) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    finished_ = 0;
    ++generation_;
  }
  cv_work_.notify_all();
  t_inside_pool = true;
  run_tasks();
  t_inside_pool = false;
  poll_for([&] { return finished_.load(std::memory_order_relaxed) == n && active_workers_.load(std::memory_order_relaxed) == 0; }, kSpinMicros);
  std::unique_lock<std::mutex> lock(mu_);
  // Wait until every index has run and no worker still holds a reference to fn.
  cv_done_.wait(lock, [&] { return finished_ == n_ && active_workers_ == 0; });
  fn_ = nullptr;
  n_ = 0;
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(0);
  return *g_pool;
}

void set_global_thread_count(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (g_pool && g_pool->thread_count() == resolve(threads)) return;
  g_pool.reset();
  g_pool = std::make_unique<ThreadPool>(threads);
}

int global_thread_count() { return ThreadPool::global().thread_count(); }

}  // namespace rkd
