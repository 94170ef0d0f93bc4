// Lowering tests' shared pieces: a random int8 convolution (the spec and its input), its int8
// reference (quant::qlinear_conv in a requantization convention), the lowering simulated from
// device memory (and again through the prepared MAC, which must agree bit for bit), and
// ConvLoweringTester: one case built by setters, whose Test() lowers, simulates and compares
// with the reference, naming every parameter and the seed on failure.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "npu/lower/lower.h"
#include "npu/regcmd/regcmd.h"
#include "npu/sim/sim.h"
#include "quant/int8.h"

namespace rkd::npu {

struct Case {
  lower::ConvSpec spec;
  Tensor x;
};

// Fixed geometry (0: random).
struct Dims {
  int64_t C = 0, OC = 0, H = 0, W = 0, K = 0, stride = 0;
};

// Weight scales spread over `decades` decades (real per-channel models: 10x to 1000x).
inline Case random_case(std::mt19937& rng, bool depthwise, DType t, double decades, bool relu, const Dims& dims = {}) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  lower::ConvSpec s;
  s.dtype = t;
  s.depthwise = depthwise;
  s.C = dims.C ? dims.C : depthwise ? pick(3, 40) : pick(1, 40);
  s.OC = depthwise ? s.C : dims.OC ? dims.OC : pick(1, 70);
  s.H = dims.H ? dims.H : pick(1, 11);  // below 4: stored with zero-point rows (the hardware minimum)
  s.W = dims.W ? dims.W : pick(4, 13);  // non-square
  s.KH = dims.K ? dims.K : pick(1, 3) * 2 - 1;
  s.KW = depthwise || dims.K ? s.KH : pick(1, 3) * 2 - 1;
  s.stride_h = dims.stride ? dims.stride : pick(1, 2);
  s.stride_w = dims.stride ? dims.stride : pick(1, 2);
  s.pad_top = s.KH / 2;
  s.pad_left = s.KW / 2;
  s.pad_bottom = s.KH / 2;
  s.pad_right = s.KW / 2;
  const int lo = t == DType::i8 ? -128 : 0, hi = t == DType::i8 ? 127 : 255;
  s.weights = Tensor::empty(t, {s.OC, depthwise ? 1 : s.C, s.KH, s.KW});
  for (int64_t i = 0; i < s.weights.numel(); ++i) {
    const int v = t == DType::i8 ? pick(-127, 127) : pick(0, 255);
    if (t == DType::i8) s.weights.data<int8_t>()[i] = static_cast<int8_t>(v);
    else s.weights.data<uint8_t>()[i] = static_cast<uint8_t>(v);
  }
  if (t == DType::i8) {
    s.w_zero_points = {0};
    for (int64_t k = 0; k < s.OC; ++k) {
      s.w_scales.push_back(static_cast<float>(0.01 * std::pow(10.0, -decades * std::uniform_real_distribution<double>(0, 1)(rng))));
    }
  } else {
    s.w_zero_points = {pick(100, 150)};
    s.w_scales = {0.004f};
  }
  s.x_scale = 0.05f;
  s.x_zero_point = t == DType::i8 ? pick(-20, 20) : pick(100, 150);
  // The output scale where the real outputs span about the type's range.
  double maxw = 0;
  for (float w : s.w_scales) maxw = std::max<double>(maxw, w);
  s.y_scale = static_cast<float>(0.05 * maxw * 127 * std::sqrt(static_cast<double>((depthwise ? 1 : s.C) * s.KH * s.KW)) / 40);
  s.y_zero_point = relu ? lo : (t == DType::i8 ? pick(-10, 10) : pick(118, 138));
  s.act_min = lo;
  s.act_max = hi;
  if (relu) {
    s.act_min = s.y_zero_point;
    // Half the ReLU cases are ReLU6-like: an upper bound inside the output range.
    if (pick(0, 1)) s.act_max = s.y_zero_point + pick(20, 100);
  }
  for (int64_t k = 0; k < s.OC; ++k) s.bias.push_back(pick(-3000, 3000));
  Case c{s, Tensor::empty(t, {1, s.C, s.H, s.W})};
  for (int64_t i = 0; i < c.x.numel(); ++i) {
    const int v = pick(lo, hi);
    if (t == DType::i8) c.x.data<int8_t>()[i] = static_cast<int8_t>(v);
    else c.x.data<uint8_t>()[i] = static_cast<uint8_t>(v);
  }
  return c;
}

