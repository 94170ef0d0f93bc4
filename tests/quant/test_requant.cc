// Requantization and the int8 reference kernels against references written here from the
// definitions (exact 128-bit integer arithmetic for the TFLite conventions, an int64
// convolution with its own loop order), never by calling the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "quant/int8.h"
#include "int8_reference.h"
#include "quant/requant.h"

namespace rkd::quant {
namespace {

using namespace testref;  // NOLINT: the reference helpers

TEST(Requant, QuantizeMultiplierEncodesWithinHalfAnUlpOf31Bits) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> e(-40, 12);
  for (int i = 0; i < 20000; ++i) {
    const double m = std::pow(2.0, e(rng));
    auto q = quantize_multiplier(m);
    ASSERT_TRUE(q.ok());
    if (m < std::ldexp(0.5, -31)) {
      EXPECT_EQ(q->multiplier, 0) << m;
      continue;
    }
    if (m >= std::ldexp(1.0, 30)) continue;  // saturated range
    ASSERT_GE(q->multiplier, 1 << 30) << m;
    const double back = std::ldexp(static_cast<double>(q->multiplier), q->shift - 31);
    EXPECT_LE(std::fabs(back - m), std::ldexp(m, -31)) << m;
  }
  EXPECT_EQ(quantize_multiplier(0.0)->multiplier, 0);
  EXPECT_FALSE(quantize_multiplier(-1.0).ok());
  EXPECT_FALSE(quantize_multiplier(NAN).ok());
  // 1 - 2^-40 rounds to q = 2^31: renormalised to 2^30 with shift + 1.
  auto one = quantize_multiplier(1.0 - std::ldexp(1.0, -40));
  EXPECT_EQ(one->multiplier, 1 << 30);
  EXPECT_EQ(one->shift, 1);
}

TEST(Requant, TfliteRoundingsMatchTheExactDefinitions) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int32_t> xs(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  std::uniform_int_distribution<int32_t> small(-70000, 70000);
  std::uniform_int_distribution<int32_t> qs(1 << 30, std::numeric_limits<int32_t>::max());
  std::uniform_int_distribution<int> shifts(-31, 0);
  int64_t checked = 0;
  for (int i = 0; i < 200000; ++i) {
    QuantizedMultiplier m{qs(rng), shifts(rng)};
    const int32_t x = (i % 2) ? xs(rng) : small(rng);
    ASSERT_EQ(multiply_by_quantized_multiplier_double_rounding(x, m), ref_double_rounding(x, m))
        << "x=" << x << " q=" << m.multiplier << " shift=" << m.shift;
    ASSERT_EQ(multiply_by_quantized_multiplier_single_rounding(x, m), ref_single_rounding(x, m))
        << "x=" << x << " q=" << m.multiplier << " shift=" << m.shift;
    ++checked;
  }
  // Edges: exact halves, the SRDHM overflow, the extreme shifts.
  for (int32_t x : {std::numeric_limits<int32_t>::min(), -3, -2, -1, 0, 1, 2, 3, std::numeric_limits<int32_t>::max()}) {
    for (QuantizedMultiplier m : {QuantizedMultiplier{1 << 30, 0}, QuantizedMultiplier{1 << 30, -1},
                                  QuantizedMultiplier{std::numeric_limits<int32_t>::max(), -31}, QuantizedMultiplier{1 << 30, -31}}) {
      EXPECT_EQ(multiply_by_quantized_multiplier_double_rounding(x, m), ref_double_rounding(x, m)) << x;
      EXPECT_EQ(multiply_by_quantized_multiplier_single_rounding(x, m), ref_single_rounding(x, m)) << x;
    }
  }
  EXPECT_EQ(saturating_rounding_doubling_high_mul(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::min()),
            std::numeric_limits<int32_t>::max());
  // The two TFLite conventions differ exactly where double rounding rounds twice: 0.5 of
  // 2^-1 at q = 2^30, shift -1 (M = 1/4): x = 2 -> 0.5: double rounding 1 (away), single 1 (up);
  // x = -2 -> -0.5: double -1 (away from zero), single 0 (toward +inf).
  const QuantizedMultiplier quarter{1 << 30, -1};
  EXPECT_EQ(multiply_by_quantized_multiplier_double_rounding(-2, quarter), -1);
  EXPECT_EQ(multiply_by_quantized_multiplier_single_rounding(-2, quarter), 0);
  EXPECT_GT(checked, 0);
}

TEST(Requant, OutCvtMultiplierKeepsFifteenSignificantBits) {
  std::mt19937 rng(9);
  for (int i = 0; i < 20000; ++i) {
    const double m = std::ldexp(std::uniform_real_distribution<double>(0.5, 1.0)(rng), std::uniform_int_distribution<int>(-40, 8)(rng));
    auto q = quantize_multiplier_15(m);
    ASSERT_TRUE(q.ok());
    EXPECT_GE(q->scale, 1 << 14);
    EXPECT_LT(q->scale, 1 << 15);
    // Nearest 15-bit value: within half a unit of the last place.
    EXPECT_LE(std::fabs(std::ldexp(static_cast<double>(q->scale), -q->shift) - m), std::ldexp(0.5, -q->shift) * (1 + 1e-12));
  }
  EXPECT_FALSE(quantize_multiplier_15(0.0).ok());
  EXPECT_FALSE(quantize_multiplier_15(1e6).ok());                                         // would need a negative shift
  auto rq = Requantizer::make(Requant::rknpu_out_cvt, 0.5f, {1.0f}, 1.0f, 0, -128, 127);  // 0.5 = 16384 / 2^15
  ASSERT_TRUE(rq.ok());
  EXPECT_EQ(rq->apply(1, 0), 0);    // 0.5 -> 0
  EXPECT_EQ(rq->apply(3, 0), 2);    // 1.5 -> 2
  EXPECT_EQ(rq->apply(-5, 0), -2);  // -2.5 -> -2
  EXPECT_EQ(parse_requant("rknpu_out_cvt").value_or(Requant::onnx_float), Requant::rknpu_out_cvt);
}

TEST(Requant, OnnxFloatConventionRoundsHalfToEvenAndClamps) {
  auto rq = Requantizer::make(Requant::onnx_float, 0.5f, {1.0f}, 1.0f, 3, -128, 127);  // s = 0.5
  ASSERT_TRUE(rq.ok());
  EXPECT_EQ(rq->apply(1, 0), 3);   // 0.5 -> 0 (even) + 3
  EXPECT_EQ(rq->apply(3, 0), 5);   // 1.5 -> 2 + 3
  EXPECT_EQ(rq->apply(-1, 0), 3);  // -0.5 -> -0
  EXPECT_EQ(rq->apply(-5, 0), 1);  // -2.5 -> -2
  EXPECT_EQ(rq->apply(1000, 0), 127);
  EXPECT_EQ(rq->apply(-1000, 0), -128);
  EXPECT_FALSE(Requantizer::make(Requant::onnx_float, 0.5f, {0.f}, 1.f, 0, -128, 127).ok());
  EXPECT_FALSE(Requantizer::make(Requant::onnx_float, 0.5f, {1.f}, 1.f, 200, -128, 127).ok());
  EXPECT_EQ(parse_requant("tflite_single_rounding").value_or(Requant::onnx_float), Requant::tflite_single_rounding);
  EXPECT_FALSE(parse_requant("nearest").ok());
}

// The convolution reference of this test: int64 accumulation, output-channel-innermost
// loop order, padding by explicit bounds.
std::vector<int64_t> conv_acc_ref(const Tensor& x, int32_t xz, const Tensor& w, const std::vector<int32_t>& wz, const std::vector<int32_t>& bias,
                                  const QConvParams& p, int64_t OH, int64_t OW) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), M = w.dim(0), Cg = w.dim(1), KH = w.dim(2), KW = w.dim(3), Mg = M / p.group;
  auto xv = [&](int64_t i) { return x.dtype() == DType::i8 ? int64_t{x.data<int8_t>()[i]} : int64_t{x.data<uint8_t>()[i]}; };
  std::vector<int64_t> acc(static_cast<size_t>(N * M * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox)
        for (int64_t m = 0; m < M; ++m) {
          int64_t s = bias.empty() ? 0 : bias[static_cast<size_t>(m)];
          const int64_t g = m / Mg;
          for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx)
              for (int64_t c = 0; c < Cg; ++c) {
                const int64_t iy = oy * p.strides[0] + ky * p.dilations[0] - p.pads[0];
                const int64_t ix = ox * p.strides[1] + kx * p.dilations[1] - p.pads[1];
                if (iy < 0 || ix < 0 || iy >= H || ix >= W) continue;
                s += (xv(((n * C + g * Cg + c) * H + iy) * W + ix) - xz) *
                     (int64_t{w.data<int8_t>()[((m * Cg + c) * KH + ky) * KW + kx]} - wz[wz.size() == 1 ? 0 : static_cast<size_t>(m)]);
              }
          acc[static_cast<size_t>(((n * M + m) * OH + oy) * OW + ox)] = s;
        }
  return acc;
}

