// The exact int8 products (ops::QConvAccumulator, ops::QMatMulAccumulator) against their
// definition summed in int64, bit for bit, on every engine and every Highway target this CPU
// runs (hwy::SetSupportedTargetsForTest walks them: AVX-512, AVX2, SSE4 ... on x86, NEON on
// arm64; the ISA-capped ctest runs repeat it under each RKD_MAX_ISA ceiling, which also moves
// the automatic engine from oneDNN to Highway), and the int8-quad products (sdot on arm64
// with DotProd, a plain loop with the same packing elsewhere). Random geometries cover what the kernels
// special-case: depthwise, grouped, 1x1, odd tap counts (K padded to pairs), K above the
// K block (kKBlockPairs), output channels not a multiple of the panel width, pixel counts not
// a multiple of the tile, strides, dilations and asymmetric padding; and operands at the
// ends of their ranges, where a saturating step would show.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/tensor_ops.h"
#include "kernels/tensor_ops_int8.h"

namespace rkd {
namespace {

struct ConvCase {
  int64_t C, H, W, M, KH, KW, S, D, group;
  std::vector<int64_t> pads;  // top, left, bottom, right
  DType xt;
  int32_t zp;
};

std::string describe(const ConvCase& c) {
  std::ostringstream o;
  o << "C" << c.C << " " << c.H << "x" << c.W << " M" << c.M << " k" << c.KH << "x" << c.KW << " s" << c.S << " d" << c.D << " g" << c.group
    << " pads " << c.pads[0] << "," << c.pads[1] << "," << c.pads[2] << "," << c.pads[3] << (c.xt == DType::i8 ? " int8" : " uint8") << " zp "
    << c.zp;
  return o.str();
}

// Values drawn from the whole range, a quarter of them at its ends.
template <typename T>
Tensor random_values(DType dt, const Shape& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(dt, s);
  constexpr int lo = std::is_same_v<T, uint8_t> ? 0 : -128, hi = std::is_same_v<T, uint8_t> ? 255 : 127;
  std::uniform_int_distribution<int> d(lo, hi), pick(0, 7);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int k = pick(rng);
    t.data<T>()[i] = static_cast<T>(k == 0 ? lo : k == 1 ? hi : d(rng));
  }
  return t;
}

// acc[n][oy][ox][m] (channels last), int64 sums of (x - zp) * w over the window, padding 0.
std::vector<int64_t> conv_int64(const ConvCase& c, const Tensor& x, const Tensor& w, int64_t OH, int64_t OW) {
  const int64_t Cg = c.C / c.group, Mg = c.M / c.group;
  std::vector<int64_t> acc(static_cast<size_t>(OH * OW * c.M), 0);
  for (int64_t m = 0; m < c.M; ++m) {
    const int64_t g = m / Mg;
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        int64_t s = 0;
        for (int64_t ci = 0; ci < Cg; ++ci)
          for (int64_t ky = 0; ky < c.KH; ++ky)
            for (int64_t kx = 0; kx < c.KW; ++kx) {
              const int64_t iy = oy * c.S - c.pads[0] + ky * c.D, ix = ox * c.S - c.pads[1] + kx * c.D;
              if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
              const int64_t at = ((g * Cg + ci) * c.H + iy) * c.W + ix;
              const int64_t xv = c.xt == DType::i8 ? x.data<int8_t>()[at] : x.data<uint8_t>()[at];
              s += (xv - c.zp) * w.data<int8_t>()[((m * Cg + ci) * c.KH + ky) * c.KW + kx];
            }
        acc[static_cast<size_t>((oy * OW + ox) * c.M + m)] = s;
      }
  }
  return acc;
}

ConvCase random_case(std::mt19937& rng) {
  auto in = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  ConvCase c;
  const int64_t kind = in(0, 4);  // 0 depthwise, 1 grouped, 2 1x1, 3 dense, 4 large K
  c.group = 1;
  if (kind == 0) {
    c.C = in(1, 70);
    c.M = c.C;
    c.group = c.C;
  } else if (kind == 1) {
    c.group = in(2, 4);
    c.C = c.group * in(1, 12);
    c.M = c.group * in(1, 20);
  } else if (kind == 4) {
    c.C = in(40, 300);
    c.M = in(1, 70);
  } else {
    c.C = in(1, 48);
    c.M = in(1, 100);
  }
  c.KH = kind == 2 ? 1 : in(1, 5);
  c.KW = kind == 2 ? 1 : in(1, 5);
  c.S = in(1, 2);
  c.D = kind == 2 ? 1 : in(1, 2);
  c.H = in((c.KH - 1) * c.D + 1, 21);
  c.W = in((c.KW - 1) * c.D + 1, 23);
  c.pads = {in(0, 2), in(0, 2), in(0, 2), in(0, 2)};
  c.xt = in(0, 1) ? DType::i8 : DType::u8;
  c.zp = static_cast<int32_t>(c.xt == DType::i8 ? in(-128, 127) : in(0, 255));
  return c;
}

