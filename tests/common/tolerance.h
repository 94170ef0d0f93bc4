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
//  - ONNX conformance data (test_data_set_*/output_*.pb, any operator) uses ONNX's own
//    backend-test criterion, onnx_agree: |a - e| <= 1e-3 * |e| + 1e-7 (onnx/backend/test/
//    runner uses rtol=1e-3, atol=1e-7): the expected values come from numpy in float64
//    or float32 with its own summation order, which is the conformance bar every runtime meets.
//  - Whole models against PyTorch or TensorFlow.js (tests/runtime/test_models.cc,
//    test_tfjs_models.cc) use model_agree: |a - e| <= 2^-14 * max|e| over the output tensor.
//    A detector's output passes through ~50-200 layers whose sums oneDNN and the peer order
//    differently; errors are relative to the scale of the activations, not of each element,
//    and they depend on the instruction set oneDNN runs (its blocking, and whether products
//    and sums fuse): worst measured max|a - e| / max|e| (centernet's wh head, the worst of the
//    five TF.js detectors) 0.9e-5 on AVX-512, 1.5e-5 with RKD_MAX_ISA=avx2, 1.7e-5 with sse4;
//    the bound 6.1e-5 keeps a factor 3.6 over the worst ISA (2^-16 held on AVX-512 only).
//    The Python-side comparisons of whole models or of a custom operator's NumPy simulation
//    (tests/cli/test_rknn_custom_op.sh: ONNX Runtime on two graph forms of one model;
//    tests/python/test_rknn_ops.py: the vendor toolkit's NumPy class against rkdeploy) apply
//    the same bound.
//    The tiny DEIM model: 1.8e-7.
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

inline bool onnx_agree(double actual, double expected) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  if (std::isinf(expected) || std::isinf(actual)) return actual == expected;
  return std::fabs(actual - expected) <= 1e-3 * std::fabs(expected) + 1e-7;
}

inline bool model_agree(double actual, double expected, double max_abs_expected) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  return std::fabs(actual - expected) <= max_abs_expected / 16384.0;
}

}  // namespace rkd::test
