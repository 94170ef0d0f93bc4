#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/progress.h"

namespace rkd {
namespace {

TEST(Progress, TheSinkSeesEveryReportUntilTheThreadsCheckAsksToStop) {
  std::vector<int64_t> seen;
  set_progress_sink([&](const std::string& stage, int64_t done, int64_t total) {
    EXPECT_EQ(stage, "calibrating");
    EXPECT_EQ(total, 5);
    seen.push_back(done);
  });
  int asked = 0;
  {
    ScopedCancelCheck stop_at_third([&] { return ++asked >= 3; });
    EXPECT_TRUE(report_progress("calibrating", 1, 5).ok());
    EXPECT_TRUE(report_progress("calibrating", 2, 5).ok());
    const Status s = report_progress("calibrating", 3, 5);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().kind, ErrorKind::io);
    EXPECT_EQ(s.error().message, "interrupted during calibrating");
    // Another thread has no check of its own: its work goes on.
    std::thread other([] { EXPECT_TRUE(report_progress("calibrating", 4, 5).ok()); });
    other.join();
  }
  // The scope ended: the check is gone.
  EXPECT_TRUE(report_progress("calibrating", 5, 5).ok());
  set_progress_sink(nullptr);
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 4, 5}));  // the refused report reached no sink
  EXPECT_EQ(asked, 3);
}

TEST(Progress, ANestedCheckRestoresTheOuterOne) {
  bool outer = false;
  ScopedCancelCheck a([&] { return outer; });
  {
    ScopedCancelCheck b([] { return true; });
    EXPECT_FALSE(report_progress("x", 1, 1).ok());
  }
  EXPECT_TRUE(report_progress("x", 1, 1).ok());
  outer = true;
  EXPECT_FALSE(report_progress("x", 1, 1).ok());
}

}  // namespace
}  // namespace rkd
