// SIMD loops behind tensor_ops (private to src/kernels; contracts in tensor_ops_simd.cc).
#pragma once

#include <cstdint>

namespace rkd::ops {
void simd_exp(const float* x, float* y, int64_t n);
void simd_sigmoid(const float* x, float* y, int64_t n);
void simd_erf(const float* x, float* y, int64_t n);
// One contiguous row: y = softmax(x) (or log-softmax), max-subtracted.
void simd_softmax_row(const float* x, float* y, int64_t n, bool log);
}  // namespace rkd::ops
