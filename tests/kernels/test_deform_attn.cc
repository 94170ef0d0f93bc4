// Fused multi-scale deformable attention: fast vs reference (bit-exact), the default
// method against a composition of GridSample calls (bit-exact), the discrete methods'
// integer semantics, value layouts, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "common/expect_tensor.h"
#include "common/tolerance.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"

namespace rkd {
namespace {

using test::exact_equal;

struct Config {
  int64_t batch, heads, head_dim, queries;
  std::vector<MsdaLevelShape> levels;
  std::vector<int64_t> points;
};

struct Inputs {
  Tensor value, locations, weights;
};

int64_t total(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (auto x : v) s += x;
  return s;
}

Inputs make_inputs(const Config& c, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(-0.2f, 1.2f);
  int64_t T = 0;
  for (auto l : c.levels) T += l.h * l.w;
  const int64_t P = total(c.points);
  Inputs in;
  in.value = Tensor::empty(DType::f32, {c.batch, T, c.heads, c.head_dim});
  in.locations = Tensor::empty(DType::f32, {c.batch, c.queries, c.heads, P, 2});
  in.weights = Tensor::empty(DType::f32, {c.batch, c.queries, c.heads, P});
  for (int64_t i = 0; i < in.value.numel(); ++i) in.value.data<float>()[i] = n(rng);
  const float picks[] = {0.0f, 1.0f, 0.5f, -0.5f, 2.0f, 1e-7f, std::nextafter(1.0f, 0.0f), -1e6f, 1e6f};
  for (int64_t i = 0; i < in.locations.numel(); ++i) {
    in.locations.data<float>()[i] = rng() % 4 == 0 ? picks[rng() % std::size(picks)] : u(rng);
  }
  if (specials) {
    in.locations.data<float>()[0] = NAN;
    in.locations.data<float>()[3] = INFINITY;
  }
  for (int64_t i = 0; i < in.weights.numel(); ++i) in.weights.data<float>()[i] = n(rng);
  return in;
}

std::string describe(const Config& c, MsdaMethod m, uint32_t seed) {
  std::ostringstream s;
  s << "method=" << to_string(m) << " B=" << c.batch << " heads=" << c.heads << " hd=" << c.head_dim << " Lq=" << c.queries << " levels=";
  for (auto l : c.levels) s << l.h << "x" << l.w << ",";
  s << " seed=" << seed;
  return s.str();
}

const std::vector<Config> kConfigs = {
    {1, 8, 24, 10, {{8, 8}, {4, 4}, {2, 2}}, {3, 6, 3}},
    {2, 3, 5, 7, {{4, 6}, {2, 3}}, {2, 3}},
    {1, 2, 1, 3, {{1, 1}}, {4}},
    {1, 1, 33, 5, {{3, 9}, {1, 17}, {2, 2}}, {1, 1, 5}},
    {3, 2, 8, 31, {{5, 5}, {3, 4}, {1, 2}, {1, 1}}, {3, 1, 2, 2}},
    {1, 4, 16, 33, {{10, 16}, {5, 8}}, {4, 4}},
};

TEST(MsdaDifferential, FastEqualsReferenceForEveryMethod) {
  ThreadPool pool1(1), pool3(3);
  uint32_t seed = 100;
  for (const auto& c : kConfigs) {
    for (auto m : {MsdaMethod::bilinear, MsdaMethod::discrete, MsdaMethod::discrete_fixed}) {
      ++seed;
      const Inputs in = make_inputs(c, seed, m == MsdaMethod::bilinear);
      const MsdaValue v = *msda_prepare_from_tokens(in.value, c.levels);
      MsdaOptions o;
      o.method = m;
      o.impl = KernelImpl::reference;
      auto ref = msda(v, in.locations, in.weights, c.points, o);
      ASSERT_TRUE(ref.ok()) << describe(c, m, seed) << ref.error().to_string();
      o.impl = KernelImpl::fast;
      expect_identical(*ref, *msda(v, in.locations, in.weights, c.points, o, &pool1), describe(c, m, seed));
      expect_identical(*ref, *msda(v, in.locations, in.weights, c.points, o, &pool3), describe(c, m, seed));
    }
  }
}

// The default method equals per-level GridSample(bilinear, zeros, align_corners=0) on
// 2*loc-1, multiplied by the weights and summed in point order - bit for bit.
TEST(MsdaComposition, DefaultEqualsGridSamplePerLevelThenWeightedSum) {
  uint32_t seed = 300;
  for (const auto& c : kConfigs) {
    ++seed;
    const Inputs in = make_inputs(c, seed, true);
    const MsdaValue v = *msda_prepare_from_tokens(in.value, c.levels);
    const Tensor out = *msda(v, in.locations, in.weights, c.points, MsdaOptions{});
    const int64_t B = c.batch, nH = c.heads, hd = c.head_dim, Lq = c.queries, P = total(c.points);
    int64_t T = 0;
    for (auto l : c.levels) T += l.h * l.w;
    // samples[b*nH+m][ch][q][k]
    std::vector<float> samples(static_cast<size_t>(B * nH * hd * Lq * P));
    int64_t k0 = 0, t0 = 0;
    for (size_t l = 0; l < c.levels.size(); ++l) {
      const auto lv = c.levels[l];
      const int64_t Pl = c.points[l];
      Tensor val = Tensor::empty(DType::f32, {B * nH, hd, lv.h, lv.w});
      Tensor grid = Tensor::empty(DType::f32, {B * nH, Lq, Pl, 2});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < nH; ++m)
          for (int64_t ch = 0; ch < hd; ++ch)
            for (int64_t t = 0; t < lv.h * lv.w; ++t)
              val.data<float>()[((b * nH + m) * hd + ch) * lv.h * lv.w + t] = in.value.data<float>()[((b * T + t0 + t) * nH + m) * hd + ch];
      for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < nH; ++m)
          for (int64_t q = 0; q < Lq; ++q)
            for (int64_t k = 0; k < Pl; ++k)
              for (int xy = 0; xy < 2; ++xy) {
                const float loc = in.locations.data<float>()[(((b * Lq + q) * nH + m) * P + k0 + k) * 2 + xy];
                grid.data<float>()[(((b * nH + m) * Lq + q) * Pl + k) * 2 + xy] = 2.0f * loc - 1.0f;
              }
      const Tensor s = *grid_sample(val, grid, GridSampleOptions{}, KernelImpl::reference);
      for (int64_t bm = 0; bm < B * nH; ++bm)
        for (int64_t ch = 0; ch < hd; ++ch)
          for (int64_t q = 0; q < Lq; ++q)
            for (int64_t k = 0; k < Pl; ++k)
              samples[static_cast<size_t>(((bm * hd + ch) * Lq + q) * P + k0 + k)] = s.data<float>()[((bm * hd + ch) * Lq + q) * Pl + k];
      k0 += Pl;
      t0 += lv.h * lv.w;
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t q = 0; q < Lq; ++q)
        for (int64_t m = 0; m < nH; ++m)
          for (int64_t ch = 0; ch < hd; ++ch) {
            float acc = 0.0f;
            for (int64_t k = 0; k < P; ++k) {
              const float prod = samples[static_cast<size_t>((((b * nH + m) * hd + ch) * Lq + q) * P + k)] *
                                 in.weights.data<float>()[((b * Lq + q) * nH + m) * P + k];
              acc = acc + prod;
            }
            const float got = out.data<float>()[(b * Lq + q) * nH * hd + m * hd + ch];
            ASSERT_TRUE(exact_equal(acc, got)) << "seed " << seed << " b" << b << " q" << q << " m" << m << " c" << ch;
          }
  }
}