TEST(Int8Conv, MatchesTheInt64ReferenceForEveryConvention) {
  std::mt19937 rng(3);
  int cases = 0;
  for (int trial = 0; trial < 60; ++trial) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    QConvParams p;
    p.group = pick(0, 2) == 0 ? 2 : 1;
    const int64_t Cg = pick(1, 5), C = Cg * p.group, Mg = pick(1, 4), M = Mg * p.group;
    const int64_t KH = pick(1, 3), KW = pick(1, 3), H = pick(KH, 9), W = pick(KW, 10);
    p.strides = {pick(1, 2), pick(1, 2)};
    p.dilations = {pick(1, 2), 1};
    p.pads = {pick(0, 1), pick(0, 1), pick(0, 1), pick(0, 1)};
    const int64_t OH = (H + p.pads[0] + p.pads[2] - (p.dilations[0] * (KH - 1) + 1)) / p.strides[0] + 1;
    const int64_t OW = (W + p.pads[1] + p.pads[3] - (p.dilations[1] * (KW - 1) + 1)) / p.strides[1] + 1;
    if (OH < 1 || OW < 1) continue;
    const bool u8 = pick(0, 1) == 1;
    Tensor x = Tensor::empty(u8 ? DType::u8 : DType::i8, {1, C, H, W});
    Tensor w = Tensor::empty(DType::i8, {M, Cg, KH, KW});
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (u8) x.data<uint8_t>()[i] = static_cast<uint8_t>(pick(0, 255));
      else x.data<int8_t>()[i] = static_cast<int8_t>(pick(-128, 127));
    }
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(pick(-127, 127));
    const int32_t xz = u8 ? pick(0, 255) : pick(-128, 127);
    std::vector<int32_t> wz(static_cast<size_t>(M), 0);
    std::vector<int32_t> bias(static_cast<size_t>(M));
    std::vector<float> ws(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      bias[static_cast<size_t>(m)] = pick(-5000, 5000);
      ws[static_cast<size_t>(m)] = std::ldexp(1.f + static_cast<float>(pick(0, 1000)) / 1000.f, -pick(6, 12));  // spread per channel
    }
    Tensor b = Tensor::empty(DType::i32, {M});
    std::copy(bias.begin(), bias.end(), b.data<int32_t>());
    const auto acc = conv_acc_ref(x, xz, w, wz, bias, p, OH, OW);
    const float xs = 0.02f, ys = 0.05f;
    const int32_t yz = u8 ? 128 : -3;
    for (Requant conv : {Requant::tflite_double_rounding, Requant::tflite_single_rounding, Requant::onnx_float, Requant::rknpu_out_cvt}) {
      auto rq = Requantizer::make(conv, xs, ws, ys, yz, u8 ? 0 : -128, u8 ? 255 : 127);
      ASSERT_TRUE(rq.ok());
      Tensor out = Tensor::empty(x.dtype(), {1, M, OH, OW});
      ASSERT_TRUE(qlinear_conv(x, xz, w, wz, b, p, *rq, out).ok());
      for (int64_t i = 0; i < out.numel(); ++i) {
        const int64_t m = (i / (OH * OW)) % M;
        const int64_t a = acc[static_cast<size_t>(i)];
        int64_t want;
        if (conv == Requant::rknpu_out_cvt) {
          // a * SCALE / 2^SHIFT rounded half to even, by floor division and remainder.
          auto m15 = quantize_multiplier_15(static_cast<double>(xs) * ws[static_cast<size_t>(m)] / ys);
          const int64_t num = a * m15->scale, den = int64_t{1} << m15->shift;
          const int64_t r = ((num % den) + den) % den, q = (num - r) / den;
          const int64_t rounded = 2 * r > den || (2 * r == den && (q % 2 != 0)) ? q + 1 : q;
          want = std::clamp<int64_t>(rounded + yz, u8 ? 0 : -128, u8 ? 255 : 127);
        } else if (conv == Requant::onnx_float) {
          const float s = xs * ws[static_cast<size_t>(m)] / ys;
          want = static_cast<int64_t>(std::nearbyint(
                     std::clamp(static_cast<float>(a) * s, static_cast<float>((u8 ? 0 : -128) - yz), static_cast<float>((u8 ? 255 : 127) - yz)))) +
                 yz;
        } else {
          auto qm = quantize_multiplier(static_cast<double>(xs) * ws[static_cast<size_t>(m)] / ys);
          const int32_t v = conv == Requant::tflite_double_rounding ? ref_double_rounding(static_cast<int32_t>(a), *qm)
                                                                    : ref_single_rounding(static_cast<int32_t>(a), *qm);
          want = std::clamp<int64_t>(int64_t{v} + yz, u8 ? 0 : -128, u8 ? 255 : 127);
        }
        const int64_t got = u8 ? int64_t{out.data<uint8_t>()[i]} : int64_t{out.data<int8_t>()[i]};
        ASSERT_EQ(got, want) << "trial " << trial << " " << to_string(conv) << " element " << i;
      }
    }
    ++cases;
  }
  EXPECT_GT(cases, 40);
}

