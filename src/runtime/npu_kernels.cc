// The kernels of the NPU nodes (rkdeploy.Npu*) on the simulator, and the device memory they
// share (npu_conv.h, NpuSession): each node is lowered once when its kernel is prepared; per
// call the host writes the inputs no NPU node left in device memory, the tasks run, and the
// outputs a host reader needs are read back.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "ir/op_info.h"
#include "npu/lower/eltwise.h"
#include "npu/lower/lower.h"
#include "runtime/npu_conv.h"

namespace rkd::runtime {

using ir::Node;
using ir::Value;
using npu::lower::DeviceMap;

struct NpuSession {
  npu::DeviceMemory mem;
  std::mutex m;
  bool chain = false;                                      // consecutive NPU nodes read each other's outputs in place
  std::set<const Value*> host_values;                      // the graph's outputs
  std::map<const Value*, DeviceMap> maps;                  // NPU outputs a reader may read in place
  std::set<const Value*> host_needed;                      // NPU outputs an NPU reader could not read in place
  NpuChaining stats;                                       // inputs (prepare time)
  std::vector<std::function<bool()>> output_read_on_host;  // per NPU output, decided once every node is prepared
};

std::shared_ptr<NpuSession> make_npu_session(const std::vector<Value*>& graph_outputs) {
  auto s = std::make_shared<NpuSession>();
  s->chain = true;
  s->host_values.insert(graph_outputs.begin(), graph_outputs.end());
  return s;
}

NpuChaining npu_chaining(const NpuSession& s) {
  NpuChaining c = s.stats;
  for (const auto& f : s.output_read_on_host) (f() ? c.host_read_outputs : c.device_only_outputs) += 1;
  return c;
}

namespace {

// v, looking through the name-giving Identities a dropped DequantizeLinear -> QuantizeLinear
// pair leaves (the executor aliases them: a view of the same tensor).
const Value* source_of(const Value* v) {
  while (v && v->producer && v->producer->op_type == "Identity" && v->producer->domain.empty() && !v->producer->inputs.empty() &&
         v->producer->inputs[0])
    v = v->producer->inputs[0];
  return v;
}

// Whether the host must read v: a graph output, or a reader (through Identities) that is not
// an NPU node. An NPU reader that cannot read v in place says so later (host_needed).
bool read_by_host(const NpuSession& s, const Value* v) {
  if (!s.chain) return true;
  std::vector<const Value*> todo{v};
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    if (!x || s.host_values.count(x)) return true;
    for (const Node* r : x->consumers) {
      if (r->op_type == "Identity" && r->domain.empty()) {
        todo.insert(todo.end(), r->outputs.begin(), r->outputs.end());
      } else if (!ir::op_has(*r, ir::kOnNpu)) {
        return true;
      }
    }
  }
  return false;
}

// Where input value v already is when an NPU node produced it in the layout `want` the
// reader would allocate; else none, and its producer must hand it to the host.
std::optional<uint32_t> in_place(NpuSession& s, const Value* v, const std::optional<DeviceMap>& want) {
  const Value* src = source_of(v);
  if (!s.chain || !src) return std::nullopt;
  auto it = s.maps.find(src);
  if (it != s.maps.end() && want && npu::lower::chainable(it->second, *want)) {
    ++s.stats.chained_inputs;
    return it->second.address;
  }
  if (it != s.maps.end()) s.host_needed.insert(src);
  ++s.stats.host_written_inputs;
  return std::nullopt;
}

// Output value y of an NPU node: in device memory as `map` (when a reader may read it in
// place); whether the host reads it is decided when every node is prepared.
std::function<bool()> register_output(const std::shared_ptr<NpuSession>& s, const Value* y, const std::optional<DeviceMap>& map) {
  if (map && s->chain) s->maps[y] = *map;
  const bool host = read_by_host(*s, y) || !map;
  std::weak_ptr<NpuSession> ws = s;
  auto f = [ws, y, host]() {
    auto sp = ws.lock();
    return host || !sp || sp->host_needed.count(y) > 0;
  };
  s->output_read_on_host.push_back(f);
  return f;
}

Result<npu::sim::Quirks> quirks_from_attrs(const Node& n) {
  RKD_ASSIGN(std::string knobs, n.attr_string("rkd_sim_knobs", ""));
  npu::sim::Quirks q;
  size_t at = 0;
  while (at < knobs.size()) {
    const size_t end = std::min(knobs.find(';', at), knobs.size());
    RKD_TRY(npu::sim::set_knob(q, knobs.substr(at, end - at)));
    at = end + 1;
  }
  return q;
}

// The regcmd of a lowered node, placed after its buffers.
struct Placed {
  uint32_t regcmd = 0;
  size_t first_words = 0;
};
Result<Placed> place(npu::DeviceMemory& mem, const std::vector<npu::regcmd::Task>& tasks) {
  RKD_ASSIGN(auto p, npu::lower::place_regcmd(mem, tasks));
  return Placed{p.address, p.spans[0].word_count};
}

Result<Kernel> conv_kernel(const Node& n, const std::shared_ptr<NpuSession>& s, npu::lower::Strategy strategy, const npu::sim::Quirks& quirks) {
  RKD_ASSIGN(npu::lower::ConvSpec spec, npu_conv_spec(n));
  const auto chained = in_place(*s, n.inputs[0], npu::lower::conv_input_map(spec, 0));
  uint32_t input = 0;
  if (chained) {
    input = *chained;
  } else {
    Tensor zero = Tensor::empty(spec.dtype, {1, spec.C, spec.H, spec.W});
    std::memset(zero.raw(), 0, zero.nbytes());
    RKD_ASSIGN(input, npu::lower::place_input(s->mem, spec, zero));
  }
  // A fused residual is the EW operand of the convolution's own regions (their channel order):
  // the host writes it, so its producer reads it back.
  if (spec.residual) (void)in_place(*s, n.inputs[9], std::nullopt);
  RKD_ASSIGN(npu::lower::Lowered lowered, npu::lower::lower_conv(spec, strategy, s->mem, input));
  RKD_ASSIGN(Placed placed, place(s->mem, lowered.tasks));
  auto host_out = register_output(s, n.outputs[0], npu::lower::conv_output_map(spec, lowered));
  auto cache = std::make_shared<npu::sim::SimCache>();  // the MAC prepared once (oneDNN), reused by every call
  const std::string what = n.describe();
  const bool write_x = !chained;
  return Kernel(
      [s, spec, lowered, placed, quirks, cache, host_out, write_x, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        std::lock_guard<std::mutex> lock(s->m);
        auto go = [&]() -> Status {
          if (write_x) RKD_TRY(npu::lower::write_input(s->mem, lowered.input_address, spec, *in[0]));
          if (spec.residual) {
            if (in.size() < 10 || !in[9]) return invalid("fused residual input missing");
            RKD_TRY(npu::lower::write_residual(s->mem, spec, lowered, *in[9]));
          }
          auto stats = npu::sim::run(s->mem, placed.regcmd, placed.first_words, quirks, cache.get());
          if (!stats.ok()) return stats.error();
          return host_out() ? npu::lower::gather_output_into(s->mem, spec, lowered, out[0]) : Status();
        };
        Status st = go();
        return st.ok() ? st : st.error().with_context(what + " (NPU simulator)");
      });
}

// An element-wise node's kernel: `lower` places its maps (the inputs `at` names chained) and
// tasks; data_inputs[i] is the node input index of the lowering's data input i.
using LowerFn = std::function<Result<npu::lower::LoweredEltwise>(npu::DeviceMemory&, const npu::lower::InputsAt&)>;
Result<Kernel> eltwise_kernel(const Node& n, const std::shared_ptr<NpuSession>& s, const npu::sim::Quirks& quirks, const LowerFn& lower,
                              std::vector<size_t> data_inputs) {
  // The layouts the lowering allocates, from a lowering into scratch memory; an input held in
  // two buffers (a LeakyRelu's x at two strides) is written by the host.
  npu::DeviceMemory scratch;
  RKD_ASSIGN(npu::lower::LoweredEltwise probe, lower(scratch, {}));
  npu::lower::InputsAt at(data_inputs.size());
  for (size_t i = 0; i < data_inputs.size(); ++i) {
    if (data_inputs[i] >= n.inputs.size() || i >= probe.input_maps.size())
      return invalid(n.describe() + ": data input " + std::to_string(i) + " missing");
    const auto& maps = probe.input_maps[i];
    at[i] = in_place(*s, n.inputs[data_inputs[i]], maps.size() == 1 ? std::optional<DeviceMap>(maps[0]) : std::nullopt);
  }
  RKD_ASSIGN(npu::lower::LoweredEltwise lowered, lower(s->mem, at));
  RKD_ASSIGN(Placed placed, place(s->mem, lowered.tasks));
  std::vector<std::function<bool()>> host_out;
  for (size_t j = 0; j < n.outputs.size() && j < lowered.output_maps.size(); ++j)
    host_out.push_back(register_output(s, n.outputs[j], lowered.output_maps[j]));
  auto cache = std::make_shared<npu::sim::SimCache>();  // the task decoded once, its look-up table built once
  const std::string what = n.describe();
  return Kernel(
      [s, lowered, placed, quirks, cache, host_out, data_inputs, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        std::lock_guard<std::mutex> lock(s->m);
        auto go = [&]() -> Status {
          for (size_t i = 0; i < data_inputs.size(); ++i) {
            const bool all_chained =
                std::all_of(lowered.input_maps[i].begin(), lowered.input_maps[i].end(), [](const DeviceMap& m) { return m.chained; });
            if (all_chained) continue;
            if (data_inputs[i] >= in.size() || !in[data_inputs[i]]) return invalid("input " + std::to_string(data_inputs[i]) + " missing");
            RKD_TRY(npu::lower::write_eltwise_input(s->mem, lowered, i, *in[data_inputs[i]]));
          }
          auto stats = npu::sim::run(s->mem, placed.regcmd, placed.first_words, quirks, cache.get());
          if (!stats.ok()) return stats.error();
          for (size_t j = 0; j < host_out.size() && j < out.size(); ++j) {
            if (host_out[j]()) RKD_TRY(npu::lower::read_eltwise_output(s->mem, lowered, j, out[j]));
          }
          return {};
        };
        Status st = go();
        return st.ok() ? st : st.error().with_context(what + " (NPU simulator)");
      });
}

// eltwise_kernel for a spec the node gives and its lowering.
template <typename Spec>
Result<Kernel> typed_kernel(const Node& n, const std::shared_ptr<NpuSession>& s, const npu::sim::Quirks& q, Result<Spec> spec,
                            Result<npu::lower::LoweredEltwise> (*lower)(const Spec&, npu::DeviceMemory&, const npu::lower::InputsAt&),
                            std::vector<size_t> data_inputs) {
  if (!spec.ok()) return spec.error();
  return eltwise_kernel(
      n, s, q, [sp = *spec, lower](npu::DeviceMemory& m, const npu::lower::InputsAt& at) { return lower(sp, m, at); }, std::move(data_inputs));
}

}  // namespace

