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
#include "kernels/tensor_ops.h"
#include "npu/lower/node_geometry.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_device.h"
#include "runtime/npu_ops.h"

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
  std::map<const Value*, std::vector<int64_t>> permuted;   // convolution outputs left as their regions map (its channels) for readers that absorb it
  NpuChaining stats;                                       // inputs (prepare time)
  std::vector<std::function<bool()>> output_read_on_host;  // per NPU output, decided once every node is prepared
  std::vector<std::shared_ptr<const NpuLoweredNode>> nodes;  // in lowering (graph) order
  // On a device: the node's jobs (npu_node_jobs) with their token buffer objects.
  std::shared_ptr<NpuDevice> device;
  struct DeviceNode {
    std::vector<npu::device::Job> jobs;
    std::vector<npu::device::Bo> tokens;  // per job
    std::vector<size_t> final_jobs;       // the jobs whose end completes the node's outputs
  };
  std::map<const NpuLoweredNode*, DeviceNode> device_nodes;
};

std::shared_ptr<NpuSession> make_npu_session(const std::vector<Value*>& graph_outputs, std::shared_ptr<NpuDevice> device) {
  auto s = std::make_shared<NpuSession>();
  s->chain = true;
  s->host_values.insert(graph_outputs.begin(), graph_outputs.end());
  if (device) s->mem = npu::DeviceMemory(device->base());
  s->device = std::move(device);
  return s;
}

std::vector<NpuJobPlan> npu_node_jobs(const NpuLoweredNode& ln, int cores) {
  std::vector<NpuJobPlan> jobs;
  const size_t n = ln.regcmd.spans.size();
  if (n == 0) return jobs;
  if (!ln.conv) {
    NpuJobPlan j;
    for (size_t t = 0; t < n; ++t) j.tasks.push_back(t);
    jobs.push_back(std::move(j));
    return jobs;
  }
  const npu::lower::Lowered& l = ln.conv_lowered;
  const size_t nc = std::min(l.tasks.size(), n);
  std::vector<int64_t> cost(nc, 0);
  int64_t total = 0;
  for (size_t t = 0; t < nc && t < l.task_info.size(); ++t) {
    const auto& ti = l.task_info[t];
    const int64_t ch = ti.region < l.outputs.size() ? l.outputs[ti.region].stored_channels : 0;
    cost[t] = ti.slice.out_rows * l.OW * ch;
    total += cost[t];
  }
  // Consecutive tasks, cut where the running cost reaches the next k-th of the total (each
  // job keeping at least one task).
  const size_t k = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(cores, 1)), nc));
  size_t t = 0;
  for (size_t g = 0; g < k; ++g) {
    NpuJobPlan j;
    const int64_t until = total * static_cast<int64_t>(g + 1) / static_cast<int64_t>(k);
    int64_t acc = 0;
    for (const auto& p : jobs) acc += p.cost;
    while (t < nc && (j.tasks.empty() || g + 1 == k || (acc + j.cost < until && nc - t > k - g - 1))) {
      j.cost += cost[t];
      j.tasks.push_back(t++);
    }
    if (!j.tasks.empty()) jobs.push_back(std::move(j));
  }
  if (nc < n) {
    NpuJobPlan c;
    c.stage = 1;
    for (size_t u = nc; u < n; ++u) c.tasks.push_back(u);
    jobs.push_back(std::move(c));
  }
  return jobs;
}

namespace {
// Task t's enable mask: the value of its trailer's last word (PC_OPERATION_ENABLE).
uint32_t enable_mask_of(const npu::lower::PlacedRegcmd& r, size_t t) {
  const npu::regcmd::TaskSpan& s = r.spans[t];
  const size_t last = s.first_word + s.word_count - 1;
  return last < r.words.size() ? npu::regcmd::unpack(r.words[last]).value : 0;
}
}  // namespace

bool npu_session_needs_arena(const NpuSession& s, const NpuDevice& d) {
  const auto& a = d.arena();
  return !a || a->dma_address != s.mem.base() || a->size < s.mem.size();
}

