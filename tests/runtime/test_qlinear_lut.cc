// qdq-to-qlinear's table and integer-side rewrites (quant/qlinear_lut.h) against the same
// QDQ graph executed as written in float32 (DequantizeLinear, the op, QuantizeLinear): the
// integers must be equal bit for bit, for int8 and uint8 activations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "ir/ir.h"
#include "kernels/tensor_ops.h"
#include "quant/requant.h"
#include "runtime/executor.h"
#include "runtime/qdq_builder.h"

namespace rkd {
namespace {

using ir::Dim;

// x -> Q -> DQ -> LeakyRelu -> Q -> DQ -> Pad(-inf) -> Q -> DQ -> MaxPool -> Q (another scale)
//   -> DQ -> Resize (nearest x2) -> Q (the same scale) -> DQ -> { Sigmoid, Mul by 1.7, Sub from 0.5 (the varying input second),
//              Mul by a per-channel constant (not a table: stays float),
//              SiLU as YOLO exports write it (Mul(v, DQ(Q(Sigmoid(v))))), Mul(v, v) } -> Q -> outputs.
void build(Builder& b) {
  ir::Graph& g = b.g;
  ir::Value* x = b.input(3, 9, 10);
  ir::Value* v = b.dq(b.q(x, 0.05f, -3), 0.05f, -3);
  ir::Node* lr = b.op("LeakyRelu", {v});
  lr->attrs["alpha"] = 0.1f;
  v = b.dq(b.q(lr->outputs[0], 0.03f, -100), 0.03f, -100);
  Tensor pads = Tensor::empty(DType::i64, {8});
  const int64_t pv[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  std::memcpy(pads.raw(), pv, sizeof pv);
  ir::Node* pad = b.op("Pad", {v, g.add_constant("pads", pads), b.scalar(-INFINITY)});
  v = b.dq(b.q(pad->outputs[0], 0.031f, -100), 0.031f, -100);
  ir::Node* mp = b.op("MaxPool", {v});
  mp->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  mp->attrs["strides"] = std::vector<int64_t>{2, 2};
  v = b.dq(b.q(mp->outputs[0], 0.04f, 5), 0.04f, 5);
  ir::Node* up = b.op("Resize", {v, nullptr, g.add_constant("scales", Tensor::from_floats({4}, std::vector<float>{1, 1, 2, 2}))});
  up->attrs["mode"] = std::string("nearest");
  up->attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  up->attrs["nearest_mode"] = std::string("floor");
  v = b.dq(b.q(up->outputs[0], 0.04f, 5), 0.04f, 5);
  ir::Node* sg = b.op("Sigmoid", {v});
  ir::Node* mul = b.op("Mul", {v, b.scalar(1.7f)});
  ir::Node* sub = b.op("Sub", {b.scalar(0.5f), v});
  ir::Node* chan = b.op("Mul", {v, g.add_constant("c", Tensor::from_floats({1, 3, 1, 1}, std::vector<float>{0.5f, -1.f, 2.f}))});
  ir::Node* sg2 = b.op("Sigmoid", {v});
  ir::Node* silu = b.op("Mul", {v, b.dq(b.q(sg2->outputs[0], 1.f / 256, -128), 1.f / 256, -128)});
  ir::Node* square = b.op("Mul", {v, v});
  int k = 0;
  for (ir::Node* n : {sg, mul, sub, chan, silu, square}) {
    ir::Value* y = b.q(n->outputs[0], 0.0079f + 0.003f * static_cast<float>(k++), -7);
    std::string name = "y";
    name += std::to_string(k);
    ASSERT_TRUE(g.rename_value(y, name).ok());
    g.outputs.push_back(y);
  }
}

std::map<std::string, Tensor> run(Builder& b, bool int8, const Tensor& x, std::map<std::string, int>* ops) {
  runtime::CompileOptions opt;
  opt.int8 = int8;
  Status s = runtime::optimize(b.g, opt);
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  if (ops) {
    for (const auto& n : b.g.nodes()) ++(*ops)[n->op_type];
  }
  auto ex = runtime::Executor::create(b.g);
  EXPECT_TRUE(ex.ok()) << ex.error().to_string();
  auto out = (*ex)->run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  return *out;
}

class QLinearLut : public ::testing::TestWithParam<DType> {};

TEST_P(QLinearLut, TablesAndIntegerPoolAndPadEqualTheFloatQdqGraphBitForBit) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-7.f, 7.f);  // beyond the input grid on both sides
  Tensor x = Tensor::empty(DType::f32, {1, 3, 9, 10});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
  Builder fb{{}, GetParam()}, ib{{}, GetParam()};
  build(fb);
  build(ib);
  std::map<std::string, int> ops;
  const auto want = run(fb, false, x, nullptr);
  const auto got = run(ib, true, x, &ops);
  // Every site but the per-channel Mul is on the integers; the LeakyRelu and Pad tables
  // compose into one, the MaxPool (other output scale) needs its own; the SiLU's Sigmoid
  // table is folded into its Mul's. The Pad of -inf (the type's minimum on the integers)
  // joins the MaxPool's own padding (qlinear_pass.cc fold_pad_into_window). The nearest Resize
  // copies integers (commute_data_movement).
  EXPECT_EQ(ops["LeakyRelu"] + ops["Pad"] + ops["MaxPool"] + ops["Sigmoid"] + ops["Sub"], 0 + 0 + 1 + 0 + 0);
  EXPECT_EQ(ops["Resize"], 1);
  for (const auto& n : ib.g.nodes()) {
    if (n->op_type == "Resize") {
      EXPECT_EQ(n->inputs[0]->dtype, GetParam()) << "the Resize still reads floats";
    }
  }
  EXPECT_EQ(ops["Mul"], 1);
  EXPECT_EQ(ops["DequantizeLinear"], 1);  // the per-channel Mul's input
  EXPECT_EQ(ops["QLinearLut"], 1 + 1 + 3 + 2);
  for (const char* name : {"y1", "y2", "y3", "y4", "y5", "y6"}) {
    const Tensor& w = want.at(name);
    const Tensor& g = got.at(name);
    ASSERT_EQ(w.dtype(), GetParam());
    ASSERT_EQ(g.dtype(), GetParam());
    ASSERT_EQ(w.shape(), g.shape());
    EXPECT_EQ(std::memcmp(w.raw(), g.raw(), static_cast<size_t>(w.numel())), 0) << name;
  }
}

// A graph output as a TensorFlow.js detector's head ends: the op's Q -> DQ, a name-giving
// Identity, then Q -> DQ again with the same parameters (NanoDet's six outputs). On the integers
// the second pair is the identity: one DequantizeLinear per output remains, the same floats.
TEST_P(QLinearLut, AnOutputsRequantizationThroughItsIdentityStaysOnTheIntegers) {
  auto build_out = [](Builder& b) {
    ir::Graph& g = b.g;
    ir::Value* x = b.input(2, 5, 6);
    ir::Value* v = b.dq(b.q(x, 0.05f, 3), 0.05f, 3);
    ir::Node* sg = b.op("Sigmoid", {v});
    ir::Value* s = b.dq(b.q(sg->outputs[0], 1.f / 256, -128), 1.f / 256, -128);
    ir::Node* id = b.op("Identity", {s});
    ir::Value* y = b.dq(b.q(id->outputs[0], 1.f / 256, -128), 1.f / 256, -128);
    ASSERT_TRUE(g.rename_value(y, "y").ok());
    g.outputs.push_back(y);
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-9.f, 9.f);
  Tensor x = Tensor::empty(DType::f32, {1, 2, 5, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
  Builder fb{{}, GetParam()}, ib{{}, GetParam()};
  build_out(fb);
  build_out(ib);
  std::map<std::string, int> ops;
  const auto want = run(fb, false, x, nullptr);
  const auto got = run(ib, true, x, &ops);
  EXPECT_EQ(ops["QuantizeLinear"], 1);    // the input's
  EXPECT_EQ(ops["DequantizeLinear"], 1);  // the output's
  EXPECT_EQ(ops["QLinearLut"], 1);
  const Tensor& w = want.at("y");
  const Tensor& g = got.at("y");
  ASSERT_EQ(w.dtype(), DType::f32);
  ASSERT_EQ(w.shape(), g.shape());
  EXPECT_EQ(std::memcmp(w.raw(), g.raw(), w.nbytes()), 0);
}

// Hard-swish as TensorFlow.js exports a quantized MobileNetV3 (centernet's 20 sites): its
// constants are themselves quantized, (x * DQ(Q(1/6))) * relu6(x + DQ(Q(3))), each product and
// sum between DequantizeLinear and QuantizeLinear. The scalar product becomes a table (a
// dequantized constant scalar counts as a constant), the Add of a constant an integer
// QLinearAdd and then a table (constant_add_luts), the product of the two tables of x one
// table (mul_lut_sites) - one QLinearLut in all, equal to the float QDQ graph bit for bit.
TEST_P(QLinearLut, HardSwishWithQuantizedConstantsIsOneTable) {
  auto build_hs = [](Builder& b) {
    ir::Graph& g = b.g;
    ir::Value* x = b.input(4, 5, 6);
    ir::Value* v = b.dq(b.q(x, 0.06f, 7), 0.06f, 7);
    auto qconst = [&](int code, float scale) {
      Tensor c = Tensor::empty(b.t, {});
      if (b.t == DType::i8) c.data<int8_t>()[0] = static_cast<int8_t>(code);
      else c.data<uint8_t>()[0] = static_cast<uint8_t>(code + 128);
      return b.dq(g.add_constant(b.id("c"), c), scale, 0);
    };
    ir::Node* sixth = b.op("Mul", {qconst(127, 0.1667f / 127), v});
    ir::Value* xs = b.dq(b.q(sixth->outputs[0], 0.012f, 5), 0.012f, 5);
    ir::Node* add = b.op("Add", {v, qconst(127, 3.f / 127)});
    ir::Node* relu6 = b.op("Clip", {add->outputs[0], b.scalar(0.f), b.scalar(6.f)});
    ir::Value* r = b.dq(b.q(relu6->outputs[0], 6.f / 255, -128), 6.f / 255, -128);
    ir::Node* mul = b.op("Mul", {xs, r});
    ir::Value* y = b.q(mul->outputs[0], 0.05f, -60);
    EXPECT_TRUE(g.rename_value(y, "y").ok());
    g.outputs.push_back(y);
  };
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-9.f, 9.f);
  Tensor x = Tensor::empty(DType::f32, {1, 4, 5, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
  Builder fb{{}, GetParam()}, ib{{}, GetParam()};
  build_hs(fb);
  build_hs(ib);
  std::map<std::string, int> ops;
  const auto want = run(fb, false, x, nullptr);
  const auto got = run(ib, true, x, &ops);
  EXPECT_EQ(ops["QLinearLut"], 1);
  EXPECT_EQ(ops["Mul"] + ops["Add"] + ops["QLinearAdd"] + ops["Clip"], 0);
  const Tensor& w = want.at("y");
  const Tensor& g = got.at("y");
  ASSERT_EQ(w.dtype(), GetParam());
  ASSERT_EQ(g.dtype(), GetParam());
  EXPECT_EQ(std::memcmp(w.raw(), g.raw(), static_cast<size_t>(w.numel())), 0);
}

TEST(QLinearLutMarks, ALeakyReluTableCarriesItsParametersUntilItIsComposed) {
  // x -> Q -> DQ -> [Sigmoid -> Q -> DQ ->] LeakyRelu -> Q: alone, the table keeps what the NPU
  // lowering reads (rkd_op, alpha, the scales and zero points); composed after the Sigmoid's
  // table it is no longer a LeakyRelu of its input and must not say so.
  for (bool sigmoid_first : {false, true}) {
    Builder b{{}, DType::i8};
    ir::Graph& g = b.g;
    ir::Value* x = b.input(3, 4, 4);
    ir::Value* v = b.dq(b.q(x, 0.05f, -3), 0.05f, -3);
    if (sigmoid_first) v = b.dq(b.q(b.op("Sigmoid", {v})->outputs[0], 0.004f, -128), 0.004f, -128);
    ir::Node* lr = b.op("LeakyRelu", {v});
    lr->attrs["alpha"] = 0.2f;
    ir::Value* y = b.q(lr->outputs[0], 0.03f, -10);
    ASSERT_TRUE(g.rename_value(y, "y").ok());
    g.outputs.push_back(y);
    runtime::CompileOptions opt;
    opt.int8 = true;
    ASSERT_TRUE(runtime::optimize(g, opt).ok());
    int luts = 0;
    for (const auto& n : g.nodes()) {
      if (n->op_type != "QLinearLut") continue;
      ++luts;
      EXPECT_EQ(n->attrs.count("rkd_op"), sigmoid_first ? 0u : 1u);
      if (!sigmoid_first) {
        EXPECT_EQ(*n->attr_float("rkd_alpha", 0), 0.2f);
        EXPECT_EQ(*n->attr_float("rkd_x_scale", 0), 0.05f);
        EXPECT_EQ(*n->attr_int("rkd_x_zero_point", 0), -3);
        EXPECT_EQ(*n->attr_float("rkd_y_scale", 0), 0.03f);
        EXPECT_EQ(*n->attr_int("rkd_y_zero_point", 0), -10);
      }
    }
    EXPECT_EQ(luts, 1);
  }
}

// A 2 x 2 stride-2 ConvTranspose between Q/DQ (per-channel weights on axis 1, an int32 bias,
// a fused Relu that is the output's saturation) becomes a 1 x 1 QLinearConv of 4 OC outputs and
// an integer DepthToSpace; its output equals the ConvTranspose's integer definition - each
// output cell's one tap summed over the input channels in int64 plus the bias - requantized by
// the graph's convention (quant::Requantizer, onnx_float), for int8 and uint8 maps.
TEST(QLinearConvTranspose, AStride2Kernel2ConvTransposeIsA1x1ConvAndDepthToSpace) {
  const int64_t IC = 32, OC = 16, H = 3, W = 4;
  std::mt19937 rng(5);
  for (DType t : {DType::i8, DType::u8}) {
    Builder b{{}, t};
    ir::Graph& g = b.g;
    ir::Value* x = b.input(IC, H, W);
    const float sx = 0.05f, sy = 0.07f;
    const int zx = -3, zy = -128;
    ir::Value* v = b.dq(b.q(x, sx, zx), sx, zx);
    Tensor wq = Tensor::empty(DType::i8, {IC, OC, 2, 2});
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    std::vector<float> ws(OC), bs(OC);
    Tensor bq = Tensor::empty(DType::i32, {OC});
    for (int64_t o = 0; o < OC; ++o) {
      ws[static_cast<size_t>(o)] = 0.001f * static_cast<float>(1 + o);
      bs[static_cast<size_t>(o)] = sx * ws[static_cast<size_t>(o)];
      bq.data<int32_t>()[o] = static_cast<int32_t>(rng() % 4001) - 2000;
    }
    Tensor wzp = Tensor::empty(DType::i8, {OC});
    for (int64_t o = 0; o < OC; ++o) wzp.data<int8_t>()[o] = 0;
    ir::Node* wdq = *g.add_node("wdq", "DequantizeLinear", "",
                                {g.add_constant("wq", wq), g.add_constant("ws", Tensor::from_floats({OC}, ws)), g.add_constant("wz", wzp)}, {"w"});
    wdq->attrs["axis"] = int64_t{1};
    ir::Node* bdq =
        *g.add_node("bdq", "DequantizeLinear", "", {g.add_constant("bq", bq), g.add_constant("bs", Tensor::from_floats({OC}, bs))}, {"b"});
    bdq->attrs["axis"] = int64_t{0};
    ir::Node* ct = b.op("ConvTranspose", {v, wdq->outputs[0], bdq->outputs[0]});
    ct->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
    ct->attrs["strides"] = std::vector<int64_t>{2, 2};
    ir::Node* relu = b.op("Relu", {ct->outputs[0]});
    ir::Value* y = b.q(relu->outputs[0], sy, zy);
    ASSERT_TRUE(g.rename_value(y, "y").ok());
    g.outputs.push_back(y);
    Tensor xf = Tensor::empty(DType::f32, {1, IC, H, W});
    std::uniform_real_distribution<float> u(-7.f, 7.f);
    for (int64_t i = 0; i < xf.numel(); ++i) xf.data<float>()[i] = u(rng);
    std::map<std::string, int> ops;
    const auto got = run(b, true, xf, &ops);
    EXPECT_EQ(ops["ConvTranspose"], 0);
    EXPECT_EQ(ops["QLinearConv"], 1);
    EXPECT_EQ(ops["DepthToSpace"], 1);
    for (const auto& n : b.g.nodes()) {
      if (n->op_type == "DepthToSpace") {
        EXPECT_EQ(n->inputs[0]->dtype, t) << "the DepthToSpace still reads floats";
      }
    }
    // The definition: the input's codes, one tap per output cell, the bias, requantized.
    const int32_t shift = t == DType::u8 ? 128 : 0, lo = t == DType::u8 ? 0 : -128;
    auto requant = quant::Requantizer::make(quant::Requant::onnx_float, sx, ws, sy, zy + shift, lo, lo + 255);
    ASSERT_TRUE(requant.ok());
    int wrong = 0;
    const Tensor& yg = got.at("y");
    ASSERT_EQ(yg.shape(), (Shape{1, OC, 2 * H, 2 * W}));
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t oy = 0; oy < 2 * H; ++oy)
        for (int64_t ox = 0; ox < 2 * W; ++ox) {
          int64_t acc = bq.data<int32_t>()[o];
          for (int64_t c = 0; c < IC; ++c) {
            const float xv = xf.data<float>()[(c * H + oy / 2) * W + ox / 2];
            const int32_t code = std::clamp(static_cast<int32_t>(std::nearbyint(xv / sx)) + zx, -128, 127);  // the input's Q (int8 grid)
            acc += static_cast<int64_t>(code - zx) * wq.data<int8_t>()[((c * OC + o) * 2 + oy % 2) * 2 + ox % 2];
          }
          const int32_t want = requant->apply(static_cast<int32_t>(acc), static_cast<size_t>(o));
          const int32_t have = t == DType::i8 ? yg.data<int8_t>()[(o * 2 * H + oy) * 2 * W + ox] : yg.data<uint8_t>()[(o * 2 * H + oy) * 2 * W + ox];
          wrong += have != want;
        }
    EXPECT_EQ(wrong, 0) << dtype_name(t);
  }
}

// Under rknpu_out_cvt a linear half-pixel Resize by 2 becomes nearest x2, a Pad edge and a
// depthwise 3 x 3 QLinearConv; one by 1/2 a depthwise 2 x 2 stride-2 QLinearConv (the NPU runs
// both as convolutions). Their accumulators are the executor's float Resize of the input codes
// (less the zero point) times 16 and 4, exactly - the taps, checked against the kernel ONNX's
// conformance data checks - and the outputs that accumulator requantized by quant::Requantizer
// (an int64 evaluation here). Under onnx_float both sites stay float.
TEST(QLinearResize, UnderTheNpuConventionLinearByTwoAndByAHalfAreDepthwiseConvolutionsOfTheCodes) {
  const int64_t C = 5, H = 6, W = 8;
  std::mt19937 rng(11);
  for (DType t : {DType::i8, DType::u8}) {
    for (bool npu : {true, false}) {
      Builder b{{}, t};
      ir::Graph& g = b.g;
      if (npu) g.metadata["rkdeploy.requant"] = "rknpu_out_cvt";
      ir::Value* x = b.input(C, H, W);
      const float sx = 0.05f, su = 0.045f, sd = 0.06f;
      const int zx = -3, zu = 2, zd = -1;
      ir::Value* v = b.dq(b.q(x, sx, zx), sx, zx);
      ir::Node* up = b.op("Resize", {v, nullptr, g.add_constant("up_scales", Tensor::from_floats({4}, std::vector<float>{1, 1, 2, 2}))});
      ir::Node* down = b.op("Resize", {v, nullptr, g.add_constant("down_scales", Tensor::from_floats({4}, std::vector<float>{1, 1, 0.5f, 0.5f}))});
      // TensorFlow's ResizeBilinear without half-pixel centres (centernet's neck).
      ir::Node* asym = b.op("Resize", {v, nullptr, g.add_constant("asym_scales", Tensor::from_floats({4}, std::vector<float>{1, 1, 2, 2}))});
      for (ir::Node* r : {up, down, asym}) r->attrs["mode"] = std::string("linear");
      down->attrs["coordinate_transformation_mode"] = std::string("pytorch_half_pixel");
      asym->attrs["coordinate_transformation_mode"] = std::string("asymmetric");
      ir::Value* yu = b.q(up->outputs[0], su, zu);
      ir::Value* yd = b.q(down->outputs[0], sd, zd);
      ir::Value* ya = b.q(asym->outputs[0], su, zu);
      ASSERT_TRUE(g.rename_value(yu, "up").ok());
      ASSERT_TRUE(g.rename_value(yd, "down").ok());
      ASSERT_TRUE(g.rename_value(ya, "asym").ok());
      g.outputs = {yu, yd, ya};
      Tensor xf = Tensor::empty(DType::f32, {1, C, H, W});
      std::uniform_real_distribution<float> u(-7.f, 7.f);
      for (int64_t i = 0; i < xf.numel(); ++i) xf.data<float>()[i] = u(rng);
      std::map<std::string, int> ops;
      const auto got = run(b, true, xf, &ops);
      EXPECT_EQ(ops["QLinearConv"], npu ? 3 : 0);
      EXPECT_EQ(ops["Pad"], npu ? 2 : 0);
      EXPECT_EQ(ops["DequantizeLinear"], npu ? 0 : 1) << "the float sites' one input";
      if (!npu) continue;
      // The input's codes minus the zero point (QuantizeLinear on this type's grid), as floats.
      const int32_t lo = t == DType::u8 ? 0 : -128, shift = t == DType::u8 ? 128 : 0;
      Tensor centred = Tensor::empty(DType::f32, {1, C, H, W});
      for (int64_t i = 0; i < xf.numel(); ++i)
        centred.data<float>()[i] =
            static_cast<float>(std::clamp(static_cast<int32_t>(std::nearbyint(xf.data<float>()[i] / sx)) + zx + shift, lo, lo + 255) - zx - shift);
      auto cell = [&](int64_t c, int64_t h, int64_t w) {
        return static_cast<int64_t>(centred.data<float>()[(c * H + std::clamp<int64_t>(h, 0, H - 1)) * W + std::clamp<int64_t>(w, 0, W - 1)]);
      };
      for (const char* name : {"up", "down", "asym"}) {
        const bool asymmetric = std::string(name) == "asym";
        const bool by2 = std::string(name) == "up" || asymmetric;
        ops::ResizeParams rp;
        rp.mode = ops::ResizeParams::Mode::linear;
        rp.coordinate_transformation = asymmetric ? "asymmetric" : by2 ? "half_pixel" : "pytorch_half_pixel";
        rp.scales = {1.f, 1.f, by2 ? 2.f : 0.5f, by2 ? 2.f : 0.5f};
        const Tensor& y = got.at(name);
        ASSERT_EQ(y.dtype(), t);
        Tensor blend = Tensor::empty(DType::f32, y.shape());
        ASSERT_TRUE(ops::resize(centred, rp, blend).ok());
        auto rq = quant::Requantizer::make(quant::Requant::rknpu_out_cvt, sx, {by2 && !asymmetric ? 0.0625f : 0.25f}, by2 ? su : sd,
                                           (by2 ? zu : zd) + shift, lo, lo + 255);
        ASSERT_TRUE(rq.ok());
        const int64_t OH = y.shape()[2], OW = y.shape()[3];
        int wrong = 0, taps = 0;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
              int64_t acc = 0;
              if (by2) {
                // The edge-replicated nearest map's 3 x 3 window around (oy + 1, ox + 1);
                // asymmetric: its lower right 2 x 2 (the cell and its neighbours below and right).
                const int k3[3] = {1, 2, 1}, a3[3] = {0, 1, 1};
                for (int dy = 0; dy < 3; ++dy)
                  for (int dx = 0; dx < 3; ++dx) {
                    const int64_t ey = oy + dy, ex = ox + dx;  // in the padded map
                    const int tap = asymmetric ? a3[dy] * a3[dx] : k3[dy] * k3[dx];
                    acc += tap * cell(c, ey - 1 < 0 ? 0 : (ey - 1) / 2, ex - 1 < 0 ? 0 : (ex - 1) / 2);
                  }
              } else {
                for (int dy = 0; dy < 2; ++dy)
                  for (int dx = 0; dx < 2; ++dx) acc += cell(c, 2 * oy + dy, 2 * ox + dx);
              }
              const int64_t at = (c * OH + oy) * OW + ox;
              taps += static_cast<double>(acc) != static_cast<double>(blend.data<float>()[at]) * (by2 && !asymmetric ? 16.0 : 4.0);
              const int32_t have = t == DType::i8 ? int32_t{y.data<int8_t>()[at]} : int32_t{y.data<uint8_t>()[at]};
              wrong += have != rq->apply(static_cast<int32_t>(acc), 0);
            }
        EXPECT_EQ(taps, 0) << name << ": the convolution's taps are not the Resize's";
        EXPECT_EQ(wrong, 0) << name << " " << dtype_name(t);
      }
    }
  }
}

// Averages over height and width windows, under the NPU's convention, become depthwise
// QLinearConvs of weights 1 and weight scale 1 / (KH KW): checked against an int64 sum of the
// codes minus the zero point over each window (a padded cell adds 0) requantized by
// quant::Requantizer, and their taps against the executor's float average of those codes.
// Windows no convolution has (count_include_pad 0 with padding, a mean over the channels)
// and every site outside the convention stay float.
TEST(QLinearAverage, UnderTheNpuConventionAveragesAreDepthwiseConvolutionsOfTheCodes) {
  const int64_t C = 5, H = 7, W = 9;
  struct Site {
    const char* name;
    int64_t kh, kw, sh, sw, pad;  // pad: on every side
    bool conv;                    // the NPU form takes it
  };
  const Site sites[] = {{"pool3s2", 3, 3, 2, 2, 0, true},        {"pool2x3", 2, 3, 1, 2, 0, true}, {"pool3pad", 3, 3, 1, 1, 1, true},
                        {"pool3pad_excl", 3, 3, 1, 1, 1, false}, {"global", H, W, H, W, 0, true},  {"mean", H, W, H, W, 0, true},
                        {"mean_flat", H, W, H, W, 0, true},      {"mean_c", 1, 1, 1, 1, 0, false}, {"pool_whole", H, W, 8, 9, 0, true}};
  std::mt19937 rng(13);
  for (DType t : {DType::i8, DType::u8}) {
    for (bool npu : {true, false}) {
      const float sx = 0.05f;
      const int zx = -3;
      auto make = [&](Builder& b) {
        ir::Graph& g = b.g;
        if (npu) g.metadata["rkdeploy.requant"] = "rknpu_out_cvt";
        ir::Value* x = b.input(C, H, W);
        ir::Value* v = b.dq(b.q(x, sx, zx), sx, zx);
        std::vector<ir::Value*> outs;
        for (const Site& st : sites) {
          const std::string name = st.name;
          ir::Node* n = nullptr;
          if (name == "global") {
            n = b.op("GlobalAveragePool", {v});
          } else if (name.rfind("mean", 0) == 0) {
            n = b.op("ReduceMean", {v});
            n->attrs["axes"] = name == "mean_c" ? std::vector<int64_t>{1} : std::vector<int64_t>{-1, 2};
            if (name == "mean_flat") n->attrs["keepdims"] = int64_t{0};
          } else {
            n = b.op("AveragePool", {v});
            n->attrs["kernel_shape"] = std::vector<int64_t>{st.kh, st.kw};
            n->attrs["strides"] = std::vector<int64_t>{st.sh, st.sw};
            n->attrs["pads"] = std::vector<int64_t>(4, st.pad);
            n->attrs["count_include_pad"] = int64_t{name == "pool3pad" ? 1 : 0};
          }
          ir::Value* y = b.q(n->outputs[0], 0.02f, 4);
          EXPECT_TRUE(g.rename_value(y, name).ok());
          outs.push_back(y);
        }
        g.outputs = outs;
      };
      Builder b{{}, t}, sb{{}, t};
      make(b);
      make(sb);
      Tensor xf = Tensor::empty(DType::f32, {1, C, H, W});
      std::uniform_real_distribution<float> u(-7.f, 7.f);
      for (int64_t i = 0; i < xf.numel(); ++i) xf.data<float>()[i] = u(rng);
      std::map<std::string, int> ops;
      const auto got = run(b, true, xf, &ops);
      int convs = 0;
      for (const Site& st : sites) convs += st.conv;
      EXPECT_EQ(ops["QLinearConv"], npu ? convs : 0) << dtype_name(t);
      if (!npu) continue;
      {
        // The same graph for the RK3588 simulator: every such convolution on the NPU, its
        // outputs the integer reference's bit for bit (per-tensor weights: the per-tensor
        // strategy is the convention's OUT_CVT; the BS-multiplier strategies re-encode it).
        runtime::CompileOptions opt;
        opt.int8 = true;
        opt.npu_strategy = npu::lower::Strategy::per_tensor;
        ir::FusionReport rep;
        ASSERT_TRUE(runtime::optimize(sb.g, opt, &rep).ok());
        EXPECT_EQ(rep.npu["Conv"].placed, convs) << ::testing::PrintToString(rep.npu["Conv"].on_cpu);
        auto ex = runtime::Executor::create(sb.g);
        ASSERT_TRUE(ex.ok()) << ex.error().to_string();
        auto out = (*ex)->run({{"x", xf}});
        ASSERT_TRUE(out.ok()) << out.error().to_string();
        for (const Site& st : sites) {
          const Tensor& a = out->at(st.name);
          const Tensor& r = got.at(st.name);
          ASSERT_EQ(a.nbytes(), r.nbytes()) << st.name;
          int differ = 0, first = -1;
          for (int64_t i = 0; i < r.numel(); ++i) {
            const bool d = static_cast<const uint8_t*>(a.raw())[i] != static_cast<const uint8_t*>(r.raw())[i];
            differ += d;
            if (d && first < 0) first = static_cast<int>(i);
          }
          EXPECT_EQ(differ, 0) << st.name << " " << dtype_name(t) << ": simulator != integer reference, first at " << first << ": "
                               << int{static_cast<const uint8_t*>(a.raw())[std::max(first, 0)]} << " vs "
                               << int{static_cast<const uint8_t*>(r.raw())[std::max(first, 0)]} << " of " << r.numel();
        }
      }
      const int32_t lo = t == DType::u8 ? 0 : -128, shift = t == DType::u8 ? 128 : 0;
      auto centred = [&](int64_t c, int64_t h, int64_t w) -> int64_t {
        const float f = xf.data<float>()[(c * H + h) * W + w];
        return std::clamp(static_cast<int32_t>(std::nearbyint(f / sx)) + zx + shift, lo, lo + 255) - zx - shift;
      };
      for (const Site& st : sites) {
        if (!st.conv) continue;
        const Tensor& y = got.at(st.name);
        ASSERT_EQ(y.dtype(), t) << st.name;
        const int64_t OH = (H + 2 * st.pad - st.kh) / st.sh + 1, OW = (W + 2 * st.pad - st.kw) / st.sw + 1;
        ASSERT_EQ(y.numel(), C * OH * OW) << st.name;
        if (std::string(st.name) == "mean_flat") {
          EXPECT_EQ(y.shape(), (Shape{1, C})) << "keepdims 0";
        }
        auto rq =
            quant::Requantizer::make(quant::Requant::rknpu_out_cvt, sx, {1.f / static_cast<float>(st.kh * st.kw)}, 0.02f, 4 + shift, lo, lo + 255);
        ASSERT_TRUE(rq.ok());
        int wrong = 0;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
              int64_t acc = 0;
              for (int64_t ky = 0; ky < st.kh; ++ky)
                for (int64_t kx = 0; kx < st.kw; ++kx) {
                  const int64_t iy = oy * st.sh - st.pad + ky, ix = ox * st.sw - st.pad + kx;
                  if (iy >= 0 && iy < H && ix >= 0 && ix < W) acc += centred(c, iy, ix);
                }
              const int64_t at = (c * OH + oy) * OW + ox;
              const int32_t have = t == DType::i8 ? int32_t{y.data<int8_t>()[at]} : int32_t{y.data<uint8_t>()[at]};
              wrong += have != rq->apply(static_cast<int32_t>(acc), 0);
            }
        EXPECT_EQ(wrong, 0) << st.name << " " << dtype_name(t);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QLinearLut, ::testing::Values(DType::i8, DType::u8),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(p.param == DType::i8 ? "int8" : "uint8"); });

}  // namespace
}  // namespace rkd