// The engines and Highway targets to run; a Highway target is made current by
// SetSupportedTargetsForTest for the duration of fn.
template <typename F>
void for_each_path(const F& fn) {
  if (ops::onednn_int8_exact()) {
    SCOPED_TRACE("engine onednn");
    fn(ops::Int8Engine::onednn);
  }
  ops::int8::set_dotprod_for_test(0);
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(std::string("engine highway, target ") + hwy::TargetName(target));
    fn(ops::Int8Engine::highway);
    hwy::SetSupportedTargetsForTest(0);
  }
  // The int8-quad products: sdot on arm64 with DotProd, their plain loop elsewhere.
  ops::int8::set_dotprod_for_test(1);
  {
    SCOPED_TRACE("engine highway, int8 quads (dot products)");
    fn(ops::Int8Engine::highway);
  }
  ops::int8::set_dotprod_for_test(-1);
}

TEST(Int8Products, ConvolutionEqualsTheInt64DefinitionOnEveryPath) {
  std::mt19937 rng(20261201);
  int paths = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const ConvCase c = random_case(rng);
    SCOPED_TRACE(describe(c));
    const int64_t OH = (c.H + c.pads[0] + c.pads[2] - ((c.KH - 1) * c.D + 1)) / c.S + 1;
    const int64_t OW = (c.W + c.pads[1] + c.pads[3] - ((c.KW - 1) * c.D + 1)) / c.S + 1;
    const Tensor x =
        c.xt == DType::i8 ? random_values<int8_t>(DType::i8, {1, c.C, c.H, c.W}, rng) : random_values<uint8_t>(DType::u8, {1, c.C, c.H, c.W}, rng);
    const Tensor w = random_values<int8_t>(DType::i8, {c.M, c.C / c.group, c.KH, c.KW}, rng);
    const std::vector<int64_t> want = conv_int64(c, x, w, OH, OW);
    Tensor x_nhwc = Tensor::empty(c.xt, {1, c.H, c.W, c.C});
    for (int64_t ch = 0; ch < c.C; ++ch)
      for (int64_t i = 0; i < c.H * c.W; ++i)
        static_cast<uint8_t*>(x_nhwc.raw())[i * c.C + ch] = static_cast<const uint8_t*>(x.raw())[ch * c.H * c.W + i];
    std::vector<int64_t> wsum(static_cast<size_t>(c.M), 0);
    for (int64_t i = 0; i < w.numel(); ++i) wsum[static_cast<size_t>(i / (w.numel() / c.M))] += w.data<int8_t>()[i];
    const int64_t zp_u8 = c.zp + (c.xt == DType::i8 ? 128 : 0);
    ops::ConvParams p;
    p.strides = {c.S, c.S};
    p.dilations = {c.D, c.D};
    p.pads = c.pads;
    p.group = c.group;
    for_each_path([&](ops::Int8Engine engine) {
      ++paths;
      auto a = ops::make_qconv_accumulator({1, c.C, c.H, c.W}, c.xt, c.zp, w, p, {1, c.M, OH, OW}, engine);
      ASSERT_TRUE(a.ok()) << a.error().to_string();
      Tensor acc = Tensor::empty(DType::i32, {1, OH, OW, c.M});
      ASSERT_TRUE((*a)->run(x, acc).ok());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(acc.data<int32_t>()[i], want[i]) << "run(), element " << i << " (" << (*a)->implementation() << ")";
      }
      // The raw sums over the buffer run() filled: each output + zp_u8 * sum(w[m]), which is
      // compensation()[m]; run_raw() fills and gives the same.
      ASSERT_TRUE((*a)->run_filled_raw(acc).ok());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(acc.data<int32_t>()[i], want[i] + zp_u8 * wsum[i % static_cast<size_t>(c.M)]) << "run_filled_raw(), element " << i;
      }
      std::fill_n(acc.data<int32_t>(), acc.numel(), 0);
      ASSERT_TRUE((*a)->run_raw(x, acc).ok());
      for (size_t i = 0; i < want.size(); ++i) {
        const size_t m = i % static_cast<size_t>(c.M);
        ASSERT_EQ((*a)->compensation()[m], zp_u8 * wsum[m]);
        ASSERT_EQ(acc.data<int32_t>()[i], want[i] + (*a)->compensation()[m]) << "run_raw(), element " << i;
      }
      // The same input channels last ([N, H, W, C], the int8-channels-last pass's layout).
      std::fill_n(acc.data<int32_t>(), acc.numel(), 0);
      ASSERT_TRUE((*a)->run_raw(x_nhwc, acc, true).ok());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(acc.data<int32_t>()[i], want[i] + (*a)->compensation()[i % static_cast<size_t>(c.M)]) << "run_raw(channels last), element " << i;
      }
    });
  }
  EXPECT_GE(paths, 60);
}

