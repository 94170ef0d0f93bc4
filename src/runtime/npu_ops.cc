// The NPU operation table (npu_ops.h): one record per family, the placement pass that walks it,
// and the report and manifest entries derived from it.
#include "runtime/npu_ops.h"
#include "runtime/npu_rewrites.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/dtype.h"
#include "ir/op_info.h"
#include "npu/arch/arch.h"
#include "npu/lower/eltwise.h"
#include "npu/lower/lower.h"

namespace rkd::runtime {

namespace {

using ir::Node;
using ir::Value;
using json = nlohmann::ordered_json;
namespace L = npu::lower;

template <typename T>
Status status_of(const Result<T>& r) {
  return r.ok() ? Status() : Status(r.error());
}

bool is_rkdeploy(const Node& n, const char* op) { return n.domain == "rkdeploy" && n.op_type == op; }

// "N <what>, M on the CPU".
std::string counted(const ir::NpuFamilyPlacement& p, const std::string& what) {
  return std::to_string(p.placed) + " " + what + ", " + std::to_string(p.on_cpu.size()) + " on the CPU";
}

int note(const ir::NpuFamilyPlacement& p, const char* key) {
  auto it = p.notes.find(key);
  return it == p.notes.end() ? 0 : it->second;
}

// Where a lowered node's data input comes from: an NPU node's output read in place, or the host.
json source_of_input(const NpuLoweredNode& ln, size_t data_input) {
  const Value* v = data_input < ln.read_from.size() ? ln.read_from[data_input] : nullptr;
  if (!v) return json{{"written_by", "host"}};
  return json{{"written_by", "npu"}, {"from", {{"node", v->producer ? v->producer->name : ""}, {"value", v->name}}}};
}

// A node's jobs on a device (npu_node_jobs): task indices into its "tasks" (then "compaction").
json jobs_json(const NpuLoweredNode& ln, int cores) {
  json js = json::array();
  for (const auto& j : npu_node_jobs(ln, cores)) js.push_back({{"stage", j.stage}, {"tasks", j.tasks}});
  return js;
}

// ---------------------------------------------------------------------------------------------
// Convolutions.

// A convolution's or matrix product's placed node carries the strategy its lowering uses.
Node* with_strategy(Node* n, const NpuPlacementOptions& o) {
  n->attrs["rkd_npu_strategy"] = std::string(L::strategy_name(o.strategy));
  return n;
}

bool conv_candidate(const Node& n) { return n.op_type == "QLinearConv" && n.domain.empty(); }

// The spec, then a lowering with the placement's strategy into scratch memory (weights that no
// CBUF split fits, ...).
Status conv_lowerable(const Node& n, const NpuPlacementOptions& o) {
  auto spec = npu_conv_spec(n);
  if (!spec.ok()) return spec.error();
  return npu_try_lower(*spec, o.strategy);
}

// The node to place (with the Add that is its only reader fused, when asked and expressible),
// carrying the strategy its lowering uses.
Node* conv_rewrite(ir::Graph& g, Node* n, const NpuPlacementOptions& o, ir::NpuFamilyPlacement& p) {
  if (Node* f = o.fuse_add ? fuse_residual_add(g, n) : nullptr) {
    ++p.notes["fused_adds"];
    n = f;
  }
  return with_strategy(n, o);
}

std::string conv_report(const ir::NpuFamilyPlacement& p, const std::string& where, const std::string& strategy) {
  return std::to_string(p.placed) + " convolution(s) on " + where + " (strategy " + strategy + ", " + std::to_string(note(p, "fused_adds")) +
         " with the following Add fused), " + std::to_string(p.on_cpu.size()) + " on the CPU";
}

Result<json> conv_manifest(const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) {
  // The node's geometry (the lowering's spec may read its input as a producer's regions map).
  RKD_ASSIGN(const L::ConvSpec s, npu_conv_spec(n));
  const L::Lowered& l = ln.conv_lowered;
  const npu::DeviceMemory& mem = *c.mem;
  const auto& spans = ln.regcmd.spans;
  const auto* wbytes = reinterpret_cast<const uint8_t*>(ln.regcmd.words.data());
  json jc;
  jc["node"] = n.name;
  jc["directory"] = c.directory;
  jc["geometry"] = {{"C", s.C},
                    {"H", s.H},
                    {"W", s.W},
                    {"OC", s.OC},
                    {"OH", l.OH},
                    {"OW", l.OW},
                    {"KH", s.KH},
                    {"KW", s.KW},
                    {"stride", {s.stride_h, s.stride_w}},
                    {"pads", {s.pad_top, s.pad_left, s.pad_bottom, s.pad_right}},
                    {"depthwise", s.depthwise},
                    {"dtype", dtype_name(s.dtype)}};
  // The input buffer (unless an NPU node's output is read in place): its padding lanes and
  // rows hold the zero point from the start; the host writes the real values before each kick.
  jc["input"] = {{"device_offset", l.input_address - mem.base()},
                 {"bytes", L::input_bytes(s)},
                 {"layout",
                  "NC1HWC2, C2 = 16, width the line dimension; "
                  "padding lanes and rows hold the input zero point"},
                 {"zero_point_stored", s.dtype == DType::u8 ? s.x_zero_point - 128 : s.x_zero_point}};
  jc["input"].update(source_of_input(ln, 0));
  // The output as one map in channel order (an NPU reader may read it in place): the regions
  // in order, or the compaction's output; else the host compacts the tasks' regions.
  jc["output"] = json::object();
  if (const auto& om = ln.conv_output) jc["output"] = {{"device_offset", om->address - mem.base()}, {"surface_bytes", om->surface_bytes}};
  // Left as its regions: stored channel j holds output channel channels[j] (-1 none); its
  // readers are convolutions whose weights are permuted to match (npu::lower::permuted_input).
  if (!ln.conv_output_channels.empty()) jc["output"]["channels"] = ln.conv_output_channels;
  c.host_reads("/output/read_by_host", ln.host_reads.at(0));
  // The tasks of `lw` (regcmd spans from first_span on), files named PREFIXnnn.
  auto tasks_json = [&](const L::Lowered& lw, size_t first_span, const char* prefix) -> Result<json> {
    json ts = json::array();
    for (size_t t = 0; t < lw.tasks.size(); ++t) {
      const auto& span = spans.at(first_span + t);
      const std::string tname = c.directory + "/" + npu_numbered(prefix, t);
      RKD_TRY(c.write(tname + ".regcmd", std::span<const uint8_t>(wbytes + span.first_word * 8, span.word_count * 8)));
      json jt = {{"regcmd", tname + ".regcmd"}, {"device_offset", span.address - mem.base()}, {"words", span.word_count}};
      jt["buffers"] = json::array();
      for (const auto& b : lw.buffers) {
        if (b.task != t) continue;
        json jb = {{"kind", L::buffer_kind_name(b.kind)}, {"device_offset", b.address - mem.base()}, {"bytes", b.bytes}};
        if (b.kind != L::BufferKind::output) {
          const std::string file = tname + "." + L::buffer_kind_name(b.kind) + ".bin";
          RKD_ASSIGN(auto bytes, mem.read(b.address, b.bytes));
          RKD_TRY(c.write(file, bytes));
          jb["file"] = file;
        }
        jt["buffers"].push_back(jb);
      }
      const auto& info = lw.task_info[t];
      const auto& r = lw.outputs[info.region];
      jt["cbuf"] = {{"data_banks", info.data_banks}, {"weight_banks", info.weight_banks}};
      jt["input_rows"] = {info.slice.in_row0, info.slice.in_rows};
      jt["output"] = {{"device_offset", r.address - mem.base()},
                      {"surface_bytes", r.surface_bytes},
                      {"rows", {info.slice.out_row0, info.slice.out_rows}},
                      {"channels", r.channels}};
      ts.push_back(jt);
    }
    return ts;
  };
  RKD_ASSIGN(jc["tasks"], tasks_json(l, 0, "task"));
  // After the convolution's tasks (the same register-command chain): the 1 x 1 permutation
  // convolution reading the regions as one map and writing every channel in order.
  if (ln.compaction) {
    RKD_ASSIGN(jc["compaction"], tasks_json(ln.compaction_lowered, l.tasks.size(), "compact"));
  }
  jc["jobs"] = jobs_json(ln, c.cores);
  return jc;
}

// ---------------------------------------------------------------------------------------------
// Element-wise, table, pooling and copy tasks: one entry layout, each family's own fields.

// What an element-wise family adds to the common entry.
struct EltwiseEntry {
  std::string op;
  L::MapShape shape;
  json geometry = json::object();  // fields after C, H, W, dtype
  json extra = json::object();     // fields after the geometry (scratch maps, completion)
  // x: one input X (MRDMA; x_ppu: PPU_RDMA); parts: part i read by task i; two: main_operand
  // (MRDMA) and ew_operand (ERDMA).
  enum class Inputs { x, x_ppu, parts, two } inputs = Inputs::x;
  std::string main_operand = "X", ew_operand = "X";
  bool b_per_channel = false;  // a binary op's B: one value per channel (EW_DATA_MODE 0)
  bool part_outputs = false;   // a Split: one output per part
  json tail = json::object();  // fields after the jobs (a table, its differences)
};

json scratch_maps(const L::LoweredEltwise& l, const npu::DeviceMemory& mem) {
  json s = json::array();
  for (const L::Buffer& b : l.buffers) {
    if (b.kind == L::BufferKind::scratch) s.push_back({{"device_offset", b.address - mem.base()}, {"bytes", b.bytes}});
  }
  return s;
}

Result<json> eltwise_manifest(const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c, const EltwiseEntry& e) {
  const L::LoweredEltwise& l = ln.eltwise;
  const npu::DeviceMemory& mem = *c.mem;
  json je;
  je["node"] = n.name;
  je["op"] = e.op;
  je["directory"] = c.directory;
  je["geometry"] = {{"C", e.shape.C}, {"H", e.shape.H}, {"W", e.shape.W}, {"dtype", dtype_name(e.shape.dtype)}};
  for (const auto& [k, v] : e.geometry.items()) je["geometry"][k] = v;
  for (const auto& [k, v] : e.extra.items()) je[k] = v;
  json& ins = je["inputs"] = json::array();
  auto input = [&](const std::string& operand, const char* read_by, uint32_t address, int64_t surface) {
    ins.push_back({{"operand", operand}, {"read_by", read_by}, {"device_offset", address - mem.base()}, {"surface_bytes", surface}});
  };
  switch (e.inputs) {
    case EltwiseEntry::Inputs::parts:
      // Part i is read by task i (MRDMA), which writes it at its channel offset of the output.
      for (size_t i = 0; i < l.part_addresses.size(); ++i) input("part" + std::to_string(i), "MRDMA", l.part_addresses[i], l.main_surface_bytes);
      break;
    case EltwiseEntry::Inputs::x:
    case EltwiseEntry::Inputs::x_ppu:
      input("X", e.inputs == EltwiseEntry::Inputs::x_ppu ? "PPU_RDMA" : "MRDMA", l.main_address, l.main_surface_bytes);
      break;
    case EltwiseEntry::Inputs::two:
      input(e.main_operand, "MRDMA", l.main_address, l.main_surface_bytes);
      input(e.ew_operand, "ERDMA", l.ew_address, l.ew_surface_bytes);
      // One value per channel: a [1, C, 1, 1] (or one-element) B as a vector of 16-channel atoms.
      if (e.b_per_channel) ins.back()["per_channel"] = true;
      break;
  }
  for (auto& in : ins) {
    const uint32_t address = static_cast<uint32_t>(mem.base() + in["device_offset"].get<uint64_t>());
    size_t data_input = ln.read_from.size();
    for (size_t i = 0; i < l.input_maps.size() && data_input == ln.read_from.size(); ++i) {
      for (const auto& m : l.input_maps[i])
        if (m.address == address) data_input = i;
    }
    in.update(source_of_input(ln, data_input));
  }
  if (e.part_outputs) {
    // Task i writes part i into its own map.
    je["outputs"] = json::array();
    for (uint32_t a : l.part_addresses) {
      c.host_reads("/outputs/" + std::to_string(je["outputs"].size()) + "/read_by_host", ln.host_reads.at(je["outputs"].size()));
      je["outputs"].push_back({{"device_offset", a - mem.base()}, {"surface_bytes", l.output_surface_bytes}});
    }
  } else {
    je["output"] = {{"device_offset", l.output_address - mem.base()}, {"surface_bytes", l.output_surface_bytes}};
    c.host_reads("/output/read_by_host", ln.host_reads.at(0));
  }
  je["layout"] = "NC1HWC2, C2 = 16, stored int8 (uint8 - 128); padding lanes carry no meaning";
  // Rows [..., P, C] (a tensor other than a [1, C, H, W] map): the map's H x W positions in order.
  if (ln.channels_last) je["host_layout"] = "rows: [..., P, C], the map's H x W positions in order";
  je["tasks"] = json::array();
  const auto* wbytes = reinterpret_cast<const uint8_t*>(ln.regcmd.words.data());
  for (size_t t = 0; t < ln.regcmd.spans.size(); ++t) {
    const auto& span = ln.regcmd.spans[t];
    const std::string file = c.directory + "/" + npu_numbered("task", t) + ".regcmd";
    RKD_TRY(c.write(file, std::span<const uint8_t>(wbytes + span.first_word * 8, span.word_count * 8)));
    je["tasks"].push_back({{"regcmd", file}, {"device_offset", span.address - mem.base()}, {"words", span.word_count}});
  }
  je["jobs"] = jobs_json(ln, c.cores);
  for (const auto& [k, v] : e.tail.items()) je[k] = v;
  return je;
}

// The lowering of a family whose spec comes from the node: its maps and tasks in the session.
template <typename Spec>
Result<std::shared_ptr<NpuLoweredNode>> lower_spec(const Node& n, const std::shared_ptr<NpuSession>& s, Result<Spec> (*spec_of)(const Node&),
                                                   Result<L::LoweredEltwise> (*lower)(const Spec&, npu::DeviceMemory&, const L::InputsAt&),
                                                   std::vector<size_t> data_inputs) {
  RKD_ASSIGN(Spec spec, spec_of(n));
  return lower_eltwise_node(
      n, s, [spec, lower](npu::DeviceMemory& m, const L::InputsAt& at) { return lower(spec, m, at); }, std::move(data_inputs));
}

// ---------------------------------------------------------------------------------------------
// Binary element-wise operations (the EW stage): Add, and Sub / Max / Min, Mul.

bool binary_candidate(const Node& n, bool add) {
  if (n.op_type.rfind("QLinear", 0) != 0) return false;
  const auto alu = binary_alu_of(n);
  return alu && (*alu == quant::BinaryAlu::add) == add;
}

Result<json> binary_manifest(const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) {
  RKD_ASSIGN(L::AddSpec spec, npu_add_spec(n));
  EltwiseEntry e{quant::to_string(spec.alu), spec};
  e.inputs = EltwiseEntry::Inputs::two;
  // The operand of the larger scale is the main one (read by MRDMA).
  e.main_operand = ln.eltwise.b_is_main ? "B" : "A";
  e.ew_operand = ln.eltwise.b_is_main ? "A" : "B";
  e.b_per_channel = spec.b != L::BOperand::map;
  return eltwise_manifest(n, ln, c, e);
}

std::string binary_npu_op(const Node& n) { return std::string("Npu") + quant::to_string(binary_alu_of(n).value_or(quant::BinaryAlu::add)); }

Result<std::shared_ptr<NpuLoweredNode>> binary_lower(const Node& n, const std::shared_ptr<NpuSession>& s) {
  return lower_spec(n, s, &npu_add_spec, &L::lower_add, {0, 3});
}

NpuOpFamily add_family() {
  return NpuOpFamily{
      .name = "Add",
      .npu_ops = {"NpuAdd"},
      .lowered = "Adds",
      .sources = {"Add"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .rows = true,
      .candidate = [](const Node& n) { return binary_candidate(n, true); },
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_add_spec(n)); },
      .npu_op = &binary_npu_op,
      .lower = &binary_lower,
      .manifest = &binary_manifest,
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) { return counted(p, "Add(s) as DPU tasks"); },
  };
}

