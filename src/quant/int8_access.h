// Private to src/quant: element access to int8/uint8 tensors and the TFLite multiplier
// dispatch shared by the reference kernels (int8.cc, int8_tflite.cc).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quant/requant.h"

namespace rkd::quant::detail {

inline int32_t load_q(const Tensor& t, int64_t i) {
  return t.dtype() == DType::i8 ? static_cast<int32_t>(t.data<int8_t>()[i]) : static_cast<int32_t>(t.data<uint8_t>()[i]);
}

inline void store_q(Tensor& t, int64_t i, int32_t v) {
  if (t.dtype() == DType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(v);
  else t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
}

// TFLite's MultiplyByQuantizedMultiplier in the build's rounding: single rounding for
// tflite_single_rounding and tflite_xnnpack (whose non-delegated kernels are those of a
// single-rounding build), double rounding otherwise (onnx_float is not a TFLite convention;
// callers that have a float form handle it before).
inline int32_t multiply(Requant c, int32_t x, QuantizedMultiplier m) {
  return c == Requant::tflite_single_rounding || c == Requant::tflite_xnnpack ? multiply_by_quantized_multiplier_single_rounding(x, m)
                                                                              : multiply_by_quantized_multiplier_double_rounding(x, m);
}

}  // namespace rkd::quant::detail
