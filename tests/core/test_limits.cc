// core/limits.h: the memory a run may use is what the kernel reports available now
// (MemAvailable), not the machine's physical total; the thread and memory checks name what
// they refuse.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "core/limits.h"

namespace rkd {
namespace {

std::optional<uint64_t> meminfo_bytes(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string name;
    uint64_t kib = 0;
    if (s >> name >> kib && name == field + ":") return kib * 1024;
  }
  return std::nullopt;
}

TEST(Limits, UsableMemoryIsWhatIsAvailableNotThePhysicalTotal) {
  const auto total = meminfo_bytes("MemTotal");
  const auto before = meminfo_bytes("MemAvailable");
  if (!total || !before) GTEST_SKIP() << "no /proc/meminfo with MemTotal and MemAvailable";
  const uint64_t usable = usable_memory_bytes();
  const auto after = meminfo_bytes("MemAvailable");
  ASSERT_TRUE(after);
  // What other processes free or take between the reads moves MemAvailable a little.
  const uint64_t slack = uint64_t{256} << 20;
  EXPECT_LE(usable, std::max(*before, *after) + slack) << "MemTotal " << *total;
  EXPECT_LT(usable, *total);
}

TEST(Limits, ChecksNameWhatTheyRefuse) {
  EXPECT_TRUE(check_thread_count(0, "threads").ok());
  EXPECT_TRUE(check_thread_count(kMaxThreads, "threads").ok());
  const Status t = check_thread_count(kMaxThreads + 1, "--threads");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "--threads 1025: must be 0 (one per core) to 1024");
  const Status m = check_memory_estimate(UINT64_MAX / 2, "model.onnx");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message.rfind("model.onnx: needs about ", 0), 0u) << m.error().message;
  EXPECT_TRUE(check_memory_estimate(1 << 20, "model.onnx").ok());
}

}  // namespace
}  // namespace rkd