NpuOpFamily sub_max_min_family() {
  return NpuOpFamily{
      .name = "Sub/Max/Min",
      .npu_ops = {"NpuSub", "NpuMax", "NpuMin"},
      .lowered = "Subs, Maxes, Mins",
      .sources = {"Sub", "Max", "Min"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .rows = true,
      .candidate = [](const Node& n) { return binary_candidate(n, false); },
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_add_spec(n)); },
      .npu_op = &binary_npu_op,
      .lower = &binary_lower,
      .manifest = &binary_manifest,
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) { return counted(p, "Sub/Max/Min as DPU tasks"); },
  };
}

NpuOpFamily mul_family() {
  return NpuOpFamily{
      .name = "Mul",
      .npu_ops = {"NpuMul"},
      .lowered = "Muls",
      .sources = {"Mul"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .rows = true,
      .candidate = [](const Node& n) { return is_rkdeploy(n, "QLinearMul"); },
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_mul_spec(n)); },
      .npu_op = [](const Node&) { return std::string("NpuMul"); },
      .lower =
          [](const Node& n, const std::shared_ptr<NpuSession>& s) {
            return lower_spec(n, s, &npu_mul_spec, &L::lower_mul, {0, 3});
          },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::MulSpec spec, npu_mul_spec(n));
        EltwiseEntry e{"Mul", spec};
        e.inputs = EltwiseEntry::Inputs::two;
        e.main_operand = "A";
        e.ew_operand = "B";
        e.b_per_channel = spec.b != L::BOperand::map;
        return eltwise_manifest(n, ln, c, e);
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) { return counted(p, "Mul(s) as DPU tasks"); },
  };
}

