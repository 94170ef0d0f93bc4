// The executor's passes on small hand-built graphs: shape inference (static and symbolic
// dims, errors naming the node), constant folding, conv-bn-folding and
// conv-activation-fusion against double-precision references written here.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <random>

#include "common/tolerance.h"
#include "core/npy.h"
#include "ir/op_info.h"
#include "ir/pass.h"
#include "ir/passes/shape_inference.h"
#include "runtime/executor.h"
#include "runtime/op_registry.h"

namespace rkd {
namespace {

using ir::Dim;
using ir::Dims;

ir::Value* input(ir::Graph& g, const std::string& name, Dims d) {
  ir::Value* v = *g.add_value(name);
  v->dtype = DType::f32;
  v->shape = d;
  g.inputs.push_back(v);
  return v;
}

Tensor random_tensor(const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::empty(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Tensor ints(std::vector<int64_t> v) {
  Tensor t = Tensor::empty(DType::i64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

TEST(ShapeInference, ConvKeepsSymbolicBatch) {
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {Dim{-1, "N"}, Dim{3, ""}, Dim{33, ""}, Dim{20, ""}});
  ir::Value* w = g.add_constant("w", random_tensor({8, 3, 3, 3}, 1));
  ir::Node* c = *g.add_node("conv", "Conv", "", {x, w}, {"y"});
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  c->attrs["strides"] = std::vector<int64_t>{2, 2};
  ASSERT_TRUE(ir::infer_node(*c, 17).ok());
  EXPECT_EQ(ir::dims_to_string(*c->outputs[0]->shape), "[N, 8, 17, 10]");
}

TEST(ShapeInference, ErrorsNameTheNode) {
  ir::Graph g;
  ir::Value* x = input(g, "x", {Dim{2, ""}, Dim{3, ""}});
  ir::Node* r = *g.add_node("bad_reshape", "Reshape", "", {x, g.add_constant("s", ints({4, 2}))}, {"y"});
  auto s = ir::infer_node(*r, 17);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("bad_reshape"), std::string::npos) << s.error().message;
  ir::Value* y = input(g, "z", {Dim{4, ""}});
  ir::Node* add = *g.add_node("bad_add", "Add", "", {x, y}, {"w"});
  auto s2 = ir::infer_node(*add, 17);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.error().message.find("bad_add"), std::string::npos) << s2.error().message;
  EXPECT_NE(s2.error().message.find("broadcast"), std::string::npos) << s2.error().message;
}

TEST(ConstantFolding, ShapeChainsBecomeConstants) {
  // x [2, 3, 4] -> Reshape(x, Concat(Gather(Shape(x), 0), [-1])) == [2, 12]
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {Dim{2, ""}, Dim{3, ""}, Dim{4, ""}});
  ir::Node* sh = *g.add_node("shape", "Shape", "", {x}, {"s"});
  Tensor zero = Tensor::empty(DType::i64, {});
  ir::Node* ga = *g.add_node("gather", "Gather", "", {sh->outputs[0], g.add_constant("i0", zero)}, {"n"});
  ir::Node* un = *g.add_node("unsq", "Unsqueeze", "", {ga->outputs[0], g.add_constant("ax", ints({0}))}, {"n1"});
  ir::Node* cat = *g.add_node("cat", "Concat", "", {un->outputs[0], g.add_constant("m1", ints({-1}))}, {"spec"});
  cat->attrs["axis"] = int64_t{0};
  ir::Node* rs = *g.add_node("reshape", "Reshape", "", {x, cat->outputs[0]}, {"y"});
  g.outputs.push_back(rs->outputs[0]);
  ASSERT_TRUE(runtime::optimize(g).ok());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0]->op_type, "Reshape");
  EXPECT_EQ(ir::dims_to_string(*g.outputs[0]->shape), "[2, 12]");
}

// Direct convolution in double (stride 1, pad 1, 3x3), the independent reference.
std::vector<double> conv_ref(const Tensor& x, const Tensor& w, const std::vector<double>& b) {
  const int64_t C = x.dim(1), H = x.dim(2), W = x.dim(3), M = w.dim(0);
  std::vector<double> y(static_cast<size_t>(M * H * W));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t i = 0; i < H; ++i) {
      for (int64_t j = 0; j < W; ++j) {
        double acc = b[static_cast<size_t>(m)];
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t u = 0; u < 3; ++u) {
            for (int64_t v = 0; v < 3; ++v) {
              const int64_t yy = i + u - 1, xx = j + v - 1;
              if (yy < 0 || xx < 0 || yy >= H || xx >= W) continue;
              acc +=
                  static_cast<double>(x.data<float>()[(c * H + yy) * W + xx]) * static_cast<double>(w.data<float>()[((m * C + c) * 3 + u) * 3 + v]);
            }
          }
        }
        y[static_cast<size_t>((m * H + i) * W + j)] = acc;
      }
    }
  }
  return y;
}

