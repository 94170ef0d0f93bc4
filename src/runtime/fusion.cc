#include "runtime/fusion.h"

#include <algorithm>
#include <set>

namespace rkd::runtime {

namespace {

bool only_reader(const ir::Value* v, const ir::Node* n, const ir::Graph& g) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
  for (const ir::Node* c : v->consumers) {
    if (c != n) return false;
  }
  return true;
}

}  // namespace

ir::Pass conv_activation_fusion_pass() {
  return ir::Pass{"conv-activation-fusion", [](ir::Graph& g) -> Status {
                    std::set<const ir::Node*> gone;
                    for (const auto& np : g.nodes()) {
                      ir::Node* conv = np.get();
                      if (conv->op_type != "Conv" || !conv->domain.empty() || conv->attrs.count("rkd_activation")) continue;
                      ir::Value* y = conv->outputs[0];
                      if (!y || std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) continue;
                      std::vector<ir::Node*> readers;
                      for (ir::Node* c : y->consumers) {
                        if (std::find(readers.begin(), readers.end(), c) == readers.end()) readers.push_back(c);
                      }
                      ir::Node* last = nullptr;
                      std::string act;
                      if (readers.size() == 1 && readers[0]->op_type == "Relu" && readers[0]->domain.empty()) {
                        last = readers[0];
                        act = "relu";
                      } else if (readers.size() == 2) {
                        ir::Node* sig = readers[0]->op_type == "Sigmoid" ? readers[0] : readers[1];
                        ir::Node* mul = sig == readers[0] ? readers[1] : readers[0];
                        if (sig->op_type == "Sigmoid" && mul->op_type == "Mul" && sig->domain.empty() && mul->domain.empty() &&
                            sig->outputs[0] && only_reader(sig->outputs[0], mul, g) && mul->inputs.size() == 2 &&
                            ((mul->inputs[0] == y && mul->inputs[1] == sig->outputs[0]) ||
                             (mul->inputs[1] == y && mul->inputs[0] == sig->outputs[0]))) {
                          last = mul;
                          act = "silu";
                          gone.insert(sig);
                        }
                      }
                      if (!last) continue;
                      // The conv takes over the activation's output value (its name stays).
                      ir::Value* out = last->outputs[0];
                      last->outputs[0] = nullptr;
                      conv->outputs[0] = out;
                      out->producer = conv;
                      y->producer = nullptr;
                      conv->attrs["rkd_activation"] = act;
                      gone.insert(last);
                    }
                    g.remove_nodes([&](const ir::Node& n) { return gone.count(&n) > 0; });
                    return {};
                  }};
}

bool is_fused_op(const ir::Node& n) { return n.domain == "rkdeploy"; }

Result<Kernel> prepare_fused_op(const ir::Node& n) {
  return unsupported(n.describe() + ": unknown rkdeploy op");
}

}  // namespace rkd::runtime
