// TFLite's int8 activations, Softmax, Mean and bilinear Resize (quant/int8_tflite.h) against
// references written here: the table activations element by element from the float
// definition (no table), LeakyRelu and Mean through the exact 128-bit multiplier references,
// and every kernel against the real-valued function in double precision to within one output
// step. Bit-exactness against TensorFlow Lite itself: tests/cli/test_tflite_peer.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "int8_reference.h"
#include "quant/int8_tflite.h"

namespace rkd::quant {
namespace {

using testref::ref_multiply;

Tensor all_values(DType t) {
  Tensor x = Tensor::empty(t, {256});
  for (int i = 0; i < 256; ++i) {
    if (t == DType::i8) x.data<int8_t>()[i] = static_cast<int8_t>(i - 128);
    else x.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  }
  return x;
}
int32_t get(const Tensor& t, int64_t i) { return static_cast<int32_t>(t.get_as_double(i)); }
double clamp_q(double v, DType t) { return t == DType::i8 ? std::clamp(v, -128.0, 127.0) : std::clamp(v, 0.0, 255.0); }

float rand_scale(std::mt19937& rng, int lo, int hi) {
  const int e = std::uniform_int_distribution<int>(lo, hi)(rng);
  return std::ldexp(1.f + std::uniform_real_distribution<float>(0.f, 1.f)(rng), -e);
}

// The largest distance from the real result: half a step, plus, for double rounding, the
// first rounding's half unit at 2^-right output steps (TFLite's SRDHM rounds x * m to an
// integer before the rounding right shift), plus the multiplier's 31-bit encoding.
double rounding_bound(Requant c, QuantizedMultiplier m) {
  const int right = std::max(-m.shift, 0);
  return 0.5 + (c == Requant::tflite_double_rounding ? std::ldexp(0.5, -right) : 0.0) + 1e-6;
}

TEST(Int8Lut, LogisticTanhSiluEqualTheirFloatDefinitionPerElement) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const DType t = trial % 2 ? DType::u8 : DType::i8;
    const auto f = static_cast<LutFunction>(trial % 3);
    QTensorParams in{rand_scale(rng, 3, 6), std::uniform_int_distribution<int>(-20, 20)(rng) + (t == DType::u8 ? 128 : 0)};
    QTensorParams out{f == LutFunction::logistic ? 1.f / 256 : rand_scale(rng, 5, 7), t == DType::i8 ? -128 : 0};
    if (f == LutFunction::tanh) out.zero_point = t == DType::i8 ? 0 : 128;
    if (f == LutFunction::silu) out.zero_point = t == DType::i8 ? -100 : 28;
    const Tensor x = all_values(t);
    Tensor y = Tensor::empty(t, {256});
    ASSERT_TRUE(lut_activation(x, f, in, out, y).ok());
    for (int i = 0; i < 256; ++i) {
      const float v = in.scale * static_cast<float>(get(x, i) - in.zero_point);
      const float fv = f == LutFunction::logistic ? 1.f / (1.f + std::exp(-v)) : f == LutFunction::tanh ? std::tanh(v) : v / (1.f + std::exp(-v));
      const double want = clamp_q(static_cast<double>(std::round(fv * (1.f / out.scale))) + out.zero_point, t);
      ASSERT_EQ(get(y, i), want) << "trial " << trial << " q " << get(x, i);
      const double dv = static_cast<double>(v);
      const double exact = f == LutFunction::logistic ? 1 / (1 + std::exp(-dv)) : f == LutFunction::tanh ? std::tanh(dv) : dv / (1 + std::exp(-dv));
      EXPECT_LE(std::fabs(get(y, i) - clamp_q(exact / out.scale + out.zero_point, t)), 0.5 + 1e-3);
    }
  }
}