TEST(ConvBnFolding, FoldsAndMatchesDoubleReference) {
  const int64_t C = 5, M = 7, H = 9, W = 11;
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {Dim{1, ""}, Dim{C, ""}, Dim{H, ""}, Dim{W, ""}});
  const Tensor w = random_tensor({M, C, 3, 3}, 2), b = random_tensor({M}, 3);
  const Tensor scale = random_tensor({M}, 4, 0.5f, 2.f), beta = random_tensor({M}, 5), mean = random_tensor({M}, 6),
               var = random_tensor({M}, 7, 0.1f, 3.f);
  ir::Node* c = *g.add_node("conv", "Conv", "", {x, g.add_constant("w", w), g.add_constant("b", b)}, {"c"});
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  ir::Node* bn = *g.add_node(
      "bn", "BatchNormalization", "",
      {c->outputs[0], g.add_constant("scale", scale), g.add_constant("beta", beta), g.add_constant("mean", mean), g.add_constant("var", var)}, {"y"});
  bn->attrs["epsilon"] = 1e-3f;
  g.outputs.push_back(bn->outputs[0]);
  ASSERT_TRUE(runtime::optimize(g).ok());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0]->op_type, "Conv");
  EXPECT_EQ(g.outputs[0]->name, "y");
  auto ex = runtime::Executor::create(g);
  ASSERT_TRUE(ex.ok()) << ex.error().to_string();
  const Tensor xin = random_tensor({1, C, H, W}, 8);
  auto out = (*ex)->run({{"x", xin}});
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  std::vector<double> bias(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) bias[static_cast<size_t>(m)] = b.data<float>()[m];
  const auto ref = conv_ref(xin, w, bias);
  for (int64_t m = 0; m < M; ++m) {
    const double k = scale.data<float>()[m] / std::sqrt(static_cast<double>(var.data<float>()[m]) + 1e-3);
    for (int64_t i = 0; i < H * W; ++i) {
      const double e = (ref[static_cast<size_t>(m * H * W + i)] - mean.data<float>()[m]) * k + beta.data<float>()[m];
      const double a = out->at("y").data<float>()[m * H * W + i];
      // Magnitude: the conv's sum of |terms| is at most C*9 (inputs and weights in [-1, 1]) times k.
      EXPECT_TRUE(test::float_agree(a, e, static_cast<double>(C * 9) * k, C * 9)) << m << "," << i << ": " << a << " vs " << e;
    }
  }
}

// A TensorFlow-style biased convolution (Conv, then Add of a per-channel constant) becomes
// one Conv in both operand orders and with or without a bias of its own; Adds that broadcast
// another way stay.
TEST(ConvBiasFolding, FoldsPerChannelAddsAndKeepsTheOthers) {
  const int64_t C = 3, M = 4, H = 5, W = 6;
  const Tensor w = random_tensor({M, C, 3, 3}, 11), b0 = random_tensor({M}, 12);
  struct Case {
    const char* what;
    Shape addend;
    bool own_bias, constant_first, folds;
  };
  const Case cases[] = {
      {"[1, M, 1, 1], no bias", {1, M, 1, 1}, false, false, true},
      {"[M, 1, 1] first, with bias", {M, 1, 1}, true, true, true},
      {"scalar, with bias", {}, true, false, true},
      {"[1], no bias", {1}, false, true, true},
      {"[1, M, H, W]: not per channel", {1, M, H, W}, false, false, false},
      {"[H, 1]: per row", {H, 1}, false, false, false},
      {"[1, 1, M, 1, 1]: widens the output", {1, 1, M, 1, 1}, false, false, false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    ir::Graph g;
    g.opset = 17;
    ir::Value* x = input(g, "x", {Dim{1, ""}, Dim{C, ""}, Dim{H, ""}, Dim{W, ""}});
    std::vector<ir::Value*> cin{x, g.add_constant("w", w)};
    if (k.own_bias) cin.push_back(g.add_constant("b", b0));
    ir::Node* c = *g.add_node("conv", "Conv", "", cin, {"c"});
    c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    const Tensor a = random_tensor(k.addend, 13);
    ir::Value* av = g.add_constant("a", a);
    ir::Node* add = *g.add_node("add", "Add", "",
                                k.constant_first ? std::vector<ir::Value*>{av, c->outputs[0]} : std::vector<ir::Value*>{c->outputs[0], av}, {"y"});
    g.outputs.push_back(add->outputs[0]);
    ASSERT_TRUE(runtime::optimize(g).ok());
    EXPECT_EQ(g.nodes().size(), k.folds ? 1u : 2u);
    EXPECT_EQ(g.outputs[0]->name, "y");
    auto ex = runtime::Executor::create(g);
    ASSERT_TRUE(ex.ok()) << ex.error().to_string();
    const Tensor xin = random_tensor({1, C, H, W}, 14);
    auto out = (*ex)->run({{"x", xin}});
    ASSERT_TRUE(out.ok()) << out.error().to_string();
    std::vector<double> bias(static_cast<size_t>(M), 0.0);
    for (int64_t m = 0; m < M && k.own_bias; ++m) bias[static_cast<size_t>(m)] = b0.data<float>()[m];
    const auto ref = conv_ref(xin, w, bias);
    const Tensor& y = out->at("y");
    ASSERT_EQ(y.numel(), M * H * W);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t i = 0; i < H * W; ++i) {
        // The addend's element for output (m, h, w): its dims right-aligned with [M, H, W].
        const int64_t pos[3] = {m, i / W, i % W};
        int64_t at = 0;
        for (int d = std::max(0, a.rank() - 3); d < a.rank(); ++d) {
          const int axis = 3 - (a.rank() - d);
          at = at * a.dim(d) + (a.dim(d) == 1 ? 0 : pos[axis]);
        }
        const double e = ref[static_cast<size_t>(m * H * W + i)] + a.data<float>()[at];
        // Magnitude: C * 9 products of values in [-1, 1], the bias and the addend.
        EXPECT_TRUE(test::float_agree(y.data<float>()[m * H * W + i], e, static_cast<double>(C * 9 + 2), C * 9 + 2)) << m << "," << i;
      }
    }
  }
}

