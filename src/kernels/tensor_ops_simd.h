// SIMD loops behind tensor_ops (private to src/kernels; contracts in tensor_ops_simd.cc).
#pragma once

#include <cstdint>

namespace rkd::ops {
void simd_exp(const float* x, float* y, int64_t n);
void simd_sigmoid(const float* x, float* y, int64_t n);
void simd_erf(const float* x, float* y, int64_t n);
// One contiguous row: y = softmax(x) (or log-softmax), max-subtracted.
void simd_softmax_row(const float* x, float* y, int64_t n, bool log);
// One LayerNormalization row of n elements (bias may be nullptr; mean/inv_std optional).
void simd_layer_norm_row(const float* x, const float* scale, const float* bias, float* y, int64_t n, float eps, float* mean, float* inv_std);
// Highway's name of the target the dynamic dispatch runs ("AVX3", "AVX2", "SSE4", "NEON", ...).
const char* highway_dispatched_target();
}  // namespace rkd::ops