TEST(Int8HardSwish, WithinOneStepOfTheRealFunctionAndMostlyExact) {
  std::mt19937 rng(12);
  int64_t exact = 0, total = 0;
  for (int trial = 0; trial < 80; ++trial) {
    const DType t = trial % 2 ? DType::u8 : DType::i8;
    // Input ranges from about +-1 to +-40 (real models: MobileNetV3 layers reach tens).
    QTensorParams in{rand_scale(rng, 2, 7), std::uniform_int_distribution<int>(-30, 30)(rng) + (t == DType::u8 ? 128 : 0)};
    QTensorParams out{rand_scale(rng, 2, 7), std::uniform_int_distribution<int>(-128, -90)(rng) + (t == DType::u8 ? 128 : 0)};
    if (in.scale / out.scale >= 64.f) continue;
    const Tensor x = all_values(t);
    Tensor y = Tensor::empty(t, {256});
    ASSERT_TRUE(tflite_hard_swish(x, in, out, y).ok());
    for (int i = 0; i < 256; ++i) {
      const double v = static_cast<double>(in.scale) * (get(x, i) - in.zero_point);
      const double hs = v * std::clamp(v + 3, 0.0, 6.0) / 6;
      const double want = clamp_q(hs / out.scale + out.zero_point, t);
      const double err = std::fabs(get(y, i) - want);
      EXPECT_LE(err, 1.0) << "trial " << trial << " q " << get(x, i) << " real " << hs;
      exact += std::fabs(get(y, i) - std::round(want)) < 0.5;
      ++total;
    }
  }
  EXPECT_GT(static_cast<double>(exact) / static_cast<double>(total), 0.9);
}

TEST(Int8LeakyRelu, EqualsTheExactMultiplierDefinition) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 60; ++trial) {
    const DType t = trial % 2 ? DType::u8 : DType::i8;
    const Requant c = trial % 3 ? Requant::tflite_double_rounding : Requant::tflite_single_rounding;
    const float alpha = std::uniform_real_distribution<float>(0.01f, 0.5f)(rng);
    QTensorParams in{rand_scale(rng, 3, 6), std::uniform_int_distribution<int>(-20, 20)(rng) + (t == DType::u8 ? 128 : 0)};
    QTensorParams out{rand_scale(rng, 3, 6), std::uniform_int_distribution<int>(-60, -20)(rng) + (t == DType::u8 ? 128 : 0)};
    const Tensor x = all_values(t);
    Tensor y = Tensor::empty(t, {256});
    ASSERT_TRUE(tflite_leaky_relu(x, alpha, in, out, c, y).ok());
    const auto mi = *quantize_multiplier(static_cast<double>(in.scale / out.scale));
    const auto ma = *quantize_multiplier(static_cast<double>(in.scale * alpha / out.scale));
    for (int i = 0; i < 256; ++i) {
      const int64_t v = get(x, i) - in.zero_point;
      const double want = clamp_q(out.zero_point + ref_multiply(c, v, v >= 0 ? mi : ma), t);
      ASSERT_EQ(get(y, i), want) << "trial " << trial << " q " << get(x, i);
      const double real = (v >= 0 ? 1.0 : static_cast<double>(alpha)) * static_cast<double>(in.scale) * static_cast<double>(v);
      EXPECT_LE(std::fabs(get(y, i) - clamp_q(real / out.scale + out.zero_point, t)), rounding_bound(c, v >= 0 ? mi : ma))
          << "trial " << trial << " q " << get(x, i);
    }
  }
}