// A BatchNormalization kept as Mul then Add after a 2x2 stride-2 ConvTranspose (TensorFlow.js's
// handdetect) and a per-channel Mul after a Conv fold into the weights and bias: one node each,
// against a double reference of the unfolded graph; a Mul by a full map stays.
TEST(ConvScaleFolding, FoldsPerChannelMulsIntoConvAndConvTranspose) {
  const int64_t C = 3, M = 4, H = 5, W = 6;
  for (bool transposed : {false, true}) {
    for (bool per_channel : {true, false}) {
      SCOPED_TRACE(std::string(transposed ? "ConvTranspose" : "Conv") + (per_channel ? ", per-channel Mul" : ", full-map Mul"));
      ir::Graph g;
      g.opset = 17;
      ir::Value* x = input(g, "x", {Dim{1, ""}, Dim{C, ""}, Dim{H, ""}, Dim{W, ""}});
      const Tensor w = transposed ? random_tensor({C, M, 2, 2}, 41) : random_tensor({M, C, 3, 3}, 41), b = random_tensor({M}, 42);
      ir::Node* c = *g.add_node("conv", transposed ? "ConvTranspose" : "Conv", "", {x, g.add_constant("w", w), g.add_constant("b", b)}, {"c"});
      if (transposed) c->attrs["strides"] = std::vector<int64_t>{2, 2};
      else c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
      const int64_t OH = transposed ? 2 * H : H, OW = transposed ? 2 * W : W;
      const Tensor m = per_channel ? random_tensor({1, M, 1, 1}, 43, 0.5f, 2.f) : random_tensor({1, M, OH, OW}, 43, 0.5f, 2.f);
      const Tensor a = random_tensor({1, M, 1, 1}, 44);
      ir::Node* mul = *g.add_node("mul", "Mul", "", {c->outputs[0], g.add_constant("m", m)}, {"s"});
      ir::Node* add = *g.add_node("add", "Add", "", {mul->outputs[0], g.add_constant("a", a)}, {"y"});
      g.outputs.push_back(add->outputs[0]);
      ASSERT_TRUE(runtime::optimize(g).ok());
      EXPECT_EQ(g.nodes().size(), per_channel ? 1u : 3u);
      EXPECT_EQ(g.outputs[0]->name, "y");
      auto ex = runtime::Executor::create(g);
      ASSERT_TRUE(ex.ok()) << ex.error().to_string();
      const Tensor xin = random_tensor({1, C, H, W}, 45);
      auto out = (*ex)->run({{"x", xin}});
      ASSERT_TRUE(out.ok()) << out.error().to_string();
      std::vector<double> ref(static_cast<size_t>(M * OH * OW));
      if (transposed) {
        for (int64_t o = 0; o < M; ++o)
          for (int64_t i = 0; i < OH; ++i)
            for (int64_t j = 0; j < OW; ++j) {
              double acc = b.data<float>()[o];
              for (int64_t ci = 0; ci < C; ++ci)
                acc += static_cast<double>(xin.data<float>()[(ci * H + i / 2) * W + j / 2]) *
                       static_cast<double>(w.data<float>()[((ci * M + o) * 2 + i % 2) * 2 + j % 2]);
              ref[static_cast<size_t>((o * OH + i) * OW + j)] = acc;
            }
      } else {
        std::vector<double> bias(static_cast<size_t>(M));
        for (int64_t o = 0; o < M; ++o) bias[static_cast<size_t>(o)] = b.data<float>()[o];
        ref = conv_ref(xin, w, bias);
      }
      const Tensor& y = out->at("y");
      ASSERT_EQ(y.numel(), M * OH * OW);
      for (int64_t o = 0; o < M; ++o)
        for (int64_t i = 0; i < OH * OW; ++i) {
          const double e = ref[static_cast<size_t>(o * OH * OW + i)] * m.data<float>()[per_channel ? o : o * OH * OW + i] + a.data<float>()[o];
          // Magnitude: C * 9 products of values in [-1, 1] and the bias, times at most 2, and the addend.
          EXPECT_TRUE(test::float_agree(y.data<float>()[o * OH * OW + i], e, 2.0 * (C * 9 + 1) + 1, C * 9 + 3)) << o << "," << i;
        }
    }
  }
}

