// Named IR passes and the one pass manager that runs them.
//
// Contract:
//  - A pass has a stable name (used by --dump-after and in errors) and a function that
//    rewrites the graph in place and returns a Status.
//  - PassManager::run runs the passes in order, validates the graph after each one, and
//    wraps any failure as "pass 'NAME': ..." (the pass's own message names the node).
//  - After a pass named in dump_after, the graph's text form is handed to the dump sink.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"

namespace rkd::ir {

struct Pass {
  std::string name;
  std::function<Status(Graph&)> run;
};

struct PassOptions {
  std::set<std::string> dump_after;                                          // pass names
  std::function<void(const std::string& pass, const std::string& ir)> dump;  // receives Graph::dump()
};

class PassManager {
 public:
  void add(Pass p) { passes_.push_back(std::move(p)); }
  const std::vector<Pass>& passes() const { return passes_; }
  // Fails on the first pass that fails; an unknown name in dump_after is an error too.
  Status run(Graph& g, const PassOptions& opt = {}) const;

 private:
  std::vector<Pass> passes_;
};

// dead-code-elimination: removes nodes none of whose outputs reach a graph output, and
// constants nothing reads.
Pass dead_code_elimination_pass();

// Computes a node's outputs from its inputs (the executor's kernels; injected so that the
// IR does not depend on them).
using NodeEvaluator = std::function<Result<std::vector<Tensor>>(const Node&, int64_t opset, const std::vector<const Tensor*>&)>;

// constant-folding: in topological order, infers each node's shapes (shape_inference.h)
// and replaces a node by constants when every present input is constant (Shape and Size
// also when the input's shape is static), unless one output would exceed
// kMaxFoldedBytes. Folded values keep their names. Nodes the evaluator cannot run stay.
// `keep` lists op types never folded (the first folding keeps DequantizeLinear so that
// QDQ sites stay recognisable); `name` distinguishes repeated runs.
inline constexpr int64_t kMaxFoldedBytes = int64_t{64} << 20;
Pass constant_folding_pass(NodeEvaluator eval, std::set<std::string> keep = {}, std::string name = "constant-folding");

// conv-bn-folding: Conv (constant weights, optional constant bias) followed by an
// inference BatchNormalization (constant scale, bias, mean, var) that is the conv
// output's only reader becomes one Conv with W' = W * k[o], b' = (b - mean) * k + beta,
// k = scale / sqrt(var + eps), computed in double and rounded once to float32.
Pass conv_bn_folding_pass();

}  // namespace rkd::ir
