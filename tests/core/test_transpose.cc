// transpose_bytes against the definition, on every Highway target this CPU runs: shapes
// around the 16 x 16 block (edges below, at and above it), strides wider than the matrix,
// and the int8 <-> uint8 flip.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <random>
#include <vector>

#include "core/transpose.h"

namespace rkd {
namespace {

TEST(TransposeBytes, EqualsTheDefinitionOnEveryTarget) {
  std::mt19937 rng(3);
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (int64_t rows : {1, 3, 15, 16, 17, 33, 64}) {
      for (int64_t cols : {1, 7, 16, 24, 31, 96}) {
        for (uint8_t flip : {0, 0x80}) {
          const int64_t ss = cols + 5, ds = rows + 3;
          std::vector<uint8_t> src(static_cast<size_t>(rows * ss)), dst(static_cast<size_t>(cols * ds), 0xA5);
          for (auto& v : src) v = static_cast<uint8_t>(rng());
          transpose_bytes(src.data(), rows, cols, ss, dst.data(), ds, flip);
          for (int64_t j = 0; j < cols; ++j) {
            for (int64_t i = 0; i < ds; ++i) {
              const uint8_t want = i < rows ? src[static_cast<size_t>(i * ss + j)] ^ flip : 0xA5;  // the stride's gap untouched
              ASSERT_EQ(dst[static_cast<size_t>(j * ds + i)], want) << rows << "x" << cols << " at " << i << "," << j;
            }
          }
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

}  // namespace
}  // namespace rkd