TEST(Int8Conv, RefusesAccumulatorsThatCouldOverflow) {
  Tensor x = Tensor::empty(DType::i8, {1, 40000, 1, 1}), w = Tensor::empty(DType::i8, {1, 40000, 1, 1});
  Tensor out = Tensor::empty(DType::i8, {1, 1, 1, 1});
  QConvParams p{{1, 1}, {1, 1}, {0, 0, 0, 0}, 1};
  auto rq = Requantizer::make(Requant::onnx_float, 1.f, {1.f}, 1.f, 0, -128, 127);
  auto s = qlinear_conv(x, 0, w, {0}, Tensor(), p, *rq, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("overflow"), std::string::npos);
}

TEST(Int8Elementwise, AddSubMulMatchTheDefinitionsAndTheRealValues) {
  std::mt19937 rng(5);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    QBinaryParams p;
    p.a_scale = std::ldexp(1.f + static_cast<float>(pick(0, 999)) / 1000.f, -pick(3, 9));
    p.b_scale = std::ldexp(1.f + static_cast<float>(pick(0, 999)) / 1000.f, -pick(3, 9));
    p.out_scale = std::ldexp(1.f + static_cast<float>(pick(0, 999)) / 1000.f, -pick(2, 7));
    p.a_zero_point = pick(-20, 20);
    p.b_zero_point = pick(-20, 20);
    p.out_zero_point = pick(-10, 10);
    p.act_min = pick(0, 1) ? -128 : 0;  // none, or ReLU
    p.convention = pick(0, 1) ? Requant::tflite_double_rounding : Requant::tflite_single_rounding;
    Tensor a = Tensor::empty(DType::i8, {64}), b = Tensor::empty(DType::i8, {64});
    for (int i = 0; i < 64; ++i) {
      a.data<int8_t>()[i] = static_cast<int8_t>(pick(-128, 127));
      b.data<int8_t>()[i] = static_cast<int8_t>(pick(-128, 127));
    }
    auto mult = [&](int64_t x, double real) {
      auto m = *quantize_multiplier(real);
      return p.convention == Requant::tflite_double_rounding ? ref_double_rounding(static_cast<int32_t>(x), m)
                                                             : ref_single_rounding(static_cast<int32_t>(x), m);
    };
    for (int op = 0; op < 3; ++op) {
      Tensor out = Tensor::empty(DType::i8, {64});
      ASSERT_TRUE((op == 2 ? tflite_mul(a, b, p, out) : tflite_add(a, b, p, op == 1, out)).ok());
      const double tm = 2.0 * std::max<double>(p.a_scale, p.b_scale);
      for (int i = 0; i < 64; ++i) {
        const int64_t xa = a.data<int8_t>()[i] - p.a_zero_point, xb = b.data<int8_t>()[i] - p.b_zero_point;
        int64_t y;
        if (op == 2) {
          y = mult(xa * xb, static_cast<double>(p.a_scale) * p.b_scale / p.out_scale);
        } else {
          const int64_t va = mult(xa << 20, p.a_scale / tm), vb = mult(xb << 20, p.b_scale / tm);
          y = mult(op == 1 ? va - vb : va + vb, tm / (static_cast<double>(1 << 20) * p.out_scale));
        }
        y = std::clamp<int64_t>(y + p.out_zero_point, p.act_min, p.act_max);
        ASSERT_EQ(out.data<int8_t>()[i], y) << "trial " << trial << " op " << op << " element " << i;
        // And the integer result is the real result to within one output step (plus the clamp).
        const double real = op == 2 ? (xa * p.a_scale) * (xb * p.b_scale)
                                    : xa * static_cast<double>(p.a_scale) + (op == 1 ? -1 : 1) * xb * static_cast<double>(p.b_scale);
        const double want = std::clamp(real / p.out_scale + p.out_zero_point, static_cast<double>(p.act_min), 127.0);
        EXPECT_LE(std::fabs(static_cast<double>(y) - want), 1.0) << "trial " << trial << " op " << op;
      }
    }
  }
}