// ---------------------------------------------------------------------------------------------
// Tables: a LeakyRelu as the EW stage's max where that arithmetic is the table's (rknpu_out_cvt);
// every other table (and a LeakyRelu whose table differs) through the DPU's LUT, which
// reproduces any table exactly.

bool leaky_relu_candidate(const Node& n) {
  if (!is_rkdeploy(n, "QLinearLut") || !n.attrs.count("rkd_op")) return false;
  auto d = npu_leaky_relu_table_differences(n);
  return d.ok() && (*d == 0 || !npu_lut_spec(n).ok());
}

NpuOpFamily leaky_relu_family() {
  return NpuOpFamily{
      .name = "LeakyRelu",
      .npu_ops = {"NpuLeakyRelu"},
      .lowered = "LeakyRelu tables",
      .sources = {"LeakyRelu"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .rows = true,
      .candidate = &leaky_relu_candidate,
      .lowerable = [](const Node&, const NpuPlacementOptions&) { return Status(); },  // the candidate test built its spec
      .rewrite = [](ir::Graph&, Node* n, const NpuPlacementOptions&, ir::NpuFamilyPlacement& p) -> Node* {
        int& most = p.notes["table_differences"];
        most = std::max(most, npu_leaky_relu_table_differences(*n).value_or(0));
        return n;
      },
      .npu_op = [](const Node&) { return std::string("NpuLeakyRelu"); },
      .lower = [](const Node& n, const std::shared_ptr<NpuSession>& s) { return lower_spec(n, s, &npu_leaky_relu_spec, &L::lower_leaky_relu, {0}); },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::LeakyReluSpec spec, npu_leaky_relu_spec(n));
        RKD_ASSIGN(int differences, npu_leaky_relu_table_differences(n));
        EltwiseEntry e{"LeakyRelu", spec};
        e.inputs = EltwiseEntry::Inputs::two;  // x twice: the EW stage's max(x, alpha x)
        e.tail["table_entries_differing"] = differences;
        return eltwise_manifest(n, ln, c, e);
      },
      .report =
          [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) {
            return std::to_string(p.placed) + " LeakyRelu(s) as DPU tasks (their tables differ from the NPU's in at most " +
                   std::to_string(note(p, "table_differences")) + " of 256 entries)";
          },
  };
}