TEST(MsdaLayouts, LevelLayoutEqualsTokenLayout) {
  const Config c = kConfigs[4];
  const Inputs in = make_inputs(c, 17, false);
  std::vector<Tensor> levels;
  int64_t T = 0, t0 = 0;
  for (auto l : c.levels) T += l.h * l.w;
  for (auto lv : c.levels) {
    Tensor t = Tensor::empty(DType::f32, {c.batch * c.heads, c.head_dim, lv.h, lv.w});
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t m = 0; m < c.heads; ++m)
        for (int64_t ch = 0; ch < c.head_dim; ++ch)
          for (int64_t i = 0; i < lv.h * lv.w; ++i)
            t.data<float>()[((b * c.heads + m) * c.head_dim + ch) * lv.h * lv.w + i] =
                in.value.data<float>()[((b * T + t0 + i) * c.heads + m) * c.head_dim + ch];
    levels.push_back(t);
    t0 += lv.h * lv.w;
  }
  const MsdaValue a = *msda_prepare_from_tokens(in.value, c.levels);
  const MsdaValue b = *msda_prepare_from_levels(levels, c.heads);
  ASSERT_EQ(a.data.shape(), b.data.shape());
  EXPECT_EQ(std::memcmp(a.data.raw(), b.data.raw(), a.data.nbytes()), 0);
}

// One level, H = 2 rows, W = 4 columns, one head of 1 channel holding its token index.
float discrete_sample(MsdaMethod m, float lx, float ly, int64_t H = 2, int64_t W = 4) {
  Tensor v = Tensor::empty(DType::f32, {1, H * W, 1, 1});
  for (int64_t i = 0; i < H * W; ++i) v.data<float>()[i] = static_cast<float>(i);
  const MsdaValue pv = *msda_prepare_from_tokens(v, {{H, W}});
  Tensor loc = Tensor::from_floats({1, 1, 1, 1, 2}, std::vector<float>{lx, ly});
  Tensor w = Tensor::from_floats({1, 1, 1, 1}, std::vector<float>{1.0f});
  MsdaOptions o;
  o.method = m;
  auto r = msda(pv, loc, w, {1}, o);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? r->data<float>()[0] : NAN;
}