Status npu_session_attach(NpuSession& s, std::shared_ptr<NpuDevice> d) {
  s.device = d;
  const npu::device::Bo& arena = *d->arena();
  if (arena.dma_address != s.mem.base()) return invalid("NPU session lowered at another address than the device's buffer object");
  s.mem.adopt(arena.bytes());
  RKD_TRY(d->driver().fini_bo(arena));
  // Jobs and tokens; who waits for whom.
  std::map<const Value*, std::vector<uint32_t>> final_tokens, reader_tokens;
  std::map<const NpuLoweredNode*, std::vector<NpuJobPlan>> plans;
  for (const auto& ln : s.nodes) {
    // Mainline learns of a task's end only through the DPU's interrupt (the placement keeps
    // PPU-only tasks off a mainline device: CompileOptions::npu_mainline).
    const auto& tasks = ln->conv ? ln->conv_lowered.tasks : ln->eltwise.tasks;
    for (const auto& t : tasks)
      if (d->mainline() && !(t.enable_mask & npu::arch::kDpuEnableBit))
        return unsupported(ln->node->describe() + ": a task without the DPU (enable mask " + std::to_string(t.enable_mask) +
                           ") never completes on a mainline rocket device");
    auto& dn = s.device_nodes[ln.get()];
    auto& p = plans[ln.get()] = npu_node_jobs(*ln, d->options().cores);
    int last = 0;
    for (const auto& j : p) last = std::max(last, j.stage);
    for (size_t i = 0; i < p.size(); ++i) {
      RKD_ASSIGN(npu::device::Bo t, d->token());
      dn.tokens.push_back(t);
      if (p[i].stage == last) dn.final_jobs.push_back(i);
    }
    for (const Value* y : ln->node->outputs)
      for (size_t i : dn.final_jobs) final_tokens[y].push_back(dn.tokens[i].handle);
    for (const Value* v : ln->read_from)
      if (v)
        for (size_t i = 0; i < p.size(); ++i)
          if (p[i].stage == 0) reader_tokens[v].push_back(dn.tokens[i].handle);
  }
  for (const auto& ln : s.nodes) {
    auto& dn = s.device_nodes[ln.get()];
    const auto& p = plans[ln.get()];
    for (size_t i = 0; i < p.size(); ++i) {
      npu::device::Job job;
      for (size_t t : p[i].tasks)
        job.tasks.push_back({ln->regcmd.spans[t].address, static_cast<uint32_t>(ln->regcmd.spans[t].word_count), enable_mask_of(ln->regcmd, t)});
      job.core = static_cast<int>(i % static_cast<size_t>(std::max(1, d->options().cores)));
      // After its producers (this run), and after this node's later stages and the readers of its
      // outputs of the run before (they read what it is about to overwrite); stage 1 after stage 0.
      if (p[i].stage == 0) {
        for (const Value* v : ln->read_from)
          if (v && final_tokens.count(v)) job.in.insert(job.in.end(), final_tokens[v].begin(), final_tokens[v].end());
      }
      for (size_t o = 0; o < p.size(); ++o)
        if (p[o].stage != p[i].stage) job.in.push_back(dn.tokens[o].handle);
      for (const Value* y : ln->node->outputs)
        if (reader_tokens.count(y)) job.in.insert(job.in.end(), reader_tokens[y].begin(), reader_tokens[y].end());
      std::sort(job.in.begin(), job.in.end());
      job.in.erase(std::unique(job.in.begin(), job.in.end()), job.in.end());
      job.out.push_back(dn.tokens[i].handle);
      dn.jobs.push_back(std::move(job));
    }
  }
  return {};
}

NpuChaining npu_chaining(const NpuSession& s) {
  NpuChaining c = s.stats;
  for (const auto& f : s.output_read_on_host) (f() ? c.host_read_outputs : c.device_only_outputs) += 1;
  return c;
}

std::string npu_chaining_text(const NpuChaining& c) {
  return std::to_string(c.chained_inputs) + " input(s) read in place from the NPU node before, " + std::to_string(c.host_written_inputs) +
         " written by the host; " + std::to_string(c.device_only_outputs) + " output(s) only in device memory, " +
         std::to_string(c.host_read_outputs) + " read back by the host";
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

// Who reads v (through the name-giving Identities): the host (a graph output, or a reader that
// is not an NPU node) and the NPU nodes, with the input index each reads it at. An NPU reader
// that cannot read v in place says so later (host_needed). Every node alone (no chaining):
// every value through the host, no NPU reader.
struct Readers {
  bool host = false;
  std::vector<std::pair<const Node*, size_t>> npu;
};
Readers readers_of(const NpuSession& s, const Value* v) {
  Readers r;
  if (!s.chain) return Readers{true, {}};
  std::vector<const Value*> todo{v};
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    if (!x) continue;
    if (s.host_values.count(x)) r.host = true;  // a graph output: the caller reads it, NPU nodes may too
    for (const Node* n : x->consumers) {
      if (n->op_type == "Identity" && n->domain.empty()) {
        todo.insert(todo.end(), n->outputs.begin(), n->outputs.end());
      } else if (!ir::op_has(*n, ir::kOnNpu)) {
        r.host = true;
      } else {
        for (size_t i = 0; i < n->inputs.size(); ++i)
          if (n->inputs[i] == x) r.npu.emplace_back(n, i);
      }
    }
  }
  return r;
}

