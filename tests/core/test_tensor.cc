#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "core/tensor.h"

namespace rkd {
namespace {

TEST(CheckedSize, RefusesNegativeAndOverflowingShapes) {
  EXPECT_FALSE(checked_numel({2, -1}, "x").ok());
  auto r = checked_numel({int64_t{1} << 40, int64_t{1} << 40}, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("too many elements"), std::string::npos);
  auto b = checked_shape_bytes({int64_t{1} << 34, 8}, DType::f32, "grid");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("grid"), std::string::npos);
  EXPECT_EQ(*checked_shape_bytes({2, 3}, DType::i64, "x"), 48u);
  EXPECT_EQ(*checked_shape_bytes({0, 3}, DType::f32, "x"), 0u);
  // Empty, but the other dimensions' product (which strides are built from) overflows.
  EXPECT_FALSE(checked_numel({0, int64_t{3304799966952}, 33411111}, "x").ok());
  EXPECT_FALSE(Tensor::zeros(DType::f32, {int64_t{1} << 62, 4}).ok());
}

TEST(Tensor, ViewsShareStorageAndContiguousCopies) {
  Tensor t = Tensor::empty(DType::f32, {2, 3, 4});
  for (int i = 0; i < 24; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor p = *t.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_FALSE(p.is_contiguous());
  Tensor c = p.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  // c[k, i, j] = t[i, j, k]
  EXPECT_EQ(c.data<float>()[(1 * 2 + 1) * 3 + 2], t.data<float>()[(1 * 3 + 2) * 4 + 1]);
  Tensor s = *t.slice(1, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(s.get_as_double(0), 4.0);
  EXPECT_FALSE(t.slice(1, 2, 5).ok());
  EXPECT_FALSE(t.permute({0, 0, 1}).ok());
  EXPECT_FALSE(t.reshape({5, 5}).ok());
  EXPECT_FALSE(p.reshape({24}).ok());
  EXPECT_EQ(t.reshape({6, 4})->dim(0), 6);
}

TEST(DType, Float16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << "half bits " << h;
  }
}

TEST(DType, Float16RoundsHalfToEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to even -> 1.
  EXPECT_EQ(f32_to_f16(1.0f + 0.00048828125f), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even) -> even.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0.00048828125f), 0x3c02);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(5.9604644775390625e-08f), 0x0001);   // smallest subnormal
  EXPECT_EQ(f32_to_f16(2.98023223876953125e-08f), 0x0000);  // half of it: tie -> even (0)
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(DType, BFloat16RoundsHalfToEvenAndKeepsNaN) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits_to_float(0x7f800001u)))));  // NaN not turned into inf
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_f32(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), b);
    }
  }
}

TEST(Tensor, ConvertsBetweenFloatTypes) {
  Tensor t = Tensor::from_floats({3}, std::vector<float>{1.5f, -2.25f, 65504.0f});
  Tensor h = *t.to(DType::f16);
  Tensor b = *h.to(DType::bf16);
  Tensor back = *b.to(DType::f32);
  EXPECT_EQ(back.data<float>()[0], 1.5f);
  EXPECT_EQ(back.data<float>()[1], -2.25f);
  EXPECT_EQ(back.data<float>()[2], 65536.0f);  // bf16 has 8 bits of mantissa
  EXPECT_FALSE(t.to(DType::i8).ok());
}

}  // namespace
}  // namespace rkd
