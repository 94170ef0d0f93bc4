// Exact reference arithmetic for the int8 tests: TFLite's multiplier conventions written from
// their definitions in 128-bit integers, never by calling the code under test.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "quant/requant.h"

namespace rkd::quant::testref {

__extension__ typedef __int128 i128;  // exact reference arithmetic (GCC/Clang, x86-64 and arm64)

// n / d rounded half away from zero (d > 0).
inline i128 div_round_half_away(i128 n, i128 d) {
  const i128 a = n < 0 ? -n : n;
  const i128 q = (2 * a + d) / (2 * d);
  return n < 0 ? -q : q;
}
// floor(n / d) (d > 0).
inline i128 div_floor(i128 n, i128 d) { return n >= 0 ? n / d : -((-n + d - 1) / d); }

inline int32_t ref_double_rounding(int32_t x, QuantizedMultiplier m) {
  const int left = std::max(m.shift, 0), right = std::max(-m.shift, 0);
  const i128 xs = static_cast<i128>(x) << left;
  i128 high;
  if (xs == std::numeric_limits<int32_t>::min() && m.multiplier == std::numeric_limits<int32_t>::min()) {
    high = std::numeric_limits<int32_t>::max();
  } else {
    high = div_floor(xs * m.multiplier + (i128{1} << 30), i128{1} << 31);  // 2*x*q / 2^32, ties toward +inf
  }
  return static_cast<int32_t>(div_round_half_away(high, i128{1} << right));
}

inline int32_t ref_single_rounding(int32_t x, QuantizedMultiplier m) {
  const int t = 31 - m.shift;
  return static_cast<int32_t>(div_floor(static_cast<i128>(x) * m.multiplier + (i128{1} << (t - 1)), i128{1} << t));
}

inline int32_t ref_multiply(Requant c, int64_t x, QuantizedMultiplier m) {
  return c == Requant::tflite_single_rounding ? ref_single_rounding(static_cast<int32_t>(x), m) : ref_double_rounding(static_cast<int32_t>(x), m);
}

}  // namespace rkd::quant::testref