NpuOpFamily lut_family() {
  return NpuOpFamily{
      .name = "Lut",
      .npu_ops = {"NpuLut"},
      .lowered = "other lookup tables (Sigmoid, SiLU, HardSwish, ...)",
      .sources = {"Sigmoid", "Tanh", "Erf", "Sqrt", "HardSwish", "HardSigmoid", "Exp"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .rows = true,
      .next_to_npu = true,
      .candidate = [](const Node& n) { return is_rkdeploy(n, "QLinearLut"); },
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_lut_spec(n)); },
      .npu_op = [](const Node&) { return std::string("NpuLut"); },
      .lower = [](const Node& n, const std::shared_ptr<NpuSession>& s) { return lower_spec(n, s, &npu_lut_spec, &L::lower_lut, {0}); },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::LutSpec spec, npu_lut_spec(n));
        EltwiseEntry e{"Lut", spec};
        e.tail["table"] = spec.table;  // its 256 output codes (its tasks upload them)
        return eltwise_manifest(n, ln, c, e);
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&,
                   const std::string&) { return counted(p, "other table(s) through the DPU's LUT"); },
  };
}

// ---------------------------------------------------------------------------------------------
// Pooling, padding and copies.

NpuOpFamily max_pool_family() {
  return NpuOpFamily{
      .name = "MaxPool",
      .npu_ops = {"NpuMaxPool"},
      .lowered = "max pooling",
      .sources = {"MaxPool"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .next_to_npu = true,
      .ppu_only = true,
      .candidate = &npu_max_pool_candidate,
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_max_pool_spec(n)); },
      .npu_op = [](const Node&) { return std::string("NpuMaxPool"); },
      .lower = [](const Node& n, const std::shared_ptr<NpuSession>& s) { return lower_spec(n, s, &npu_max_pool_spec, &L::lower_max_pool, {0}); },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::MaxPoolSpec spec, npu_max_pool_spec(n));
        EltwiseEntry e{"MaxPool", spec};
        const L::MapShape o = spec.output();
        e.geometry = {{"OH", o.H},
                      {"OW", o.W},
                      {"kernel", {spec.kernel_h, spec.kernel_w}},
                      {"stride", {spec.stride_h, spec.stride_w}},
                      {"pads", {spec.pad_top, spec.pad_left, spec.pad_bottom, spec.pad_right}}};
        // A PPU-only task ends with the PPU's interrupts; mainline's rocket waits for the DPU's.
        e.extra["completion"] = "PPU interrupt (mainline rocket signals DPU interrupts only: docs/npu.md)";
        e.inputs = EltwiseEntry::Inputs::x_ppu;
        return eltwise_manifest(n, ln, c, e);
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) { return counted(p, "MaxPool(s) as PPU tasks"); },
  };
}

