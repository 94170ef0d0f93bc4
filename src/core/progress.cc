#include "core/progress.h"

#include <mutex>
#include <utility>

namespace rkd {

namespace {
std::mutex g_progress_mu;
ProgressSink& sink() {
  static ProgressSink s;
  return s;
}
thread_local CancelCheck t_cancel;
}  // namespace

void set_progress_sink(ProgressSink s) {
  std::lock_guard<std::mutex> lk(g_progress_mu);
  sink() = std::move(s);
}

Status report_progress(const std::string& stage, int64_t done, int64_t total) {
  if (t_cancel && t_cancel()) return io_error("interrupted during " + stage);
  std::lock_guard<std::mutex> lk(g_progress_mu);
  if (sink()) sink()(stage, done, total);
  return {};
}

ScopedCancelCheck::ScopedCancelCheck(CancelCheck check) : previous_(std::exchange(t_cancel, std::move(check))) {}
ScopedCancelCheck::~ScopedCancelCheck() { t_cancel = std::move(previous_); }

}  // namespace rkd