inline Tensor reference(const Case& c, quant::Requant conv) {
  const auto& s = c.spec;
  auto rq = quant::Requantizer::make(conv, s.x_scale, s.w_scales, s.y_scale, s.y_zero_point, s.act_min, s.act_max);
  EXPECT_TRUE(rq.ok());
  Tensor b = Tensor::empty(DType::i32, {s.OC});
  std::memcpy(b.raw(), s.bias.data(), s.bias.size() * 4);
  quant::QConvParams p{{s.stride_h, s.stride_w}, {1, 1}, {s.pad_top, s.pad_left, s.pad_bottom, s.pad_right}, s.depthwise ? s.C : 1};
  Tensor y = Tensor::empty(s.dtype, {1, s.OC, s.OH(), s.OW()});
  EXPECT_TRUE(quant::qlinear_conv(c.x, s.x_zero_point, s.weights, s.w_zero_points, b, p, *rq, y).ok());
  return y;
}

// mac_runs: the oneDNN convolutions the cached runs computed for the chain (one per group of
// tasks over one input map).
inline Result<Tensor> simulate(const Case& c, lower::Strategy st, size_t* tasks = nullptr, const lower::LowerOptions& opt = {},
                               int64_t* row_slices = nullptr, const sim::Quirks& quirks = {}, const Tensor* residual = nullptr,
                               size_t* mac_runs = nullptr) {
  DeviceMemory mem;
  RKD_ASSIGN(uint32_t in, lower::place_input(mem, c.spec, c.x));
  RKD_ASSIGN(lower::Lowered l, lower::lower_conv(c.spec, st, mem, in, opt));
  if (residual) RKD_TRY(lower::write_residual(mem, c.spec, l, *residual));
  if (row_slices) *row_slices = l.row_slices;
  RKD_ASSIGN(auto placed, lower::place_regcmd(mem, l));
  const uint32_t at = placed.address;
  const auto& spans = placed.spans;
  RKD_ASSIGN(auto stats, sim::run(mem, at, spans[0].word_count, quirks));
  if (stats.size() != l.tasks.size())
    return invalid("the simulator ran " + std::to_string(stats.size()) + " tasks of " + std::to_string(l.tasks.size()));
  if (tasks) *tasks = l.tasks.size();
  RKD_ASSIGN(Tensor loops, lower::gather_output(mem, c.spec, l));
  // The same buffer with the prepared MAC (oneDNN where available), twice (cache reuse):
  // bit for bit the simulator's own loops.
  sim::SimCache cache;
  for (int rep = 0; rep < 2; ++rep) {
    auto again = sim::run(mem, at, spans[0].word_count, quirks, &cache);
    if (!again.ok()) return again.error();
    RKD_ASSIGN(Tensor fast, lower::gather_output(mem, c.spec, l));
    if (std::memcmp(fast.raw(), loops.raw(), loops.nbytes()) != 0) return invalid("the prepared MAC differs from the simulator's loops");
    if (cache.last_tasks != l.tasks.size()) return invalid("the cached run ran " + std::to_string(cache.last_tasks) + " tasks");
  }
  if (mac_runs) *mac_runs = cache.last_mac_runs;
  return loops;
}

struct Diff {
  int64_t max = 0, exact = 0, n = 0;
};
inline Diff compare(const Tensor& a, const Tensor& b) {
  Diff d;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int64_t e = std::llabs(static_cast<int64_t>(a.get_as_double(i)) - static_cast<int64_t>(b.get_as_double(i)));
    d.max = std::max(d.max, e);
    d.exact += e == 0;
    ++d.n;
  }
  return d;
}

