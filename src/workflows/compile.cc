#include "workflows/compile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "core/json_style.h"
#include "core/npy.h"
#include "ir/op_info.h"
#include "npu/regcmd/regcmd.h"
#include "runtime/executor.h"
#include "runtime/model.h"
#include "runtime/npu_conv.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

namespace {

namespace fs = std::filesystem;

std::string numbered(const char* prefix, size_t i) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%03zu", prefix, i);
  return b;
}

}  // namespace

Result<NpuCompileSummary> compile_for_npu(const std::string& model, npu::lower::Strategy strategy, const std::string& out_dir, int cores,
                                          bool mainline) {
  RKD_ASSIGN(ImportedModel imp, import_model(model, 1));
  ir::Graph g = std::move(imp.graph);
  CompileOptions co;
  co.int8 = true;
  co.channels_last = false;  // the QLinearConvs' NCHW geometry is read below
  // The runtime's own placement (npu-sim-placement): compile lists on the NPU exactly what
  // `run --backend sim` runs there, and every other node with the placement's reason.
  co.npu_sim_strategy = npu::lower::strategy_name(strategy);
  co.npu_mainline = mainline;
  ir::FusionReport placement;
  RKD_TRY(optimize(g, co, &placement));
  auto cpu_reason = [&placement](const ir::Node& n) -> std::string {
    for (const auto* list : placement.npu_cpu_lists()) {
      for (const std::string& e : *list) {
        if (e.size() > n.name.size() + 2 && e.compare(0, n.name.size() + 2, n.name + ": ") == 0) return e.substr(n.name.size() + 2);
      }
    }
    return "the NPU back end lowers int8 convolutions, Adds, Subs, Maxes, Mins, Muls, lookup tables (LeakyRelu, Sigmoid, SiLU, ...), max pooling, "
           "channel Pads, "
           "nearest x2 Resizes (with an edge Pad: a bilinear one's), DepthToSpace and channel Concats and Splits only (yet)";
  };
  const fs::path tmp(out_dir);
  std::error_code ec;
  if (!fs::is_directory(tmp, ec)) return io_error(out_dir + ": not a folder");

  // The runtime's own lowering: every NPU node into one session's device memory in graph order,
  // an input another NPU node's output holds in the reader's layout read there (npu_conv.h).
  std::shared_ptr<NpuSession> session = make_npu_session(g.outputs);
  const npu::DeviceMemory& mem = npu_session_memory(*session);
  // Where each NPU input comes from: an NPU node's output in place, or the host.
  auto source = [](const NpuLoweredNode& ln, size_t data_input) {
    const ir::Value* v = data_input < ln.read_from.size() ? ln.read_from[data_input] : nullptr;
    if (!v) return nlohmann::ordered_json{{"written_by", "host"}};
    return nlohmann::ordered_json{{"written_by", "npu"}, {"from", {{"node", v->producer ? v->producer->name : ""}, {"value", v->name}}}};
  };
  auto eltwise_source = [&source](const NpuLoweredNode& ln, uint32_t address) {
    for (size_t i = 0; i < ln.eltwise.input_maps.size(); ++i) {
      for (const auto& m : ln.eltwise.input_maps[i]) {
        if (m.address == address) return source(ln, i);
      }
    }
    return source(ln, ln.read_from.size());
  };
  // Whether the host reads an output back: decided once every node is lowered.
  std::vector<std::pair<nlohmann::json_pointer<std::string>, std::function<bool()>>> host_reads;
  NpuCompileSummary sum;
  nlohmann::ordered_json man;
  man["written_by"] = kCompileWrittenBy;
  man["target"] = npu::arch::kRk3588.name;
  man["strategy"] = npu::lower::strategy_name(strategy);
  man["model"] = model;
  man["device_base"] = mem.base();
  man["cores"] = cores;
  man["mainline"] = mainline;
  // A node's jobs on a device (npu_node_jobs): task indices into its "tasks" (then "compaction").
  auto jobs_json = [cores](const NpuLoweredNode& ln) {
    nlohmann::ordered_json js = nlohmann::ordered_json::array();
    for (const auto& j : npu_node_jobs(ln, cores)) js.push_back({{"stage", j.stage}, {"tasks", j.tasks}});
    return js;
  };
  man["convolutions"] = nlohmann::ordered_json::array();
  man["cpu"] = nlohmann::ordered_json::array();
  man["views"] = nlohmann::ordered_json::array();
  std::map<std::string, int> cpu_ops;
  const bool any_npu =
      std::any_of(g.nodes().begin(), g.nodes().end(), [](const auto& np) { return np->op_type == "QLinearConv" || ir::op_has(*np, ir::kOnNpu); });
  if (!any_npu) {
    return unsupported(model + ": no int8 operation to lower (a float model? rkdeploy quantize writes a QDQ model; docs/quantization.md)");
  }
  man["elementwise"] = nlohmann::ordered_json::array();
  for (const auto& np : g.nodes()) {
    const ir::Node& n = *np;
    const bool on_npu = n.domain == "rkdeploy";
    const auto alu = ir::op_has(n, ir::kOnNpu) ? binary_alu_of(n) : std::nullopt;  // NpuAdd, NpuSub, NpuMax, NpuMin
    const bool add = alu.has_value(), mul = on_npu && n.op_type == "NpuMul", leaky = on_npu && n.op_type == "NpuLeakyRelu",
               concat = on_npu && n.op_type == "NpuConcat", split = on_npu && n.op_type == "NpuSplit", lut = on_npu && n.op_type == "NpuLut",
               pool = on_npu && n.op_type == "NpuMaxPool", pad = on_npu && n.op_type == "NpuPad", resize = on_npu && n.op_type == "NpuResize",
               d2s = on_npu && n.op_type == "NpuDepthToSpace";
    if (add || mul || leaky || concat || split || lut || pool || pad || resize || d2s) {
      // An element-wise task: its operand buffers (written by the host), output and regcmd.
      RKD_ASSIGN(auto ln, lower_npu_node(n, session));
      const npu::lower::LoweredEltwise& l = ln->eltwise;
      const auto& placed = ln->regcmd;
      npu::lower::MapShape shape;
      int table_differences = 0;
      std::vector<int32_t> lut_table;  // a Lut's 256 output codes (its tasks upload them)
      std::optional<npu::lower::MaxPoolSpec> pool_spec;
      int64_t pad_channels = 0;    // a channel Pad's added channels
      bool b_per_channel = false;  // an Add's, Sub's, Max's, Min's or Mul's B: one value per channel (EW_DATA_MODE 0)
      if (add) {
        RKD_ASSIGN(npu::lower::AddSpec spec, npu_add_spec(n));
        shape = spec;
        b_per_channel = spec.b != npu::lower::BOperand::map;
      } else if (mul) {
        RKD_ASSIGN(npu::lower::MulSpec spec, npu_mul_spec(n));
        shape = spec;
        b_per_channel = spec.b != npu::lower::BOperand::map;
      } else if (concat) {
        RKD_ASSIGN(npu::lower::ConcatSpec spec, npu_concat_spec(n));
        shape = spec;
      } else if (split) {
        RKD_ASSIGN(npu::lower::SplitSpec spec, npu_split_spec(n));
        shape = spec;
      } else if (pad) {
        RKD_ASSIGN(npu::lower::ChannelPadSpec spec, npu_channel_pad_spec(n));
        shape = spec;
        pad_channels = spec.pad_end;
      } else if (resize) {
        RKD_ASSIGN(npu::lower::Upsample2Spec spec, npu_upsample2_spec(n));
        shape = spec;
      } else if (d2s) {
        RKD_ASSIGN(npu::lower::DepthToSpace2Spec spec, npu_depth_to_space_spec(n));
        shape = spec;
      } else if (pool) {
        RKD_ASSIGN(pool_spec, npu_max_pool_spec(n));
        shape = *pool_spec;
      } else if (lut) {
        RKD_ASSIGN(npu::lower::LutSpec spec, npu_lut_spec(n));
        shape = spec;
        lut_table = spec.table;
      } else {
        RKD_ASSIGN(npu::lower::LeakyReluSpec spec, npu_leaky_relu_spec(n));
        shape = spec;
        RKD_ASSIGN(table_differences, npu_leaky_relu_table_differences(n));
      }
      const size_t ei = man["elementwise"].size();
      const std::string ename = numbered("eltwise", ei);
      fs::create_directories(tmp / ename, ec);
      nlohmann::ordered_json je;
      je["node"] = n.name;
      je["op"] = add      ? quant::to_string(*alu)
                 : mul    ? "Mul"
                 : concat ? "Concat"
                 : split  ? "Split"
                 : lut    ? "Lut"
                 : pool   ? "MaxPool"
                 : pad    ? "Pad"
                 : resize ? "Resize"
                 : d2s    ? "DepthToSpace"
                          : "LeakyRelu";
      je["directory"] = ename;
      je["geometry"] = {{"C", shape.C}, {"H", shape.H}, {"W", shape.W}, {"dtype", dtype_name(shape.dtype)}};
      if (pad) je["geometry"]["pad_channels"] = pad_channels;
      if (resize || d2s) {
        // The columns into device-only scratch maps, then their lines (eltwise.h); a Resize with a
        // Pad edge merged (a bilinear x2's first half) writes the map 1 cell larger on each side.
        const bool edge = resize && n.attr_int("rkd_edge_pad", 0).value_or(0) != 0;
        if (d2s) je["geometry"]["OC"] = shape.C / 4;
        if (resize) je["geometry"]["edge_pad"] = edge ? 1 : 0;
        je["geometry"]["OH"] = 2 * shape.H + (edge ? 2 : 0);
        je["geometry"]["OW"] = 2 * shape.W + (edge ? 2 : 0);
        je["scratch"] = nlohmann::ordered_json::array();
        for (const npu::lower::Buffer& b : l.buffers) {
          if (b.kind == "scratch") je["scratch"].push_back({{"device_offset", b.address - mem.base()}, {"bytes", b.bytes}});
        }
      }
      if (pool_spec) {
        const npu::lower::MapShape o = pool_spec->output();
        je["geometry"]["OH"] = o.H;
        je["geometry"]["OW"] = o.W;
        je["geometry"]["kernel"] = {pool_spec->kernel_h, pool_spec->kernel_w};
        je["geometry"]["stride"] = {pool_spec->stride_h, pool_spec->stride_w};
        je["geometry"]["pads"] = {pool_spec->pad_top, pool_spec->pad_left, pool_spec->pad_bottom, pool_spec->pad_right};
        // A PPU-only task ends with the PPU's interrupts; mainline's rocket waits for the DPU's.
        je["completion"] = "PPU interrupt (mainline rocket signals DPU interrupts only: docs/npu.md)";
      }
      je["inputs"] = nlohmann::ordered_json::array();
      if (concat) {
        // Part i is read by task i (MRDMA), which writes it at its channel offset of the output.
        for (size_t i = 0; i < l.part_addresses.size(); ++i) {
          je["inputs"].push_back({{"operand", "part" + std::to_string(i)},
                                  {"read_by", "MRDMA"},
                                  {"device_offset", l.part_addresses[i] - mem.base()},
                                  {"surface_bytes", l.main_surface_bytes}});
        }
      } else if (split || lut || pool || pad || resize || d2s) {
        je["inputs"].push_back({{"operand", "X"},
                                {"read_by", pool ? "PPU_RDMA" : "MRDMA"},
                                {"device_offset", l.main_address - mem.base()},
                                {"surface_bytes", l.main_surface_bytes}});
      } else {
        const std::string main_operand = add   ? (l.b_is_main ? "B" : "A")
                                         : mul ? "A"
                                               : "X",
                          ew_operand = add   ? (l.b_is_main ? "A" : "B")
                                       : mul ? "B"
                                             : "X";
        je["inputs"].push_back({{"operand", main_operand},
                                {"read_by", "MRDMA"},
                                {"device_offset", l.main_address - mem.base()},
                                {"surface_bytes", l.main_surface_bytes}});
        je["inputs"].push_back(
            {{"operand", ew_operand}, {"read_by", "ERDMA"}, {"device_offset", l.ew_address - mem.base()}, {"surface_bytes", l.ew_surface_bytes}});
        // One value per channel: a [1, C, 1, 1] (or one-element) B as a vector of 16-channel atoms.
        if (b_per_channel) je["inputs"].back()["per_channel"] = true;
      }
      for (auto& in : je["inputs"]) in.update(eltwise_source(*ln, static_cast<uint32_t>(mem.base() + in["device_offset"].get<uint64_t>())));
      const std::string at = "/elementwise/" + std::to_string(ei);
      if (split) {
        // Task i writes part i into its own map.
        je["outputs"] = nlohmann::ordered_json::array();
        for (uint32_t a : l.part_addresses) {
          host_reads.emplace_back(at + "/outputs/" + std::to_string(je["outputs"].size()) + "/read_by_host", ln->host_reads.at(je["outputs"].size()));
          je["outputs"].push_back({{"device_offset", a - mem.base()}, {"surface_bytes", l.output_surface_bytes}});
        }
      } else {
        je["output"] = {{"device_offset", l.output_address - mem.base()}, {"surface_bytes", l.output_surface_bytes}};
        host_reads.emplace_back(at + "/output/read_by_host", ln->host_reads.at(0));
      }
      je["layout"] = "NC1HWC2, C2 = 16, stored int8 (uint8 - 128); padding lanes carry no meaning";
      je["tasks"] = nlohmann::ordered_json::array();
      const auto* wbytes = reinterpret_cast<const uint8_t*>(placed.words.data());
      for (size_t t = 0; t < placed.spans.size(); ++t) {
        const std::string file = ename + "/" + numbered("task", t) + ".regcmd";
        RKD_TRY(write_file_atomic((tmp / file).string(),
                                  std::span<const uint8_t>(wbytes + placed.spans[t].first_word * 8, placed.spans[t].word_count * 8)));
        je["tasks"].push_back({{"regcmd", file}, {"device_offset", placed.spans[t].address - mem.base()}, {"words", placed.spans[t].word_count}});
      }
      je["jobs"] = jobs_json(*ln);
      if (leaky) je["table_entries_differing"] = table_differences;
      if (lut) je["table"] = lut_table;
      man["elementwise"].push_back(je);
      ++sum.eltwise_on_npu;
      sum.tasks += placed.spans.size();
      sum.regcmd_words += placed.words.size();
      continue;
    }
    if (ir::op_has(n, ir::kView) && n.op_type == "Identity") {
      // No computation: the value under another name (a dropped DequantizeLinear ->
      // QuantizeLinear pair leaves one between two NPU nodes as readily as between CPU ones).
      man["views"].push_back({{"node", n.name}, {"op", n.op_type}, {"of", n.inputs.empty() || !n.inputs[0] ? "" : n.inputs[0]->name}});
      ++sum.views;
      continue;
    }
    if (!on_npu || n.op_type != "NpuConv") {
      const std::string reason = cpu_reason(n);
      man["cpu"].push_back({{"node", n.name}, {"op", (n.domain.empty() ? "" : n.domain + ".") + n.op_type}, {"reason", reason}});
      if (n.op_type == "QLinearConv" && n.domain.empty()) sum.cpu_convs.push_back(n.name + ": " + reason);
      ++sum.nodes_on_cpu;
      continue;
    }
    RKD_ASSIGN(const npu::lower::ConvSpec s, npu_conv_spec(n));
    const size_t ci = static_cast<size_t>(sum.convs_on_npu);
    const std::string cname = numbered("conv", ci);
    fs::create_directories(tmp / cname, ec);
    // The input buffer (unless an NPU node's output is read in place): its padding lanes and
    // rows hold the zero point from the start; the host writes the real values before each kick.
    RKD_ASSIGN(auto ln, lower_npu_node(n, session));
    const npu::lower::Lowered& l = ln->conv_lowered;
    const uint32_t in = l.input_address;
    const auto& placed = ln->regcmd;
    const auto& spans = placed.spans;
    const auto& words = placed.words;
    const auto* wbytes = reinterpret_cast<const uint8_t*>(words.data());
    nlohmann::ordered_json jc;
    jc["node"] = n.name;
    jc["directory"] = cname;
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
    jc["input"] = {{"device_offset", in - mem.base()},
                   {"bytes", npu::lower::input_bytes(s)},
                   {"layout",
                    "NC1HWC2, C2 = 16, width the line dimension; "
                    "padding lanes and rows hold the input zero point"},
                   {"zero_point_stored", s.dtype == DType::u8 ? s.x_zero_point - 128 : s.x_zero_point}};
    jc["input"].update(source(*ln, 0));
    // The output as one map in channel order (an NPU reader may read it in place): the regions
    // in order, or the compaction's output; else the host compacts the tasks' regions.
    jc["output"] = nlohmann::ordered_json::object();
    if (const auto& om = ln->conv_output) jc["output"] = {{"device_offset", om->address - mem.base()}, {"surface_bytes", om->surface_bytes}};
    // Left as its regions: stored channel j holds output channel channels[j] (-1 none); its
    // readers are convolutions whose weights are permuted to match (npu::lower::permuted_input).
    if (!ln->conv_output_channels.empty()) jc["output"]["channels"] = ln->conv_output_channels;
    host_reads.emplace_back("/convolutions/" + std::to_string(ci) + "/output/read_by_host", ln->host_reads.at(0));
    // The tasks of `lw` (regcmd spans from first_span on), files named PREFIXnnn.
    auto tasks_json = [&](const npu::lower::Lowered& lw, size_t first_span, const char* prefix) -> Result<nlohmann::ordered_json> {
      nlohmann::ordered_json ts = nlohmann::ordered_json::array();
      for (size_t t = 0; t < lw.tasks.size(); ++t) {
        const auto& span = spans.at(first_span + t);
        const std::string tname = cname + "/" + numbered(prefix, t);
        RKD_TRY(write_file_atomic((tmp / (tname + ".regcmd")).string(), std::span<const uint8_t>(wbytes + span.first_word * 8, span.word_count * 8)));
        nlohmann::ordered_json jt = {{"regcmd", tname + ".regcmd"}, {"device_offset", span.address - mem.base()}, {"words", span.word_count}};
        jt["buffers"] = nlohmann::ordered_json::array();
        for (const auto& b : lw.buffers) {
          if (b.task != t) continue;
          nlohmann::ordered_json jb = {{"kind", b.kind}, {"device_offset", b.address - mem.base()}, {"bytes", b.bytes}};
          if (b.kind != "output") {
            const std::string file = tname + "." + b.kind + ".bin";
            RKD_ASSIGN(auto bytes, mem.read(b.address, b.bytes));
            RKD_TRY(write_file_atomic((tmp / file).string(), bytes));
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
    if (ln->compaction) {
      // After the convolution's tasks (the same register-command chain): the 1 x 1 permutation
      // convolution reading the regions as one map and writing every channel in order.
      RKD_ASSIGN(jc["compaction"], tasks_json(ln->compaction_lowered, l.tasks.size(), "compact"));
      sum.tasks += static_cast<int>(ln->compaction_lowered.tasks.size());
      sum.weight_bytes += ln->compaction_lowered.weight_bytes;
      sum.operand_bytes += ln->compaction_lowered.operand_bytes;
    }
    jc["jobs"] = jobs_json(*ln);
    man["convolutions"].push_back(jc);
    ++sum.convs_on_npu;
    sum.tasks += static_cast<int>(l.tasks.size());
    sum.regcmd_words += words.size();
    sum.weight_bytes += l.weight_bytes;
    sum.operand_bytes += l.operand_bytes;
  }
  for (const auto& [at, f] : host_reads) man[at] = f();
  sum.chaining = npu_chaining(*session);
  man["device_bytes"] = mem.size();
  // Every file in the folder (it was empty: the CLI passes a fresh temporary), the manifest too:
  // what `compile --force` may remove when it replaces this output.
  std::vector<std::string> files{"manifest.json"};
  for (auto it = fs::recursive_directory_iterator(tmp, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path().lexically_relative(tmp).generic_string());
  }
  if (ec) return io_error(out_dir + ": cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end());
  man["files"] = files;
  const std::string text = json_text(man);
  RKD_TRY(write_file_atomic((tmp / "manifest.json").string(), std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size())));
  return sum;
}

Result<std::vector<std::string>> compile_output_files(const std::string& dir) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return invalid("it has no manifest.json of rkdeploy compile");
  RKD_ASSIGN(const std::string text, read_file_bytes(path));
  const auto man = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (man.is_discarded() || !man.is_object()) return invalid(path + ": not JSON");
  if (!man.contains("written_by") || man["written_by"] != kCompileWrittenBy || !man.contains("files") || !man["files"].is_array()) {
    return invalid(path + ": not a manifest of rkdeploy compile (no \"written_by\": \"" + std::string(kCompileWrittenBy) + "\" with its \"files\")");
  }
  std::vector<std::string> files;
  for (const auto& f : man["files"]) {
    if (!f.is_string()) return invalid(path + ": \"files\" must hold strings");
    files.push_back(f.get<std::string>());
  }
  return files;
}

}  // namespace rkd::workflows
