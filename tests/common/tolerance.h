// The one float tolerance policy of the test suite (ruy's Agree, simplified).
//
//  - Exact-semantics paths (fast vs reference kernels, integer paths, the composition
//    identities) use exact_equal: bitwise equality with every NaN equal to every NaN.
//  - Comparisons with independent float implementations (PyTorch, ONNX data) use
//    float_agree: |a - e| <= ulps * eps32 * (|e| + magnitude) where
//      eps32 = 2^-23 (float32 epsilon);
//      magnitude = the sum of |term| the result was reduced from (e.g. sum |w_i v_i| of an
//        interpolation) - cancellation can leave a small result with a large rounding error;
//      ulps = 4 * reduction depth: each of the depth additions or fused products can differ
//        by one rounding between two correct implementations that order them differently,
//        times a factor 4 for the coefficient computations in front (bicubic weights are
//        a 3-level Horner polynomial).
//    NaN must match NaN and infinities must match exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace rkd::test {

inline bool exact_equal(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

inline double float_tolerance(double expected, double magnitude, int reduction_depth) {
  const double eps32 = 1.0 / 8388608.0;
  return 4.0 * reduction_depth * eps32 * (std::fabs(expected) + magnitude);
}

inline bool float_agree(double actual, double expected, double magnitude, int reduction_depth) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  if (std::isinf(expected) || std::isinf(actual)) return actual == expected;
  return std::fabs(actual - expected) <= float_tolerance(expected, magnitude, reduction_depth);
}

}  // namespace rkd::test