// Whether reader n takes a convolution's regions map with `channels` as its main input, its
// weights permuted to match (npu::lower::permuted_input): a dense NpuConv reading it as input 0
// with at least the rows a convolution reads.
bool absorbs(const Node& n, size_t input, const std::vector<int64_t>& channels) {
  if (n.op_type != "NpuConv" || input != 0) return false;
  auto spec = npu_conv_spec(n);
  return spec.ok() && spec->H >= npu::arch::kRk3588.min_height && npu::lower::permuted_input(*spec, channels).ok();
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
  const bool host = readers_of(*s, y).host || !map;
  std::weak_ptr<NpuSession> ws = s;
  auto f = [ws, y, host]() {
    auto sp = ws.lock();
    return host || !sp || sp->host_needed.count(y) > 0;
  };
  s->output_read_on_host.push_back(f);
  return f;
}

// An 8-bit [..., P, C] tensor's rows as the [1, C, H, W] map (H W = P), and the map back into
// y's rows (a matrix product's token map, npu_matmul_spec).
Result<Tensor> rows_to_map(const Tensor& x, int64_t C, int64_t H, int64_t W) {
  RKD_ASSIGN(const Tensor rows, x.contiguous().reshape({H * W, C}));
  Tensor m = Tensor::empty(x.dtype(), {C, H * W});
  ops::transpose(rows, {1, 0}, m);
  return m.reshape({1, C, H, W});
}
Status map_to_rows(const Tensor& m, Tensor& y) {
  if (m.nbytes() != y.nbytes() || m.dtype() != y.dtype() || m.rank() != 4 || !y.is_contiguous())
    return invalid("npu output: rows of another size than the map");
  RKD_ASSIGN(const Tensor planes, m.reshape({m.dim(1), m.dim(2) * m.dim(3)}));
  RKD_ASSIGN(Tensor rows, y.reshape({m.dim(2) * m.dim(3), m.dim(1)}));
  ops::transpose(planes, {1, 0}, rows);
  return {};
}

// Whether a placed node's family takes rows (NpuOpFamily::rows) and its data are rows
// (npu::lower::npu_map_view of its first input): its kernel converts the host's tensors.
bool rows_node(const Node& n) {
  const NpuOpFamily* f = npu_family_of(n);
  const auto xs = n.inputs.empty() ? std::nullopt : ir::static_shape(n.inputs[0]);
  const auto view = xs ? npu::lower::npu_map_view(*xs) : std::nullopt;
  return f && f->rows && view && view->rows;
}

Result<npu::sim::Quirks> quirks_from_attrs(const Node& n) {
  RKD_ASSIGN(std::string knobs, n.attr_string("rkd_npu_knobs", ""));
  return npu::sim::quirks_from_assignments(knobs);
}

}  // namespace