TEST(ConvTranspose, KernelEqualsStrideMatchesDoubleReference) {
  // The 2x2 / stride 2 upsampling of DEIM's adapter takes the GEMM + scatter path.
  for (int64_t k : {2, 3}) {
    const int64_t C = 5, M = 4, H = 3, W = 6;
    ir::Graph g;
    g.opset = 17;
    ir::Value* x = input(g, "x", {Dim{2, ""}, Dim{C, ""}, Dim{H, ""}, Dim{W, ""}});
    const Tensor w = random_tensor({C, M, k, k}, 31), b = random_tensor({M}, 32);
    ir::Node* n = *g.add_node("up", "ConvTranspose", "", {x, g.add_constant("w", w), g.add_constant("b", b)}, {"y"});
    n->attrs["strides"] = std::vector<int64_t>{k, k};
    g.outputs.push_back(n->outputs[0]);
    ASSERT_TRUE(runtime::optimize(g).ok());
    auto ex = runtime::Executor::create(g);
    ASSERT_TRUE(ex.ok()) << ex.error().to_string();
    const Tensor xin = random_tensor({2, C, H, W}, 33);
    auto out = (*ex)->run({{"x", xin}});
    ASSERT_TRUE(out.ok());
    const Tensor& y = out->at("y");
    ASSERT_EQ(y.shape(), (Shape{2, M, H * k, W * k}));
    for (int64_t nb = 0; nb < 2; ++nb)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t oy = 0; oy < H * k; ++oy)
          for (int64_t ox = 0; ox < W * k; ++ox) {
            double e = b.data<float>()[m];
            for (int64_t c = 0; c < C; ++c) {
              e += static_cast<double>(xin.data<float>()[((nb * C + c) * H + oy / k) * W + ox / k]) *
                   w.data<float>()[((c * M + m) * k + oy % k) * k + ox % k];
            }
            const double a = y.data<float>()[((nb * M + m) * H * k + oy) * W * k + ox];
            ASSERT_TRUE(test::float_agree(a, e, static_cast<double>(C) + 1, static_cast<int>(C) + 1)) << a << " vs " << e;
          }
  }
}

TEST(ConvActivationFusion, SiluPairBecomesOneConv) {
  const int64_t C = 4, M = 6, H = 8, W = 8;
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {Dim{1, ""}, Dim{C, ""}, Dim{H, ""}, Dim{W, ""}});
  const Tensor w = random_tensor({M, C, 3, 3}, 9), b = random_tensor({M}, 10);
  ir::Node* c = *g.add_node("conv", "Conv", "", {x, g.add_constant("w", w), g.add_constant("b", b)}, {"c"});
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  ir::Node* s = *g.add_node("sig", "Sigmoid", "", {c->outputs[0]}, {"s"});
  ir::Node* m = *g.add_node("mul", "Mul", "", {c->outputs[0], s->outputs[0]}, {"y"});
  g.outputs.push_back(m->outputs[0]);
  ASSERT_TRUE(runtime::optimize(g).ok());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(std::get<std::string>(g.nodes()[0]->attrs.at("rkd_activation")), "silu");
  auto ex = runtime::Executor::create(g);
  ASSERT_TRUE(ex.ok()) << ex.error().to_string();
  const Tensor xin = random_tensor({1, C, H, W}, 11);
  auto out = (*ex)->run({{"x", xin}});
  ASSERT_TRUE(out.ok());
  std::vector<double> bias(static_cast<size_t>(M));
  for (int64_t k = 0; k < M; ++k) bias[static_cast<size_t>(k)] = b.data<float>()[k];
  const auto ref = conv_ref(xin, w, bias);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = ref[i] / (1.0 + std::exp(-ref[i]));
    EXPECT_TRUE(test::float_agree(out->at("y").data<float>()[i], e, static_cast<double>(C * 9), C * 9 + 8)) << i;
  }
}

