#include "core/progress.h"

#include <mutex>

namespace rkd {

namespace {
std::mutex g_progress_mu;
ProgressSink& sink() {
  static ProgressSink s;
  return s;
}
}  // namespace

void set_progress_sink(ProgressSink s) {
  std::lock_guard<std::mutex> lk(g_progress_mu);
  sink() = std::move(s);
}

void report_progress(const std::string& stage, int64_t done, int64_t total) {
  std::lock_guard<std::mutex> lk(g_progress_mu);
  if (sink()) sink()(stage, done, total);
}

}  // namespace rkd
