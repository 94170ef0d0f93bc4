// rkdeploy run MODEL --input NAME=FILE.npy ... --output-dir DIR (every graph output as
// DIR/<output name>.npy) or --image PHOTO (detections): workflows/run.h on the chosen back end.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "cli/backend.h"
#include "cli/commands.h"
#include "core/json_style.h"
#include "core/npy.h"
#include "core/output.h"
#include "runtime/detect.h"
#include "runtime/model.h"
#include "workflows/run.h"
#include <nlohmann/json.hpp>

namespace rkd::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  BackendArgs backend;
  int threads = 0;
  bool no_fuse = false;
  bool profile = false;
  int top = 15;
  int repeat = 1;
  std::vector<std::string> dump_after;
  std::string image, config, draw, classes = "coco";
  bool json = false, allow_nonfinite = false;
};

std::string file_safe(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    if (c == '/' || c == '\\' || c == ':' || c == '\0') c = '_';
  }
  return s.empty() || s == "." || s == ".." ? "_" + s : s;
}

void run_on_image(const RunArgs& a, workflows::RunOptions o) {
  OutputTransaction out_tx({a.model, a.image, a.config});
  const std::string draw_tmp = a.draw.empty() ? "" : take(out_tx.file(a.draw));
  o.loaded = [&a](const runtime::LoadedModel& m) { report_npu(a.backend, m); };
  const workflows::PhotoRun r = take(workflows::run_photo(a.model, a.image, a.config, o));
  const auto& img = r.image;
  const auto& dets = r.detections;
  const auto& names = runtime::coco_class_names();
  auto name_of = [&](int64_t l) {
    return a.classes == "coco" && l >= 0 && l < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(l)] : std::to_string(l);
  };
  if (a.json) {
    nlohmann::json j;
    j["command"] = "run";
    j["model"] = a.model;
    j["image"] = {{"path", a.image}, {"width", img.width}, {"height", img.height}};
    j["output_kind"] = r.config.output;
    j["score_threshold"] = r.config.score_threshold;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& d : dets) {
      arr.push_back({{"label", d.label}, {"class", name_of(d.label)}, {"score", d.score}, {"box_xyxy", {d.x0, d.y0, d.x1, d.y1}}});
    }
    j["detections"] = arr;
    std::cout << json_text(j);
  } else {
    std::printf("%s: %lldx%lld, %s output, %zu detection(s) with score >= %.2f\n", a.image.c_str(), static_cast<long long>(img.width),
                static_cast<long long>(img.height), r.config.output.c_str(), dets.size(), r.config.score_threshold);
    std::printf("  %-3s %-16s %6s  %8s %8s %8s %8s\n", "#", "class", "score", "x0", "y0", "x1", "y1");
    for (size_t i = 0; i < dets.size(); ++i) {
      const auto& d = dets[i];
      std::printf("  %-3zu %-16s %6.3f  %8.1f %8.1f %8.1f %8.1f\n", i, name_of(d.label).c_str(), d.score, d.x0, d.y0, d.x1, d.y1);
    }
  }
  if (!a.draw.empty()) {
    runtime::Image out = img;
    // The labels as the table names them (--classes ids: "class N").
    runtime::draw_detections(out, dets, a.classes == "coco" ? names : std::vector<std::string>{});
    check(runtime::write_png(draw_tmp, out));
    check(out_tx.publish());
    if (!a.json) std::printf("wrote %s\n", a.draw.c_str());
  }
}

void print_profile(const RunArgs& a, const runtime::Executor& e) {
  std::map<std::string, std::pair<double, int>> by_op;
  double total = 0;
  for (const auto& nt : e.last_profile()) {
    by_op[nt.op_type].first += nt.micros;
    by_op[nt.op_type].second += 1;
    total += nt.micros;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
  std::printf("\nprofile (last run, %zu nodes, %.2f ms)\n%-22s %6s %10s %7s\n", e.last_profile().size(), total / 1000.0, "op", "nodes", "ms",
              "share");
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < a.top; ++i) {
    std::printf("%-22s %6d %10.3f %6.1f%%\n", rows[i].first.c_str(), rows[i].second.second, rows[i].second.first / 1000.0,
                100.0 * rows[i].second.first / std::max(total, 1e-9));
  }
  const auto& p = e.memory_plan();
  std::printf("memory plan: arena %.2f MB for %d values (%.2f MB without reuse), %d aliased views, outputs %.2f MB, constants %.2f MB\n",
              static_cast<double>(p.arena_bytes) / 1e6, p.planned_values, static_cast<double>(p.intermediate_bytes) / 1e6, p.aliased_values,
              static_cast<double>(p.output_bytes) / 1e6, static_cast<double>(p.constant_bytes) / 1e6);
}