// x -> Q -> DQ -> Conv(DQ(w), DQ(b)) -> Q: the QDQ form of one quantized convolution.
struct QdqGraph {
  ir::Graph g;
  ir::Node* conv = nullptr;
};
void build_qdq(QdqGraph& q, float bias_scale_factor) {
  ir::Graph& g = q.g;
  g.opset = 13;
  ir::Value* x = input(g, "x", {Dim{1, ""}, Dim{2, ""}, Dim{5, ""}, Dim{6, ""}});
  auto scalar_f = [&](const char* n, float v) { return g.add_constant(n, Tensor::from_floats({}, std::vector<float>{v})); };
  auto scalar_u8 = [&](const char* n, uint8_t v) {
    Tensor t = Tensor::empty(DType::u8, {});
    t.data<uint8_t>()[0] = v;
    return g.add_constant(n, t);
  };
  Tensor w = Tensor::empty(DType::i8, {3, 2, 3, 3});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>((i * 37) % 255 - 127);
  Tensor ws = Tensor::from_floats({3}, std::vector<float>{0.01f, 0.002f, 0.03f});
  Tensor wz = Tensor::zeros(DType::i8, {3}).value();
  Tensor b = Tensor::empty(DType::i32, {3});
  for (int i = 0; i < 3; ++i) b.data<int32_t>()[i] = 100 * (i - 1);
  Tensor bs = Tensor::from_floats({3}, std::vector<float>{0.02f * 0.01f * bias_scale_factor, 0.02f * 0.002f, 0.02f * 0.03f});
  Tensor bz = Tensor::zeros(DType::i32, {3}).value();
  ir::Value* xs = scalar_f("xs", 0.02f);
  ir::Value* xz = scalar_u8("xz", 128);
  ir::Node* q0 = *g.add_node("q0", "QuantizeLinear", "", {x, xs, xz}, {"xq"});
  ir::Node* d0 = *g.add_node("d0", "DequantizeLinear", "", {q0->outputs[0], xs, xz}, {"xd"});
  ir::Node* dw = *g.add_node("dw", "DequantizeLinear", "", {g.add_constant("w", w), g.add_constant("ws", ws), g.add_constant("wz", wz)}, {"wd"});
  dw->attrs["axis"] = int64_t{0};
  ir::Node* db = *g.add_node("db", "DequantizeLinear", "", {g.add_constant("b", b), g.add_constant("bs", bs), g.add_constant("bz", bz)}, {"bd"});
  db->attrs["axis"] = int64_t{0};
  q.conv = *g.add_node("conv", "Conv", "", {d0->outputs[0], dw->outputs[0], db->outputs[0]}, {"c"});
  q.conv->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  ir::Node* q1 = *g.add_node("q1", "QuantizeLinear", "", {q.conv->outputs[0], scalar_f("ys", 0.05f), scalar_u8("yz", 120)}, {"y"});
  g.outputs.push_back(q1->outputs[0]);
}

TEST(QdqToQlinear, FusesAndComputesInIntegers) {
  QdqGraph q;
  build_qdq(q, 1.f);
  runtime::CompileOptions int8;
  int8.int8 = true;
  ASSERT_TRUE(runtime::optimize(q.g, int8).ok());
  int qlinear = 0, conv = 0;
  for (const auto& n : q.g.nodes()) {
    qlinear += n->op_type == "QLinearConv";
    conv += n->op_type == "Conv";
  }
  EXPECT_EQ(qlinear, 1);
  EXPECT_EQ(conv, 0);
  auto ex = runtime::Executor::create(q.g);
  ASSERT_TRUE(ex.ok()) << ex.error().to_string();
  Tensor x = random_tensor({1, 2, 5, 6}, 21);
  auto out = (*ex)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(out->at("y").dtype(), DType::u8);
  // The fake-quant float path of the same graph (not fused: the bias scale is 0.1% off, so the
  // int32 bias would not mean the same thing) agrees within one output step.
  QdqGraph f;
  build_qdq(f, 1.001f);
  ASSERT_TRUE(runtime::optimize(f.g, int8).ok());
  int fconv = 0;
  for (const auto& n : f.g.nodes()) fconv += n->op_type == "Conv";
  EXPECT_EQ(fconv, 1) << "a bias at the wrong scale must not be fused";
  auto fex = runtime::Executor::create(f.g);
  ASSERT_TRUE(fex.ok());
  auto fout = (*fex)->run({{"x", x}});
  ASSERT_TRUE(fout.ok());
  for (int64_t i = 0; i < out->at("y").numel(); ++i) {
    EXPECT_LE(std::abs(int{out->at("y").data<uint8_t>()[i]} - int{fout->at("y").data<uint8_t>()[i]}), 1) << i;
  }
}

