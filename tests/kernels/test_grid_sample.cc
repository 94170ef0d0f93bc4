// GridSample: fast vs reference over the whole option cross-product (bit-exact), the
// named semantic cases of the facts sheet, ONNX-vs-PyTorch convention differences, and
// bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "common/expect_tensor.h"
#include "common/tolerance.h"
#include "kernels/grid_sample.h"

namespace rkd {
namespace {

using test::exact_equal;

// Random coordinates in [-1.4, 1.4] mixed with adversarial ones (pixel centres, corners,
// half-pixel positions, just outside, far outside, NaN, +-inf).
void fill_grid(Tensor& g, int64_t size_hint, std::mt19937& rng, bool specials) {
  std::uniform_real_distribution<float> u(-1.4f, 1.4f);
  std::vector<float> picks = {-1.0f, 1.0f,  0.0f, -0.5f, 0.5f, std::nextafter(1.0f, 2.0f), std::nextafter(-1.0f, -2.0f), 1.5f, -1.5f, 3.0f, -7.25f,
                              1e4f,  -1e4f, 3e9f, -3e9f, 1e30f};
  for (int64_t i = 1; i <= size_hint; ++i) {
    // pixel centres and edges for both align_corners values
    picks.push_back(2.0f * static_cast<float>(i) / static_cast<float>(size_hint) - 1.0f);
    picks.push_back((2.0f * static_cast<float>(i) + 1.0f) / static_cast<float>(size_hint) - 1.0f);
  }
  if (specials) {
    picks.push_back(NAN);
    picks.push_back(INFINITY);
    picks.push_back(-INFINITY);
  }
  float* p = g.data<float>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    p[i] = (rng() % 3 == 0) ? picks[rng() % picks.size()] : u(rng);
  }
}

Tensor random_tensor(const Shape& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::f32, s);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

std::string describe(const GridSampleOptions& o, const Shape& in, const Shape& g, DType dt, uint32_t seed) {
  std::ostringstream s;
  s << "mode=" << to_string(o.mode) << " padding=" << to_string(o.padding) << " align_corners=" << o.align_corners
    << " convention=" << to_string(o.convention) << " dtype=" << dtype_name(dt) << " input=" << shape_to_string(in) << " grid=" << shape_to_string(g)
    << " seed=" << seed;
  return s.str();
}

struct Spatial {
  int64_t h, w;
};

TEST(GridSampleDifferential, FastEqualsReference2D) {
  const Spatial maps[] = {{1, 1}, {1, 5}, {2, 3}, {3, 2}, {4, 4}, {5, 7}, {7, 5}, {6, 10}, {9, 8}, {15, 16}, {16, 17}, {17, 33}, {33, 15}, {32, 31}};
  const Spatial outs[] = {{1, 1}, {3, 7}, {10, 9}, {2, 40}};
  ThreadPool pool3(3), pool1(1);
  uint32_t seed = 1000;
  int cases = 0;
  for (auto conv : {GridSampleConvention::pytorch, GridSampleConvention::onnx}) {
    for (auto mode : {GridSampleMode::bilinear, GridSampleMode::nearest, GridSampleMode::bicubic}) {
      for (auto pad : {GridSamplePadding::zeros, GridSamplePadding::border, GridSamplePadding::reflection}) {
        for (bool ac : {false, true}) {
          for (size_t mi = 0; mi < std::size(maps); ++mi) {
            const auto m = maps[mi];
            const auto o = outs[(mi + static_cast<size_t>(mode)) % std::size(outs)];
            const DType dt = std::array{DType::f32, DType::f16, DType::bf16}[mi % 3];
            ++seed;
            std::mt19937 rng(seed);
            const int64_t n = 1 + static_cast<int64_t>(mi % 2), c = 1 + static_cast<int64_t>(mi % 3) * 2;
            Tensor x = random_tensor({n, c, m.h, m.w}, rng);
            Tensor g = Tensor::empty(DType::f32, {n, o.h, o.w, 2});
            fill_grid(g, std::max(m.h, m.w), rng, true);
            Tensor xd = *x.to(dt), gd = *g.to(dt);
            GridSampleOptions opt{mode, pad, ac, conv};
            const std::string what = describe(opt, x.shape(), g.shape(), dt, seed);
            auto ref = grid_sample(xd, gd, opt, KernelImpl::reference);
            ASSERT_TRUE(ref.ok()) << what << ": " << ref.error().to_string();
            auto f3 = grid_sample(xd, gd, opt, KernelImpl::fast, &pool3);
            auto f1 = grid_sample(xd, gd, opt, KernelImpl::fast, &pool1);
            ASSERT_TRUE(f3.ok() && f1.ok()) << what;
            expect_identical(*ref, *f3, what + " (3 threads)");
            expect_identical(*ref, *f1, what + " (1 thread)");
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 2 * 3 * 3 * 2 * 14);
}

TEST(GridSampleDifferential, FastEqualsReference3D) {
  const int64_t dims[][3] = {{1, 1, 1}, {2, 3, 4}, {3, 5, 2}, {4, 4, 5}, {1, 7, 3}, {5, 1, 6}};
  ThreadPool pool(3);
  uint32_t seed = 5000;
  for (auto conv : {GridSampleConvention::pytorch, GridSampleConvention::onnx}) {
    for (auto mode : {GridSampleMode::bilinear, GridSampleMode::nearest}) {
      for (auto pad : {GridSamplePadding::zeros, GridSamplePadding::border, GridSamplePadding::reflection}) {
        for (bool ac : {false, true}) {
          for (const auto& d : dims) {
            std::mt19937 rng(++seed);
            Tensor x = random_tensor({2, 3, d[0], d[1], d[2]}, rng);
            Tensor g = Tensor::empty(DType::f32, {2, 2, 3, 4, 3});
            fill_grid(g, 5, rng, true);
            GridSampleOptions opt{mode, pad, ac, conv};
            const std::string what = describe(opt, x.shape(), g.shape(), DType::f32, seed);
            auto ref = grid_sample(x, g, opt, KernelImpl::reference);
            auto fast = grid_sample(x, g, opt, KernelImpl::fast, &pool);
            ASSERT_TRUE(ref.ok() && fast.ok()) << what;
            expect_identical(*ref, *fast, what);
          }
        }
      }
    }
  }
}

TEST(GridSampleDifferential, LargeBlocksAndTails) {
  // Output point counts around the SIMD block size and lane counts.
  ThreadPool pool(2);
  uint32_t seed = 9000;
  for (int64_t pts : {1, 7, 8, 15, 16, 17, 127, 128, 129, 255, 257, 900}) {
    for (auto mode : {GridSampleMode::bilinear, GridSampleMode::nearest}) {
      for (auto pad : {GridSamplePadding::zeros, GridSamplePadding::border, GridSamplePadding::reflection}) {
        std::mt19937 rng(++seed);
        Tensor x = random_tensor({2, 5, 13, 11}, rng);
        Tensor g = Tensor::empty(DType::f32, {2, 1, pts, 2});
        fill_grid(g, 13, rng, true);
        GridSampleOptions opt{mode, pad, false, GridSampleConvention::pytorch};
        const std::string what = describe(opt, x.shape(), g.shape(), DType::f32, seed);
        expect_identical(*grid_sample(x, g, opt, KernelImpl::reference), *grid_sample(x, g, opt, KernelImpl::fast, &pool), what);
      }
    }
  }
}

float sample1(const Tensor& x, float gx, float gy, GridSampleOptions opt) {
  Tensor g = Tensor::from_floats({1, 1, 1, 2}, std::vector<float>{gx, gy});
  return grid_sample(x, g, opt, KernelImpl::reference)->data<float>()[0];
}

// Grid coordinate whose pixel position (align_corners = 0) is p on an axis of size s.
float g_of(float p, int64_t s) { return (2.0f * p + 1.0f) / static_cast<float>(s) - 1.0f; }

TEST(GridSampleSemantics, WorkedExampleFromTheFactsSheet) {
  // feature [[0,10],[20,30]] at pixel (x, y) = (0.25, 0.5) -> 12.5
  Tensor x = Tensor::from_floats({1, 1, 2, 2}, std::vector<float>{0, 10, 20, 30});
  for (auto conv : {GridSampleConvention::pytorch, GridSampleConvention::onnx}) {
    GridSampleOptions opt;
    opt.convention = conv;
    EXPECT_EQ(sample1(x, g_of(0.25f, 2), g_of(0.5f, 2), opt), 12.5f);
  }
}

TEST(GridSampleSemantics, MinusOneMapsToTheOuterEdgeNotThePixelCentre) {
  // u = -1 with align_corners = 0 is x = -0.5: half of pixel 0 under zeros padding.
  Tensor x = Tensor::from_floats({1, 1, 1, 3}, std::vector<float>{8, 100, 100});
  GridSampleOptions opt;
  // y: H = 1, g = 0 -> y = 0 exactly.
  EXPECT_EQ(sample1(x, -1.0f, 0.0f, opt), 4.0f);
  opt.align_corners = true;  // -1 is the centre of pixel 0
  EXPECT_EQ(sample1(x, -1.0f, 0.0f, opt), 8.0f);
  opt.align_corners = false;
  opt.padding = GridSamplePadding::border;  // the coordinate is clipped to 0
  EXPECT_EQ(sample1(x, -1.0f, 0.0f, opt), 8.0f);
}

TEST(GridSampleSemantics, ReflectionExampleFromTheOnnxSpec) {
  // S = 2, align_corners = 0: bounds [-0.5, 1.5]; -3.5 -> 2.5 -> 0.5.
  Tensor x = Tensor::from_floats({1, 1, 1, 2}, std::vector<float>{2, 6});
  for (auto conv : {GridSampleConvention::pytorch, GridSampleConvention::onnx}) {
    GridSampleOptions opt{GridSampleMode::bilinear, GridSamplePadding::reflection, false, conv};
    EXPECT_EQ(sample1(x, g_of(-3.5f, 2), 0.0f, opt), 4.0f) << to_string(conv);
  }
}

TEST(GridSampleSemantics, RectangularMapsAreNotTransposed) {
  // 2 rows x 5 columns; x indexes W.
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor x = Tensor::from_floats({1, 1, 2, 5}, v);
  GridSampleOptions opt;
  EXPECT_EQ(sample1(x, g_of(3.0f, 5), g_of(1.0f, 2), opt), 8.0f);  // row 1, column 3
  Tensor xt = x.permute({0, 1, 3, 2})->contiguous();               // 5 rows x 2 columns
  EXPECT_EQ(sample1(xt, g_of(1.0f, 2), g_of(3.0f, 5), opt), 8.0f);
  EXPECT_NE(sample1(xt, g_of(3.0f, 5), g_of(1.0f, 2), opt), 8.0f);
}

TEST(GridSampleSemantics, NearestRoundsHalfToEvenIn2D) {
  // align_corners = 1, W = 5: g = p/2 - 1 is exact, so p lands exactly on .5.
  Tensor x = Tensor::from_floats({1, 1, 1, 5}, std::vector<float>{0, 1, 2, 3, 4});
  GridSampleOptions opt{GridSampleMode::nearest, GridSamplePadding::zeros, true, GridSampleConvention::pytorch};
  EXPECT_EQ(sample1(x, -0.75f, 0, opt), 0.0f);  // 0.5 -> 0
  EXPECT_EQ(sample1(x, -0.25f, 0, opt), 2.0f);  // 1.5 -> 2
  EXPECT_EQ(sample1(x, 0.25f, 0, opt), 2.0f);   // 2.5 -> 2
  EXPECT_EQ(sample1(x, 0.75f, 0, opt), 4.0f);   // 3.5 -> 4
  EXPECT_EQ(sample1(x, 1.25f, 0, opt), 4.0f);   // 4.5 -> 4 (even): inside
  EXPECT_EQ(sample1(x, 1.75f, 0, opt), 0.0f);   // 5.5 -> 6: outside -> 0
}

TEST(GridSampleSemantics, NearestIn3DRoundsHalfAwayFromZeroUnderPyTorchButNotOnnx) {
  Tensor x = Tensor::from_floats({1, 1, 1, 1, 5}, std::vector<float>{0, 1, 2, 3, 4});
  // align_corners = 1, W = 5: g = p/2 - 1 exactly.
  Tensor g = Tensor::from_floats({1, 1, 1, 2, 3}, std::vector<float>{-0.75f, 0, 0, 0.25f, 0, 0});
  GridSampleOptions opt{GridSampleMode::nearest, GridSamplePadding::zeros, true, GridSampleConvention::pytorch};
  auto y = *grid_sample(x, g, opt);
  EXPECT_EQ(y.data<float>()[0], 1.0f);  // 0.5 -> 1
  EXPECT_EQ(y.data<float>()[1], 3.0f);  // 2.5 -> 3
  opt.convention = GridSampleConvention::onnx;
  y = *grid_sample(x, g, opt);
  EXPECT_EQ(y.data<float>()[0], 0.0f);  // 0.5 -> 0 (half to even)
  EXPECT_EQ(y.data<float>()[1], 2.0f);
}

TEST(GridSampleSemantics, NearestReflectionNearTheEdgeDiffersBetweenConventions) {
  // S = 4, align_corners = 0, p = 4.5: PyTorch reflects to 2.5 then rounds to 2;
  // ONNX Runtime rounds to 4 then reflects the integer to 3.
  Tensor x = Tensor::from_floats({1, 1, 1, 4}, std::vector<float>{10, 11, 12, 13});
  GridSampleOptions opt{GridSampleMode::nearest, GridSamplePadding::reflection, false, GridSampleConvention::pytorch};
  EXPECT_EQ(sample1(x, g_of(4.5f, 4), 0, opt), 12.0f);
  opt.convention = GridSampleConvention::onnx;
  EXPECT_EQ(sample1(x, g_of(4.5f, 4), 0, opt), 13.0f);
}

TEST(GridSampleSemantics, NonFiniteCoordinatesFollowPyTorch) {
  Tensor x = Tensor::from_floats({1, 1, 2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  GridSampleOptions opt;
  EXPECT_TRUE(std::isnan(sample1(x, NAN, 0, opt)));  // zeros + bilinear: NaN weights
  EXPECT_TRUE(std::isnan(sample1(x, INFINITY, 0, opt)));
  EXPECT_EQ(sample1(x, 1e10f, 0, opt), 0.0f);  // far but finite: 0
  opt.mode = GridSampleMode::nearest;
  EXPECT_EQ(sample1(x, NAN, 0, opt), 0.0f);
  opt.mode = GridSampleMode::bilinear;
  opt.padding = GridSamplePadding::border;
  // y = 0 on H = 2 (align_corners 0) is 0.5: rows blend equally.
  EXPECT_EQ(sample1(x, NAN, 0, opt), 2.5f);       // x -> 0
  EXPECT_EQ(sample1(x, INFINITY, 0, opt), 4.5f);  // x -> W-1
  opt.padding = GridSamplePadding::reflection;
  EXPECT_EQ(sample1(x, INFINITY, 0, opt), 2.5f);  // reflect(inf) = NaN -> 0
  // 3-D zeros: the scalar kernel maps NaN to -100 -> 0, not NaN.
  Tensor x3 = Tensor::from_floats({1, 1, 1, 2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  Tensor g3 = Tensor::from_floats({1, 1, 1, 1, 3}, std::vector<float>{NAN, 0, 0});
  EXPECT_EQ(grid_sample(x3, g3, GridSampleOptions{})->data<float>()[0], 0.0f);
}

TEST(GridSampleSemantics, OutputLargerThanInputAndOnePixelMaps) {
  Tensor x = Tensor::from_floats({1, 1, 1, 1}, std::vector<float>{7});
  Tensor g = Tensor::empty(DType::f32, {1, 9, 11, 2});  // all zeros -> the pixel centre
  for (auto mode : {GridSampleMode::bilinear, GridSampleMode::nearest, GridSampleMode::bicubic}) {
    GridSampleOptions opt;
    opt.mode = mode;
    opt.padding = GridSamplePadding::border;
    auto y = grid_sample(x, g, opt);
    ASSERT_TRUE(y.ok());
    EXPECT_EQ(y->shape(), (Shape{1, 1, 9, 11}));
    for (int64_t i = 0; i < y->numel(); ++i) ASSERT_FLOAT_EQ(y->data<float>()[i], 7.0f) << to_string(mode);
  }
}

TEST(GridSampleSemantics, HalfPrecisionOutputsAreTheRoundedFloat32Result) {
  std::mt19937 rng(3);
  Tensor x = random_tensor({1, 2, 5, 6}, rng);
  Tensor g = Tensor::empty(DType::f32, {1, 4, 4, 2});
  fill_grid(g, 6, rng, false);
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor xd = *x.to(dt);
    auto y = *grid_sample(xd, g, GridSampleOptions{});
    EXPECT_EQ(y.dtype(), dt);
    auto y32 = *grid_sample(*xd.to(DType::f32), g, GridSampleOptions{});
    expect_identical(y, *y32.to(dt), dtype_name(dt));
  }
}

TEST(GridSampleErrors, NameTheTensorAndDimension) {
  Tensor x = Tensor::empty(DType::f32, {2, 3, 4, 5});
  auto msg = [&](const Tensor& in, const Tensor& g, GridSampleOptions o = {}) {
    auto r = grid_sample(in, g, o);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(msg(x, Tensor::empty(DType::f32, {2, 3, 3, 3})).find("grid: dimension 3 must be 2"), std::string::npos);
  EXPECT_NE(msg(x, Tensor::empty(DType::f32, {1, 3, 3, 2})).find("grid: dimension 0 (batch)"), std::string::npos);
  EXPECT_NE(msg(x, Tensor::empty(DType::f32, {2, 3, 2})).find("grid: rank"), std::string::npos);
  EXPECT_NE(msg(Tensor::empty(DType::f32, {2, 3, 4}), Tensor::empty(DType::f32, {2, 3, 2})).find("input: rank"), std::string::npos);
  EXPECT_NE(msg(Tensor::empty(DType::f32, {2, 0, 4, 5}), Tensor::empty(DType::f32, {2, 3, 3, 2})).find("empty"), std::string::npos);
  EXPECT_NE(msg(x, Tensor::empty(DType::f32, {2, 0, 3, 2})).find("grid: dimension 1"), std::string::npos);
  EXPECT_NE(msg(Tensor::empty(DType::i8, {2, 3, 4, 5}), Tensor::empty(DType::f32, {2, 3, 3, 2})).find("input: dtype int8"), std::string::npos);
  GridSampleOptions cubic;
  cubic.mode = GridSampleMode::bicubic;
  auto r = grid_sample(Tensor::empty(DType::f32, {1, 1, 2, 2, 2}), Tensor::empty(DType::f32, {1, 1, 1, 1, 3}), cubic);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::unsupported);
  EXPECT_FALSE(parse_grid_sample_mode("trilinear").ok());
  EXPECT_EQ(*parse_grid_sample_mode("linear"), GridSampleMode::bilinear);
  EXPECT_EQ(*parse_grid_sample_mode("cubic"), GridSampleMode::bicubic);
}

}  // namespace
}  // namespace rkd
