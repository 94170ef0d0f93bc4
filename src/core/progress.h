// Progress of long work (calibration, per-layer analyses, measurements) through one
// process-wide sink. Libraries call report_progress(); the CLI installs the sink (a line on a
// terminal, nothing when stderr is not one or with --quiet; docs/cli.md). Without a sink
// nothing happens. The sink is called from the thread that reports, never concurrently.
//
// A progress point is also where long work can be stopped: a thread that runs work on someone
// else's behalf (Python's bindings, where Ctrl-C must interrupt a calibration) installs a
// CancelCheck for its duration (ScopedCancelCheck). report_progress() asks it first;
// when it answers true, report_progress() returns an error and the work unwinds through its
// Result like any other failure, so nothing half-done is published. The check is per thread:
// progress is reported from the thread that runs the work, never from a pool's workers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/result.h"

namespace rkd {

using ProgressSink = std::function<void(const std::string& stage, int64_t done, int64_t total)>;
using CancelCheck = std::function<bool()>;

void set_progress_sink(ProgressSink sink);
// `done` of `total` steps of `stage` are complete (done == total: the stage ended). An io error
// "interrupted during <stage>" (and no report) when this thread's CancelCheck asks to stop.
[[nodiscard]] Status report_progress(const std::string& stage, int64_t done, int64_t total);

// Installs `check` as this thread's CancelCheck until destroyed (restoring the one before).
class ScopedCancelCheck {
 public:
  explicit ScopedCancelCheck(CancelCheck check);
  ~ScopedCancelCheck();
  ScopedCancelCheck(const ScopedCancelCheck&) = delete;
  ScopedCancelCheck& operator=(const ScopedCancelCheck&) = delete;

 private:
  CancelCheck previous_;
};

}  // namespace rkd
