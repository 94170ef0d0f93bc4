// ONNX conformance for the executor: every node test of Debian's libonnx-testdata whose
// operators all have CPU kernels is run through the whole pipeline (import, passes,
// executor) with its inputs bound as constants, and each output compared with the
// expected data (tolerance.h: onnx_agree; integer and bool outputs exactly).
//
// A case is skipped - and counted as such - only when import or optimize() reports it
// "unsupported" (an attribute value or dtype rkdeploy does not implement); a wrong number is
// a failure. The test also requires at least one passing case for every operator with a
// kernel (runtime::kernel_ops()) that has cases in the data.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <set>

#include "common/tolerance.h"
#include "core/npy.h"
#include "frontends/onnx/onnx_import.h"
#include "ir/passes/shape_inference.h"
#include "runtime/executor.h"
#include "runtime/op_registry.h"

namespace rkd {
namespace {

namespace fs = std::filesystem;

Result<Tensor> load_pb(const fs::path& p) {
  RKD_ASSIGN(std::string bytes, read_file_bytes(p.string()));
  return onnx_frontend::import_onnx_tensor(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), p.string());
}

enum class Outcome { pass, skip, fail };

struct CaseResult {
  Outcome outcome = Outcome::skip;
  std::string message;
  std::set<std::string> ops;
};

CaseResult run_case(const fs::path& dir) {
  CaseResult r;
  auto imp = onnx_frontend::import_onnx_file((dir / "model.onnx").string());
  if (!imp.ok()) {
    r.message = imp.error().to_string();
    r.outcome = imp.error().kind == ErrorKind::unsupported ? Outcome::skip : Outcome::fail;
    return r;
  }
  ir::Graph& g = imp->graph;
  for (const auto& n : g.nodes()) {
    r.ops.insert(n->op_type);
    if (!runtime::has_kernel(n->domain, n->op_type)) {
      r.message = "no kernel for " + n->op_type;
      return r;
    }
  }
  const fs::path data = dir / "test_data_set_0";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    auto t = load_pb(data / ("input_" + std::to_string(i) + ".pb"));
    if (!t.ok()) {
      r.message = t.error().to_string();
      r.outcome = t.error().kind == ErrorKind::unsupported ? Outcome::skip : Outcome::fail;
      return r;
    }
    ir::Value* v = g.inputs[i];
    v->constant = *t;
    v->dtype = t->dtype();
    ir::Dims d;
    for (int64_t x : t->shape()) d.push_back(ir::Dim{x, ""});
    v->shape = d;
  }
  g.inputs.clear();
  // The graph outputs keep whatever the file declared; shapes come from inference.
  Status s = runtime::optimize(g);
  if (!s.ok()) {
    r.message = s.error().to_string();
    r.outcome = s.error().kind == ErrorKind::unsupported ? Outcome::skip : Outcome::fail;
    return r;
  }
  auto ex = runtime::Executor::create(g);
  if (!ex.ok()) {
    r.message = ex.error().to_string();
    r.outcome = ex.error().kind == ErrorKind::unsupported ? Outcome::skip : Outcome::fail;
    return r;
  }
  auto out = (*ex)->run({});
  if (!out.ok()) {
    r.message = out.error().to_string();
    r.outcome = out.error().kind == ErrorKind::unsupported ? Outcome::skip : Outcome::fail;
    return r;
  }
  r.outcome = Outcome::fail;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    auto want = load_pb(data / ("output_" + std::to_string(i) + ".pb"));
    if (!want.ok()) {
      r.message = want.error().to_string();
      if (want.error().kind == ErrorKind::unsupported) r.outcome = Outcome::skip;
      return r;
    }
    const Tensor& got = out->at(g.outputs[i]->name);
    if (got.shape() != want->shape()) {
      r.message = "output " + std::to_string(i) + ": shape " + shape_to_string(got.shape()) + ", expected " + shape_to_string(want->shape());
      return r;
    }
    if (got.dtype() != want->dtype()) {
      r.message = "output " + std::to_string(i) + ": dtype " + dtype_name(got.dtype()) + ", expected " + dtype_name(want->dtype());
      return r;
    }
    for (int64_t k = 0; k < got.numel(); ++k) {
      const double a = got.get_as_double(k), e = want->get_as_double(k);
      const bool ok = dtype_is_float(got.dtype()) ? test::onnx_agree(a, e) : a == e;
      if (!ok) {
        r.message =
            "output " + std::to_string(i) + " element " + std::to_string(k) + ": got " + std::to_string(a) + ", expected " + std::to_string(e);
        return r;
      }
    }
  }
  r.outcome = Outcome::pass;
  return r;
}