// Concat of parts dequantized alike and Split of a dequantized map move to the integers (the
// quantizer gives a Concat's parts one scale); a Concat of parts at different scales stays
// float. Each runs to the float graph's result exactly.
TEST(QdqToQlinear, ConcatAndSplitOfAlikeQuantizedMapsRunOnTheIntegers) {
  for (bool alike : {true, false}) {
    auto build = [alike](ir::Graph& g) {
      g.opset = 13;
      auto scalar_f = [&](const std::string& n, float v) { return g.add_constant(n, Tensor::from_floats({}, std::vector<float>{v})); };
      auto scalar_i8 = [&](const std::string& n, int8_t v) {
        Tensor t = Tensor::empty(DType::i8, {});
        t.data<int8_t>()[0] = v;
        return g.add_constant(n, t);
      };
      std::vector<ir::Value*> parts;
      const float sb = alike ? 0.05f : 0.07f;
      for (int i = 0; i < 2; ++i) {
        const std::string k = std::to_string(i);
        ir::Value* x = input(g, "x" + k, {Dim{1, ""}, Dim{i ? 8 : 16, ""}, Dim{3, ""}, Dim{4, ""}});
        ir::Node* q = *g.add_node("q" + k, "QuantizeLinear", "", {x, scalar_f("s" + k, i ? sb : 0.05f), scalar_i8("z" + k, 3)}, {"xq" + k});
        ir::Node* d =
            *g.add_node("d" + k, "DequantizeLinear", "", {q->outputs[0], scalar_f("ds" + k, i ? sb : 0.05f), scalar_i8("dz" + k, 3)}, {"xd" + k});
        parts.push_back(d->outputs[0]);
      }
      ir::Node* c = *g.add_node("cat", "Concat", "", parts, {"c"});
      c->attrs["axis"] = int64_t{1};
      ir::Node* qc = *g.add_node("qc", "QuantizeLinear", "", {c->outputs[0], scalar_f("cs", 0.05f), scalar_i8("cz", 3)}, {"cq"});
      ir::Node* dc = *g.add_node("dc", "DequantizeLinear", "", {qc->outputs[0], scalar_f("cds", 0.05f), scalar_i8("cdz", 3)}, {"cd"});
      Tensor sizes = Tensor::empty(DType::i64, {2});
      sizes.data<int64_t>()[0] = 16;
      sizes.data<int64_t>()[1] = 8;
      ir::Node* sp = *g.add_node("split", "Split", "", {dc->outputs[0], g.add_constant("sizes", sizes)}, {"p0", "p1"});
      sp->attrs["axis"] = int64_t{1};
      for (int i = 0; i < 2; ++i) {
        const std::string k = std::to_string(i);
        ir::Node* qo = *g.add_node("qo" + k, "QuantizeLinear", "", {sp->outputs[i], scalar_f("os" + k, 0.05f), scalar_i8("oz" + k, 3)}, {"y" + k});
        g.outputs.push_back(qo->outputs[0]);
      }
    };
    ir::Graph g, f;
    build(g);
    build(f);
    runtime::CompileOptions int8;
    int8.int8 = true;
    ASSERT_TRUE(runtime::optimize(g, int8).ok());
    ASSERT_TRUE(runtime::optimize(f).ok());  // the float graph: Q and DQ as float ops
    int int_concat = 0, int_split = 0, float_concat = 0;
    for (const auto& n : g.nodes()) {
      const bool integer = n->outputs[0]->dtype == DType::i8;
      int_concat += n->op_type == "Concat" && integer;
      float_concat += n->op_type == "Concat" && !integer;
      int_split += n->op_type == "Split" && integer;
    }
    EXPECT_EQ(int_concat, alike ? 1 : 0);
    EXPECT_EQ(float_concat, alike ? 0 : 1);
    EXPECT_EQ(int_split, 1);
    if (alike) {
      // With the NPU placement: the NPU could copy the parts, but nothing next to the Concat
      // runs there (its parts come from the CPU's quantizes, its reader is a Split on the
      // CPU), so it stays on the CPU, with that reason.
      ir::Graph h;
      build(h);
      runtime::CompileOptions sim = int8;
      sim.npu_strategy = npu::lower::Strategy::sorted_bs_multiplier;
      ir::FusionReport rep;
      ASSERT_TRUE(runtime::optimize(h, sim, &rep).ok());
      EXPECT_EQ(rep.npu["Concat"].placed, 0);
      ASSERT_EQ(rep.npu["Concat"].on_cpu.size(), 1u);
      EXPECT_NE(rep.npu["Concat"].on_cpu[0].find("cat/int: every part's producer and every reader run on the CPU"), std::string::npos)
          << rep.npu["Concat"].on_cpu[0];
      // So does the Split (the CPU's Concat before it, quantizes after it).
      EXPECT_EQ(rep.npu["Split"].placed, 0);
      ASSERT_EQ(rep.npu["Split"].on_cpu.size(), 1u);
      EXPECT_NE(rep.npu["Split"].on_cpu[0].find("split/int: its producer and every reader run on the CPU"), std::string::npos)
          << rep.npu["Split"].on_cpu[0];
    }
    auto ex = runtime::Executor::create(g);
    auto fex = runtime::Executor::create(f);
    ASSERT_TRUE(ex.ok() && fex.ok());
    std::map<std::string, Tensor> in{{"x0", random_tensor({1, 16, 3, 4}, 3)}, {"x1", random_tensor({1, 8, 3, 4}, 4)}};
    auto out = (*ex)->run(in);
    auto want = (*fex)->run(in);
    ASSERT_TRUE(out.ok() && want.ok());
    for (const char* y : {"y0", "y1"}) {
      ASSERT_EQ(out->at(y).nbytes(), want->at(y).nbytes());
      EXPECT_EQ(std::memcmp(out->at(y).raw(), want->at(y).raw(), want->at(y).nbytes()), 0) << y << (alike ? " alike" : " different scales");
    }
  }
}