TEST(Int8Softmax, WithinOneStepOfTheRealProbabilities) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 40; ++trial) {
    const DType t = trial % 2 ? DType::u8 : DType::i8;
    const int64_t rows = 3, n = std::uniform_int_distribution<int>(2, 90)(rng);
    QTensorParams in{rand_scale(rng, 2, 5), t == DType::u8 ? 128 : 0};
    QTensorParams out{1.f / 256, t == DType::i8 ? -128 : 0};
    Tensor x = Tensor::empty(t, {rows, n});
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int v = std::uniform_int_distribution<int>(t == DType::i8 ? -128 : 0, t == DType::i8 ? 127 : 255)(rng);
      if (t == DType::i8) x.data<int8_t>()[i] = static_cast<int8_t>(v);
      else x.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
    Tensor y = Tensor::empty(t, {rows, n});
    ASSERT_TRUE(tflite_softmax(x, 1.f, in, out, y).ok());
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(in.scale) * get(x, r * n + j));
      for (int64_t j = 0; j < n; ++j) {
        const double p = std::exp(static_cast<double>(in.scale) * get(x, r * n + j)) / sum;
        EXPECT_LE(std::fabs(get(y, r * n + j) - clamp_q(p * 256 + out.zero_point, t)), 0.5 + 1e-4) << "trial " << trial;
      }
    }
  }
}

TEST(Int8Mean, EqualsTheExactMultiplierDefinitionAndTheRealMean) {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 60; ++trial) {
    const DType t = trial % 2 ? DType::u8 : DType::i8;
    const Requant c = trial % 3 ? Requant::tflite_double_rounding : Requant::tflite_single_rounding;
    const int64_t N = 2, C = 3, H = std::uniform_int_distribution<int>(1, 9)(rng), W = std::uniform_int_distribution<int>(1, 13)(rng);
    QTensorParams in{rand_scale(rng, 3, 6), std::uniform_int_distribution<int>(-20, 20)(rng) + (t == DType::u8 ? 128 : 0)};
    QTensorParams out{rand_scale(rng, 3, 6), std::uniform_int_distribution<int>(-20, 20)(rng) + (t == DType::u8 ? 128 : 0)};
    Tensor x = Tensor::empty(t, {N, C, H, W});
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int v = std::uniform_int_distribution<int>(t == DType::i8 ? -128 : 0, t == DType::i8 ? 127 : 255)(rng);
      if (t == DType::i8) x.data<int8_t>()[i] = static_cast<int8_t>(v);
      else x.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
    Tensor y = Tensor::empty(t, {N, C});
    ASSERT_TRUE(tflite_mean(x, {2, 3}, in, out, c, y).ok());
    const int64_t n = H * W;
    const auto m = *quantize_multiplier(static_cast<double>(in.scale) / static_cast<double>(out.scale));
    int k = 0;
    while ((int64_t{2} << k) <= n) ++k;
    k = std::min({k, 32, 31 + m.shift});
    const QuantizedMultiplier mm{static_cast<int32_t>((static_cast<int64_t>(m.multiplier) << k) / n), m.shift - k};
    for (int64_t p = 0; p < N * C; ++p) {
      int64_t sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += get(x, p * n + i) - in.zero_point;
      ASSERT_EQ(get(y, p), clamp_q(ref_multiply(c, sum, mm) + out.zero_point, t)) << "trial " << trial;
      const double real = static_cast<double>(in.scale) * static_cast<double>(sum) / static_cast<double>(n);
      EXPECT_LE(std::fabs(get(y, p) - clamp_q(real / out.scale + out.zero_point, t)), rounding_bound(c, mm)) << "trial " << trial;
    }
  }
}