Result<Kernel> npu_node_kernel(const Node& n, std::shared_ptr<NpuSession> session) {
  if (!session) session = std::make_shared<NpuSession>();  // alone: its own memory, every value through the host
  RKD_ASSIGN(npu::sim::Quirks q, quirks_from_attrs(n));
  namespace L = npu::lower;
  const std::string& op = n.op_type;
  if (n.domain != "rkdeploy") return invalid(n.describe() + ": not an NPU node");
  if (op == "NpuConv") {
    RKD_ASSIGN(std::string name, n.attr_string("rkd_sim_strategy", ""));
    RKD_ASSIGN(L::Strategy st, L::parse_strategy(name));
    return conv_kernel(n, session, st, q);
  }
  if (op == "NpuAdd") return typed_kernel(n, session, q, npu_add_spec(n), &L::lower_add, {0, 3});
  if (op == "NpuMul") return typed_kernel(n, session, q, npu_mul_spec(n), &L::lower_mul, {0, 3});
  if (op == "NpuLeakyRelu") return typed_kernel(n, session, q, npu_leaky_relu_spec(n), &L::lower_leaky_relu, {0});
  if (op == "NpuLut") return typed_kernel(n, session, q, npu_lut_spec(n), &L::lower_lut, {0});
  if (op == "NpuMaxPool") return typed_kernel(n, session, q, npu_max_pool_spec(n), &L::lower_max_pool, {0});
  if (op == "NpuPad") return typed_kernel(n, session, q, npu_channel_pad_spec(n), &L::lower_channel_pad, {0});
  if (op == "NpuResize") return typed_kernel(n, session, q, npu_upsample2_spec(n), &L::lower_upsample2, {0});
  if (op == "NpuDepthToSpace") return typed_kernel(n, session, q, npu_depth_to_space_spec(n), &L::lower_depth_to_space2, {0});
  if (op == "NpuSplit") return typed_kernel(n, session, q, npu_split_spec(n), &L::lower_split, {0});
  if (op == "NpuConcat") {
    // Every input is a part.
    std::vector<size_t> parts(n.inputs.size());
    for (size_t i = 0; i < parts.size(); ++i) parts[i] = i;
    return typed_kernel(n, session, q, npu_concat_spec(n), &L::lower_concat, parts);
  }
  return invalid(n.describe() + ": no NPU kernel for " + op);
}

}  // namespace rkd::runtime
