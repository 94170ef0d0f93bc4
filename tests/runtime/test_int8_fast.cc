// The fast int8 convolution and matrix product (oneDNN u8 x s8 -> s32,
// ops::QConvAccumulator / QMatMulAccumulator) that the executor's QLinearConv and
// QLinearMatMul use must give the reference kernels' outputs bit for bit. Convolution: random geometries (kernel 1..5, stride 1/2, dilation 1/2, asymmetric pads,
// groups incl. depthwise), int8 and uint8 inputs with random zero points, per-channel
// scales, int32 bias.
#include <gtest/gtest.h>

#include <random>

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

TEST(Int8Fast, QLinearConvMatchesTheReferenceBitForBit) {
  if (!ops::int8_conv_available()) GTEST_SKIP() << "no VNNI instructions: the executor uses the reference kernel";
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

    ir::Graph g;
    g.opset = 17;
    ir::Value* xv = *g.add_value("x");
    xv->dtype = xt;
    xv->shape = ir::Dims{{1, ""}, {C, ""}, {H, ""}, {W, ""}};
    g.inputs.push_back(xv);
    ir::Node* n = *g.add_node("conv", "QLinearConv", "",
                              {xv, g.add_constant("xs", scalar(DType::f32, x_scale)), g.add_constant("xz", scalar(xt, x_zp)),
                               g.add_constant("w", w), g.add_constant("ws", w_scale), g.add_constant("wz", w_zp),
                               g.add_constant("ys", scalar(DType::f32, y_scale)), g.add_constant("yz", scalar(xt, y_zp)),
                               g.add_constant("b", bias)},
                              {"y"});
    n->attrs["kernel_shape"] = std::vector<int64_t>{K, K};
    n->attrs["strides"] = std::vector<int64_t>{S, S};
    n->attrs["dilations"] = std::vector<int64_t>{D, D};
    n->attrs["pads"] = pads;
    n->attrs["group"] = group;
    g.outputs.push_back(n->outputs[0]);
    ASSERT_TRUE(runtime::optimize(g).ok());
    auto ex = runtime::Executor::create(g);
    ASSERT_TRUE(ex.ok()) << ex.error().to_string();
    auto got = (*ex)->run({{"x", x}});
    ASSERT_TRUE(got.ok()) << got.error().to_string();

    std::vector<float> ws(w_scale.data<float>(), w_scale.data<float>() + M);
    auto rq = quant::Requantizer::make(quant::Requant::onnx_float, x_scale, ws, y_scale, y_zp, u8 ? 0 : -128, u8 ? 255 : 127);
    ASSERT_TRUE(rq.ok());
    Tensor want = Tensor::empty(xt, {1, M, OH, OW});
    const quant::QConvParams qp{{S, S}, {D, D}, pads, group};
    ASSERT_TRUE(quant::qlinear_conv(x, x_zp, w, std::vector<int32_t>(static_cast<size_t>(M), 0), bias, qp, *rq, want).ok());
    const Tensor& y = got->at("y");
    ASSERT_EQ(y.shape(), want.shape()) << "trial " << trial;
    ASSERT_EQ(std::memcmp(y.raw(), want.raw(), want.nbytes()), 0)
        << "trial " << trial << ": K" << K << " S" << S << " D" << D << " group " << group << " C" << C << " M" << M;
    ++fast_runs;
  }
  EXPECT_GT(fast_runs, 25);
}

TEST(Int8Fast, QLinearMatMulMatchesTheReferenceBitForBit) {
  if (!ops::int8_conv_available()) GTEST_SKIP() << "no VNNI instructions: the executor uses the reference kernel";
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
                              {av, g.add_constant("as", scalar(DType::f32, a_scale)), g.add_constant("az", scalar(at, a_zp)),
                               g.add_constant("b", b), g.add_constant("bs", b_scale), g.add_constant("bz", b_zp),
                               g.add_constant("ys", scalar(DType::f32, y_scale)), g.add_constant("yz", scalar(at, y_zp))},
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
  }
}

}  // namespace
}  // namespace rkd