// The Pad (mode edge, by 1 cell on each side of height and width, nothing else) that is the
// only reader of n's output, or nullptr.
Node* edge_pad_reader(const ir::Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || !n.outputs[0] || n.outputs[0]->consumers.size() != 1) return nullptr;
  if (std::find(g.outputs.begin(), g.outputs.end(), n.outputs[0]) != g.outputs.end()) return nullptr;
  Node* p = n.outputs[0]->consumers[0];
  if (p->op_type != "Pad" || !p->domain.empty() || p->inputs.size() < 2 || p->inputs[0] != n.outputs[0] || !p->inputs[1] || !p->inputs[1]->constant)
    return nullptr;
  if (p->attr_string("mode", "constant").value_or("") != "edge" || (p->inputs.size() > 3 && p->inputs[3])) return nullptr;
  const Tensor& pads = *p->inputs[1]->constant;
  const int64_t want[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  if (pads.numel() != 8) return nullptr;
  for (int64_t i = 0; i < 8; ++i)
    if (pads.get_as_double(i) != static_cast<double>(want[i])) return nullptr;
  return p;
}

// A nearest x2 Resize read only by a Pad edge by 1 on height and width (qdq-to-qlinear's
// bilinear x2: the depthwise convolution after them blends): one Resize (rkd_edge_pad) writing
// the padded map, where the lowering takes it. Its edge copies are PPU-only tasks: not on a
// mainline device.
Status merge_edge_pads(ir::Graph& g, const NpuPlacementOptions& o) {
  if (!o.ppu_only_tasks) return {};
  std::vector<std::pair<Node*, Node*>> edges;
  for (const auto& np : g.nodes()) {
    if (Node* pad = edge_pad_reader(g, *np); pad && npu_upsample2_candidate(*np)) edges.emplace_back(np.get(), pad);
  }
  for (auto [n, pad] : edges) {
    auto e = g.add_node(n->name + "/edge", "Resize", "", n->inputs, {g.fresh_name(pad->outputs[0]->name + "/npu")});
    if (!e.ok()) return e.error();
    Node* m = *e;
    m->attrs = n->attrs;
    m->attrs["rkd_edge_pad"] = int64_t{1};
    m->outputs[0]->dtype = pad->outputs[0]->dtype;
    m->outputs[0]->shape = pad->outputs[0]->shape;
    if (!npu_upsample2_spec(*m).ok()) {
      g.remove_nodes([m](const Node& x) { return &x == m; });
      continue;
    }
    g.move_output(pad, 0, m, 0);
    g.remove_nodes([resize = n, p = pad](const Node& x) { return &x == resize || &x == p; });  // clang 14: no captured bindings
  }
  if (!edges.empty()) RKD_TRY(g.sort_topologically());
  return {};
}

NpuOpFamily pad_family() {
  return NpuOpFamily{
      .name = "Pad",
      .npu_ops = {"NpuPad"},
      .lowered = "channel Pads",
      .sources = {"Pad"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .next_to_npu = true,
      .candidate = &npu_channel_pad_candidate,
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_channel_pad_spec(n)); },
      .npu_op = [](const Node&) { return std::string("NpuPad"); },
      .lower = [](const Node& n,
                  const std::shared_ptr<NpuSession>& s) { return lower_spec(n, s, &npu_channel_pad_spec, &L::lower_channel_pad, {0}); },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::ChannelPadSpec spec, npu_channel_pad_spec(n));
        EltwiseEntry e{"Pad", spec};
        e.geometry["pad_channels"] = spec.pad_end;
        return eltwise_manifest(n, ln, c, e);
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) { return counted(p, "channel Pad(s) as DPU tasks"); },
  };
}

