// Float convolution on both engines (oneDNN, XNNPACK) against a double-precision evaluation of
// its definition: random 2-D geometries (dense, grouped, depthwise, 1x1, strides, dilations,
// asymmetric padding, with and without bias), compared with tolerance.h float_agree
// (magnitude: the sum of |w x| of the window and |bias|, depth: the taps summed). The fused
// ReLU keeps NaN on both (x < 0 ? 0 : x), and SiLU is x * sigmoid(x). On the boards' CPUs
// (arm64 without SVE) the automatic engine is XNNPACK: oneDNN has only reference kernels there.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "common/tolerance.h"
#include "kernels/tensor_ops.h"

namespace rkd {
namespace {

struct Geometry {
  int64_t N, C, H, W, M, KH, KW, S, D, group;
  std::vector<int64_t> pads;  // top, left, bottom, right
  bool bias;
};

Geometry random_geometry(std::mt19937& rng) {
  auto in = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Geometry g;
  const int64_t kind = in(0, 3);  // 0 depthwise, 1 grouped, 2 1x1, 3 dense
  g.N = in(1, 2);
  g.group = 1;
  if (kind == 0) {
    g.C = in(1, 40);
    g.M = g.C;
    g.group = g.C;
  } else if (kind == 1) {
    g.group = in(2, 4);
    g.C = g.group * in(1, 8);
    g.M = g.group * in(1, 8);
  } else {
    g.C = in(1, 40);
    g.M = in(1, 50);
  }
  g.KH = kind == 2 ? 1 : in(1, 5);
  g.KW = kind == 2 ? 1 : in(1, 5);
  g.S = in(1, 2);
  g.D = kind == 2 ? 1 : in(1, 2);
  g.H = in((g.KH - 1) * g.D + 1, 17);
  g.W = in((g.KW - 1) * g.D + 1, 19);
  g.pads = {in(0, 2), in(0, 2), in(0, 2), in(0, 2)};
  g.bias = in(0, 1) == 1;
  return g;
}

std::string describe(const Geometry& g) {
  std::ostringstream o;
  o << "N" << g.N << " C" << g.C << " " << g.H << "x" << g.W << " M" << g.M << " k" << g.KH << "x" << g.KW << " s" << g.S << " d" << g.D << " g"
    << g.group << " pads " << g.pads[0] << "," << g.pads[1] << "," << g.pads[2] << "," << g.pads[3] << (g.bias ? " bias" : "");
  return o.str();
}

TEST(FloatConv, BothEnginesAgreeWithTheDoubleDefinition) {
  std::mt19937 rng(11);
  std::normal_distribution<float> v(0.f, 1.f);
  for (int trial = 0; trial < 40; ++trial) {
    const Geometry g = random_geometry(rng);
    SCOPED_TRACE(describe(g));
    const int64_t Cg = g.C / g.group, Mg = g.M / g.group;
    const int64_t OH = (g.H + g.pads[0] + g.pads[2] - ((g.KH - 1) * g.D + 1)) / g.S + 1;
    const int64_t OW = (g.W + g.pads[1] + g.pads[3] - ((g.KW - 1) * g.D + 1)) / g.S + 1;
    Tensor x = Tensor::empty(DType::f32, {g.N, g.C, g.H, g.W}), w = Tensor::empty(DType::f32, {g.M, Cg, g.KH, g.KW});
    Tensor b = Tensor::empty(DType::f32, {g.M});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = v(rng);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = v(rng);
    for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = v(rng);
    std::vector<double> want(static_cast<size_t>(g.N * g.M * OH * OW)), mag(want.size());
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t m = 0; m < g.M; ++m)
        for (int64_t oy = 0; oy < OH; ++oy)
          for (int64_t ox = 0; ox < OW; ++ox) {
            double s = g.bias ? b.data<float>()[m] : 0.0, a = g.bias ? std::fabs(s) : 0.0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t ky = 0; ky < g.KH; ++ky)
                for (int64_t kx = 0; kx < g.KW; ++kx) {
                  const int64_t iy = oy * g.S - g.pads[0] + ky * g.D, ix = ox * g.S - g.pads[1] + kx * g.D;
                  if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                  const double t = double{x.data<float>()[((n * g.C + (m / Mg) * Cg + c) * g.H + iy) * g.W + ix]} *
                                   w.data<float>()[((m * Cg + c) * g.KH + ky) * g.KW + kx];
                  s += t;
                  a += std::fabs(t);
                }
            const size_t at = static_cast<size_t>(((n * g.M + m) * OH + oy) * OW + ox);
            want[at] = s;
            mag[at] = a;
          }
    ops::ConvParams p;
    p.strides = {g.S, g.S};
    p.dilations = {g.D, g.D};
    p.pads = g.pads;
    p.group = g.group;
    for (ops::ConvEngine engine : {ops::ConvEngine::onednn, ops::ConvEngine::xnnpack}) {
      SCOPED_TRACE(engine == ops::ConvEngine::onednn ? "oneDNN" : "XNNPACK");
      auto c = ops::make_conv(x.shape(), w, g.bias ? &b : nullptr, p, false, {g.N, g.M, OH, OW}, "", engine);
      ASSERT_TRUE(c.ok()) << c.error().to_string();
      Tensor y = Tensor::empty(DType::f32, {g.N, g.M, OH, OW});
      ASSERT_TRUE((*c)->run(x, y).ok());
      const int depth = static_cast<int>(Cg * g.KH * g.KW) + 1;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(test::float_agree(y.data<float>()[i], want[i], mag[i], depth))
            << "element " << i << ": " << y.data<float>()[i] << " vs " << want[i] << " (" << (*c)->implementation() << ")";
      }
      auto r = ops::make_conv(x.shape(), w, g.bias ? &b : nullptr, p, false, {g.N, g.M, OH, OW}, "relu", engine);
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      ASSERT_TRUE((*r)->run(x, y).ok());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(test::float_agree(y.data<float>()[i], want[i] < 0 ? 0.0 : want[i], mag[i], depth)) << "relu, element " << i;
      }
    }
  }
}