TEST(Int8ResizeBilinear, EqualsTensorFlowsFloatResizeRoundedWhereTheScaleIsExact) {
  std::mt19937 rng(16);
  int exact_cases = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const DType t = trial % 2 ? DType::u8 : DType::i8;
    const bool align = trial % 3 == 1, half = trial % 3 == 2;
    const Requant c = trial % 4 ? Requant::tflite_double_rounding : Requant::tflite_single_rounding;
    const int64_t H = std::uniform_int_distribution<int>(1, 7)(rng), W = std::uniform_int_distribution<int>(1, 7)(rng);
    // Every fourth case a 2x / 4x upsampling (the feature pyramids' resize), where the 10-bit
    // fixed-point coordinates are exact.
    const bool pyramid = trial % 4 == 0;
    const int64_t f = trial % 8 == 0 ? 2 : 4;
    const int64_t OH = pyramid ? H * f : std::uniform_int_distribution<int>(1, 15)(rng);
    const int64_t OW = pyramid ? W * f : std::uniform_int_distribution<int>(1, 15)(rng);
    Tensor x = Tensor::empty(t, {1, 2, H, W});
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int v = std::uniform_int_distribution<int>(t == DType::i8 ? -128 : 0, t == DType::i8 ? 127 : 255)(rng);
      if (t == DType::i8) x.data<int8_t>()[i] = static_cast<int8_t>(v);
      else x.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
    Tensor y = Tensor::empty(t, {1, 2, OH, OW});
    ASSERT_TRUE(tflite_resize_bilinear(x, align, half, c, y).ok());
    // TensorFlow's float bilinear resize, in double precision.
    auto src = [&](int64_t o, int64_t in_n, int64_t out_n) {
      const double s = align && out_n > 1 ? static_cast<double>(in_n - 1) / static_cast<double>(out_n - 1)
                                          : static_cast<double>(in_n) / static_cast<double>(out_n);
      return half ? (static_cast<double>(o) + 0.5) * s - 0.5 : static_cast<double>(o) * s;
    };
    auto exact_scale = [&](int64_t in_n, int64_t out_n) {
      return align && out_n > 1 ? (1024 * (in_n - 1)) % (out_n - 1) == 0 : (1024 * in_n) % out_n == 0;
    };
    const bool exact = exact_scale(H, OH) && exact_scale(W, OW);
    exact_cases += exact;
    for (int64_t p = 0; p < 2; ++p) {
      for (int64_t oy = 0; oy < OH; ++oy) {
        const double fy = std::max(src(oy, H, OH), 0.0);
        const int64_t y0 = static_cast<int64_t>(std::floor(fy)), y1 = std::min<int64_t>(static_cast<int64_t>(std::ceil(fy)), H - 1);
        const double dy = fy - std::floor(fy);
        for (int64_t ox = 0; ox < OW; ++ox) {
          const double fx = std::max(src(ox, W, OW), 0.0);
          const int64_t x0 = static_cast<int64_t>(std::floor(fx)), x1 = std::min<int64_t>(static_cast<int64_t>(std::ceil(fx)), W - 1);
          const double dx = fx - std::floor(fx);
          auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(get(x, (p * H + yy) * W + xx)); };
          const double v = (at(y0, x0) * (1 - dx) + at(y0, x1) * dx) * (1 - dy) + (at(y1, x0) * (1 - dx) + at(y1, x1) * dx) * dy;
          const int32_t got = get(y, (p * OH + oy) * OW + ox);
          if (exact) {
            // The value is a multiple of 2^-20: double rounding rounds it half away from zero,
            // single rounding half up.
            const double want = c == Requant::tflite_single_rounding ? std::floor(v + 0.5) : std::round(v);
            ASSERT_EQ(got, want) << "trial " << trial << " at " << oy << "," << ox << " real " << v;
          } else {
            // The 10-bit scale is off by at most 2^-11 per output step (the half-pixel offset
            // by one more): each coordinate by up to (o + 1.5) 2^-11 source pixels, the value
            // by that times the largest step (255), per axis.
            const double bound = 0.5 + 255.0 * static_cast<double>(oy + ox + 3) / 2048.0 + 1e-9;
            EXPECT_LE(std::fabs(got - v), bound) << "trial " << trial << " at " << oy << "," << ox;
          }
        }
      }
    }
  }
  EXPECT_GT(exact_cases, 40);
}

