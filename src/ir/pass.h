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

// Computes a node's outputs from its inputs (the executor's kernels; injected so that the
// IR does not depend on them).
using NodeEvaluator = std::function<Result<std::vector<Tensor>>(const Node&, int64_t opset, const std::vector<const Tensor*>&)>;

}  // namespace rkd::ir