TEST(Int8Products, MatMulEqualsTheInt64DefinitionOnEveryPath) {
  std::mt19937 rng(7);
  auto in = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 30; ++trial) {
    // The first trials: whole tiles and a multiple of every target's panel width (the
    // products written straight into the output), with K above the block once.
    const bool whole = trial < 4;
    const int64_t rows = whole ? 96 + 48 * trial : in(1, 150), K = trial % 5 == 0 ? in(257, 700) : in(1, 80), N = whole ? 64 : in(1, 90);
    const DType at = in(0, 1) ? DType::i8 : DType::u8;
    const int32_t zp = static_cast<int32_t>(at == DType::i8 ? in(-128, 127) : in(0, 255));
    std::ostringstream what;
    what << "rows " << rows << " K " << K << " N " << N;
    SCOPED_TRACE(what.str());
    const Tensor a = at == DType::i8 ? random_values<int8_t>(at, {rows, K}, rng) : random_values<uint8_t>(at, {rows, K}, rng);
    const Tensor b = random_values<int8_t>(DType::i8, {K, N}, rng);
    for_each_path([&](ops::Int8Engine engine) {
      auto q = ops::make_qmatmul_accumulator(rows, at, zp, b, engine);
      ASSERT_TRUE(q.ok()) << q.error().to_string();
      Tensor acc = Tensor::empty(DType::i32, {rows, N});
      ASSERT_TRUE((*q)->run(a, acc).ok());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < N; ++j) {
          int64_t s = 0;
          for (int64_t k = 0; k < K; ++k) {
            const int64_t av = at == DType::i8 ? a.data<int8_t>()[r * K + k] : a.data<uint8_t>()[r * K + k];
            s += (av - zp) * b.data<int8_t>()[k * N + j];
          }
          ASSERT_EQ(acc.data<int32_t>()[r * N + j], s) << "row " << r << " column " << j;
        }
    });
  }
}

TEST(Int8Products, TheLargestSumsStayExact) {
  // Every product at its extreme (uint8 255 against weight -128, zero point 0) over the most
  // taps the contract allows in a realistic layer (3x3 x 1024 channels): -300 million, well
  // inside int32, where one saturating 16-bit step would clip.
  const int64_t C = 1024;
  Tensor x = Tensor::empty(DType::u8, {1, C, 3, 3});
  Tensor w = Tensor::empty(DType::i8, {2, C, 3, 3});
  std::fill_n(x.data<uint8_t>(), x.numel(), uint8_t{255});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = i < w.numel() / 2 ? -128 : 127;
  ops::ConvParams p;
  p.strides = {1, 1};
  p.dilations = {1, 1};
  p.pads = {0, 0, 0, 0};
  for_each_path([&](ops::Int8Engine engine) {
    auto a = ops::make_qconv_accumulator({1, C, 3, 3}, DType::u8, 0, w, p, {1, 2, 1, 1}, engine);
    ASSERT_TRUE(a.ok()) << a.error().to_string();
    Tensor acc = Tensor::empty(DType::i32, {1, 1, 1, 2});
    ASSERT_TRUE((*a)->run(x, acc).ok());
    EXPECT_EQ(acc.data<int32_t>()[0], -255 * 128 * 9 * C);
    EXPECT_EQ(acc.data<int32_t>()[1], 255 * 127 * 9 * C);
  });
}

TEST(Int8Products, TooManyTapsForInt32IsRefused) {
  Tensor b = Tensor::empty(DType::i8, {70000, 1});
  auto q = ops::make_qmatmul_accumulator(1, DType::u8, 0, b, ops::Int8Engine::highway);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().to_string().find("65793"), std::string::npos) << q.error().to_string();
}

}  // namespace
}  // namespace rkd
