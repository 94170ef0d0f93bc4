// rkdeploy inspect MODEL: what a model file holds - inputs, outputs, op histogram,
// parameters, multiply-accumulates of the convolutions and matrix products, and the ops
// that decide where a detector can run (GridSample, TopK, GatherND, ...).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/json_style.h"
#include "plan/plan.h"
#include "runtime/model.h"
#include "runtime/executor.h"

namespace rkd::cli {
namespace {

struct InspectArgs {
  std::string model;
  int64_t batch = 0;
  bool json = false;
};

// Ops that no Rockchip NPU runs natively and that decide a DETR's placement.
const char* const kPlacementOps[] = {"GridSample", "TopK", "GatherND", "GatherElements", "ScatterND", "NonZero", "Einsum"};

std::string type_text(const ir::Value* v) {
  return std::string(v->dtype ? dtype_name(*v->dtype) : "?") + " " + (v->shape ? ir::dims_to_string(*v->shape) : "[?]");
}

void run_inspect(const InspectArgs& a) {
  auto imported = take(runtime::import_model(a.model, a.batch));
  const ir::Graph& g = imported.graph;

  // A second copy, batch bound (1 unless --batch) and run through the executor's passes:
  // its shapes are static (ONNX's inference cannot see through Shape/Gather/Reshape chains),
  // and the fusion report says which deformable-attention sites the CPU executor fuses.
  auto compiled = take(runtime::import_model(a.model, a.batch > 0 ? a.batch : 1));
  runtime::FusionReport fusion;
  Status compile_status = runtime::optimize(compiled.graph, {}, &fusion);
  if (compile_status.ok()) compile_status = runtime::check_graph_memory(compiled.graph);
  const ir::Graph& shapes_from = compile_status.ok() ? compiled.graph : g;
  const std::string executor_text = compile_status.ok() ? "ok" : compile_status.error().to_string();

  std::map<std::string, int64_t> count;
  std::map<std::string, double> macs;
  std::map<std::string, int64_t> macs_unknown;
  for (const auto& n : g.nodes()) count[n->op_type]++;
  for (const auto& n : shapes_from.nodes()) {
    if (auto m = plan::node_macs(*n)) {
      macs[n->op_type] += *m;
    } else if (n->op_type == "Conv" || n->op_type == "ConvTranspose" || n->op_type == "MatMul" || n->op_type == "Gemm") {
      macs_unknown[n->op_type]++;
    }
  }
  int64_t params = 0, param_bytes = 0, initializers = 0;
  for (const auto& v : g.values()) {
    if (v->is_constant()) {
      params += v->constant->numel();
      param_bytes += static_cast<int64_t>(v->constant->nbytes());
      ++initializers;
    }
  }
  double total_macs = 0;
  for (const auto& [op, m] : macs) total_macs += m;

  if (a.json) {
    nlohmann::json j;
    j["command"] = "inspect";
    j["model"] = a.model;
    j["producer"] = g.producer;
    j["opset"] = g.opset;
    j["ir_version"] = imported.ir_version;
    j["nodes"] = g.nodes().size();
    j["parameters"] = params;
    j["parameter_bytes"] = param_bytes;
    j["initializers"] = initializers;
    auto io = [](const std::vector<ir::Value*>& vs) {
      nlohmann::json arr = nlohmann::json::array();
      for (const ir::Value* v : vs) {
        nlohmann::json shape = nlohmann::json::array();
        if (v->shape) {
          for (const auto& d : *v->shape) {
            if (d.is_static()) {
              shape.push_back(d.value);
            } else {
              shape.push_back(d.symbol.empty() ? "?" : d.symbol);
            }
          }
        }
        arr.push_back(
            {{"name", v->name}, {"dtype", v->dtype ? dtype_name(*v->dtype) : "unknown"}, {"shape", v->shape ? shape : nlohmann::json(nullptr)}});
      }
      return arr;
    };
    j["inputs"] = io(g.inputs);
    j["outputs"] = io(g.outputs);
    nlohmann::json ops = nlohmann::json::object();
    for (const auto& [op, c] : count) {
      ops[op] = {{"count", c}};
      if (macs.count(op)) ops[op]["macs"] = macs[op];
      if (macs_unknown.count(op)) ops[op]["macs_unknown_nodes"] = macs_unknown[op];
    }
    j["ops"] = ops;
    j["total_macs"] = total_macs;
    nlohmann::json place = nlohmann::json::object();
    for (const char* op : kPlacementOps) place[op] = count.count(op) ? count[op] : 0;
    j["placement_ops"] = place;
    j["notes"] = imported.notes;
    j["macs_batch"] = (a.batch > 0 ? a.batch : 1);
    j["cpu_executor"] = executor_text;
    j["fusion"] = {{"fused_sites", fusion.fused_sites}, {"fused", fusion.fused}, {"not_fused", fusion.not_fused}};
    std::cout << json_text(j);
    return;
  }
  std::printf("model       %s\n", a.model.c_str());
  if (imported.ir_version > 0) {
    std::printf("producer    %s, opset %lld, IR version %lld\n", g.producer.c_str(), static_cast<long long>(g.opset),
                static_cast<long long>(imported.ir_version));
  } else {
    std::printf("producer    %s (imported as opset %lld)\n", g.producer.c_str(), static_cast<long long>(g.opset));
  }
  std::printf("size        %zu nodes, %.2f M parameters in %lld initializers (%.1f MB)\n", g.nodes().size(), static_cast<double>(params) / 1e6,
              static_cast<long long>(initializers), static_cast<double>(param_bytes) / 1e6);
  std::printf("compute     %.2f GMAC in Conv/ConvTranspose/MatMul/Gemm (batch %lld)\n", total_macs / 1e9,
              static_cast<long long>((a.batch > 0 ? a.batch : 1)));
  std::printf("executor    %s\n", executor_text.c_str());
  std::printf("fusion      %d deformable-attention site(s) fused, %zu similar site(s) not fused\n", fusion.fused_sites, fusion.not_fused.size());
  for (const auto& f : fusion.fused) std::printf("  fused      %s\n", f.c_str());
  for (const auto& f : fusion.not_fused) std::printf("  not fused  %s\n", f.c_str());
  std::printf("\ninputs\n");
  for (const ir::Value* v : g.inputs) std::printf("  %-24s %s\n", v->name.c_str(), type_text(v).c_str());
  std::printf("outputs\n");
  for (const ir::Value* v : g.outputs) std::printf("  %-24s %s\n", v->name.c_str(), type_text(v).c_str());
  std::printf("\nops that decide placement on an NPU\n ");
  for (const char* op : kPlacementOps) std::printf(" %s %lld", op, static_cast<long long>(count.count(op) ? count[op] : 0));
  std::printf("\n\n  %-24s %6s %12s\n", "op", "count", "GMAC");
  std::vector<std::pair<std::string, int64_t>> sorted(count.begin(), count.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& x, const auto& y) { return x.second > y.second || (x.second == y.second && x.first < y.first); });
  for (const auto& [op, c] : sorted) {
    std::string m = macs.count(op) ? std::to_string(macs[op] / 1e9).substr(0, 6) : "";
    if (macs_unknown.count(op)) m += " (+" + std::to_string(macs_unknown[op]) + " unknown)";
    std::printf("  %-24s %6lld %12s\n", op.c_str(), static_cast<long long>(c), m.c_str());
  }
  for (const auto& note : imported.notes) std::printf("\nnote: %s\n", note.c_str());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect",
                                     "Show what an ONNX model holds: inputs, outputs, op histogram, parameters, "
                                     "MACs, and the ops that decide NPU placement (GridSample, TopK, ...)");
  cmd->add_option("model", a->model, "model file: ONNX (.onnx), TFLite (.tflite) or TensorFlow.js (model.json)")->required();
  cmd->add_option("--batch", a->batch, "bind a symbolic batch dimension of the inputs to this size")->check(CLI::Range(0, kMaxCount));
  cmd->add_flag("--json", a->json, "print a JSON object (docs/cli-json.md)");
  cmd->callback([a] { run_inspect(*a); });
}

}  // namespace rkd::cli