TEST(Optimize, ReportsEveryNodeWithoutAKernelAtOnce) {
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {Dim{4, ""}});
  ir::Node* a = *g.add_node("a", "NonZero", "", {x}, {"y"});
  ir::Node* b = *g.add_node("b", "Unique", "", {a->outputs[0]}, {"z"});
  g.outputs.push_back(b->outputs[0]);
  auto s = runtime::optimize(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::unsupported);
  EXPECT_NE(s.error().message.find("'a' (NonZero)"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("'b' (Unique)"), std::string::npos) << s.error().message;
}

// The observer sees every value a node computes, in node order, equal bit for bit to what
// the same graph returns with those values as outputs - though the values share arena bytes.
TEST(Executor, ObserverSeesEveryComputedValueWhileTheArenaIsShared) {
  auto build = [](ir::Graph& g) {
    g.opset = 17;
    ir::Value* x = input(g, "x", {Dim{1, ""}, Dim{4, ""}, Dim{8, ""}, Dim{8, ""}});
    ir::Node* a = *g.add_node("a", "Sigmoid", "", {x}, {"a"});
    ir::Node* b = *g.add_node("b", "Tanh", "", {a->outputs[0]}, {"b"});
    ir::Node* c = *g.add_node("c", "Reshape", "", {b->outputs[0], g.add_constant("shape", ints({1, 256}))}, {"c"});
    ir::Node* d = *g.add_node("d", "Exp", "", {c->outputs[0]}, {"d"});
    ir::Node* e = *g.add_node("e", "Neg", "", {d->outputs[0]}, {"e"});
    g.outputs.push_back(e->outputs[0]);
  };
  ir::Graph g, all;
  build(g);
  build(all);
  ASSERT_TRUE(runtime::optimize(g).ok());
  ASSERT_TRUE(runtime::optimize(all).ok());
  for (const auto& n : all.nodes()) {
    if (n->outputs[0] != all.outputs[0]) all.outputs.push_back(n->outputs[0]);
  }
  std::vector<std::string> order;
  std::map<std::string, Tensor> seen;
  runtime::ExecutorOptions eo;
  eo.observe = [&](const ir::Value& v, const Tensor& t) {
    order.push_back(v.name);
    seen[v.name] = t.clone();
  };
  auto ex = runtime::Executor::create(g, eo);
  ASSERT_TRUE(ex.ok()) << ex.error().to_string();
  EXPECT_LT((*ex)->memory_plan().arena_bytes, (*ex)->memory_plan().intermediate_bytes);
  auto ref = runtime::Executor::create(all);
  ASSERT_TRUE(ref.ok()) << ref.error().to_string();
  const Tensor xin = random_tensor({1, 4, 8, 8}, 9);
  auto out = (*ex)->run({{"x", xin}});
  auto want = (*ref)->run({{"x", xin}});
  ASSERT_TRUE(out.ok() && want.ok());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  for (const auto& [name, t] : *want) {
    ASSERT_TRUE(seen.count(name)) << name;
    ASSERT_EQ(seen[name].shape(), t.shape()) << name;
    const Tensor c = t.contiguous();
    EXPECT_EQ(std::memcmp(seen[name].contiguous().data<float>(), c.data<float>(), static_cast<size_t>(c.nbytes())), 0) << name;
  }
}

