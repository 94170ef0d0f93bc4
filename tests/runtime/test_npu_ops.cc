// The NPU operation table (runtime/npu_ops.h) against every consumer that derives from it:
// the op table's kOnNpu records, the op registry's kernels, the placement's report and
// FusionReport keys, the sentence naming what the NPU lowers, the knobs a placed node carries.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include <cmath>
#include <cstring>

#include "ir/op_info.h"
#include "npu/sim/sim.h"
#include "plan/plan.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_ops.h"
#include "runtime/executor.h"
#include "runtime/op_registry.h"
#include "runtime/qdq_builder.h"

namespace rkd {
namespace {

using runtime::npu_op_families;
using runtime::NpuOpFamily;

TEST(NpuOpTable, EveryRecordIsComplete) {
  std::set<std::string> names, ops;
  for (const NpuOpFamily& f : npu_op_families()) {
    SCOPED_TRACE(f.name);
    EXPECT_TRUE(names.insert(f.name).second) << "a family name twice";
    EXPECT_FALSE(f.npu_ops.empty());
    for (const char* op : f.npu_ops) EXPECT_TRUE(ops.insert(op).second) << op << " in two families";
    EXPECT_TRUE(f.candidate && f.lowerable && f.npu_op && f.lower && f.manifest && f.report);
    EXPECT_TRUE(std::string(f.section) == "convolutions" || std::string(f.section) == "elementwise") << f.section;
    EXPECT_NE(std::string(f.entry_prefix), "");
    EXPECT_NE(std::string(f.lowered), "");
  }
}

// The op table marks exactly the table's node types kOnNpu, and each has a kernel (the NPU
// kernel alone, which the executor replaces with the shared session's).
TEST(NpuOpTable, OpTableAndKernelsCoverEveryNpuNode) {
  std::set<std::string> table;
  for (const NpuOpFamily& f : npu_op_families()) {
    for (const char* op : f.npu_ops) {
      table.insert(op);
      const ir::OpInfo* info = ir::find_op("rkdeploy", op);
      ASSERT_NE(info, nullptr) << op << " has no record in ir/op_info.cc";
      EXPECT_TRUE(info->has(ir::kOnNpu)) << op;
      EXPECT_TRUE(runtime::has_kernel("rkdeploy", op)) << op;
      ir::Graph g;
      auto n = g.add_node("n", op, "rkdeploy", {}, {});
      ASSERT_TRUE(n.ok());
      EXPECT_EQ(runtime::npu_family_of(**n), &f) << op;
    }
  }
  for (const ir::OpInfo& info : ir::op_table()) {
    if (info.has(ir::kOnNpu)) {
      EXPECT_TRUE(table.count(std::string(info.op_type))) << info.op_type << " is kOnNpu but in no NPU family";
    }
  }
}

// The placement reports every family (placed or not) and `run`'s line and compile's sentence
// name each one.
TEST(NpuOpTable, ReportAndSentenceNameEveryFamily) {
  ir::Graph g;
  ir::FusionReport r;
  runtime::NpuPlacementOptions o;
  ASSERT_TRUE(runtime::npu_placement_pass(o, &r).run(g).ok());
  const std::string line = runtime::npu_placement_text(r, "WHERE", "STRATEGY");
  const std::string sentence = runtime::npu_lowered_ops_text();
  EXPECT_EQ(line.rfind("npu: ", 0), 0u) << line;
  EXPECT_NE(line.find("WHERE"), std::string::npos);
  EXPECT_NE(line.find("STRATEGY"), std::string::npos);
  for (const NpuOpFamily& f : npu_op_families()) {
    SCOPED_TRACE(f.name);
    ASSERT_TRUE(r.npu.count(f.name));
    EXPECT_EQ(r.npu.at(f.name).placed, 0);
    ir::NpuFamilyPlacement p;
    p.placed = 7;
    p.on_cpu = {"a: x", "b: y"};
    const std::string part = f.report(p, "WHERE", "STRATEGY");
    EXPECT_EQ(part.rfind("7 ", 0), 0u) << part;
    EXPECT_NE(line.find(f.report(r.npu.at(f.name), "WHERE", "STRATEGY")), std::string::npos) << line;
    EXPECT_NE(sentence.find(f.lowered), std::string::npos) << sentence;
  }
  EXPECT_EQ(r.npu.size(), npu_op_families().size());
}

// One NPU node of a family, by setters, in a QDQ graph: x quantized twice (scales 0.05 and
// 0.03), the two added (an NPU Add: every other family's candidate then has an NPU neighbour),
// the family's op on the sum, quantized. Test() compiles the graph for the int8 reference and
// for the simulator, both in the NPU's convention (rknpu_out_cvt), checks that the family placed
// its node and that every output is the reference's bit for bit, naming every parameter and the
// seed on failure.
// g compiled for the int8 reference in the NPU's convention (no strategy) or with its NPU part on
// the simulator (a strategy), run on `inputs`; the placement's report and the session's chaining
// when asked.
std::map<std::string, Tensor> run_int8(ir::Graph& g, std::optional<npu::lower::Strategy> strategy, const std::map<std::string, Tensor>& inputs,
                                       ir::FusionReport* rep, runtime::NpuChaining* chaining = nullptr) {
  runtime::CompileOptions o;
  o.int8 = true;
  o.requant = quant::Requant::rknpu_out_cvt;
  o.npu_strategy = strategy;
  Status st = runtime::optimize(g, o, rep);
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  auto ex = runtime::Executor::create(g);
  EXPECT_TRUE(ex.ok()) << ex.error().to_string();
  if (!ex.ok()) return {};
  auto out = (*ex)->run(inputs);
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  if (chaining && (*ex)->npu_session()) *chaining = runtime::npu_chaining(*(*ex)->npu_session());
  return out.ok() ? *out : std::map<std::string, Tensor>{};
}

// Bytes of `got` that differ from `want` (of the same size), and the first one (-1: none).
std::pair<int64_t, int64_t> bytes_differing(const Tensor& want, const Tensor& got) {
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < want.nbytes() && i < got.nbytes(); ++i) {
    const bool d = static_cast<const uint8_t*>(want.raw())[i] != static_cast<const uint8_t*>(got.raw())[i];
    differ += d;
    if (d && first < 0) first = static_cast<int64_t>(i);
  }
  return {differ, first};
}

class NpuNodeTester {
 public:
  NpuNodeTester& family(std::string v) {
    family_ = std::move(v);
    return *this;
  }
  NpuNodeTester& dtype(DType v) {
    dtype_ = v;
    return *this;
  }
  NpuNodeTester& channels(int64_t v) {
    C_ = v;
    return *this;
  }
  NpuNodeTester& height(int64_t v) {
    H_ = v;
    return *this;
  }
  NpuNodeTester& width(int64_t v) {
    W_ = v;
    return *this;
  }
  NpuNodeTester& seed(unsigned v) {
    seed_ = v;
    return *this;
  }

