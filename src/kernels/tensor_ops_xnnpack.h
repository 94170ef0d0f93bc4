// Float convolution on XNNPACK (private to src/kernels; the contract is in tensor_ops_xnnpack.cc).
#pragma once

#include <memory>
#include <string>

#include "kernels/tensor_ops.h"

namespace rkd::ops {
// [n][c][s] -> [n][s][c] float, tiled, on the OpenMP threads (tensor_ops_dnnl.cc); with c and s
// swapped it is the inverse.
void transpose_planes(const float* src, float* dst, int64_t n, int64_t c, int64_t s);

Result<std::unique_ptr<ConvPrimitive>> make_conv_xnnpack(const Shape& x_shape, const Tensor& weights, const Tensor* bias, const ConvParams& p,
                                                         const Shape& out_shape, const std::string& fused_activation,
                                                         std::unique_ptr<ConvPrimitive> non_finite_fallback);
}  // namespace rkd::ops
