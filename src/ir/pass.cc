#include "ir/pass.h"

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

}  // namespace rkd::ir
