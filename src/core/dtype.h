// Element types of rkdeploy tensors and their scalar conversions.
//
// float16 is IEEE 754 binary16; bfloat16 is the upper half of a binary32. Conversions
// to them round to nearest, ties to even, and keep NaN a NaN (quiet) and infinities
// infinite; conversions from them are exact.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace rkd {

enum class DType : uint8_t { f32, f16, bf16, i8, u8, i16, i32, i64, b8 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i16, DType::i32, DType::i64, DType::b8};

size_t dtype_size(DType t);
// "float32", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool".
const char* dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_float(DType t);

struct float16 {
  uint16_t bits = 0;
};
struct bfloat16 {
  uint16_t bits = 0;
};

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
inline float bf16_to_f32(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }
uint16_t f32_to_bf16(float f);

}  // namespace rkd