TEST(NodeConformance, EveryCaseWithKernelsPasses) {
  const fs::path root = RKD_ONNX_TESTDATA;
  ASSERT_TRUE(fs::exists(root)) << root << " missing: install libonnx-testdata (scripts/setup.sh)";
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(root)) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  std::map<std::string, int> passed_by_op, cases_by_op;
  int pass = 0, skip = 0, fail = 0;
  for (const auto& dir : dirs) {
    const CaseResult r = run_case(dir);
    for (const auto& op : r.ops) {
      if (r.outcome != Outcome::skip) cases_by_op[op] += 1;
      if (r.outcome == Outcome::pass) passed_by_op[op] += 1;
    }
    if (r.outcome == Outcome::pass) ++pass;
    else if (r.outcome == Outcome::skip) ++skip;
    else {
      ++fail;
      ADD_FAILURE() << dir.filename().string() << ": " << r.message;
    }
  }
  std::printf("node conformance: %d passed, %d skipped (unsupported), %d failed of %zu cases\n", pass, skip, fail, dirs.size());
  for (const auto& [domain, op] : runtime::kernel_ops()) {
    if (!domain.empty() || !cases_by_op.count(op)) continue;  // no case this build can read (e.g. only opset < 11)
    EXPECT_GT(passed_by_op[op], 0) << op << ": none of its " << cases_by_op[op] << " conformance cases passed";
    std::printf("  %-20s %3d passed of %3d cases\n", op.c_str(), passed_by_op[op], cases_by_op[op]);
  }
}

// Cases of operators whose definition has not changed since an opset older than the 11
// rkdeploy imports (IsInf: 10, InstanceNormalization: 6): the node built with the attributes
// the case's model.onnx states and run on its data directly.
TEST(NodeConformance, CasesOfOlderOpsetsOfUnchangedOperators) {
  struct Case {
    const char* dir;
    const char* op;
    size_t inputs;
    std::function<void(ir::Node&)> attrs;
  };
  const std::vector<Case> cases = {
      {"test_isinf", "IsInf", 1, [](ir::Node&) {}},
      {"test_isinf_negative", "IsInf", 1, [](ir::Node& n) { n.attrs["detect_positive"] = int64_t{0}; }},
      {"test_isinf_positive", "IsInf", 1, [](ir::Node& n) { n.attrs["detect_negative"] = int64_t{0}; }},
      {"test_instancenorm_example", "InstanceNormalization", 3, [](ir::Node&) {}},
      {"test_instancenorm_epsilon", "InstanceNormalization", 3, [](ir::Node& n) { n.attrs["epsilon"] = 0.009999999776482582f; }},
  };
  for (const Case& c : cases) {
    const fs::path data = fs::path(RKD_ONNX_TESTDATA) / c.dir / "test_data_set_0";
    if (!fs::exists(data)) continue;  // not in this libonnx-testdata version
    ir::Graph g;
    g.opset = 17;
    std::vector<Tensor> in;
    std::vector<ir::Value*> vs;
    for (size_t i = 0; i < c.inputs; ++i) {
      auto t = load_pb(data / ("input_" + std::to_string(i) + ".pb"));
      ASSERT_TRUE(t.ok()) << c.dir << ": " << t.error().to_string();
      in.push_back(*t);
      ir::Value* v = *g.add_value("in" + std::to_string(i));
      v->dtype = t->dtype();
      ir::Dims d;
      for (int64_t x : t->shape()) d.push_back(ir::Dim{x, ""});
      v->shape = d;
      vs.push_back(v);
    }
    ir::Node* n = *g.add_node(c.op, c.op, "", vs, {"y"});
    c.attrs(*n);
    ASSERT_TRUE(ir::infer_node(*n, g.opset).ok()) << c.dir;
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : in) ptrs.push_back(&t);
    auto got = runtime::evaluate_node(*n, g.opset, ptrs);
    ASSERT_TRUE(got.ok()) << c.dir << ": " << got.error().to_string();
    auto want = load_pb(data / "output_0.pb");
    ASSERT_TRUE(want.ok()) << c.dir;
    const Tensor& y = (*got)[0];
    ASSERT_EQ(y.shape(), want->shape()) << c.dir;
    ASSERT_EQ(y.dtype(), want->dtype()) << c.dir;
    for (int64_t k = 0; k < y.numel(); ++k) {
      const double a = y.get_as_double(k), e = want->get_as_double(k);
      EXPECT_TRUE(dtype_is_float(y.dtype()) ? test::onnx_agree(a, e) : a == e) << c.dir << " element " << k << ": got " << a << ", expected " << e;
    }
  }
}

}  // namespace
}  // namespace rkd