// One lowering case by setters (XNNPACK's testers): geometry, type, how far the channels'
// weight scales spread, a fused ReLU, the strategy, the seed of everything random. Test()
// lowers it, simulates it and compares with the int8 reference in `requant`: equal bit for bit
// (max_diff 0, the NPU's own convention rknpu_out_cvt by default), or within max_diff steps
// with at least min_exact of the values equal (another convention).
class ConvLoweringTester {
 public:
  ConvLoweringTester& channels(int64_t v) {
    dims_.C = v;
    return *this;
  }
  ConvLoweringTester& output_channels(int64_t v) {
    dims_.OC = v;
    return *this;
  }
  ConvLoweringTester& height(int64_t v) {
    dims_.H = v;
    return *this;
  }
  ConvLoweringTester& width(int64_t v) {
    dims_.W = v;
    return *this;
  }
  ConvLoweringTester& kernel(int64_t v) {
    dims_.K = v;
    return *this;
  }
  ConvLoweringTester& stride(int64_t v) {
    dims_.stride = v;
    return *this;
  }
  ConvLoweringTester& depthwise(bool v) {
    depthwise_ = v;
    return *this;
  }
  ConvLoweringTester& dtype(DType v) {
    dtype_ = v;
    return *this;
  }
  ConvLoweringTester& scale_decades(double v) {
    decades_ = v;
    return *this;
  }
  ConvLoweringTester& relu(bool v) {
    relu_ = v;
    return *this;
  }
  ConvLoweringTester& strategy(lower::Strategy v) {
    strategy_ = v;
    return *this;
  }
  ConvLoweringTester& requant(quant::Requant v) {
    requant_ = v;
    return *this;
  }
  ConvLoweringTester& max_diff(int64_t v) {
    max_diff_ = v;
    return *this;
  }
  ConvLoweringTester& min_exact(double v) {
    min_exact_ = v;
    return *this;
  }
  ConvLoweringTester& seed(unsigned v) {
    seed_ = v;
    return *this;
  }

  // Every parameter, the drawn geometry and the seed: what reproduces a failure.
  std::string describe(const lower::ConvSpec& s) const {
    std::ostringstream o;
    o << "ConvLoweringTester seed " << seed_ << ", " << dtype_name(dtype_) << (depthwise_ ? " depthwise" : "") << ", C " << s.C << ", OC " << s.OC
      << ", " << s.H << "x" << s.W << ", kernel " << s.KH << "x" << s.KW << ", stride " << s.stride_h << "x" << s.stride_w << ", pads " << s.pad_top
      << " " << s.pad_left << " " << s.pad_bottom << " " << s.pad_right << ", scale decades " << decades_ << (relu_ ? ", relu" : "") << ", act ["
      << s.act_min << ", " << s.act_max << "], strategy " << lower::strategy_name(strategy_) << ", requant " << quant::to_string(requant_);
    return o.str();
  }

  void Test() const {
    std::mt19937 rng(seed_);
    const Case c = random_case(rng, depthwise_, dtype_, decades_, relu_, dims_);
    SCOPED_TRACE(describe(c.spec));
    const Tensor want = reference(c, requant_);
    auto got = simulate(c, strategy_);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    const Diff d = compare(*got, want);
    EXPECT_LE(d.max, max_diff_);
    EXPECT_GE(static_cast<double>(d.exact) / static_cast<double>(std::max<int64_t>(d.n, 1)), min_exact_);
  }

 private:
  Dims dims_;
  bool depthwise_ = false, relu_ = false;
  DType dtype_ = DType::i8;
  double decades_ = 0;
  lower::Strategy strategy_ = lower::Strategy::per_tensor;
  quant::Requant requant_ = quant::Requant::rknpu_out_cvt;
  int64_t max_diff_ = 0;
  double min_exact_ = 1.0;
  unsigned seed_ = 1;
};

}  // namespace rkd::npu
