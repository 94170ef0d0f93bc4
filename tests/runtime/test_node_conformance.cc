// ONNX conformance for the executor: every node test of Debian's libonnx-testdata whose
// operators all have CPU kernels is run through the whole pipeline (import, passes,
// executor) with its inputs bound as constants, and each output compared with the
// expected data (tolerance.h: onnx_agree; integer and bool outputs exactly).
//
// A case is skipped - and counted as such - only when import or optimize() reports it
// "unsupported" (an attribute value or dtype rkdeploy does not implement); a wrong number is
// a failure. The test also requires at least one passing case for every operator of the
// executor's required list (issue 3) that has cases in the data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/tolerance.h"
#include "core/npy.h"
#include "frontends/onnx/onnx_import.h"
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
  // One list, packed (clang-format would put one name per line).
  // clang-format off
  const char* required[] = {
      "Conv", "ConvTranspose", "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize",
      "Concat", "Split", "Slice", "Gather", "GatherElements", "ScatterND", "Reshape", "Flatten", "Transpose",
      "Squeeze", "Unsqueeze", "Expand", "Tile", "Pad", "Shape", "ConstantOfShape", "Range", "Cast", "Where",
      "Equal", "Less", "Greater", "Not", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg",
      "Reciprocal", "Min", "Max", "Clip", "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
      "Erf", "Gelu", "Softmax", "LogSoftmax", "MatMul", "Gemm", "LayerNormalization", "ReduceMean", "ReduceSum",
      "ReduceMax", "ReduceMin", "ArgMax", "TopK", "CumSum", "Einsum", "GridSample"};
  // clang-format on
  for (const char* op : required) {
    if (!cases_by_op.count(op)) continue;  // no case this build can read (e.g. only opset < 11)
    EXPECT_GT(passed_by_op[op], 0) << op << ": none of its " << cases_by_op[op] << " conformance cases passed";
    std::printf("  %-20s %3d passed of %3d cases\n", op, passed_by_op[op], cases_by_op[op]);
  }
}

}  // namespace
}  // namespace rkd
