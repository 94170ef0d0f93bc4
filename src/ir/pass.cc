#include "ir/pass.h"

#include <unordered_set>

namespace rkd::ir {

Status PassManager::run(Graph& g, const PassOptions& opt) const {
  for (const std::string& d : opt.dump_after) {
    bool known = false;
    for (const Pass& p : passes_) known = known || p.name == d;
    if (!known) {
      std::string names;
      for (const Pass& p : passes_) names += (names.empty() ? "" : ", ") + p.name;
      return invalid("--dump-after: no pass named '" + d + "' (passes: " + names + ")");
    }
  }
  for (const Pass& p : passes_) {
    Status s = p.run(g);
    if (!s.ok()) return s.error().with_context("pass '" + p.name + "'");
    Status v = g.validate();
    if (!v.ok()) return v.error().with_context("pass '" + p.name + "' left an invalid graph");
    if (opt.dump_after.count(p.name) && opt.dump) opt.dump(p.name, g.dump());
  }
  return {};
}

Pass dead_code_elimination_pass() {
  return Pass{"dead-code-elimination", [](Graph& g) -> Status {
                // Walk backwards from the graph outputs; a node is live when any output is.
                std::unordered_set<const Value*> live_values(g.outputs.begin(), g.outputs.end());
                std::unordered_set<const Node*> live_nodes;
                for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
                  const Node* n = it->get();
                  bool live = false;
                  for (const Value* o : n->outputs) live = live || (o && live_values.count(o));
                  if (!live) continue;
                  live_nodes.insert(n);
                  for (const Value* i : n->inputs) {
                    if (i) live_values.insert(i);
                  }
                }
                g.remove_nodes([&](const Node& n) { return !live_nodes.count(&n); });
                g.remove_unused_constants();
                return {};
              }};
}

}  // namespace rkd::ir
