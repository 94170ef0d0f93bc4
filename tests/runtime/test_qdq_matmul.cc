// quantize's matrix products (quant/qdq.h) through qdq-to-qlinear: a MatMul's bias Add and a
// Gemm become one QLinearMatMul with an int32 bias, and a target's CPU node between two
// quantized products reads and writes what they exchange quantized.
#include <gtest/gtest.h>

#include <random>

#include "quant/qdq.h"
#include "runtime/executor.h"

namespace rkd {
namespace {

ir::Value* mm_input(ir::Graph& g, const char* name, Shape s) {
  g.opset = 13;
  ir::Value* x = *g.add_value(name);
  x->dtype = DType::f32;
  x->shape = ir::Dims{};
  for (int64_t d : s) x->shape->push_back(ir::Dim{d, ""});
  g.inputs.push_back(x);
  return x;
}

Tensor mm_random(Shape s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::empty(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Every float value's range [-4, 4]: what calibration would give.
std::map<std::string, quant::Range> mm_ranges(const ir::Graph& g) {
  std::map<std::string, quant::Range> r;
  for (const auto& v : g.values())
    if (!v->constant && v->dtype == DType::f32) r[v->name] = quant::Range{-4.f, 4.f};
  return r;
}

runtime::CompileOptions mm_portable() {
  runtime::CompileOptions o;
  o.portable = true;
  return o;
}

std::map<std::string, int> mm_int8_ops(ir::Graph& g) {
  runtime::CompileOptions o;
  o.int8 = true;
  Status st = runtime::optimize(g, o);
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  std::map<std::string, int> ops;
  for (const auto& n : g.nodes()) ++ops[n->op_type];
  return ops;
}

// PyTorch's Linear on [1, T, K]: MatMul, then Add(bias, product).
TEST(QdqMatMul, BiasAddBecomesTheProductsInt32Bias) {
  ir::Graph g;
  ir::Value* x = mm_input(g, "x", {1, 6, 7});
  auto mm = g.add_node("mm", "MatMul", "", {x, g.add_constant("w", mm_random({7, 9}, 1))}, {"p"});
  auto add = g.add_node("add", "Add", "", {g.add_constant("b", mm_random({9}, 2)), (*mm)->outputs[0]}, {"y"});
  g.outputs = {(*add)->outputs[0]};
  ASSERT_TRUE(runtime::optimize(g, mm_portable()).ok());
  EXPECT_EQ(quant::matmul_bias_add(g, **mm), *add);
  auto rep = quant::insert_qdq(g, mm_ranges(g), quant::QdqOptions{});
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  EXPECT_EQ(rep->biases, 1);
  EXPECT_EQ(g.find("p/q"), nullptr) << "the product is quantized before its bias";
  const auto ops = mm_int8_ops(g);
  EXPECT_EQ(ops.count("QLinearMatMul") ? ops.at("QLinearMatMul") : 0, 1);
  EXPECT_EQ(ops.count("Add"), 0u);
  for (const auto& n : g.nodes()) {
    if (n->op_type == "QLinearMatMul") {
      EXPECT_EQ(n->inputs.size(), 9u) << "no bias input";
    }
  }
}

// A Gemm of transposed B and a bias: one QLinearMatMul of B^T with the bias.
TEST(QdqMatMul, GemmBecomesOneQLinearMatMul) {
  ir::Graph g;
  ir::Value* x = mm_input(g, "x", {5, 7});
  auto gemm = g.add_node("gemm", "Gemm", "", {x, g.add_constant("w", mm_random({9, 7}, 3)), g.add_constant("b", mm_random({9}, 4))}, {"y"});
  (*gemm)->attrs["transB"] = int64_t{1};
  g.outputs = {(*gemm)->outputs[0]};
  ASSERT_TRUE(runtime::optimize(g, mm_portable()).ok());
  auto rep = quant::insert_qdq(g, mm_ranges(g), quant::QdqOptions{});
  ASSERT_TRUE(rep.ok()) << rep.error().to_string();
  const auto ops = mm_int8_ops(g);
  EXPECT_EQ(ops.count("QLinearMatMul") ? ops.at("QLinearMatMul") : 0, 1);
  EXPECT_EQ(ops.count("Gemm"), 0u);
  for (const auto& n : g.nodes()) {
    if (n->op_type != "QLinearMatMul") continue;
    ASSERT_TRUE(n->inputs[3]->constant);
    EXPECT_EQ(n->inputs[3]->constant->shape(), (Shape{7, 9})) << "B as [K, N]";
  }
}

// A target's CPU node (cpu_nodes) between two products the target quantizes: it reads the first
// product's dequantized output and its output is quantized for the second, so both are
// QLinearMatMuls; kept in float by keep_float instead, its neighbours stay float.
TEST(QdqMatMul, ATargetsCpuNodeBetweenQuantizedProductsIsABoundary) {
  for (bool target : {true, false}) {
    SCOPED_TRACE(target ? "cpu_nodes" : "keep_float");
    ir::Graph g;
    ir::Value* x = mm_input(g, "x", {1, 6, 8});
    auto m1 = g.add_node("m1", "MatMul", "", {x, g.add_constant("w1", mm_random({8, 8}, 5))}, {"p1"});
    auto sm = g.add_node("sm", "Softmax", "", {(*m1)->outputs[0]}, {"s"});
    auto m2 = g.add_node("m2", "MatMul", "", {(*sm)->outputs[0], g.add_constant("w2", mm_random({8, 4}, 6))}, {"y"});
    g.outputs = {(*m2)->outputs[0]};
    ASSERT_TRUE(runtime::optimize(g, mm_portable()).ok());
    quant::QdqOptions o;
    (target ? o.cpu_nodes : o.keep_float).insert("sm");
    auto rep = quant::insert_qdq(g, mm_ranges(g), o);
    ASSERT_TRUE(rep.ok()) << rep.error().to_string();
    const auto ops = mm_int8_ops(g);
    EXPECT_EQ(ops.count("QLinearMatMul") ? ops.at("QLinearMatMul") : 0, target ? 2 : 0);
    EXPECT_EQ(ops.count("Softmax") ? ops.at("Softmax") : 0, 1) << "the CPU node computes in float";
  }
}

// --keep-float's entries: a name, an op type, a glob over names, a scope prefix; an entry that
// matches nothing is refused, and one naming a node the passes folded says what became of it.
TEST(KeepFloat, NamesTypesGlobsAndPrefixes) {
  auto node = [](const std::string& name, const std::string& op) {
    ir::Node n;
    n.name = name;
    n.op_type = op;
    return n;
  };
  const ir::Node conv = node("/model.22/cv2/conv/Conv", "Conv"), sig = node("/model.22/act/Sigmoid", "Sigmoid"), mul = node("/head/Mul", "Mul");
  EXPECT_TRUE(quant::keep_float_matches("/head/Mul", mul));
  EXPECT_TRUE(quant::keep_float_matches("Sigmoid", sig));
  EXPECT_TRUE(quant::keep_float_matches("/model.22/", conv));
  EXPECT_TRUE(quant::keep_float_matches("/model.22/", sig));
  EXPECT_FALSE(quant::keep_float_matches("/model.22/", mul));
  EXPECT_FALSE(quant::keep_float_matches("/model.2/", conv));  // a prefix ends at a '/': not /model.22
  EXPECT_TRUE(quant::keep_float_matches("*/cv2/*", conv));
  EXPECT_FALSE(quant::keep_float_matches("*/cv2/*", sig));
  EXPECT_TRUE(quant::keep_float_matches("/model.2[0-9]/*", sig));
  EXPECT_FALSE(quant::keep_float_matches("/model.22", conv));  // neither a name, a glob nor a prefix
  EXPECT_FALSE(quant::keep_float_matches("", conv));

  // Before folding: bn reads the conv and writes y; after: the conv writes y itself.
  ir::Graph before, after;
  for (ir::Graph* g : {&before, &after}) {
    ir::Value* x = *g->add_value("x");
    x->dtype = DType::f32;
    g->inputs.push_back(x);
  }
  ir::Node* c0 = *before.add_node("conv", "Conv", "", {before.find("x")}, {"c"});
  ir::Node* bn = *before.add_node("bn", "BatchNormalization", "", {c0->outputs[0]}, {"y"});
  (void)*before.add_node("const_shape", "Shape", "", {before.find("x")}, {"s"});
  before.outputs = {bn->outputs[0]};
  ir::Node* c1 = *after.add_node("conv", "Conv", "", {after.find("x")}, {"y"});
  after.outputs = {c1->outputs[0]};
  EXPECT_TRUE(quant::check_keep_float(after, {"conv", "Conv", "co*"}).ok());
  auto none = quant::check_keep_float(after, {"/nowhere/"});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("--keep-float '/nowhere/': the model has no node"), std::string::npos) << none.error().message;
  auto folded = quant::check_keep_float(after, {"bn"}, &before);
  ASSERT_FALSE(folded.ok());
  EXPECT_NE(folded.error().message.find("node 'bn' (BatchNormalization) was folded by rkdeploy's passes: its output 'y' is computed by node 'conv' "
                                        "(Conv) now; --keep-float 'conv'"),
            std::string::npos)
      << folded.error().message;
  auto gone = quant::check_keep_float(after, {"const_shape"}, &before);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message.find("node 'const_shape' (Shape) was folded away"), std::string::npos) << gone.error().message;
}

}  // namespace
}  // namespace rkd