void run_model(const RunArgs& a) {
  workflows::RunOptions o;
  o.load.compile.fuse = !a.no_fuse;
  apply_backend(a.backend, o.load.compile, o.load.exec);
  o.load.exec.threads = a.threads;
  o.repeat = a.repeat;
  o.allow_nonfinite = a.allow_nonfinite;
  if (!a.image.empty()) {
    if (!a.inputs.empty()) fail(invalid("--image and --input cannot be combined"));
    if (!a.output_dir.empty()) fail(invalid("--output-dir writes the graph outputs of an --input run; with --image use --json or --draw"));
    run_on_image(a, o);
    return;
  }
  if (!a.draw.empty() || !a.config.empty()) fail(invalid("--draw and --config need --image"));
  OutputTransaction out_tx(read_paths({a.model}, a.inputs));
  if (!a.output_dir.empty()) check(out_tx.files_in(a.output_dir));
  std::map<std::string, Tensor> inputs;
  for (const std::string& spec : a.inputs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      fail(invalid("--input '" + spec + "': expected NAME=FILE.npy"));
    }
    const std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
    if (inputs.count(name)) fail(invalid("--input: '" + name + "' given twice"));
    inputs[name] = take(read_npy(path));
  }
  o.load.compile.dump_after.insert(a.dump_after.begin(), a.dump_after.end());
  o.load.compile.dump = [](const std::string& pass, const std::string& ir) { std::cerr << "=== IR after " << pass << " ===\n" << ir; };
  o.load.exec.profile = a.profile;
  // Every output file is declared (and checked) before the inference.
  std::map<std::string, std::string> out_tmp;
  o.loaded = [&](const runtime::LoadedModel& m) {
    report_npu(a.backend, m);
    if (!a.output_dir.empty()) {
      for (const ir::Value* v : m.graph->outputs) {
        out_tmp[v->name] = take(out_tx.file((std::filesystem::path(a.output_dir) / (file_safe(v->name) + ".npy")).string()));
      }
    }
    if (m.fusion.fused_sites > 0 || !m.fusion.not_fused.empty()) {
      std::fprintf(stderr, "deform-attn-fusion: %d site(s) fused, %zu similar site(s) left unfused\n", m.fusion.fused_sites,
                   m.fusion.not_fused.size());
      for (const auto& r : m.fusion.not_fused) std::fprintf(stderr, "  not fused: %s\n", r.c_str());
    }
  };
  const workflows::RunResult r = take(workflows::run_tensors(a.model, inputs, o));
  // The first run is a warm-up and not timed.
  if (const auto& ms = r.warm_ms; !ms.empty()) {
    std::fprintf(stderr, "timing: %zu warm runs, median %.3f ms, min %.3f ms, max %.3f ms\n", ms.size(), ms[ms.size() / 2], ms.front(), ms.back());
  }
  for (const auto& [name, t] : r.outputs) {
    std::printf("%-24s %-8s %s\n", name.c_str(), dtype_name(t.dtype()), shape_to_string(t.shape()).c_str());
    if (!a.output_dir.empty()) check(write_npy(out_tmp.at(name), t));
  }
  check(out_tx.publish());
  if (a.profile) print_profile(a, *r.model.executor);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* c = app.add_subcommand("run", "Run a model on the CPU executor: rkdeploy run MODEL --input NAME=FILE.npy ... --output-dir DIR");
  c->add_option("model", a->model,
                "model file: ONNX (.onnx), TFLite (.tflite), TensorFlow.js (model.json), or an artifact of compile (.rkd: --backend sim or device)")
      ->required();
  add_backend_options(c, a->backend);
  c->add_option("--input", a->inputs, "NAME=FILE.npy, one per graph input");
  c->add_option("--output-dir", a->output_dir, "write DIR/<output name>.npy for every graph output");
  add_threads_option(c, a->threads, "threads (0 = all cores)");
  c->add_flag("--no-fuse", a->no_fuse, "skip the deformable-attention fusion (run the exported subgraph)");
  c->add_flag("--profile", a->profile, "time every node and print the top op types");
  c->add_option("--top", a->top, "rows of the --profile table")->check(CLI::Range(1, kMaxCount));
  c->add_option("--repeat", a->repeat, "run N times; outputs and --profile come from the last run")->check(CLI::Range(1, 100000));
  c->add_option("--dump-after", a->dump_after, "print the IR after this pass to stderr (repeatable)");
  c->add_option("--image", a->image, "a photo (PNG/JPEG): preprocess, run, decode and print detections");
  c->add_option("--config", a->config, "detector config JSON (docs/detector-config.md); default from the model's inputs");
  CLI::Option* image = c->get_option("--image");
  c->add_option("--classes", a->classes, "with --image: label names, coco (default) or ids")->check(CLI::IsMember({"coco", "ids"}))->needs(image);
  c->add_option("--draw", a->draw, "with --image: write the photo with boxes to this PNG");
  c->add_flag("--json", a->json, "with --image: print detections as JSON")->needs(image);
  add_nonfinite_option(c, a->allow_nonfinite);
  c->callback([a] { run_model(*a); });
}

}  // namespace rkd::cli