NpuOpFamily resize_family() {
  return NpuOpFamily{
      .name = "Resize",
      .npu_ops = {"NpuResize"},
      .lowered = "nearest x2 Resizes (with an edge Pad: a bilinear one's)",
      .sources = {"Resize"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .next_to_npu = true,
      .candidate = &npu_upsample2_candidate,
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_upsample2_spec(n)); },
      .before = &merge_edge_pads,
      .rewrite = [](ir::Graph&, Node* n, const NpuPlacementOptions&, ir::NpuFamilyPlacement& p) -> Node* {
        if (n->attr_int("rkd_edge_pad", 0).value_or(0) != 0) ++p.notes["edge_padded"];
        return n;
      },
      .npu_op = [](const Node&) { return std::string("NpuResize"); },
      .lower = [](const Node& n, const std::shared_ptr<NpuSession>& s) { return lower_spec(n, s, &npu_upsample2_spec, &L::lower_upsample2, {0}); },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::Upsample2Spec spec, npu_upsample2_spec(n));
        EltwiseEntry e{"Resize", spec};
        // The columns into device-only scratch maps, then their lines (eltwise.h); a Resize with a
        // Pad edge merged (a bilinear x2's first half) writes the map 1 cell larger on each side.
        const int64_t edge = spec.edge ? 1 : 0;
        e.geometry = {{"edge_pad", edge}, {"OH", 2 * spec.H + 2 * edge}, {"OW", 2 * spec.W + 2 * edge}};
        e.extra["scratch"] = scratch_maps(ln.eltwise, *c.mem);
        return eltwise_manifest(n, ln, c, e);
      },
      .report =
          [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) {
            return counted(p, "nearest x2 Resize(s) as NPU tasks (" + std::to_string(note(p, "edge_padded")) + " edge-padded for a bilinear one)");
          },
  };
}

NpuOpFamily depth_to_space_family() {
  return NpuOpFamily{
      .name = "DepthToSpace",
      .npu_ops = {"NpuDepthToSpace"},
      .lowered = "DepthToSpace",
      .sources = {"DepthToSpace", "ConvTranspose"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .next_to_npu = true,
      .candidate = &npu_depth_to_space_candidate,
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_depth_to_space_spec(n)); },
      .npu_op = [](const Node&) { return std::string("NpuDepthToSpace"); },
      .lower = [](const Node& n,
                  const std::shared_ptr<NpuSession>& s) { return lower_spec(n, s, &npu_depth_to_space_spec, &L::lower_depth_to_space2, {0}); },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::DepthToSpace2Spec spec, npu_depth_to_space_spec(n));
        EltwiseEntry e{"DepthToSpace", spec};
        e.geometry = {{"OC", spec.C / 4}, {"OH", 2 * spec.H}, {"OW", 2 * spec.W}};
        e.extra["scratch"] = scratch_maps(ln.eltwise, *c.mem);
        return eltwise_manifest(n, ln, c, e);
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&,
                   const std::string&) { return counted(p, "DepthToSpace(s) as DPU copy tasks"); },
  };
}

NpuOpFamily split_family() {
  return NpuOpFamily{
      .name = "Split",
      .npu_ops = {"NpuSplit"},
      .lowered = "channel Splits",
      .sources = {"Split"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .next_to_npu = true,
      .candidate = &npu_split_candidate,
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_split_spec(n)); },
      .npu_op = [](const Node&) { return std::string("NpuSplit"); },
      .lower = [](const Node& n, const std::shared_ptr<NpuSession>& s) { return lower_spec(n, s, &npu_split_spec, &L::lower_split, {0}); },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::SplitSpec spec, npu_split_spec(n));
        EltwiseEntry e{"Split", spec};
        e.part_outputs = true;
        return eltwise_manifest(n, ln, c, e);
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) { return counted(p, "Split(s) as DPU copy tasks"); },
  };
}

NpuOpFamily concat_family() {
  return NpuOpFamily{
      .name = "Concat",
      .npu_ops = {"NpuConcat"},
      .lowered = "channel Concats",
      .sources = {"Concat"},
      .section = "elementwise",
      .entry_prefix = "eltwise",
      .next_to_npu = true,
      .alone = "every part's producer and every reader run on the CPU",
      .candidate = &npu_concat_candidate,
      .lowerable = [](const Node& n, const NpuPlacementOptions&) { return status_of(npu_concat_spec(n)); },
      .npu_op = [](const Node&) { return std::string("NpuConcat"); },
      .lower =
          [](const Node& n, const std::shared_ptr<NpuSession>& s) {
            std::vector<size_t> parts(n.inputs.size());  // every input is a part
            for (size_t i = 0; i < parts.size(); ++i) parts[i] = i;
            return lower_spec(n, s, &npu_concat_spec, &L::lower_concat, parts);
          },
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(L::ConcatSpec spec, npu_concat_spec(n));
        EltwiseEntry e{"Concat", spec};
        e.inputs = EltwiseEntry::Inputs::parts;
        return eltwise_manifest(n, ln, c, e);
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&, const std::string&) { return counted(p, "Concat(s) as DPU copy tasks"); },
  };
}

