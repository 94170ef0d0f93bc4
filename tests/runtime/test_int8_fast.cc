// The executor's QLinearConv and QLinearMatMul, on whichever path this CPU (and the ISA ceiling,
// core/isa.h) gives them - oneDNN's exact u8 x s8 -> s32 products (ops::QConvAccumulator /
// QMatMulAccumulator) where oneDNN has VNNI, the reference loops elsewhere - must give
// (1) an independent evaluation written here (int64 accumulation, then ONNX Runtime's float32
// requantization from its contract in quant/requant.h) and (2) the reference kernels'
// outputs, bit for bit. On a CPU without VNNI (2) compares the reference with itself; (1) is
// the check that holds on every path. Convolution: random geometries (kernel 1..5, stride 1/2, dilation 1/2, asymmetric pads,
// groups incl. depthwise), int8 and uint8 inputs with random zero points, per-channel
// scales, int32 bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <type_traits>

#include "ir/pass.h"
#include "ir/passes/shape_inference.h"
#include "kernels/tensor_ops.h"
#include "quant/int8.h"
#include "runtime/executor.h"

namespace rkd {
namespace {

template <typename T>
Tensor random_q(DType dt, const Shape& s, std::mt19937& rng, int lo, int hi) {
  Tensor t = Tensor::empty(dt, s);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  return t;
}

Tensor scalar(DType dt, double v) {
  Tensor t = Tensor::empty(dt, {});
  if (dt == DType::f32) t.data<float>()[0] = static_cast<float>(v);
  if (dt == DType::i8) t.data<int8_t>()[0] = static_cast<int8_t>(v);
  if (dt == DType::u8) t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  return t;
}

// y = clamp(nearbyint(clamp((float)acc * s))) + y_zp with s = (float)(x_scale * w_scale) / y_scale
// in float32 (the onnx_float contract), acc summed in int64.
template <typename T>
T onnx_requant_int64(int64_t acc, float x_scale, float w_scale, float y_scale, int32_t y_zp) {
  constexpr int32_t qmin = std::is_same_v<T, uint8_t> ? 0 : -128, qmax = std::is_same_v<T, uint8_t> ? 255 : 127;
  const float s = x_scale * w_scale / y_scale;
  const float f = std::min(std::max(static_cast<float>(acc) * s, static_cast<float>(qmin - y_zp)), static_cast<float>(qmax - y_zp));
  return static_cast<T>(static_cast<int32_t>(std::nearbyint(f)) + y_zp);
}

// QLinearConv from its definition: NCHW, groups, strides, dilations, pads [top, left, bottom,
// right], symmetric weights, int32 bias; padding taps contribute nothing.
template <typename T>
Tensor qlinear_conv_int64(const Tensor& x, int32_t x_zp, float x_scale, const Tensor& w, const Tensor& w_scale, const Tensor& bias, float y_scale,
                          int32_t y_zp, int64_t S, int64_t D, const std::vector<int64_t>& pads, int64_t group) {
  const int64_t C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t M = w.shape()[0], Cg = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  const int64_t OH = (H + pads[0] + pads[2] - ((KH - 1) * D + 1)) / S + 1, OW = (W + pads[1] + pads[3] - ((KW - 1) * D + 1)) / S + 1;
  Tensor y = Tensor::empty(x.dtype(), {1, M, OH, OW});
  const T* xp = x.data<T>();
  const int8_t* wp = w.data<int8_t>();
  for (int64_t m = 0; m < M; ++m) {
    const int64_t g = m / (M / group);
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        int64_t acc = bias.data<int32_t>()[m];
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx) {
              const int64_t iy = oy * S - pads[0] + ky * D, ix = ox * S - pads[1] + kx * D;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              acc += (static_cast<int64_t>(xp[((g * Cg + c) * H + iy) * W + ix]) - x_zp) * wp[((m * Cg + c) * KH + ky) * KW + kx];
            }
        y.data<T>()[(m * OH + oy) * OW + ox] = onnx_requant_int64<T>(acc, x_scale, w_scale.data<float>()[m], y_scale, y_zp);
      }
  }
  (void)C;
  return y;
}