// The node's conv lowering into the session: its input read in place or placed (its padding
// lanes, rows and, until the host writes it, its values the input zero point).
Result<std::shared_ptr<NpuLoweredNode>> lower_conv_node(const Node& n, const std::shared_ptr<NpuSession>& s) {
  RKD_ASSIGN(std::string name, n.attr_string("rkd_npu_strategy", ""));
  RKD_ASSIGN(npu::lower::Strategy strategy, npu::lower::parse_strategy(name));
  auto ln = std::make_shared<NpuLoweredNode>();
  RKD_ASSIGN(npu::lower::ConvSpec spec, npu_conv_spec(n));
  // An input left as its producer's regions map: read in place with the weights permuted.
  if (auto it = s->permuted.find(source_of(n.inputs[0])); s->chain && it != s->permuted.end()) {
    if (auto p = npu::lower::permuted_input(spec, it->second);
        p.ok() && npu::lower::chainable(s->maps.at(it->first), npu::lower::conv_input_map(*p, 0)))
      spec = std::move(p).value();
  }
  const bool rows = npu_matmul_node(n);  // a matrix product reads and writes token maps
  DeviceMap want = npu::lower::conv_input_map(spec, 0);
  want.rows = rows;
  const auto chained = in_place(*s, n.inputs[0], want);
  uint32_t input = 0;
  if (chained) {
    input = *chained;
    ln->read_from.push_back(source_of(n.inputs[0]));
  } else {
    Tensor zero = Tensor::empty(spec.dtype, {1, spec.C, spec.H, spec.W});
    std::memset(zero.raw(), static_cast<uint8_t>(spec.x_zero_point), zero.nbytes());
    RKD_ASSIGN(input, npu::lower::place_input(s->mem, spec, zero));
    ln->read_from.push_back(nullptr);
  }
  // A fused residual is the EW operand of the convolution's own regions (their channel order):
  // the host writes it, so its producer reads it back.
  if (spec.residual) (void)in_place(*s, n.inputs[9], std::nullopt);
  RKD_ASSIGN(ln->conv_lowered, npu::lower::lower_conv(spec, strategy, s->mem, input));
  std::optional<DeviceMap> out_map = npu::lower::conv_output_map(spec, ln->conv_lowered);
  std::vector<npu::regcmd::Task> tasks = ln->conv_lowered.tasks;
  // Regions out of channel order (the sorted and grouped strategies) that an NPU node reads:
  // compacted on the NPU by a permutation convolution after the node's own tasks.
  const auto rm = out_map ? std::nullopt : npu::lower::regions_map(spec, ln->conv_lowered);
  const auto readers = readers_of(*s, n.outputs[0]).npu;
  if (rm && !rows && !readers.empty() &&
      std::all_of(readers.begin(), readers.end(), [&](const auto& r) { return absorbs(*r.first, r.second, rm->channels); })) {
    // Every NPU reader is a dense convolution: it reads the regions as they are, no compaction.
    out_map = rm->map;
    s->permuted[n.outputs[0]] = rm->channels;
    ln->conv_output_channels = rm->channels;
  } else if (!out_map && !readers.empty()) {
    auto cs = npu::lower::compaction_spec(spec, ln->conv_lowered);
    npu::DeviceMemory probe;  // a compaction the CBUF cannot take (one region per channel: 16x the channels) stays on the host
    if (cs && npu::lower::lower_conv(*cs, npu::lower::Strategy::per_tensor, probe, probe.alloc(npu::lower::input_bytes(*cs))).ok()) {
      RKD_ASSIGN(ln->compaction_lowered, npu::lower::lower_conv(*cs, npu::lower::Strategy::per_tensor, s->mem, ln->conv_lowered.outputs[0].address));
      out_map = npu::lower::conv_output_map(*cs, ln->compaction_lowered);
      tasks.insert(tasks.end(), ln->compaction_lowered.tasks.begin(), ln->compaction_lowered.tasks.end());
      ln->compaction = std::move(cs);
    }
  }
  if (out_map) out_map->rows = rows;
  RKD_ASSIGN(ln->regcmd, npu::lower::place_regcmd(s->mem, tasks));
  ln->host_reads.push_back(register_output(s, n.outputs[0], out_map));
  ln->conv_output = out_map;
  ln->conv = std::move(spec);
  ln->channels_last = rows;
  ln->data_inputs = {0};
  return ln;
}