// A broadcasting operand (one value per channel, a single element, a trailing row) gives
// what the same operand expanded to a's shape gives, for every convention and both ops; and
// the NPU's Mul (rknpu_out_cvt) is the real product rounded once to within its 15-bit
// multiplier's error.
TEST(Int8Elementwise, BroadcastOperandsEqualTheirExpandedTensors) {
  std::mt19937 rng(11);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Shape as{2, 3, 4, 5};
  const std::vector<Shape> bshapes{{1, 3, 1, 1}, {3, 1, 1}, {1}, {5}, {2, 1, 4, 1}, {4, 5}};
  for (const Shape& bs : bshapes) {
    for (Requant conv : {Requant::onnx_float, Requant::rknpu_out_cvt, Requant::tflite_double_rounding, Requant::tflite_xnnpack}) {
      for (int op = 0; op < 2; ++op) {
        if (op == 0 && conv == Requant::tflite_xnnpack) continue;  // Add: its own form, covered above
        QBinaryParams p;
        p.a_scale = 0.031f;
        p.b_scale = 0.0087f;
        p.out_scale = op == 1 ? 0.0105f : 0.043f;
        p.a_zero_point = pick(-9, 9);
        p.b_zero_point = pick(-9, 9);
        p.out_zero_point = pick(-5, 5);
        p.convention = conv;
        Tensor a = Tensor::empty(DType::i8, as), b = Tensor::empty(DType::i8, bs);
        for (int64_t i = 0; i < a.numel(); ++i) a.data<int8_t>()[i] = static_cast<int8_t>(pick(-128, 127));
        for (int64_t i = 0; i < b.numel(); ++i) b.data<int8_t>()[i] = static_cast<int8_t>(pick(-128, 127));
        // b expanded by index arithmetic of its own (numpy's rule, right-aligned dimensions).
        Tensor full = Tensor::empty(DType::i8, as);
        for (int64_t i = 0; i < full.numel(); ++i) {
          int64_t rem = i, j = 0, stride = 1;
          for (size_t d = as.size(); d-- > 0;) {
            const int64_t ad = as[d], k = rem % ad;
            rem /= ad;
            const size_t back = as.size() - 1 - d;
            if (back < bs.size()) {
              const int64_t bd = bs[bs.size() - 1 - back];
              j += (bd == 1 ? 0 : k) * stride;
              stride *= bd;
            }
          }
          full.data<int8_t>()[i] = b.data<int8_t>()[j];
        }
        Tensor y1 = Tensor::empty(DType::i8, as), y2 = Tensor::empty(DType::i8, as);
        auto run = [&](const Tensor& bb, Tensor& y) { return op == 1 ? tflite_mul(a, bb, p, y) : tflite_add(a, bb, p, false, y); };
        ASSERT_TRUE(run(b, y1).ok()) << "op " << op;
        ASSERT_TRUE(run(full, y2).ok());
        for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(y1.data<int8_t>()[i], y2.data<int8_t>()[i]) << "op " << op << " element " << i;
        if (op == 1 && conv == Requant::rknpu_out_cvt) {
          for (int64_t i = 0; i < a.numel(); ++i) {
            const double real = (a.data<int8_t>()[i] - p.a_zero_point) * static_cast<double>(p.a_scale) * (full.data<int8_t>()[i] - p.b_zero_point) *
                                    p.b_scale / p.out_scale +
                                p.out_zero_point;
            // 15-bit multiplier: |v| 2^-15 relative error on |v| <= 2^16 / 100 steps here, plus half a step.
            EXPECT_LE(std::fabs(y1.data<int8_t>()[i] - std::clamp(real, -128.0, 127.0)), 0.5 + 0.05) << "element " << i;
          }
        }
      }
    }
  }
  Tensor a = Tensor::empty(DType::i8, {1, 3, 2, 2}), b = Tensor::empty(DType::i8, {1, 2, 1, 1}), y = Tensor::empty(DType::i8, {1, 3, 2, 2});
  EXPECT_FALSE(tflite_mul(a, b, QBinaryParams{}, y).ok());  // 2 channels do not broadcast to 3
}