TEST(MsdaDiscrete, ClampsXToHeightMinusOneLikeTheHistoricalCode) {
  // x = 0.9 on W = 4: int(3.6 + 0.5) = 4 -> discrete clamps to H-1 = 1; fixed to W-1 = 3.
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete, 0.9f, 0.1f), 1.0f);
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete_fixed, 0.9f, 0.1f), 3.0f);
  // x = 0.3: int(1.2 + 0.5) = 1 on both; y = 0.8: int(1.6 + 0.5) = 2 -> clamp to 1.
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete, 0.3f, 0.8f), 5.0f);
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete_fixed, 0.3f, 0.8f), 5.0f);
  // Truncation toward zero: -0.2*4 + 0.5 = -0.3 -> 0; out-of-range points take border values.
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete_fixed, -0.2f, -3.0f), 0.0f);
  // The half-pixel offset: loc*W + 0.5 picks pixel 1 at x = 0.125*4 = 0.5 (bilinear's
  // coordinate 0.0 is pixel 0's centre).
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete_fixed, 0.125f, 0.0f), 1.0f);
  // NaN truncates to INT64_MIN (x86) and clamps to 0.
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete_fixed, NAN, 0.0f), 0.0f);
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete_fixed, INFINITY, 0.0f), 0.0f);
}

TEST(MsdaDiscrete, TallMapsIndexPastTheLastColumnAndAreRefused) {
  // H = 4, W = 2: x = 0.9 -> int(1.8+0.5) = 2 -> clamp to H-1 = 3 > W-1: PyTorch IndexError.
  Tensor v = Tensor::empty(DType::f32, {1, 8, 1, 1});
  const MsdaValue pv = *msda_prepare_from_tokens(v, {{4, 2}});
  Tensor loc = Tensor::from_floats({1, 1, 1, 1, 2}, std::vector<float>{0.9f, 0.1f});
  Tensor w = Tensor::from_floats({1, 1, 1, 1}, std::vector<float>{1.0f});
  MsdaOptions o;
  o.method = MsdaMethod::discrete;
  auto r = msda(pv, loc, w, {1}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("IndexError"), std::string::npos);
  EXPECT_NE(r.error().message.find("level 0"), std::string::npos);
  EXPECT_EQ(discrete_sample(MsdaMethod::discrete, 0.2f, 0.9f, 4, 2), 6.0f);  // x 0, y int(4.1) = 4 -> 3
  o.method = MsdaMethod::discrete_fixed;
  EXPECT_TRUE(msda(pv, loc, w, {1}, o).ok());
}

TEST(MsdaErrors, NameTheTensorAndDimension) {
  const Config c = kConfigs[1];
  const Inputs in = make_inputs(c, 5, false);
  const MsdaValue v = *msda_prepare_from_tokens(in.value, c.levels);
  auto msg = [&](const Tensor& loc, const Tensor& w, std::vector<int64_t> pts, MsdaOptions o = {}) {
    auto r = msda(v, loc, w, pts, o);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(msg(in.locations, in.weights, {2, 2}).find("locations: dimension 3 is 5 but the sum of points per level is 4"), std::string::npos);
  EXPECT_NE(msg(in.locations, in.weights, {5}).find("points: 1 values given for 2 levels"), std::string::npos);
  EXPECT_NE(msg(*in.locations.slice(0, 0, 1), *in.weights.slice(0, 0, 1), c.points).find("locations: dimension 0"), std::string::npos);
  EXPECT_NE(msg(in.locations, *in.weights.slice(1, 0, 3), c.points).find("weights: dimension 1"), std::string::npos);
  Tensor w = in.weights.clone();
  w.data<float>()[7] = NAN;
  MsdaOptions strict;
  strict.require_finite_weights = true;
  EXPECT_NE(msg(in.locations, w, c.points, strict).find("weights: non-finite value"), std::string::npos);
  auto bad_tokens = msda_prepare_from_tokens(in.value, {{4, 6}, {2, 2}});
  ASSERT_FALSE(bad_tokens.ok());
  EXPECT_NE(bad_tokens.error().message.find("value: dimension 1 has 30 tokens but the level shapes sum to 28"), std::string::npos);
  EXPECT_FALSE(parse_level_shapes("80x80,40").ok());
  EXPECT_FALSE(parse_level_shapes("80x0").ok());
  EXPECT_FALSE(parse_points("3,,3").ok());
  EXPECT_EQ(parse_level_shapes("48x80,24x40")->at(1).w, 40);
}

}  // namespace
}  // namespace rkd