// An element-wise node's lowering into the session: `lower` places its maps (the inputs `at`
// names chained) and tasks; data_inputs[i] is the node input index of the lowering's data
// input i.
Result<std::shared_ptr<NpuLoweredNode>> lower_eltwise_node(const Node& n, const std::shared_ptr<NpuSession>& s, const NpuEltwiseLowering& lower,
                                                           std::vector<size_t> data_inputs) {
  auto ln = std::make_shared<NpuLoweredNode>();
  ln->channels_last = rows_node(n);
  // The layouts the lowering allocates, from a lowering into scratch memory; an input held in
  // two buffers (a LeakyRelu's x at two strides) is written by the host.
  npu::DeviceMemory scratch;
  RKD_ASSIGN(npu::lower::LoweredEltwise probe, lower(scratch, {}));
  npu::lower::InputsAt at(data_inputs.size());
  for (size_t i = 0; i < data_inputs.size(); ++i) {
    if (data_inputs[i] >= n.inputs.size() || i >= probe.input_maps.size())
      return invalid(n.describe() + ": data input " + std::to_string(i) + " missing");
    const auto& maps = probe.input_maps[i];
    std::optional<DeviceMap> want = maps.size() == 1 ? std::optional<DeviceMap>(maps[0]) : std::nullopt;
    if (want) want->rows = ln->channels_last;
    at[i] = in_place(*s, n.inputs[data_inputs[i]], want);
    ln->read_from.push_back(at[i] ? source_of(n.inputs[data_inputs[i]]) : nullptr);
  }
  RKD_ASSIGN(ln->eltwise, lower(s->mem, at));
  for (auto& maps : ln->eltwise.input_maps)
    for (DeviceMap& m : maps) m.rows = ln->channels_last;
  for (DeviceMap& m : ln->eltwise.output_maps) m.rows = ln->channels_last;
  RKD_ASSIGN(ln->regcmd, npu::lower::place_regcmd(s->mem, ln->eltwise.tasks));
  for (size_t j = 0; j < n.outputs.size() && j < ln->eltwise.output_maps.size(); ++j)
    ln->host_reads.push_back(register_output(s, n.outputs[j], ln->eltwise.output_maps[j]));
  ln->data_inputs = std::move(data_inputs);
  return ln;
}

namespace {

// The kernel of a lowered node: per call the host writes the data inputs no NPU node left in
// place, the tasks run on the simulator, and the outputs the host reads are read back.
Kernel kernel_of(std::shared_ptr<const NpuLoweredNode> ln, std::shared_ptr<NpuSession> s) {
  // The MAC prepared once (oneDNN), a DPU-only task decoded and its look-up table built once.
  auto cache = std::make_shared<npu::sim::SimCache>();
  const std::string what = ln->node->describe();
  return Kernel([s, ln, cache, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    std::lock_guard<std::mutex> lock(s->m);
    auto input = [&](size_t i) -> Result<const Tensor*> {
      if (i >= in.size() || !in[i]) return invalid("input " + std::to_string(i) + " missing");
      return in[i];
    };
    const NpuSession::DeviceNode* dn = nullptr;
    if (s->device) {
      auto it = s->device_nodes.find(ln.get());
      if (it == s->device_nodes.end()) return invalid(what + ": not attached to the NPU device");
      dn = &it->second;
    }
    bool host_writes = ln->conv && ln->conv->residual;
    for (const Value* v : ln->read_from) host_writes = host_writes || !v;
    auto go = [&]() -> Status {
      // The host is about to overwrite this node's inputs: its jobs of the run before are done.
      if (dn && host_writes)
        for (const auto& t : dn->tokens) RKD_TRY(s->device->driver().prep_bo(t, s->device->options().wait_ms));
      for (size_t i = 0; i < ln->data_inputs.size(); ++i) {
        if (ln->read_from[i]) continue;
        RKD_ASSIGN(const Tensor* x, input(ln->data_inputs[i]));
        if (ln->conv && ln->channels_last) {
          const npu::lower::ConvSpec& c = *ln->conv;
          if (x->nbytes() != static_cast<size_t>(c.C * c.H * c.W) || x->dtype() != c.dtype) return invalid("input: not the matrix product's rows");
          RKD_ASSIGN(const Tensor map, rows_to_map(*x, c.C, c.H, c.W));
          RKD_TRY(npu::lower::write_input(s->mem, ln->conv_lowered.input_address, c, map));
        } else if (ln->conv) {
          RKD_TRY(npu::lower::write_input(s->mem, ln->conv_lowered.input_address, *ln->conv, *x));
        } else if (ln->channels_last && !ln->eltwise.input_maps.at(i).empty()) {
          // Rows of the map's size are the map channels-last; a per-channel operand ([C]) or one
          // element is the same bytes either way.
          const npu::lower::MapShape& m = ln->eltwise.input_maps[i][0].shape;
          const bool whole = x->numel() == m.C * m.H * m.W && m.H * m.W > 1;
          if (whole && x->dtype() != m.dtype) return invalid("input: not the map's type");
          if (whole) {
            RKD_ASSIGN(const Tensor map, rows_to_map(*x, m.C, m.H, m.W));
            RKD_TRY(npu::lower::write_eltwise_input(s->mem, ln->eltwise, i, map));
          } else {
            RKD_TRY(npu::lower::write_eltwise_input(s->mem, ln->eltwise, i, *x));
          }
        } else {
          RKD_TRY(npu::lower::write_eltwise_input(s->mem, ln->eltwise, i, *x));
        }
      }
      if (ln->conv && ln->conv->residual) {
        RKD_ASSIGN(const Tensor* r, input(9));
        RKD_TRY(npu::lower::write_residual(s->mem, *ln->conv, ln->conv_lowered, *r));
      }
      if (dn) {
        npu::device::Driver& r = s->device->driver();
        if (host_writes) RKD_TRY(r.fini_bo(*s->device->arena()));
        RKD_TRY(r.submit(dn->jobs, s->device->options().wait_ms));
        bool reads = false;
        for (size_t j = 0; j < ln->host_reads.size() && j < out.size(); ++j) reads = reads || ln->host_reads[j]();
        if (reads) {
          for (size_t i : dn->final_jobs) RKD_TRY(r.prep_bo(dn->tokens[i], s->device->options().wait_ms));
          RKD_TRY(r.prep_bo(*s->device->arena(), s->device->options().wait_ms));
        }
      } else {
        auto stats = npu::sim::run(s->mem, ln->regcmd.address, ln->regcmd.spans[0].word_count, ln->quirks, cache.get());
        if (!stats.ok()) return stats.error();
      }
      for (size_t j = 0; j < ln->host_reads.size() && j < out.size(); ++j) {
        if (!ln->host_reads[j]()) continue;
        if (ln->channels_last && ln->conv) {
          const bool compacted = ln->compaction.has_value();
          RKD_ASSIGN(Tensor m, npu::lower::gather_output(s->mem, compacted ? *ln->compaction : *ln->conv,
                                                         compacted ? ln->compaction_lowered : ln->conv_lowered));
          RKD_TRY(map_to_rows(m, out[j]));
        } else if (ln->compaction) {
          RKD_TRY(npu::lower::gather_output_into(s->mem, *ln->compaction, ln->compaction_lowered, out[j]));
        } else if (ln->conv) {
          RKD_TRY(npu::lower::gather_output_into(s->mem, *ln->conv, ln->conv_lowered, out[j]));
        } else if (ln->channels_last) {
          const npu::lower::MapShape& m = ln->eltwise.output_maps.at(j).shape;
          Tensor map = Tensor::empty(m.dtype, {1, m.C, m.H, m.W});
          RKD_TRY(npu::lower::read_eltwise_output(s->mem, ln->eltwise, j, map));
          RKD_TRY(map_to_rows(map, out[j]));
        } else {
          RKD_TRY(npu::lower::read_eltwise_output(s->mem, ln->eltwise, j, out[j]));
        }
      }
      return {};
    };
    Status st = go();
    return st.ok() ? st
                   : st.error().with_context(
                         what + (dn ? " (NPU device " + s->device->driver().path() + ", " + s->device->driver().name() + ")" : " (NPU simulator)"));
  });
}

}  // namespace