  std::string describe() const {
    std::ostringstream o;
    o << "NpuNodeTester family " << family_ << ", " << dtype_name(dtype_) << ", [1, " << C_ << ", " << H_ << ", " << W_ << "], seed " << seed_;
    return o.str();
  }

  // The family's op on the Add's output `v` (scale 0.04, zero point 3), its outputs quantized.
  using Maker = std::function<std::vector<ir::Value*>(Builder& b, ir::Value* v, std::mt19937& rng, int64_t C)>;
  static const std::map<std::string, Maker>& makers();

  void Test() const {
    SCOPED_TRACE(describe());
    auto it = makers().find(family_);
    ASSERT_NE(it, makers().end()) << "no graph for family " << family_;
    std::mt19937 rng(seed_);
    Tensor x = Tensor::empty(DType::f32, {1, C_, H_, W_});
    std::uniform_real_distribution<float> u(-4.f, 4.f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
    auto build = [&](Builder& b) {
      std::mt19937 graph_rng(seed_ + 1);
      ir::Value* in = b.input(C_, H_, W_);
      ir::Value* a = b.dq(b.q(in, 0.05f, -3), 0.05f, -3);
      ir::Value* c = b.dq(b.q(in, 0.03f, 7), 0.03f, 7);
      ir::Value* v = b.dq(b.q(b.op("Add", {a, c})->outputs[0], 0.04f, 3), 0.04f, 3);
      b.g.outputs = it->second(b, v, graph_rng, C_);
    };
    auto run = [&](bool sim, ir::FusionReport* rep) -> std::map<std::string, Tensor> {
      Builder b{{}, dtype_};
      build(b);
      return run_int8(b.g, sim ? std::optional(npu::lower::Strategy::per_tensor) : std::nullopt, {{"x", x}}, rep);
    };
    ir::FusionReport rep;
    const auto want = run(false, nullptr), got = run(true, &rep);
    EXPECT_GE(rep.npu[family_].placed, 1) << ::testing::PrintToString(rep.npu[family_].on_cpu);
    ASSERT_EQ(want.size(), got.size());
    for (const auto& [name, w] : want) {
      const Tensor& g = got.at(name);
      ASSERT_EQ(w.nbytes(), g.nbytes()) << name;
      const auto [differ, first] = bytes_differing(w, g);
      EXPECT_EQ(differ, 0) << name << ": the simulator differs from the int8 reference in " << differ << " of " << w.nbytes() << " bytes, first at "
                           << first;
    }
  }

 private:
  std::string family_;
  DType dtype_ = DType::i8;
  int64_t C_ = 16, H_ = 6, W_ = 8;
  unsigned seed_ = 1;
};

const std::map<std::string, NpuNodeTester::Maker>& NpuNodeTester::makers() {
  // Quantized output of `y` at the Add's scale (the copies and pooling keep it).
  static const auto same = [](Builder& b, ir::Value* y) { return b.q(y, 0.04f, 3); };
  static const std::map<std::string, Maker> m = {
      {"Conv",
       [](Builder& b, ir::Value* v, std::mt19937& rng, int64_t C) {
         Tensor w = Tensor::empty(b.t, {C + 3, C, 3, 3});
         for (size_t i = 0; i < w.nbytes(); ++i) static_cast<uint8_t*>(w.raw())[i] = static_cast<uint8_t>(rng());
         ir::Node* n = b.op("Conv", {v, b.dq(b.g.add_constant("w", w), 0.002f, 0)});
         n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
         return std::vector<ir::Value*>{b.q(n->outputs[0], 0.06f, -2)};
       }},
      // A's rows are v's [1, C, H] (K = W): a rank-4 operand, read by the host (a map is not rows).
      {"MatMul",
       [](Builder& b, ir::Value* v, std::mt19937& rng, int64_t C) {
         const int64_t K = ir::static_shape(b.g.inputs[0])->back(), N = C + 5;
         Tensor w = Tensor::empty(b.t, {K, N});
         for (size_t i = 0; i < w.nbytes(); ++i) static_cast<uint8_t*>(w.raw())[i] = static_cast<uint8_t>(rng());
         ir::Node* n = b.op("MatMul", {v, b.dq(b.g.add_constant("w", w), 0.003f, 0)});
         return std::vector<ir::Value*>{b.q(n->outputs[0], 0.09f, 4)};
       }},
      {"Add", [](Builder& b, ir::Value* v, std::mt19937&, int64_t) { return std::vector<ir::Value*>{b.q(v, 0.04f, 3)}; }},
      {"Sub/Max/Min",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         return std::vector<ir::Value*>{b.q(b.op("Sub", {v, b.dq(b.q(b.g.inputs[0], 0.02f, 1), 0.02f, 1)})->outputs[0], 0.05f, 0),
                                        b.q(b.op("Max", {v, b.dq(b.q(b.g.inputs[0], 0.02f, 1), 0.02f, 1)})->outputs[0], 0.05f, 0)};
       }},
      {"Mul",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         return std::vector<ir::Value*>{b.q(b.op("Mul", {v, b.dq(b.q(b.g.inputs[0], 0.02f, 1), 0.02f, 1)})->outputs[0], 0.1f, 0)};
       }},
      {"LeakyRelu",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         ir::Node* n = b.op("LeakyRelu", {v});
         n->attrs["alpha"] = 0.1f;
         return std::vector<ir::Value*>{b.q(n->outputs[0], 0.03f, -50)};
       }},
      {"Lut", [](Builder& b, ir::Value* v, std::mt19937&,
                 int64_t) { return std::vector<ir::Value*>{b.q(b.op("Sigmoid", {v})->outputs[0], 1.f / 256, -128)}; }},
      {"MaxPool",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         ir::Node* n = b.op("MaxPool", {v});
         n->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
         n->attrs["strides"] = std::vector<int64_t>{2, 2};
         return std::vector<ir::Value*>{same(b, n->outputs[0])};
       }},
      {"Pad",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         Tensor pads = Tensor::empty(DType::i64, {8});
         const int64_t pv[8] = {0, 0, 0, 0, 0, 5, 0, 0};
         std::memcpy(pads.raw(), pv, sizeof pv);
         return std::vector<ir::Value*>{same(b, b.op("Pad", {v, b.g.add_constant("pads", pads)})->outputs[0])};
       }},
      {"Resize",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         ir::Node* n = b.op("Resize", {v, nullptr, b.g.add_constant("scales", Tensor::from_floats({4}, std::vector<float>{1, 1, 2, 2}))});
         n->attrs["mode"] = std::string("nearest");
         n->attrs["coordinate_transformation_mode"] = std::string("asymmetric");
         n->attrs["nearest_mode"] = std::string("floor");
         return std::vector<ir::Value*>{same(b, n->outputs[0])};
       }},
      {"DepthToSpace",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         ir::Node* n = b.op("DepthToSpace", {v});
         n->attrs["blocksize"] = int64_t{2};
         n->attrs["mode"] = std::string("DCR");
         return std::vector<ir::Value*>{same(b, n->outputs[0])};
       }},
      {"Split",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t C) {
         Tensor parts = Tensor::empty(DType::i64, {2});
         const int64_t pv[2] = {16, C - 16};  // parts start at multiples of 16 channels
         std::memcpy(parts.raw(), pv, sizeof pv);
         auto n = b.g.add_node(b.id("Split"), "Split", "", {v, b.g.add_constant("split", parts)}, {b.id("v"), b.id("v")});
         (*n)->attrs["axis"] = int64_t{1};
         return std::vector<ir::Value*>{same(b, (*n)->outputs[0]), same(b, (*n)->outputs[1])};
       }},
      {"Concat",
       [](Builder& b, ir::Value* v, std::mt19937&, int64_t) {
         ir::Node* r = b.op("Relu", {v});
         ir::Value* rv = b.dq(same(b, r->outputs[0]), 0.04f, 3);
         ir::Node* n = b.op("Concat", {v, rv});
         n->attrs["axis"] = int64_t{1};
         return std::vector<ir::Value*>{same(b, n->outputs[0])};
       }},
  };
  return m;
}