NpuOpFamily conv_family() {
  return NpuOpFamily{
      .name = "Conv",
      .npu_ops = {"NpuConv"},
      .lowered = "int8 convolutions",
      .sources = {"Conv", "QLinearConv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "ReduceMean", "Relu", "Clip"},
      .float_forms = {"Conv", "ConvTranspose"},
      .section = "convolutions",
      .entry_prefix = "conv",
      .candidate = &conv_candidate,
      .lowerable = &conv_lowerable,
      .before = [](ir::Graph& g, const NpuPlacementOptions&) { return patch_embeddings_as_1x1(g); },
      .rewrite = &conv_rewrite,
      .npu_op = [](const Node&) { return std::string("NpuConv"); },
      .lower = &lower_conv_node,
      .manifest = &conv_manifest,
      .report = &conv_report,
  };
}

// ---------------------------------------------------------------------------------------------
// Matrix products with a constant operand: 1 x 1 convolutions over the token map.

NpuOpFamily matmul_family() {
  return NpuOpFamily{
      .name = "MatMul",
      .npu_ops = {"NpuMatMul"},
      .lowered = "matrix products with a constant operand (1 x 1 convolutions over the rows)",
      .sources = {"MatMul", "Gemm", "QLinearMatMul"},
      .float_forms = {"MatMul", "Gemm"},
      .section = "convolutions",
      .entry_prefix = "matmul",
      .candidate = [](const Node& n) { return n.op_type == "QLinearMatMul" && n.domain.empty(); },
      .lowerable = &conv_lowerable,
      .rewrite = [](ir::Graph&, Node* n, const NpuPlacementOptions& o, ir::NpuFamilyPlacement&) { return with_strategy(n, o); },
      .npu_op = [](const Node&) { return std::string("NpuMatMul"); },
      .lower = &lower_conv_node,
      .manifest = [](const Node& n, const NpuLoweredNode& ln, const NpuManifestContext& c) -> Result<json> {
        RKD_ASSIGN(json j, conv_manifest(n, ln, c));
        // The host's A and Y are the map channels-last: rows [..., P, C], P = H x W.
        j["geometry"]["rows"] = ln.conv ? ln.conv->H * ln.conv->W : 0;
        j["input"]["host_layout"] = "rows: [..., P, C], the map's H x W positions in order";
        return j;
      },
      .report = [](const ir::NpuFamilyPlacement& p, const std::string&,
                   const std::string&) { return counted(p, "matrix product(s) as 1x1 convolutions"); },
  };
}

// Whether a node placed on the NPU produces one of n's inputs or reads one of its outputs,
// looking through the Identities a dropped DequantizeLinear -> QuantizeLinear pair leaves.
bool next_to_npu_node(const Node& n) {
  auto on_npu = [](const Node* m) { return m && ir::op_has(*m, ir::kOnNpu); };
  for (const Value* v : n.inputs) {
    const Node* p = v ? v->producer : nullptr;
    while (p && p->op_type == "Identity" && p->domain.empty() && !p->inputs.empty() && p->inputs[0]) p = p->inputs[0]->producer;
    if (on_npu(p)) return true;
  }
  std::vector<const Value*> todo(n.outputs.begin(), n.outputs.end());
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (!v) continue;
    for (const Node* r : v->consumers) {
      if (on_npu(r)) return true;
      if (r->op_type == "Identity" && r->domain.empty()) {
        for (const Value* o : r->outputs) todo.push_back(o);
      }
    }
  }
  return false;
}

}  // namespace

std::string npu_numbered(const char* prefix, size_t i) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%03zu", prefix, i);
  return b;
}

const std::vector<NpuOpFamily>& npu_op_families() {
  // Placement order: the convolutions and matrix products first (their neighbours' next_to_npu reads them), the
  // LeakyRelu tables before the other tables, the Splits before the Concats (a Concat of a
  // placed Split's parts has it as neighbour). Within a family the candidates go in graph
  // (topological) order, so a next_to_npu decision sees its producers' and not its readers'.
  // (Built at the first call: the records' vectors need no static initialisation order.)
  static const std::vector<NpuOpFamily> t{conv_family(),           matmul_family(), add_family(),      sub_max_min_family(), mul_family(),
                                          leaky_relu_family(),     lut_family(),    max_pool_family(), pad_family(),         resize_family(),
                                          depth_to_space_family(), split_family(),  concat_family()};
  return t;
}

const NpuOpFamily* npu_family_of(const Node& n) {
  if (n.domain != "rkdeploy") return nullptr;
  for (const NpuOpFamily& f : npu_op_families()) {
    for (const char* op : f.npu_ops)
      if (n.op_type == op) return &f;
  }
  return nullptr;
}