TEST(Int8Fast, QLinearConvMatchesTheReferenceBitForBit) {
  SCOPED_TRACE(std::string("int8 products: ") + (ops::onednn_int8_exact() ? "oneDNN VNNI" : "Highway"));
  std::mt19937 rng(20261130);
  int fast_runs = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::uniform_int_distribution<int> k(1, 5), s(1, 2), d(1, 2), pad(0, 2), hw(5, 13), ch(1, 12);
    const int64_t K = k(rng), S = s(rng), D = trial % 3 == 0 ? d(rng) : 1;
    const bool depthwise = trial % 4 == 1;
    const int64_t group = depthwise ? ch(rng) : (trial % 4 == 2 ? 2 : 1);
    const int64_t C = depthwise ? group : group * ch(rng), M = depthwise ? group * (1 + trial % 2) : group * ch(rng);
    const int64_t H = hw(rng), W = hw(rng);
    const std::vector<int64_t> pads = {pad(rng), pad(rng), pad(rng), pad(rng)};
    const int64_t OH = (H + pads[0] + pads[2] - ((K - 1) * D + 1)) / S + 1;
    const int64_t OW = (W + pads[1] + pads[3] - ((K - 1) * D + 1)) / S + 1;
    if (OH < 1 || OW < 1) continue;
    const bool u8 = trial % 2 == 0;
    const DType xt = u8 ? DType::u8 : DType::i8;
    Tensor x = u8 ? random_q<uint8_t>(xt, {1, C, H, W}, rng, 0, 255) : random_q<int8_t>(xt, {1, C, H, W}, rng, -128, 127);
    Tensor w = random_q<int8_t>(DType::i8, {M, C / group, K, K}, rng, -127, 127);
    Tensor bias = random_q<int32_t>(DType::i32, {M}, rng, -20000, 20000);
    std::uniform_int_distribution<int> zp(u8 ? 0 : -128, u8 ? 255 : 127);
    const int32_t x_zp = zp(rng), y_zp = zp(rng);
    std::uniform_real_distribution<float> sc(0.001f, 0.05f);
    const float x_scale = sc(rng), y_scale = sc(rng) * 4;
    Tensor w_scale = Tensor::empty(DType::f32, {M});
    for (int64_t m = 0; m < M; ++m) w_scale.data<float>()[m] = sc(rng) * 0.1f;
    Tensor w_zp = Tensor::zeros(DType::i8, {M}).value();

    // The node as written (NCHW), and after the int8 back end's passes (int8-channels-last:
    // the convolution channels last between two Transposes).
    auto run = [&](bool int8_passes) -> Tensor {
      ir::Graph g;
      g.opset = 17;
      ir::Value* xv = *g.add_value("x");
      xv->dtype = xt;
      xv->shape = ir::Dims{{1, ""}, {C, ""}, {H, ""}, {W, ""}};
      g.inputs.push_back(xv);
      ir::Node* n =
          *g.add_node("conv", "QLinearConv", "",
                      {xv, g.add_constant("xs", scalar(DType::f32, x_scale)), g.add_constant("xz", scalar(xt, x_zp)), g.add_constant("w", w),
                       g.add_constant("ws", w_scale), g.add_constant("wz", w_zp), g.add_constant("ys", scalar(DType::f32, y_scale)),
                       g.add_constant("yz", scalar(xt, y_zp)), g.add_constant("b", bias)},
                      {"y"});
      n->attrs["kernel_shape"] = std::vector<int64_t>{K, K};
      n->attrs["strides"] = std::vector<int64_t>{S, S};
      n->attrs["dilations"] = std::vector<int64_t>{D, D};
      n->attrs["pads"] = pads;
      n->attrs["group"] = group;
      g.outputs.push_back(n->outputs[0]);
      runtime::CompileOptions co;
      co.int8 = int8_passes;
      EXPECT_TRUE(runtime::optimize(g, co).ok());
      if (int8_passes) {
        const auto conv = std::find_if(g.nodes().begin(), g.nodes().end(), [](const auto& m) { return m->op_type == "QLinearConv"; });
        EXPECT_TRUE(conv != g.nodes().end() && (*conv)->attrs.count("rkd_input_channels_last"));
      }
      auto ex = runtime::Executor::create(g);
      EXPECT_TRUE(ex.ok()) << ex.error().to_string();
      if (!ex.ok()) return Tensor();
      auto got = (*ex)->run({{"x", x}});
      EXPECT_TRUE(got.ok()) << got.error().to_string();
      return got.ok() ? got->at("y") : Tensor();
    };
    const Tensor y = run(false), y_channels_last = run(true);
    ASSERT_TRUE(y.defined() && y_channels_last.defined());
    ASSERT_EQ(y_channels_last.shape(), y.shape());
    ASSERT_EQ(std::memcmp(y_channels_last.raw(), y.raw(), y.nbytes()), 0) << "trial " << trial << ": channels last";

    std::vector<float> ws(w_scale.data<float>(), w_scale.data<float>() + M);
    auto rq = quant::Requantizer::make(quant::Requant::onnx_float, x_scale, ws, y_scale, y_zp, u8 ? 0 : -128, u8 ? 255 : 127);
    ASSERT_TRUE(rq.ok());
    Tensor want = Tensor::empty(xt, {1, M, OH, OW});
    const quant::QConvParams qp{{S, S}, {D, D}, pads, group};
    ASSERT_TRUE(quant::qlinear_conv(x, x_zp, w, std::vector<int32_t>(static_cast<size_t>(M), 0), bias, qp, *rq, want).ok());
    ASSERT_EQ(y.shape(), want.shape()) << "trial " << trial;
    ASSERT_EQ(std::memcmp(y.raw(), want.raw(), want.nbytes()), 0)
        << "trial " << trial << ": K" << K << " S" << S << " D" << D << " group " << group << " C" << C << " M" << M;
    const Tensor exact = u8 ? qlinear_conv_int64<uint8_t>(x, x_zp, x_scale, w, w_scale, bias, y_scale, y_zp, S, D, pads, group)
                            : qlinear_conv_int64<int8_t>(x, x_zp, x_scale, w, w_scale, bias, y_scale, y_zp, S, D, pads, group);
    ASSERT_EQ(std::memcmp(y.raw(), exact.raw(), exact.nbytes()), 0)
        << "trial " << trial << " against the int64 evaluation: K" << K << " S" << S << " D" << D << " group " << group;
    ++fast_runs;
  }
  EXPECT_GT(fast_runs, 25);
}