Result<std::shared_ptr<const NpuLoweredNode>> lower_npu_node(const Node& n, const std::shared_ptr<NpuSession>& session) {
  if (!session) return invalid(n.describe() + ": no NPU session");
  const NpuOpFamily* f = npu_family_of(n);
  if (!f) return invalid(n.describe() + ": not an NPU node");
  RKD_ASSIGN(npu::sim::Quirks q, quirks_from_attrs(n));
  Result<std::shared_ptr<NpuLoweredNode>> r = f->lower(n, session);
  if (!r.ok()) return r.error();
  std::shared_ptr<NpuLoweredNode> ln = std::move(r).value();
  ln->node = &n;
  ln->quirks = q;
  std::shared_ptr<const NpuLoweredNode> done(std::move(ln));
  session->nodes.push_back(done);
  return done;
}

Result<Kernel> npu_node_kernel(const Node& n, std::shared_ptr<NpuSession> session) {
  if (!session) session = std::make_shared<NpuSession>();  // alone: its own memory, every value through the host
  RKD_ASSIGN(auto ln, lower_npu_node(n, session));
  return kernel_of(std::move(ln), std::move(session));
}

const npu::DeviceMemory& npu_session_memory(const NpuSession& s) { return s.mem; }

Result<std::vector<npu::sim::TaskWork>> npu_node_work(const NpuSession& s, const NpuLoweredNode& ln) {
  if (ln.regcmd.spans.empty()) return std::vector<npu::sim::TaskWork>{};
  return npu::sim::chain_work(s.mem, ln.regcmd.address, ln.regcmd.spans[0].word_count, ln.quirks);
}

}  // namespace rkd::runtime