// The XNNPACK forms (tflite_xnnpack; bit-exact against TFLite in test_tflite_peer.py) stay
// within their precision of the real result: LeakyRelu's 8-bit multipliers by |x - z| / 512
// steps, Mean's float32 scale by a rounding, Resize's 11-bit weights by 255 / 2048 per axis.
TEST(Int8Xnnpack, LeakyReluMeanResizeStayWithinTheirPrecision) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 40; ++trial) {
    const DType t = trial % 2 ? DType::u8 : DType::i8;
    QTensorParams in{rand_scale(rng, 3, 6), std::uniform_int_distribution<int>(-20, 20)(rng) + (t == DType::u8 ? 128 : 0)};
    QTensorParams out{rand_scale(rng, 3, 6), std::uniform_int_distribution<int>(-20, 20)(rng) + (t == DType::u8 ? 128 : 0)};
    const float alpha = std::uniform_real_distribution<float>(0.05f, 0.5f)(rng);
    const Tensor x = all_values(t);
    Tensor y = Tensor::empty(t, {256});
    ASSERT_TRUE(tflite_leaky_relu(x, alpha, in, out, Requant::tflite_xnnpack, y).ok());
    for (int i = 0; i < 256; ++i) {
      const double v = get(x, i) - in.zero_point;
      const double real = (v >= 0 ? 1.0 : static_cast<double>(alpha)) * static_cast<double>(in.scale) * v;
      EXPECT_LE(std::fabs(get(y, i) - clamp_q(real / out.scale + out.zero_point, t)), 0.5 + std::fabs(v) / 512 + 1e-6) << trial;
    }
    Tensor x4 = Tensor::empty(t, {1, 3, 4, 5});
    for (int64_t i = 0; i < x4.numel(); ++i) {
      if (t == DType::i8) x4.data<int8_t>()[i] = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
      else x4.data<uint8_t>()[i] = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 255)(rng));
    }
    Tensor m = Tensor::empty(t, {1, 3, 1, 1});
    ASSERT_TRUE(tflite_mean(x4, {2, 3}, in, out, Requant::tflite_xnnpack, m).ok());
    for (int64_t c = 0; c < 3; ++c) {
      double sum = 0;
      for (int64_t i = 0; i < 20; ++i) sum += get(x4, c * 20 + i) - in.zero_point;
      const double real = static_cast<double>(in.scale) * sum / 20;
      EXPECT_LE(std::fabs(get(m, c) - clamp_q(real / out.scale + out.zero_point, t)), 0.5 + 1e-4) << trial;
    }
    const bool align = trial % 3 == 1, half = trial % 3 == 2;
    Tensor r = Tensor::empty(t, {1, 3, 7, 9});
    ASSERT_TRUE(tflite_resize_bilinear(x4, align, half, Requant::tflite_xnnpack, r).ok());
    auto src = [&](int64_t o, int64_t in_n, int64_t out_n) {
      const double sc =
          align ? static_cast<double>(in_n - 1) / static_cast<double>(out_n - 1) : static_cast<double>(in_n) / static_cast<double>(out_n);
      const double f = half ? (static_cast<double>(o) + 0.5) * sc - 0.5 : static_cast<double>(o) * sc;
      return std::clamp(f, 0.0, static_cast<double>(in_n - 1));
    };
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t oy = 0; oy < 7; ++oy) {
        const double fy = src(oy, 4, 7);
        const int64_t y0 = static_cast<int64_t>(fy), y1 = std::min<int64_t>(y0 + 1, 3);
        for (int64_t ox = 0; ox < 9; ++ox) {
          const double fx = src(ox, 5, 9);
          const int64_t x0 = static_cast<int64_t>(fx), x1 = std::min<int64_t>(x0 + 1, 4);
          auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(get(x4, (c * 4 + yy) * 5 + xx)); };
          const double dy = fy - static_cast<double>(y0), dx = fx - static_cast<double>(x0);
          const double v = (at(y0, x0) * (1 - dx) + at(y0, x1) * dx) * (1 - dy) + (at(y1, x0) * (1 - dx) + at(y1, x1) * dx) * dy;
          EXPECT_LE(std::fabs(get(r, (c * 7 + oy) * 9 + ox) - v), 0.5 + 2 * 255.0 / 4096 + 1e-4) << trial << " " << oy << "," << ox;
        }
      }
    }
  }
}

}  // namespace
}  // namespace rkd::quant