TEST(Int8Fast, ChannelsLastChainsConvertLayoutsOnlyAtTheirEnds) {
  // Identity -> conv 3x3 -> conv 1x1 -> QLinearAdd(both convs) -> depthwise conv -> output:
  // with int8-channels-last, no Transpose node is left (the pairs between the convolutions
  // cancel, the first convolution reads NCHW and the last writes NCHW themselves), c2 and the
  // Add work channels last, and the output bytes are those of the graph without the pass.
  std::mt19937 rng(5);
  const int64_t C = 5, M = 12, H = 9, W = 11;
  const DType dt = DType::i8;
  const Tensor x = random_q<int8_t>(dt, {1, C, H, W}, rng, -128, 127);
  std::vector<Tensor> ws{random_q<int8_t>(DType::i8, {M, C, 3, 3}, rng, -127, 127), random_q<int8_t>(DType::i8, {M, M, 1, 1}, rng, -127, 127),
                         random_q<int8_t>(DType::i8, {M, 1, 3, 3}, rng, -127, 127)};
  const Tensor bias = random_q<int32_t>(DType::i32, {M}, rng, -3000, 3000);
  std::map<std::string, std::string> layouts;  // convolution: its two channels-last flags
  auto run = [&](bool channels_last, int* transposes) -> Tensor {
    ir::Graph g;
    g.opset = 17;
    ir::Value* xv = *g.add_value("x");
    xv->dtype = dt;
    xv->shape = ir::Dims{{1, ""}, {C, ""}, {H, ""}, {W, ""}};
    g.inputs.push_back(xv);
    ir::Node* id = *g.add_node("id", "Identity", "", {xv}, {"x_id"});
    id->outputs[0]->dtype = dt;
    id->outputs[0]->shape = xv->shape;
    auto conv = [&](const std::string& name, ir::Value* in, const Tensor& w, int64_t group, int64_t pad, float ys) {
      Tensor wscale = Tensor::empty(DType::f32, {w.dim(0)});
      for (int64_t m = 0; m < w.dim(0); ++m) wscale.data<float>()[m] = 0.002f + 0.0003f * static_cast<float>(m);
      ir::Node* n = *g.add_node(
          name, "QLinearConv", "",
          {in, g.add_constant(name + "_xs", scalar(DType::f32, 0.05)), g.add_constant(name + "_xz", scalar(dt, 3)), g.add_constant(name + "_w", w),
           g.add_constant(name + "_ws", wscale), g.add_constant(name + "_wz", Tensor::zeros(DType::i8, {w.dim(0)}).value()),
           g.add_constant(name + "_ys", scalar(DType::f32, ys)), g.add_constant(name + "_yz", scalar(dt, -2)), g.add_constant(name + "_b", bias)},
          {name + "_y"});
      n->attrs["pads"] = std::vector<int64_t>{pad, pad, pad, pad};
      n->attrs["group"] = group;
      return n->outputs[0];
    };
    ir::Value* y1 = conv("c1", id->outputs[0], ws[0], 1, 1, 0.05f);
    ir::Value* y2 = conv("c2", y1, ws[1], 1, 0, 0.05f);
    ir::Node* add = *g.add_node("add", "QLinearAdd", "rkdeploy",
                                {y1, g.add_constant("a_s", scalar(DType::f32, 0.05)), g.add_constant("a_z", scalar(dt, -2)), y2,
                                 g.add_constant("b_s", scalar(DType::f32, 0.05)), g.add_constant("b_z", scalar(dt, -2)),
                                 g.add_constant("c_s", scalar(DType::f32, 0.08)), g.add_constant("c_z", scalar(dt, 1))},
                                {"sum"});
    add->outputs[0]->dtype = dt;
    ir::Value* y3 = conv("c3", add->outputs[0], ws[2], M, 1, 0.04f);
    g.outputs.push_back(y3);
    EXPECT_TRUE(ir::shape_inference_pass().run(g).ok());
    add->outputs[0]->shape = y1->shape;  // a custom op: shapes set by whoever makes it
    EXPECT_TRUE(ir::shape_inference_pass().run(g).ok());
    runtime::CompileOptions co;
    co.int8 = true;
    co.channels_last = channels_last;
    Status st = runtime::optimize(g, co);
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    *transposes = static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(), [](const auto& n) { return n->op_type == "Transpose"; }));
    for (const auto& n : g.nodes()) {
      if (n->op_type != "QLinearConv") continue;
      layouts[n->name] = std::to_string(n->attr_int("rkd_input_channels_last", -1).value_or(-2)) +
                         std::to_string(n->attr_int("rkd_output_channels_last", -1).value_or(-2));
    }
    auto ex = runtime::Executor::create(g);
    EXPECT_TRUE(ex.ok()) << ex.error().to_string();
    if (!ex.ok()) return Tensor();
    auto got = (*ex)->run({{"x", x}});
    EXPECT_TRUE(got.ok()) << got.error().to_string();
    return got.ok() ? got->at("c3_y") : Tensor();
  };
  int t_off = -1, t_on = -1;
  const Tensor want = run(false, &t_off);
  EXPECT_EQ(layouts["c2"], "-1-1");  // without the pass: no attributes
  const Tensor got = run(true, &t_on);
  ASSERT_TRUE(want.defined() && got.defined());
  EXPECT_EQ(t_off, 0);
  EXPECT_EQ(t_on, 0);
  EXPECT_EQ(layouts["c1"], "01");
  EXPECT_EQ(layouts["c2"], "11");
  EXPECT_EQ(layouts["c3"], "10");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
}