// Every family of the table has a tester graph, and each places its node and computes the
// int8 reference's bytes on the simulator, for int8 and uint8 and a channel count that is not a
// multiple of the atomic 16 (where the lowering needs parts at multiples of 16: 32 for a
// Concat of two copies, 64 for DepthToSpace's four blocks).
TEST(NpuOpTable, EveryFamilyPlacesItsNodeAndEqualsTheInt8Reference) {
  for (const NpuOpFamily& f : npu_op_families()) {
    for (DType t : {DType::i8, DType::u8}) {
      const std::string name = f.name;
      NpuNodeTester()
          .family(name)
          .dtype(t)
          .channels(name == "DepthToSpace" ? 64
                    : name == "Concat"     ? 32
                                           : 20)
          .height(6)
          .width(name == "Resize" ? 5 : 9)
          .seed(7)
          .Test();
    }
  }
}

// A fully connected layer on tokens as PyTorch exports it (MatMul of a constant [K, N], then Add
// of a constant [N]), quantized as `quantize` does (per-column int8 weights, the bias int32 at
// x_scale * w_scale: one QLinearMatMul with a bias), on the NPU as a 1 x 1 convolution over the
// rows folded into a map: bit for bit the int8 reference, per channel exact (strategy
// per-channel), for random row counts (primes among them: a P x 1 map), K and N not multiples
// of 16, A of rank 2, 3 and 4, int8 and uint8 (per-tensor weights, zero point 131).
TEST(NpuMatMul, RandomShapesEqualTheReferenceBitForBit) {
  std::mt19937 rng(2026);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int placed_total = 0;
  for (int c = 0; c < 24; ++c) {
    const DType t = c % 3 == 2 ? DType::u8 : DType::i8;
    const int64_t P = c == 0 ? 97 : c == 1 ? 1 : pick(2, 90), K = pick(1, 70), N = pick(1, 70);
    const int rank = 2 + c % 3;
    SCOPED_TRACE("case " + std::to_string(c) + ": " + dtype_name(t) + ", rows " + std::to_string(P) + ", K " + std::to_string(K) + ", N " +
                 std::to_string(N) + ", A of rank " + std::to_string(rank));
    Tensor x = Tensor::empty(DType::f32, rank == 2 ? Shape{P, K} : rank == 3 ? Shape{1, P, K} : Shape{1, 1, P, K});
    std::uniform_real_distribution<float> u(-3.f, 3.f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
    Tensor w = Tensor::empty(t, {K, N});
    for (size_t i = 0; i < w.nbytes(); ++i) static_cast<uint8_t*>(w.raw())[i] = static_cast<uint8_t>(t == DType::i8 ? pick(-127, 127) : pick(0, 255));
    std::vector<float> ws(t == DType::i8 ? static_cast<size_t>(N) : 1);
    for (float& v : ws) v = 0.002f * std::pow(10.f, static_cast<float>(pick(0, 100)) / 50.f);  // two decades
    Tensor bias = Tensor::empty(DType::i32, {N});
    for (int64_t i = 0; i < N; ++i) bias.data<int32_t>()[i] = pick(-3000, 3000);
    auto run = [&](bool sim, ir::FusionReport* rep) -> std::map<std::string, Tensor> {
      Builder b{{}, t};
      b.g.opset = 13;
      ir::Value* in = *b.g.add_value("x");
      in->dtype = DType::f32;
      in->shape = ir::Dims{};
      for (int64_t d : x.shape()) in->shape->push_back(ir::Dim{d, ""});
      b.g.inputs.push_back(in);
      const float xs = 0.05f;
      ir::Value* a = b.dq(b.q(in, xs, -3), xs, -3);
      ir::Value* wv = b.g.add_constant("w", w);
      Tensor wz = Tensor::empty(t, ws.size() == 1 ? Shape{} : Shape{N});
      std::memset(wz.raw(), t == DType::i8 ? 0 : 131, wz.nbytes());
      ir::Value* wsv = b.g.add_constant("ws", ws.size() == 1 ? Tensor::from_floats({}, ws) : Tensor::from_floats({N}, ws));
      auto wd = b.g.add_node("wdq", "DequantizeLinear", "", {wv, wsv, b.g.add_constant("wz", wz)}, {"wdv"});
      if (ws.size() > 1) (*wd)->attrs["axis"] = int64_t{1};
      std::vector<float> bs(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i)
        bs[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>(xs) * ws[ws.size() == 1 ? 0 : static_cast<size_t>(i)]);
      Tensor bz = Tensor::empty(DType::i32, {N});
      std::memset(bz.raw(), 0, bz.nbytes());
      auto bd =
          b.g.add_node("bdq", "DequantizeLinear", "",
                       {b.g.add_constant("b", bias), b.g.add_constant("bs", Tensor::from_floats({N}, bs)), b.g.add_constant("bz", bz)}, {"bdv"});
      (*bd)->attrs["axis"] = int64_t{0};
      ir::Node* mm = b.op("MatMul", {a, (*wd)->outputs[0]});
      ir::Node* add = b.op("Add", {(*bd)->outputs[0], mm->outputs[0]});  // the bias first, as PyTorch writes it
      b.g.outputs = {b.q(add->outputs[0], 0.11f, 2)};
      return run_int8(b.g, sim ? std::optional(npu::lower::Strategy::per_channel) : std::nullopt, {{"x", x}}, rep);
    };
    ir::FusionReport rep;
    const auto want = run(false, nullptr), got = run(true, &rep);
    EXPECT_EQ(rep.npu["MatMul"].placed, 1) << ::testing::PrintToString(rep.npu["MatMul"].on_cpu);
    placed_total += rep.npu["MatMul"].placed;
    ASSERT_EQ(want.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    const Tensor& wt = want.begin()->second;
    const Tensor& gt = got.begin()->second;
    ASSERT_EQ(wt.shape(), gt.shape());
    ASSERT_EQ(wt.nbytes(), gt.nbytes());
    EXPECT_EQ(bytes_differing(wt, gt).first, 0) << "bytes differ of " << wt.nbytes();
  }
  EXPECT_EQ(placed_total, 24);
}

// A transformer block's pattern on rows [1, P, K]: a product, a table (Sigmoid) and a residual
// Add of the rows and a per-channel (last-axis) Mul, then a second product: every node on the
// NPU (the element-wise families on rows: npu::lower::npu_map_view), the outputs the int8 reference's
// bit for bit, and the rows passed from node to node in device memory.
TEST(NpuMatMul, RowsStayOnTheNpuBetweenProducts) {
  for (const int64_t P : {35, 64, 13}) {
    SCOPED_TRACE("rows " + std::to_string(P));
    const int64_t K = 24, N = 40;
    std::mt19937 rng(static_cast<unsigned>(P));
    auto weights = [&](int64_t k, int64_t n) {
      Tensor w = Tensor::empty(DType::i8, {k, n});
      for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
      return w;
    };
    const Tensor w1 = weights(K, N), w2 = weights(N, K);
    Tensor scale = Tensor::empty(DType::f32, {N});
    for (int64_t i = 0; i < N; ++i) scale.data<float>()[i] = 0.5f + static_cast<float>(rng() % 100) / 100.f;
    Tensor x = Tensor::empty(DType::f32, {1, P, K});
    std::uniform_real_distribution<float> u(-3.f, 3.f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
    auto run = [&](bool sim, ir::FusionReport* rep, runtime::NpuChaining* chaining) -> std::map<std::string, Tensor> {
      Builder b{{}, DType::i8};
      b.g.opset = 13;
      ir::Value* in = *b.g.add_value("x");
      in->dtype = DType::f32;
      in->shape = ir::Dims{ir::Dim{1, ""}, ir::Dim{P, ""}, ir::Dim{K, ""}};
      b.g.inputs.push_back(in);
      ir::Value* a = b.dq(b.q(in, 0.05f, -3), 0.05f, -3);
      ir::Value* h = b.dq(b.q(b.op("MatMul", {a, b.dq(b.g.add_constant("w1", w1), 0.004f, 0)})->outputs[0], 0.2f, 5), 0.2f, 5);
      ir::Value* sg = b.dq(b.q(b.op("Sigmoid", {h})->outputs[0], 1.f / 256, -128), 1.f / 256, -128);
      ir::Value* sumq = b.q(b.op("Add", {h, sg})->outputs[0], 0.21f, 4);
      ir::Value* sum = b.dq(sumq, 0.21f, 4);
      ir::Value* sc = b.dq(b.q(b.g.add_constant("scale", scale), 0.01f, -128), 0.01f, -128);
      ir::Value* prod = b.dq(b.q(b.op("Mul", {sum, sc})->outputs[0], 0.25f, 0), 0.25f, 0);
      // The residual sum is an output too: the host reads an element-wise node's rows.
      b.g.outputs = {b.q(b.op("MatMul", {prod, b.dq(b.g.add_constant("w2", w2), 0.003f, 0)})->outputs[0], 0.3f, -1), sumq};
      return run_int8(b.g, sim ? std::optional(npu::lower::Strategy::per_tensor) : std::nullopt, {{"x", x}}, rep, chaining);
    };
    ir::FusionReport rep;
    runtime::NpuChaining chaining;
    const auto wants = run(false, nullptr, nullptr), gots = run(true, &rep, &chaining);
    EXPECT_EQ(rep.npu["MatMul"].placed, 2);
    EXPECT_EQ(rep.npu["Add"].placed, 1) << ::testing::PrintToString(rep.npu["Add"].on_cpu);
    EXPECT_EQ(rep.npu["Mul"].placed, 1) << ::testing::PrintToString(rep.npu["Mul"].on_cpu);
    EXPECT_EQ(rep.npu["Lut"].placed, 1) << ::testing::PrintToString(rep.npu["Lut"].on_cpu);
    EXPECT_EQ(chaining.host_read_outputs, 2) << "only the outputs leave the device";
    EXPECT_EQ(chaining.host_written_inputs, 2) << "only x and the Mul's constant operand are written by the host";
    ASSERT_EQ(wants.size(), 2u);
    ASSERT_EQ(gots.size(), 2u);
    for (const auto& [name, want] : wants) {
      const Tensor& got = gots.at(name);
      ASSERT_EQ(want.shape(), got.shape()) << name;
      EXPECT_EQ(bytes_differing(want, got).first, 0) << name << ": bytes differ of " << want.nbytes();
    }
  }
}

// The token map: H x W = P, W the largest divisor not above the square root.
TEST(NpuMatMul, TokenMapFoldsRowsIntoAMap) {
  EXPECT_EQ(npu::lower::npu_token_map(1600).H, 40);
  EXPECT_EQ(npu::lower::npu_token_map(1600).W, 40);
  EXPECT_EQ(npu::lower::npu_token_map(300).H, 20);
  EXPECT_EQ(npu::lower::npu_token_map(300).W, 15);
  EXPECT_EQ(npu::lower::npu_token_map(97).H, 97);
  EXPECT_EQ(npu::lower::npu_token_map(97).W, 1);
  for (int64_t P = 1; P < 500; ++P) {
    const npu::lower::TokenMap m = npu::lower::npu_token_map(P);
    EXPECT_EQ(m.H * m.W, P);
    EXPECT_GE(m.H, m.W);
  }
}

// The planner's rk3588-rkdeploy rows follow the table: every ONNX op a family takes over has a
// lowered NPU rule in the profile, and every lowered NPU rule's op is one a family takes over.
TEST(NpuOpTable, TheRkdeployProfileLowersWhatTheTableTakes) {
  auto t = plan::find_target("rk3588-rkdeploy", std::string(RKD_SOURCE_DIR) + "/targets");
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_TRUE(t->rkdeploy_lowering);
  std::set<std::string> sources, lowered;
  for (const NpuOpFamily& f : npu_op_families())
    for (const char* op : f.sources) sources.insert(op);
  for (const plan::OpRule& r : t->ops)
    if (r.device == plan::Device::npu && r.lowered) lowered.insert(r.op);
  for (const std::string& op : sources) EXPECT_TRUE(lowered.count(op)) << op << ": a family takes it, the profile lowers it nowhere";
  for (const std::string& op : lowered) EXPECT_TRUE(sources.count(op)) << op << ": the profile lowers it, no family of the table takes it";
}

// What a placed node carries: the knobs that differ from the defaults, read back as the same quirks.
TEST(NpuOpTable, KnobAssignmentsRoundTrip) {
  npu::sim::Quirks q;
  EXPECT_EQ(npu::sim::knob_assignments(q), "");
  for (const npu::sim::KnobInfo& k : npu::sim::knob_list()) {
    std::string values = k.values;
    size_t at = 0;
    while (at <= values.size()) {
      const size_t end = std::min(values.find('|', at), values.size());
      const std::string v = values.substr(at, end - at);
      npu::sim::Quirks one;
      ASSERT_TRUE(npu::sim::set_knob(one, std::string(k.name) + "=" + v).ok()) << k.name << "=" << v;
      const std::string text = npu::sim::knob_assignments(one);
      EXPECT_EQ(text.empty(), v == k.default_value) << k.name << "=" << v << ": " << text;
      auto back = npu::sim::quirks_from_assignments(text);
      ASSERT_TRUE(back.ok()) << text;
      EXPECT_TRUE(*back == one) << text;
      at = end + 1;
    }
  }
  EXPECT_FALSE(npu::sim::quirks_from_assignments("no_such_knob=1").ok());
}

}  // namespace
}  // namespace rkd

namespace rkd {
namespace {

// npu-schedule on a graph whose order alternates devices on independent branches: the order
// it gives is topological, groups each device's nodes into as few runs as the dependences allow
// (k 4 -> 2), puts a view with whatever run it falls in, and is the executor's order afterwards.
TEST(NpuSchedule, GroupsEachDevicesNodesIntoFewRuns) {
  ir::Graph g;
  ir::Value* x = *g.add_value("x");
  g.inputs.push_back(x);
  auto node = [&](const std::string& name, const char* op, const char* domain, ir::Value* in) {
    return *g.add_node(name, op, domain, {in}, {name + "_out"});
  };
  ir::Node* n1 = node("n1", "NpuAdd", "rkdeploy", x);
  ir::Node* c2 = node("c2", "Sigmoid", "", x);
  ir::Node* n3 = node("n3", "NpuAdd", "rkdeploy", x);
  ir::Node* v1 = node("v1", "Reshape", "", n1->outputs[0]);
  ir::Node* c1 = node("c1", "Sigmoid", "", v1->outputs[0]);
  ir::Node* n2 = node("n2", "NpuAdd", "rkdeploy", c2->outputs[0]);
  for (ir::Node* n : {c1, n2, n3}) g.outputs.push_back(n->outputs[0]);
  ASSERT_TRUE(g.validate().ok());
  EXPECT_EQ(runtime::npu_device_switches(g), 4);  // n1 | c2 | n3 | c1 | n2 (the view joins a run)
  ir::PassManager pm;
  pm.add(runtime::npu_schedule_pass());
  ASSERT_TRUE(pm.run(g, {}).ok());
  ASSERT_TRUE(g.validate().ok());
  std::vector<std::string> order;
  for (const auto& np : g.nodes()) order.push_back(np->name);
  // From the first node's device (NPU): n1, its view, n3; then the CPU's c2 and c1; then n2.
  EXPECT_EQ(order, (std::vector<std::string>{"n1", "v1", "n3", "c2", "c1", "n2"}));
  EXPECT_EQ(runtime::npu_device_switches(g), 2);
}

// An order that is not a permutation of the nodes, or puts a node before its input's producer,
// is refused by name and leaves the order as it was.
TEST(NpuSchedule, SetNodeOrderRefusesWhatIsNotTopological) {
  ir::Graph g;
  ir::Value* x = *g.add_value("x");
  g.inputs.push_back(x);
  ir::Node* a = *g.add_node("a", "Relu", "", {x}, {"a_out"});
  ir::Node* b = *g.add_node("b", "Relu", "", {a->outputs[0]}, {"b_out"});
  g.outputs.push_back(b->outputs[0]);
  const Status backwards = g.set_node_order({b, a});
  ASSERT_FALSE(backwards.ok());
  EXPECT_NE(backwards.error().message.find("before the producer of its input 'a_out'"), std::string::npos) << backwards.error().message;
  EXPECT_FALSE(g.set_node_order({a}).ok());
  EXPECT_FALSE(g.set_node_order({a, a}).ok());
  EXPECT_EQ(g.nodes()[0].get(), a);
  EXPECT_TRUE(g.set_node_order({a, b}).ok());
}

}  // namespace
}  // namespace rkd
