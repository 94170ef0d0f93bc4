// Variants, device assignment and the serial schedule's segments (plan.h).
#include <algorithm>

#include "ir/op_info.h"
#include "plan/plan.h"

namespace rkd::plan {

bool npu_placed_op(const ir::Node& n) { return ir::op_has(n, ir::kOnNpu); }

namespace {

struct VariantInfo {
  Variant v;
  const char* name;
  const char* description;
  GraphForm form;
  bool in_all = true;  // planned by `--variant all`
};

const std::vector<VariantInfo>& variant_table() {
  static const std::vector<VariantInfo> t = {
      {Variant::as_is, "as-is", "the unmodified graph as the runtime places it", GraphForm::imported},
      {Variant::as_run, "as-run",
       "the int8 graph `run --backend sim` executes: what the runtime placed on the NPU there, everything else on its CPU kernels (QDQ models)",
       GraphForm::runtime, false},
      {Variant::custom_op_cpu, "custom-op-cpu",
       "every op the runtime cannot run on the NPU registered as a CPU custom op: one fallback per op (on RKNN, the GridSamples: "
       "`rkdeploy export --rknn-custom-op --unfused` and rkdeploy's librkcst_grid_sample.so plugin, docs/rknn-custom-op.md)",
       GraphForm::imported},
      {Variant::custom_op_gpu, "custom-op-gpu", "the same, as GPU custom ops", GraphForm::imported},
      {Variant::fused_fallback, "fused-fallback",
       "one fused deformable-attention op per decoder layer, on the CPU (rkdeploy's kernel; on RKNN: `rkdeploy export --rknn-custom-op` and "
       "rkdeploy's librkcst_msdeform_attn.so plugin, docs/rknn-custom-op.md)",
       GraphForm::fused},
      {Variant::decoder_on_cpu, "decoder-on-cpu",
       "split at the encoder's feature levels: what computes them stays, everything after runs on the CPU (rkdeploy's kernels)", GraphForm::fused},
      {Variant::discrete, "discrete", "discrete sampling (index gathers): a different model whose accuracy must be re-measured", GraphForm::discrete},
  };
  return t;
}

const VariantInfo& info(Variant v) {
  for (const auto& i : variant_table()) {
    if (i.v == v) return i;
  }
  return variant_table()[0];
}

std::string node_op(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx" ? n.op_type : n.domain + "." + n.op_type; }

// Nodes (by address) whose outputs the feature levels need: the ancestors of every sampled
// value (GridSample input 0, MSDAPrepare input 0), those producers included.
std::set<const ir::Node*> feature_level_producers(const ir::Graph& g) {
  std::set<const ir::Node*> keep;
  std::vector<const ir::Node*> stack;
  for (const auto& np : g.nodes()) {
    const bool sampler = (np->op_type == "GridSample" && np->domain.empty()) || (np->op_type == "MSDAPrepare" && np->domain == "rkdeploy");
    if (sampler && !np->inputs.empty() && np->inputs[0] && np->inputs[0]->producer) stack.push_back(np->inputs[0]->producer);
  }
  while (!stack.empty()) {
    const ir::Node* n = stack.back();
    stack.pop_back();
    if (!keep.insert(n).second) continue;
    for (const ir::Value* v : n->inputs) {
      if (v && v->producer) stack.push_back(v->producer);
    }
  }
  return keep;
}

// Elements of a value (a symbolic dim counts as 1), and its bytes at its own type.
double value_numel(const ir::Value* v) {
  if (!v || !v->shape) return 0;
  double n = 1;
  for (const auto& d : *v->shape) n *= d.is_static() ? static_cast<double>(d.value) : 1.0;
  return n;
}
double value_bytes(const ir::Value* v) { return v && v->dtype ? value_numel(v) * static_cast<double>(dtype_size(*v->dtype)) : 0; }

}  // namespace

NodeTraffic node_traffic(const ir::Node& n, int bytes_per_element) {
  NodeTraffic r;
  for (const ir::Value* in : n.inputs) {
    if (!in) continue;
    const bool weight =
        in->constant || (in->producer && in->producer->op_type == "DequantizeLinear" && in->producer->inputs[0] && in->producer->inputs[0]->constant);
    (weight ? r.weight_bytes : r.feature_bytes) += value_numel(in) * bytes_per_element;
  }
  for (const ir::Value* o : n.outputs) r.feature_bytes += value_numel(o) * bytes_per_element;
  return r;
}

namespace {

// The bytes that enter each segment from another device (each value read once per segment),
// k, and the prices.
VariantPlan finish_plan(const ir::Graph& g, const Target& t, std::map<const ir::Node*, size_t>& index, VariantPlan& p) {
  // Bytes that enter each segment from another device (read once per segment).
  {
    size_t i = 0;
    std::vector<std::set<const ir::Value*>> entering(p.segments.size());
    for (const auto& np : g.nodes()) {
      const int s = p.nodes[i++].segment;
      for (const ir::Value* in : np->inputs) {
        if (!in || !in->producer || !index.count(in->producer)) continue;
        const size_t q = index[in->producer];
        if (p.nodes[q].device != p.segments[static_cast<size_t>(s)].device) entering[static_cast<size_t>(s)].insert(in);
      }
    }
    for (size_t s = 0; s < p.segments.size(); ++s) {
      for (const ir::Value* v2 : entering[s]) p.segments[s].in_bytes += value_bytes(v2);
    }
  }
  p.k = p.segments.empty() ? 0 : static_cast<int>(p.segments.size()) - 1;
  price(p, t);
  return std::move(p);
}

}  // namespace

std::vector<Variant> default_variants(const Target& t) {
  std::vector<Variant> r;
  if (t.rkdeploy_lowering) r.push_back(Variant::as_run);
  for (const auto& i : variant_table()) {
    if (i.in_all) r.push_back(i.v);
  }
  return r;
}
const char* variant_name(Variant v) { return info(v).name; }
const char* variant_description(Variant v) { return info(v).description; }
GraphForm graph_form(Variant v) { return info(v).form; }
std::string variant_names() {
  std::string names;
  for (const auto& i : variant_table()) names += (names.empty() ? "" : ", ") + std::string(i.name);
  return names;
}
Result<Variant> parse_variant(const std::string& s) {
  for (const auto& i : variant_table()) {
    if (s == i.name) return i.v;
  }
  return invalid("unknown variant '" + s + "' (" + variant_names() + ", all)");
}

Result<VariantPlan> plan_variant(const ir::Graph& g, const Target& t, Variant v, const std::map<std::string, double>& host_ms,
                                 const std::map<std::string, std::vector<double>>& host_runs, const RuntimePlacement& runtime) {
  VariantPlan p;
  p.variant = v;
  const bool custom_cpu = v == Variant::custom_op_cpu, custom_gpu = v == Variant::custom_op_gpu;
  const Device custom_dev = custom_gpu ? Device::gpu : Device::cpu;
  const bool runtime_custom = std::find(t.custom_op_devices.begin(), t.custom_op_devices.end(), custom_dev) != t.custom_op_devices.end();
  if ((custom_cpu || custom_gpu) && !runtime_custom) {
    p.executable = false;
    p.failures.push_back(t.name + " has no custom-op mechanism on the " + device_name(custom_dev));
  }
  std::set<const ir::Node*> encoder;
  if (v == Variant::decoder_on_cpu) {
    encoder = feature_level_producers(g);
    if (encoder.empty()) {
      p.executable = false;
      p.failures.push_back("no sampled feature levels (GridSample or the fused deformable attention) in this graph: nothing to split at");
    }
  }
  if (v == Variant::discrete)
    p.notes.push_back("a different model: discrete sampling changes the outputs; re-measure its accuracy before comparing latency");
  std::map<const ir::Node*, size_t> index;
  std::map<std::string, int> unlowered;
  for (const auto& np : g.nodes()) {
    const ir::Node& n = *np;
    PlannedNode pn;
    pn.name = n.name;
    pn.op_type = node_op(n);
    const Placement pl = place(t, n);
    pn.device = pl.device;
    pn.reason = pl.reason;
    pn.zero_cost = pl.zero_cost;
    pn.lowered = pl.lowered;
    // A rule marked lowered: false says what the hardware could run: never NPU time.
    if (v != Variant::as_run && pn.device == Device::npu && !pn.zero_cost && !pn.lowered) {
      ++unlowered[pn.op_type];
      pn.device = Device::cpu;
      pn.lowered = true;
      pn.reason = "not lowered by this runtime yet (" + pl.reason + ")";
    }
    // As run: what the executor skips (a view of its input) costs nothing; every other node runs.
    if (v == Variant::as_run) pn.zero_cost = ir::op_has(n, ir::kView);
    if (v == Variant::as_run && !pn.zero_cost) {
      pn.lowered = true;
      if (npu_placed_op(n)) {
        pn.device = Device::npu;
        pn.reason = "placed on the NPU by the runtime (npu-placement)";
      } else {
        pn.device = Device::cpu;
        auto why = runtime.cpu_reasons.find(n.name);
        pn.reason = why != runtime.cpu_reasons.end() ? "left on the CPU by the runtime's placement: " + why->second : "rkdeploy's CPU kernels";
      }
    }
    if (n.domain == "rkdeploy" && v != Variant::as_run) {
      // rkdeploy's fused ops reach a vendor runtime as custom ops on its CPU.
      const bool mine = t.rules_for(pn.op_type).size() > 0;
      if (!mine) {
        pn.zero_cost = false;
        if (std::find(t.custom_op_devices.begin(), t.custom_op_devices.end(), Device::cpu) != t.custom_op_devices.end()) {
          pn.device = Device::cpu;
          pn.reason = "rkdeploy's fused kernel as a CPU custom op";
        } else {
          pn.device = Device::none;
          pn.reason = t.name + " cannot load custom ops";
        }
      }
    }
    if ((custom_cpu || custom_gpu) && !pn.zero_cost && pn.device != Device::npu && runtime_custom) {
      if (std::find(pl.custom_op.begin(), pl.custom_op.end(), custom_dev) != pl.custom_op.end()) {
        pn.device = custom_dev;
        pn.reason = std::string("registered as a ") + device_name(custom_dev) + " custom op (" + pl.reason + ")";
      }
    }
    if (v == Variant::decoder_on_cpu && !encoder.empty() && !encoder.count(&n) && !pn.zero_cost) {
      pn.device = Device::cpu;
      pn.reason = "decoder part: on the CPU by the split";
    }
    if (pn.device == Device::gpu && !t.gpu.present) {
      pn.device = Device::none;
      pn.reason = "placed on a GPU the profile does not describe";
    }
    if (pn.device == Device::none && !pn.zero_cost) {
      p.executable = false;
      p.failures.push_back("node '" + n.name + "' (" + pn.op_type + "): " + pn.reason);
    }
    if (auto m = node_macs(n)) pn.macs = *m;
    const NodeTraffic traffic = node_traffic(n, t.npu.bytes_per_element);
    pn.weight_bytes = traffic.weight_bytes;
    pn.feature_bytes = traffic.feature_bytes;
    if (auto it = host_ms.find(n.name); it != host_ms.end()) pn.host_ms = it->second;
    if (auto it = host_runs.find(n.name); it != host_runs.end()) pn.host_runs = it->second;
    if (auto it = runtime.lowered.find(n.name); it != runtime.lowered.end() && pn.device == Device::npu) pn.lowered_tasks = it->second;
    index[&n] = p.nodes.size();
    p.nodes.push_back(std::move(pn));
  }
  for (const auto& [op, count] : unlowered) {
    p.notes.push_back(std::to_string(count) + " " + op +
                      " node(s) the hardware could run on the NPU, on the CPU: the lowering does not emit them yet");
  }
  // The serial schedule. As run: the executor's, the graph's node order (the runtime's
  // npu-schedule made it). Otherwise: ir::device_grouped_order over the placement's devices.
  // Views join the current segment.
  const size_t N = p.nodes.size();
  std::vector<const ir::Node*> order;
  if (v == Variant::as_run) {
    for (const auto& np : g.nodes()) order.push_back(np.get());
  } else {
    order = ir::device_grouped_order(g, [&](const ir::Node& n) {
      const PlannedNode& pn = p.nodes[index.at(&n)];
      return pn.zero_cost ? -1 : static_cast<int>(pn.device);
    });
    if (order.size() != N) return Error{ErrorKind::internal, "plan: the graph has a cycle"};
  }
  std::optional<Device> cur;
  for (const ir::Node* n : order) {
    const size_t i = index.at(n);
    if (!p.nodes[i].zero_cost && cur != p.nodes[i].device) {
      cur = p.nodes[i].device;
      if (p.segments.empty() || p.segments.back().device != *cur) {
        if (!p.segments.empty() && p.segments.back().nodes.empty()) p.segments.back().device = *cur;
        else {
          p.segments.push_back(Segment{});
          p.segments.back().device = *cur;
        }
      }
    }
    if (p.segments.empty()) {
      p.segments.push_back(Segment{});
      p.segments.back().device = cur.value_or(Device::cpu);
    }
    p.nodes[i].segment = static_cast<int>(p.segments.size() - 1);
    if (p.nodes[i].zero_cost) p.nodes[i].device = p.segments.back().device;
    p.segments.back().nodes.push_back(i);
  }
  // A leading segment of views only (graph inputs reshaped first) belongs to the next one.
  if (p.segments.size() > 1) {
    bool views_only = true;
    for (size_t i : p.segments[0].nodes) views_only = views_only && p.nodes[i].zero_cost;
    if (views_only) {
      Segment& s1 = p.segments[1];
      s1.nodes.insert(s1.nodes.begin(), p.segments[0].nodes.begin(), p.segments[0].nodes.end());
      p.segments.erase(p.segments.begin());
      for (size_t si = 0; si < p.segments.size(); ++si) {
        for (size_t i : p.segments[si].nodes) {
          p.nodes[i].segment = static_cast<int>(si);
          if (p.nodes[i].zero_cost) p.nodes[i].device = p.segments[si].device;
        }
      }
    }
  }
  return finish_plan(g, t, index, p);
}

}  // namespace rkd::plan
