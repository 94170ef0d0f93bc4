// Progress of long work (calibration, per-layer analyses, measurements) through one
// process-wide sink. Libraries call report_progress(); the CLI installs the sink (a line on a
// terminal, nothing when stderr is not one or with --quiet; docs/cli.md). Without a sink
// nothing happens. The sink is called from the thread that reports, never concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace rkd {

using ProgressSink = std::function<void(const std::string& stage, int64_t done, int64_t total)>;

void set_progress_sink(ProgressSink sink);
// `done` of `total` steps of `stage` are complete (done == total: the stage ended).
void report_progress(const std::string& stage, int64_t done, int64_t total);

}  // namespace rkd
