// Calibration statistics (quant/calibrate.h): what a tensor's min, max and histogram count,
// worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quant/calibrate.h"

namespace rkd::quant {
namespace {

Tensor floats(std::vector<float> v) {
  Tensor t = Tensor::empty(DType::f32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

TEST(TensorStats, MinMaxSkipsNonFiniteValuesAndSpansSamples) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  TensorStats s;
  s.observe_minmax(floats({nan, inf, -inf}));
  EXPECT_FALSE(s.seen());  // nothing finite yet
  s.observe_minmax(floats({-inf, 0.5f, nan, 2.f, inf}));
  EXPECT_TRUE(s.seen());
  EXPECT_EQ(s.min(), 0.5f);
  EXPECT_EQ(s.max(), 2.f);
  s.observe_minmax(floats({-3.f, 1.f}));
  EXPECT_EQ(s.min(), -3.f);
  EXPECT_EQ(s.max(), 2.f);
  const Range r = s.choose_range(CalibMethod::minmax, 99.99, false);
  EXPECT_EQ(r.lo, -3.f);
  EXPECT_EQ(r.hi, 2.f);
}

// 2048 bins over [0, 2048]: bin b holds [b, b + 1). 1000 values at 0.5, one at 2047.5: the
// 99.9th percentile's bin is bin 0 (1000 of 1001 values, 99.90 %), so the range is [0, 1]; at
// 99.95 it needs the last value, [0, 2048]. A value past the range of pass 1 counts in the
// last bin, a non-finite one in none.
TEST(TensorStats, PercentileReadsTheHistogramByBinEdges) {
  TensorStats s;
  std::vector<float> v(1000, 0.5f);
  v.push_back(2047.5f);
  v.push_back(0.f);
  v.push_back(2048.f);
  s.observe_minmax(floats(v));
  v.pop_back();
  v.pop_back();
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  s.observe_histogram(floats(v));
  Range r = s.choose_range(CalibMethod::percentile, 99.9, false);
  EXPECT_EQ(r.lo, 0.f);
  EXPECT_EQ(r.hi, 1.f);
  r = s.choose_range(CalibMethod::percentile, 99.95, false);
  EXPECT_EQ(r.lo, 0.f);
  EXPECT_EQ(r.hi, 2048.f);
  s.observe_histogram(floats({5000.f, 5000.f, 5000.f, 5000.f, 5000.f, 5000.f, 5000.f, 5000.f, 5000.f, 5000.f}));
  r = s.choose_range(CalibMethod::percentile, 99.9, false);
  EXPECT_EQ(r.hi, 2048.f);  // 11 of 1011 values now in the last bin
}

}  // namespace
}  // namespace rkd::quant