ir::Pass npu_placement_pass(const NpuPlacementOptions& o, ir::FusionReport* report) {
  return ir::Pass{"npu-placement", [o, report](ir::Graph& g) -> Status {
                    const std::string knobs = npu::sim::knob_assignments(o.quirks);
                    ir::FusionReport local;
                    ir::FusionReport& r = report ? *report : local;
                    // The rewrites first: they change which nodes are candidates, not where any is placed.
                    for (const NpuOpFamily& f : npu_op_families())
                      if (f.before) RKD_TRY(f.before(g, o));
                    // Places n (lowerable) in family f; true when a rewrite replaced it (a re-sort is due).
                    auto place = [&](const NpuOpFamily& f, ir::NpuFamilyPlacement& p, Node* n) {
                      Node* m = f.rewrite ? f.rewrite(g, n, o, p) : n;
                      m->op_type = f.npu_op(*m);
                      m->domain = "rkdeploy";
                      m->attrs["rkd_npu_knobs"] = knobs;
                      ++p.placed;
                      return m != n;
                    };
                    struct Alone {
                      const NpuOpFamily* family;
                      Node* node;
                      std::string name;
                    };
                    std::vector<Alone> alone;  // lowerable, but no NPU neighbour yet
                    for (const NpuOpFamily& f : npu_op_families()) {
                      ir::NpuFamilyPlacement& p = r.npu[f.name];
                      std::vector<Node*> candidates;
                      for (const auto& np : g.nodes()) {
                        if (f.candidate(*np)) candidates.push_back(np.get());
                        // A float node of the family's kind (kept in float by the quantizer's plan) is
                        // one of its operations on the CPU too.
                        for (const char* op : f.float_forms) {
                          if (np->domain.empty() && np->op_type == op) p.on_cpu.push_back(np->name + ": float (not quantized), runs on the CPU");
                        }
                      }
                      bool resort = false;
                      for (Node* n : candidates) {
                        Status lowerable = f.lowerable(*n, o);
                        if (lowerable.ok() && f.ppu_only && !o.ppu_only_tasks)
                          lowerable = unsupported(
                              "a PPU-only task: mainline's rocket driver learns of a task's end only through the DPU's "
                              "interrupt, so it would never complete (docs/device.md)");
                        if (lowerable.ok() && f.next_to_npu && !next_to_npu_node(*n)) {
                          // Alone for now: a family placed later may put a neighbour on the NPU.
                          alone.push_back({&f, n, n->name});
                          continue;
                        }
                        if (!lowerable.ok()) {
                          p.on_cpu.push_back(n->name + ": " + lowerable.error().message);
                          continue;
                        }
                        resort = place(f, p, n) || resort;
                      }
                      if (resort) RKD_TRY(g.sort_topologically());
                    }
                    // The nodes that were alone, until none has a new NPU neighbour (placing one can
                    // give another its neighbour: a table between a Split and a copy). Their
                    // rewrites never replace the node (only the convolution's does; it is not
                    // next_to_npu); one a later family's rewrite removed is forgotten.
                    std::map<std::string, Node*> by_name;
                    for (const auto& np : g.nodes()) by_name[np->name] = np.get();
                    for (Alone& a : alone) {
                      auto it = by_name.find(a.name);
                      if (it == by_name.end() || it->second != a.node || !a.family->candidate(*a.node)) a.node = nullptr;
                    }
                    for (bool placed_one = true; placed_one;) {
                      placed_one = false;
                      for (Alone& a : alone) {
                        if (!a.node || !next_to_npu_node(*a.node)) continue;
                        place(*a.family, r.npu[a.family->name], a.node);
                        a.node = nullptr;
                        placed_one = true;
                      }
                    }
                    for (const Alone& a : alone)
                      if (a.node)
                        r.npu[a.family->name].on_cpu.push_back(a.name + ": " +
                                                               (a.family->alone ? a.family->alone : "its producer and every reader run on the CPU"));
                    return {};
                  }};
}

std::string npu_placement_text(const ir::FusionReport& f, const std::string& where, const std::string& strategy) {
  std::string s = "npu: ";
  const ir::NpuFamilyPlacement none;
  for (const NpuOpFamily& fam : npu_op_families()) {
    auto it = f.npu.find(fam.name);
    s += (&fam == &npu_op_families().front() ? "" : "; ") + fam.report(it == f.npu.end() ? none : it->second, where, strategy);
  }
  return s;
}

namespace {

// The executor's devices: -1 a view (no computation: it joins whichever run it is in), 1 an NPU
// node, 0 a CPU node.
int executor_device(const ir::Node& n) {
  if (ir::op_has(n, ir::kView)) return -1;
  return ir::op_has(n, ir::kOnNpu) ? 1 : 0;
}

int switches_in(const std::vector<const ir::Node*>& order) {
  int runs = 0, last = -1;
  for (const ir::Node* n : order) {
    const int d = executor_device(*n);
    if (d < 0) continue;
    runs += d != last;
    last = d;
  }
  return std::max(runs - 1, 0);
}

}  // namespace

int npu_device_switches(const ir::Graph& g) {
  std::vector<const ir::Node*> order;
  for (const auto& np : g.nodes()) order.push_back(np.get());
  return switches_in(order);
}

std::vector<const ir::Node*> npu_schedule(const ir::Graph& g) {
  int first = 0;
  for (const auto& np : g.nodes()) {
    if (executor_device(*np) >= 0) {
      first = executor_device(*np);
      break;
    }
  }
  std::vector<const ir::Node*> a = ir::device_grouped_order(g, executor_device, first), b = ir::device_grouped_order(g, executor_device, 1 - first);
  if (b.size() == g.nodes().size() && (a.size() != g.nodes().size() || switches_in(b) < switches_in(a))) return b;
  return a;
}

ir::Pass npu_schedule_pass() {
  return ir::Pass{"npu-schedule", [](ir::Graph& g) -> Status { return g.set_node_order(npu_schedule(g)); }};
}

std::string npu_lowered_ops_text() {
  std::string s;
  const auto& t = npu_op_families();
  for (size_t i = 0; i < t.size(); ++i) s += (i == 0 ? "" : i + 1 == t.size() ? " and " : ", ") + std::string(t[i].lowered);
  return s;
}

std::string npu_cpu_reason(const ir::FusionReport& f, const std::string& name) {
  for (const auto& [family, p] : f.npu) {
    for (const std::string& e : p.on_cpu) {
      if (e.size() > name.size() + 2 && e.compare(0, name.size() + 2, name + ": ") == 0) return e.substr(name.size() + 2);
    }
  }
  return "";
}

}  // namespace rkd::runtime