TEST(Int8Fast, QLinearMatMulMatchesTheReferenceBitForBit) {
  SCOPED_TRACE(std::string("int8 products: ") + (ops::onednn_int8_exact() ? "oneDNN VNNI" : "Highway"));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_int_distribution<int> dim(1, 70);
    const int64_t B = 1 + trial % 3, M = dim(rng), K = dim(rng), N = dim(rng);
    const bool u8 = trial % 2 == 0;
    const DType at = u8 ? DType::u8 : DType::i8;
    Tensor a = u8 ? random_q<uint8_t>(at, {B, M, K}, rng, 0, 255) : random_q<int8_t>(at, {B, M, K}, rng, -128, 127);
    Tensor b = random_q<int8_t>(DType::i8, {K, N}, rng, -127, 127);
    std::uniform_int_distribution<int> zp(u8 ? 0 : -128, u8 ? 255 : 127);
    const int32_t a_zp = zp(rng), y_zp = zp(rng);
    std::uniform_real_distribution<float> sc(0.001f, 0.05f);
    const float a_scale = sc(rng), y_scale = sc(rng) * 8;
    const bool per_column = trial % 4 < 2;
    Tensor b_scale = Tensor::empty(DType::f32, per_column ? Shape{N} : Shape{});
    for (int64_t j = 0; j < b_scale.numel(); ++j) b_scale.data<float>()[j] = sc(rng) * 0.1f;
    Tensor b_zp = Tensor::zeros(DType::i8, per_column ? Shape{N} : Shape{}).value();
    ir::Graph g;
    g.opset = 17;
    ir::Value* av = *g.add_value("a");
    av->dtype = at;
    av->shape = ir::Dims{{B, ""}, {M, ""}, {K, ""}};
    g.inputs.push_back(av);
    ir::Node* n = *g.add_node("mm", "QLinearMatMul", "",
                              {av, g.add_constant("as", scalar(DType::f32, a_scale)), g.add_constant("az", scalar(at, a_zp)), g.add_constant("b", b),
                               g.add_constant("bs", b_scale), g.add_constant("bz", b_zp), g.add_constant("ys", scalar(DType::f32, y_scale)),
                               g.add_constant("yz", scalar(at, y_zp))},
                              {"y"});
    g.outputs.push_back(n->outputs[0]);
    ASSERT_TRUE(runtime::optimize(g).ok());
    auto ex = runtime::Executor::create(g);
    ASSERT_TRUE(ex.ok()) << ex.error().to_string();
    auto got = (*ex)->run({{"a", a}});
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    std::vector<float> ws(b_scale.data<float>(), b_scale.data<float>() + b_scale.numel());
    auto rq = quant::Requantizer::make(quant::Requant::onnx_float, a_scale, ws, y_scale, y_zp, u8 ? 0 : -128, u8 ? 255 : 127);
    ASSERT_TRUE(rq.ok());
    Tensor want = Tensor::empty(at, {B, M, N});
    ASSERT_TRUE(quant::qlinear_matmul(a, a_zp, b, std::vector<int32_t>(ws.size(), 0), *rq, want).ok());
    ASSERT_EQ(got->at("y").shape(), want.shape());
    ASSERT_EQ(std::memcmp(got->at("y").raw(), want.raw(), want.nbytes()), 0) << "trial " << trial << " M" << M << " K" << K << " N" << N;
    // The int64 evaluation (a [B, M, K] x b [K, N], per-column or per-tensor scales).
    Tensor exact = Tensor::empty(at, {B, M, N});
    for (int64_t r = 0; r < B * M; ++r)
      for (int64_t j = 0; j < N; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t a_rk = u8 ? a.data<uint8_t>()[r * K + k] : a.data<int8_t>()[r * K + k];
          acc += (a_rk - a_zp) * b.data<int8_t>()[k * N + j];
        }
        const float bs = b_scale.data<float>()[per_column ? j : 0];
        if (u8) exact.data<uint8_t>()[r * N + j] = onnx_requant_int64<uint8_t>(acc, a_scale, bs, y_scale, y_zp);
        else exact.data<int8_t>()[r * N + j] = onnx_requant_int64<int8_t>(acc, a_scale, bs, y_scale, y_zp);
      }
    ASSERT_EQ(std::memcmp(got->at("y").raw(), exact.raw(), exact.nbytes()), 0) << "trial " << trial << " against the int64 evaluation";
  }
}

}  // namespace
}  // namespace rkd