TEST(Int8Pool, AverageRoundsHalfAwayAndMaxIsExact) {
  Tensor x = Tensor::empty(DType::i8, {1, 1, 2, 3});
  const int8_t v[] = {-3, -2, 5, 4, -1, 0};
  std::copy(std::begin(v), std::end(v), x.data<int8_t>());
  QPoolParams p{{2, 2}, {1, 1}, {0, 0, 0, 0}, -128, 127};
  Tensor avg = Tensor::empty(DType::i8, {1, 1, 1, 2}), mx = Tensor::empty(DType::i8, {1, 1, 1, 2});
  ASSERT_TRUE(tflite_average_pool(x, p, avg).ok());
  ASSERT_TRUE(tflite_max_pool(x, p, mx).ok());
  // windows {-3,-2,4,-1} sum -2 -> -0.5 -> -1 (away from zero); {-2,5,-1,0} sum 2 -> 0.5 -> 1
  EXPECT_EQ(avg.data<int8_t>()[0], -1);
  EXPECT_EQ(avg.data<int8_t>()[1], 1);
  EXPECT_EQ(mx.data<int8_t>()[0], 4);
  EXPECT_EQ(mx.data<int8_t>()[1], 5);
  // Padding cells are not counted: a 3x3 window at the corner of a 2x3 map with pad 1 averages 4 values.
  QPoolParams pad{{3, 3}, {1, 1}, {1, 1, 1, 1}, -128, 127};
  Tensor a2 = Tensor::empty(DType::i8, {1, 1, 2, 3});
  ASSERT_TRUE(tflite_average_pool(x, pad, a2).ok());
  EXPECT_EQ(a2.data<int8_t>()[0], -1);  // (-3 - 2 + 4 - 1) / 4 = -0.5 -> -1
}