TEST(Executor, ReportsEveryUnsupportedAttributeAtOnce) {
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {Dim{1, ""}, Dim{2, ""}, Dim{8, ""}, Dim{8, ""}});
  ir::Node* mp = *g.add_node("pool", "MaxPool", "", {x}, {"p"});
  mp->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  mp->attrs["storage_order"] = int64_t{1};
  Tensor scales = Tensor::from_floats({4}, std::vector<float>{1, 1, 2, 2});
  ir::Node* rs = *g.add_node("resize", "Resize", "", {mp->outputs[0], nullptr, g.add_constant("scales", scales)}, {"y"});
  rs->attrs["antialias"] = int64_t{1};
  g.outputs.push_back(rs->outputs[0]);
  ASSERT_TRUE(runtime::optimize(g).ok());
  auto ex = runtime::Executor::create(g);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.error().kind, ErrorKind::unsupported);
  EXPECT_NE(ex.error().message.find("storage_order"), std::string::npos) << ex.error().message;
  EXPECT_NE(ex.error().message.find("antialias"), std::string::npos) << ex.error().message;
}

TEST(Optimize, DumpAfterNamesKnownPasses) {
  ir::Graph g;
  g.opset = 17;
  ir::Value* x = input(g, "x", {Dim{4, ""}});
  ir::Node* r = *g.add_node("r", "Relu", "", {x}, {"y"});
  g.outputs.push_back(r->outputs[0]);
  runtime::CompileOptions o;
  std::string dumped;
  o.dump_after = {"constant-folding"};
  o.dump = [&](const std::string& pass, const std::string& ir) { dumped = pass + "\n" + ir; };
  ASSERT_TRUE(runtime::optimize(g, o).ok());
  EXPECT_NE(dumped.find("Relu"), std::string::npos);
  o.dump_after = {"no-such-pass"};
  auto s = runtime::optimize(g, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no-such-pass"), std::string::npos);
}

TEST(Registry, EveryKernelHasAShapeFunctionAndIsDocumented) {
  auto doc = read_file_bytes(std::string(RKD_SOURCE_DIR) + "/docs/executor.md");
  ASSERT_TRUE(doc.ok());
  std::set<std::string> words;
  std::string w;
  for (char c : *doc) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      w += c;
    } else if (!w.empty()) {
      words.insert(w);
      w.clear();
    }
  }
  for (const auto& [domain, op] : runtime::kernel_ops()) {
    if (!domain.empty()) continue;
    EXPECT_TRUE(ir::has_shape_function(op)) << op;
    EXPECT_TRUE(words.count(op)) << op << " is missing from the operator list in docs/executor.md";
  }
}

// ir/op_info.h's table and the executor's registry describe the same operators: every op in
// the table has a kernel unless marked kNoKernel (and then has none), every kernel has a table
// record with a shape function (or a creator that sets its shapes).
TEST(OpTable, CoversTheKernelsAndTheKernelsCoverIt) {
  for (const auto& [domain, op] : runtime::kernel_ops()) {
    const ir::OpInfo* info = ir::find_op(domain, op);
    ASSERT_NE(info, nullptr) << domain << "." << op << " has a kernel but no record in ir/op_info.cc";
    EXPECT_TRUE(info->shape) << domain << "." << op << " has a kernel but no shape function";
  }
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const ir::OpInfo& info : ir::op_table()) {
    EXPECT_TRUE(seen.insert({info.domain, info.op_type}).second) << info.op_type << " is in the table twice";
    const bool kernel = runtime::has_kernel(std::string(info.domain), std::string(info.op_type));
    if (info.has(ir::kNoKernel)) {
      EXPECT_FALSE(kernel) << info.op_type << " is marked kNoKernel but has a kernel";
    } else {
      EXPECT_TRUE(kernel) << info.domain << "." << info.op_type << " is in the table with no kernel (nor kNoKernel)";
    }
    EXPECT_TRUE(info.shape || info.has(ir::kNoKernel)) << info.op_type << " has a kernel but no shape function";
    EXPECT_TRUE(!info.has(ir::kView) || info.has(ir::kLayoutOnly)) << info.op_type << ": a view is layout-only";
  }
  EXPECT_EQ(ir::find_op("ai.onnx", "Relu"), ir::find_op("", "Relu"));
  EXPECT_EQ(ir::find_op("", "NoSuchOp"), nullptr);
  EXPECT_EQ(ir::find_op("rkdeploy", "Relu"), nullptr);
}

}  // namespace
}  // namespace rkd