TEST(FloatConv, FusedActivationsKeepNanOnBothEngines) {
  // A 1x1 convolution with weight 1: the output is the input, so NaN, +-inf and negatives reach
  // the activation unchanged.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::empty(DType::f32, {1, 1, 1, 5}), w = Tensor::empty(DType::f32, {1, 1, 1, 1});
  const float xs[5] = {nan, -2.f, 3.f, -inf, inf};
  std::copy(xs, xs + 5, x.data<float>());
  w.data<float>()[0] = 1.f;
  ops::ConvParams p;
  p.strides = {1, 1};
  p.dilations = {1, 1};
  p.pads = {0, 0, 0, 0};
  for (ops::ConvEngine engine : {ops::ConvEngine::onednn, ops::ConvEngine::xnnpack}) {
    SCOPED_TRACE(engine == ops::ConvEngine::onednn ? "oneDNN" : "XNNPACK");
    auto relu = ops::make_conv(x.shape(), w, nullptr, p, false, {1, 1, 1, 5}, "relu", engine);
    ASSERT_TRUE(relu.ok()) << relu.error().to_string();
    Tensor y = Tensor::empty(DType::f32, {1, 1, 1, 5});
    ASSERT_TRUE((*relu)->run(x, y).ok());
    EXPECT_TRUE(std::isnan(y.data<float>()[0]));
    EXPECT_EQ(y.data<float>()[1], 0.f);
    EXPECT_EQ(y.data<float>()[2], 3.f);
    EXPECT_EQ(y.data<float>()[3], 0.f);
    EXPECT_EQ(y.data<float>()[4], inf);
    auto silu = ops::make_conv(x.shape(), w, nullptr, p, false, {1, 1, 1, 5}, "silu", engine);
    ASSERT_TRUE(silu.ok()) << silu.error().to_string();
    ASSERT_TRUE((*silu)->run(x, y).ok());
    EXPECT_TRUE(std::isnan(y.data<float>()[0]));
    EXPECT_TRUE(test::float_agree(y.data<float>()[1], -2.0 / (1.0 + std::exp(2.0)), 2.0, 8));
    EXPECT_TRUE(test::float_agree(y.data<float>()[2], 3.0 / (1.0 + std::exp(-3.0)), 3.0, 8));
  }
}

}  // namespace
}  // namespace rkd