TEST(Int8Concat, CopiesMatchingInputsAndRequantizesOthers) {
  Tensor a = Tensor::empty(DType::u8, {1, 2, 2}), b = Tensor::empty(DType::u8, {1, 1, 2});
  const uint8_t av[] = {0, 100, 128, 255}, bv[] = {3, 250};
  std::copy(std::begin(av), std::end(av), a.data<uint8_t>());
  std::copy(std::begin(bv), std::end(bv), b.data<uint8_t>());
  const QTensorParams pa{0.5f, 128}, pb{0.25f, 10}, po{0.5f, 128};
  Tensor out = Tensor::empty(DType::u8, {1, 3, 2});
  ASSERT_TRUE(tflite_concat({&a, &b}, {pa, pb}, po, 1, out).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.data<uint8_t>()[i], av[i]) << i;  // same parameters: copied
  for (int i = 0; i < 2; ++i) {
    // real = 0.25 (b - 10); in output units real / 0.5 + 128, rounded half away from zero
    const double want = std::round((bv[i] - 10) * 0.25 / 0.5) + 128;
    EXPECT_EQ(out.data<uint8_t>()[4 + i], static_cast<uint8_t>(std::clamp(want, 0.0, 255.0))) << i;
  }
  EXPECT_FALSE(tflite_concat({&a}, {pa, pb}, po, 1, out).ok());
}

TEST(Requant, BlockFormsEqualApplyForEveryConvention) {
  // apply_to_planes (channel-major out, through the byte transposes) and apply_to_rows
  // (channels last) against apply() value by value: every convention, per-tensor and
  // per-channel scales, channel and pixel counts around the 16 x 16 blocks and the 64-pixel
  // block, int8 and uint8 ranges, accumulators over the whole int32 range.
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  int checked = 0;
  for (const std::string& name : requant_names()) {
    auto conv = parse_requant(name);
    ASSERT_TRUE(conv.ok());
    for (int trial = 0; trial < 12; ++trial) {
      const int64_t M = pick(1, 70), P = pick(1, 200);
      const bool u8 = pick(0, 1);
      std::vector<float> ws(pick(0, 1) ? 1 : static_cast<size_t>(M));
      for (auto& w : ws) w = scale(rng);
      auto rq = Requantizer::make(*conv, 0.02f, ws, 0.1f, static_cast<int32_t>(u8 ? pick(0, 255) : pick(-128, 127)), u8 ? 0 : -128, u8 ? 255 : 127);
      ASSERT_TRUE(rq.ok()) << name;
      std::vector<int32_t> acc(static_cast<size_t>(P * M)), bias(static_cast<size_t>(M));
      for (auto& a : acc) a = static_cast<int32_t>(pick(0, 3) ? pick(-40000, 40000) : pick(INT32_MIN / 2, INT32_MAX / 2));
      for (auto& b : bias) b = static_cast<int32_t>(pick(-5000, 5000));
      const auto plan = rq->plan_planes(bias.data(), M);
      std::vector<uint8_t> planes(static_cast<size_t>(P * M)), rows(static_cast<size_t>(P * M));
      rq->apply_to_planes(plan, acc.data(), P, planes.data(), P);
      rq->apply_to_rows(plan, acc.data(), P, rows.data());
      for (int64_t p = 0; p < P; ++p)
        for (int64_t c = 0; c < M; ++c) {
          const auto want =
              static_cast<uint8_t>(rq->apply(acc[static_cast<size_t>(p * M + c)] + bias[static_cast<size_t>(c)], static_cast<size_t>(c)));
          ASSERT_EQ(planes[static_cast<size_t>(c * P + p)], want) << name << " planes, pixel " << p << " channel " << c;
          ASSERT_EQ(rows[static_cast<size_t>(p * M + c)], want) << name << " rows, pixel " << p << " channel " << c;
          ++checked;
        }
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST(Quantize, RoundingConventions) {
  Tensor x = Tensor::from_floats({6}, std::vector<float>{0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 1000.f});
  Tensor even = Tensor::empty(DType::i8, {6}), away = Tensor::empty(DType::i8, {6});
  QuantParams p{{1.f}, {0}, 0};
  ASSERT_TRUE(quantize(x, p, QuantizeRounding::half_to_even, even).ok());
  ASSERT_TRUE(quantize(x, p, QuantizeRounding::half_away, away).ok());
  const int8_t want_even[] = {0, 2, 2, 0, -2, 127}, want_away[] = {1, 2, 3, -1, -3, 127};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(even.data<int8_t>()[i], want_even[i]) << i;
    EXPECT_EQ(away.data<int8_t>()[i], want_away[i]) << i;
  }
}

}  // namespace
}  // namespace rkd::quant
