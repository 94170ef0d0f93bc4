// rkdeploy run MODEL --input NAME=FILE.npy ... --output-dir DIR: runs a model on the CPU
// executor and writes DIR/<output name>.npy for every graph output.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "core/json_style.h"
#include "npu/lower/lower.h"
#include "npu/sim/sim.h"
#include "core/npy.h"
#include "core/output.h"
#include "quant/requant.h"
#include "runtime/detect.h"
#include "runtime/model.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_device.h"
#include <nlohmann/json.hpp>

namespace rkd::cli {
namespace {

struct RunArgs;
void report_npu(const RunArgs& a, const runtime::FusionReport& f, const runtime::Executor& e);

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string backend = "cpu";
  std::string requant;
  std::string strategy;
  std::vector<std::string> sim_knobs;
  std::string device = npu::device::kDefaultDevice;
  int cores = 3;
  bool fuse_npu_add = false;
  bool npu_round_trips = false;
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

void run_on_image(const RunArgs& a, runtime::LoadOptions lo) {
  OutputTransaction out_tx({a.model, a.image, a.config});
  const std::string draw_tmp = a.draw.empty() ? "" : take(out_tx.file(a.draw));
  const runtime::Image img = take(runtime::load_image(a.image));
  runtime::LoadedModel m = take(runtime::load_model(a.model, lo));
  report_npu(a, m.fusion, *m.executor);
  const runtime::DetectorConfig cfg = take(runtime::detector_config(*m.graph, a.config));
  const runtime::Prepared prep = take(runtime::preprocess(img, cfg, runtime::takes_target_sizes(*m.graph)));
  check(runtime::check_detector_inputs(prep.inputs));
  auto outputs = take(m.executor->run(prep.inputs));
  for (int i = 1; i < a.repeat; ++i) outputs = take(m.executor->run(prep.inputs));
  const auto dets = take(runtime::postprocess(outputs, cfg, prep, img));
  const auto& names = runtime::coco_class_names();
  auto name_of = [&](int64_t l) {
    return a.classes == "coco" && l >= 0 && l < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(l)] : std::to_string(l);
  };
  if (a.json) {
    nlohmann::json j;
    j["command"] = "run";
    j["model"] = a.model;
    j["image"] = {{"path", a.image}, {"width", img.width}, {"height", img.height}};
    j["output_kind"] = cfg.output;
    j["score_threshold"] = cfg.score_threshold;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& d : dets) {
      arr.push_back({{"label", d.label}, {"class", name_of(d.label)}, {"score", d.score}, {"box_xyxy", {d.x0, d.y0, d.x1, d.y1}}});
    }
    j["detections"] = arr;
    std::cout << json_text(j);
  } else {
    std::printf("%s: %lldx%lld, %s output, %zu detection(s) with score >= %.2f\n", a.image.c_str(), static_cast<long long>(img.width),
                static_cast<long long>(img.height), cfg.output.c_str(), dets.size(), cfg.score_threshold);
    std::printf("  %-3s %-16s %6s  %8s %8s %8s %8s\n", "#", "class", "score", "x0", "y0", "x1", "y1");
    for (size_t i = 0; i < dets.size(); ++i) {
      const auto& d = dets[i];
      std::printf("  %-3zu %-16s %6.3f  %8.1f %8.1f %8.1f %8.1f\n", i, name_of(d.label).c_str(), d.score, d.x0, d.y0, d.x1, d.y1);
    }
  }
  if (!a.draw.empty()) {
    runtime::Image out = img;
    runtime::draw_detections(out, dets);
    check(runtime::write_png(draw_tmp, out));
    check(out_tx.publish());
    if (!a.json) std::printf("wrote %s\n", a.draw.c_str());
  }
}

// --backend: cpu (float), int8 (integer kernels), sim (int8, NPU nodes on the RK3588 NPU
// simulator with --strategy), device (the same NPU nodes on a rocket device: docs/device.md).
void set_backend(const RunArgs& a, runtime::CompileOptions& c, runtime::ExecutorOptions& e) {
  const bool npu = a.backend == "sim" || a.backend == "device";
  c.int8 = a.backend == "int8" || npu;
  c.requant = a.requant;
  if (npu) {
    // Checked once here: a typo is one error, not one per NPU node.
    if (!a.strategy.empty()) (void)take(npu::lower::parse_strategy(a.strategy));
    npu::sim::Quirks q;
    for (const std::string& k : a.sim_knobs) check(npu::sim::set_knob(q, k));
    c.npu_sim_strategy = a.strategy.empty() ? npu::lower::strategy_name(npu::lower::kDefaultStrategy) : a.strategy;
    c.sim_knobs = a.sim_knobs;
    c.npu_fuse_add = a.fuse_npu_add;
  } else if (!a.strategy.empty() || !a.sim_knobs.empty() || a.fuse_npu_add || a.npu_round_trips) {
    fail(invalid("--strategy, --sim, --fuse-npu-add and --npu-round-trips need --backend sim"));
  }
  if (a.backend == "device") {
    if (a.npu_round_trips) fail(invalid("--npu-round-trips is a simulator check: not with --backend device"));
    c.npu_mainline = true;
    runtime::NpuDeviceOptions o;
    o.path = a.device;
    o.cores = a.cores;
    e.npu_device = take(runtime::NpuDevice::open(o));
  } else if (a.device != npu::device::kDefaultDevice || a.cores != 3) {
    fail(invalid("--device and --cores need --backend device"));
  }
  e.npu_chaining = !a.npu_round_trips;
}

void report_npu(const RunArgs& a, const runtime::FusionReport& f, const runtime::Executor& e) {
  if (a.backend != "sim" && a.backend != "device") return;
  const std::string where = a.backend == "sim" ? "the RK3588 simulator" : "the NPU device " + a.device + " (" + std::to_string(a.cores) + " core(s))";
  std::fprintf(stderr,
               "npu: %d convolution(s) on %s (strategy %s, %d with the following Add fused), %zu on the CPU; "
               "%d Add(s) as DPU tasks, %zu on the CPU; %d Sub/Max/Min as DPU tasks, %zu on the CPU; %d Mul(s) as DPU tasks, %zu on the CPU; %d "
               "LeakyRelu(s) as DPU tasks (their tables differ "
               "from the NPU's in at most %d "
               "of 256 entries); %d other table(s) through the DPU's LUT, %zu on the CPU; %d Concat(s) as DPU copy tasks, %zu on the CPU; "
               "%d Split(s) as DPU copy tasks, %zu on the CPU; %d MaxPool(s) as PPU tasks, %zu on the CPU; %d channel Pad(s) as DPU tasks, %zu on "
               "the CPU; %d nearest x2 Resize(s) as NPU tasks (%d edge-padded for a bilinear one), %zu on the CPU; %d DepthToSpace(s) as DPU copy "
               "tasks, %zu on the CPU\n",
               f.npu_sim_convs, where.c_str(), a.strategy.empty() ? npu::lower::strategy_name(npu::lower::kDefaultStrategy) : a.strategy.c_str(),
               f.npu_fused_adds, f.npu_cpu_convs.size(), f.npu_sim_adds, f.npu_cpu_adds.size(), f.npu_sim_alus, f.npu_cpu_alus.size(), f.npu_sim_muls,
               f.npu_cpu_muls.size(), f.npu_sim_leaky_relus, f.npu_leaky_relu_table_differences, f.npu_sim_luts, f.npu_cpu_luts.size(),
               f.npu_sim_concats, f.npu_cpu_concats.size(), f.npu_sim_splits, f.npu_cpu_splits.size(), f.npu_sim_pools, f.npu_cpu_pools.size(),
               f.npu_sim_pads, f.npu_cpu_pads.size(), f.npu_sim_resizes, f.npu_sim_edge_resizes, f.npu_cpu_resizes.size(), f.npu_sim_depth_to_spaces,
               f.npu_cpu_depth_to_spaces.size());
  for (const auto* list : f.npu_cpu_lists()) {
    for (const auto& r : *list) std::fprintf(stderr, "  on the CPU: %s\n", r.c_str());
  }
  if (const runtime::NpuSession* s = e.npu_session()) {
    std::fprintf(stderr, "npu device memory: %s\n", runtime::npu_chaining_text(runtime::npu_chaining(*s)).c_str());
  }
}

void run_model(const RunArgs& a) {
  if (!a.image.empty()) {
    if (!a.inputs.empty()) fail(invalid("--image and --input cannot be combined"));
    if (!a.output_dir.empty()) fail(invalid("--output-dir writes the graph outputs of an --input run; with --image use --json or --draw"));
    runtime::LoadOptions lo;
    lo.batch = 1;
    lo.compile.fuse = !a.no_fuse;
    set_backend(a, lo.compile, lo.exec);
    lo.exec.threads = a.threads;
    run_on_image(a, lo);
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
  check(runtime::check_detector_inputs(inputs));
  if (!a.allow_nonfinite) check(runtime::check_finite_inputs(inputs));
  int64_t batch = 0;
  for (const auto& [name, t] : inputs) {
    if (t.rank() > 0) {
      batch = t.dim(0);
      break;
    }
  }
  runtime::LoadOptions lo;
  lo.batch = batch;
  lo.compile.fuse = !a.no_fuse;
  set_backend(a, lo.compile, lo.exec);
  lo.compile.dump_after.insert(a.dump_after.begin(), a.dump_after.end());
  lo.compile.dump = [](const std::string& pass, const std::string& ir) { std::cerr << "=== IR after " << pass << " ===\n" << ir; };
  lo.exec.threads = a.threads;
  lo.exec.profile = a.profile;
  lo.inputs = &inputs;
  runtime::LoadedModel m = take(runtime::load_model(a.model, lo));
  report_npu(a, m.fusion, *m.executor);
  // Every output file is declared (and checked) before the inference.
  std::map<std::string, std::string> out_tmp;
  if (!a.output_dir.empty()) {
    for (const ir::Value* v : m.graph->outputs) {
      out_tmp[v->name] = take(out_tx.file((std::filesystem::path(a.output_dir) / (file_safe(v->name) + ".npy")).string()));
    }
  }
  if (m.fusion.fused_sites > 0 || !m.fusion.not_fused.empty()) {
    std::fprintf(stderr, "deform-attn-fusion: %d site(s) fused, %zu similar site(s) left unfused\n", m.fusion.fused_sites, m.fusion.not_fused.size());
    for (const auto& r : m.fusion.not_fused) std::fprintf(stderr, "  not fused: %s\n", r.c_str());
  }
  auto outputs = take(m.executor->run(inputs));
  // Repeats (warm caches for --profile and timing): the last run is the one reported; the
  // first run is a warm-up and not timed.
  std::vector<double> ms;
  for (int i = 1; i < a.repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    outputs = take(m.executor->run(inputs));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!ms.empty()) {
    std::sort(ms.begin(), ms.end());
    std::fprintf(stderr, "timing: %zu warm runs, median %.3f ms, min %.3f ms, max %.3f ms\n", ms.size(), ms[ms.size() / 2], ms.front(), ms.back());
  }
  for (const auto& [name, t] : outputs) {
    std::printf("%-24s %-8s %s\n", name.c_str(), dtype_name(t.dtype()), shape_to_string(t.shape()).c_str());
    if (!a.output_dir.empty()) check(write_npy(out_tmp.at(name), t));
  }
  check(out_tx.publish());
  if (a.profile) {
    std::map<std::string, std::pair<double, int>> by_op;
    double total = 0;
    for (const auto& nt : m.executor->last_profile()) {
      by_op[nt.op_type].first += nt.micros;
      by_op[nt.op_type].second += 1;
      total += nt.micros;
    }
    std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_op.begin(), by_op.end());
    std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
    std::printf("\nprofile (last run, %zu nodes, %.2f ms)\n%-22s %6s %10s %7s\n", m.executor->last_profile().size(), total / 1000.0, "op", "nodes",
                "ms", "share");
    for (size_t i = 0; i < rows.size() && static_cast<int>(i) < a.top; ++i) {
      std::printf("%-22s %6d %10.3f %6.1f%%\n", rows[i].first.c_str(), rows[i].second.second, rows[i].second.first / 1000.0,
                  100.0 * rows[i].second.first / std::max(total, 1e-9));
    }
    const auto& p = m.executor->memory_plan();
    std::printf("memory plan: arena %.2f MB for %d values (%.2f MB without reuse), %d aliased views, outputs %.2f MB, constants %.2f MB\n",
                static_cast<double>(p.arena_bytes) / 1e6, p.planned_values, static_cast<double>(p.intermediate_bytes) / 1e6, p.aliased_values,
                static_cast<double>(p.output_bytes) / 1e6, static_cast<double>(p.constant_bytes) / 1e6);
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* c = app.add_subcommand("run", "Run a model on the CPU executor: rkdeploy run MODEL --input NAME=FILE.npy ... --output-dir DIR");
  c->add_option("model", a->model, "model file: ONNX (.onnx), TFLite (.tflite) or TensorFlow.js (model.json)")->required();
  c->add_option("--backend", a->backend,
                "cpu (float; QDQ as written), int8 (QDQ patterns on the integer kernels) or sim (int8, convolutions on the RK3588 NPU "
                "simulator, docs/npu.md) or device (the sim back end's NPU nodes on a board's NPU through the mainline rocket driver, "
                "docs/device.md)")
      ->check(CLI::IsMember({"cpu", "int8", "sim", "device"}));
  c->add_option("--device", a->device, "with --backend device: the rocket device node (default /dev/accel/accel0)");
  c->add_option("--cores", a->cores, "with --backend device: NPU cores a convolution's tasks are split over, as separate jobs (1-3, default 3)")
      ->check(CLI::Range(1, 3));
  c->add_option("--strategy", a->strategy, "with --backend sim or device: " + strategy_help());
  c->add_option("--sim", a->sim_knobs, "with --backend sim: simulator knob NAME=VALUE (rkdeploy help sim)");
  c->add_flag("--fuse-npu-add", a->fuse_npu_add,
              "with --backend sim: fuse an Add into the convolution before it (the EW stage: one rounding instead of the int8 reference's two) "
              "instead of running it as its own DPU task");
  c->add_flag("--npu-round-trips", a->npu_round_trips,
              "with --backend sim: every NPU node in its own device memory, each input written and each output read back by the host "
              "(no device-memory chaining; the outputs are the same)");
  c->add_option("--requant", a->requant,
                "with --backend int8 or sim: requantization of every integer op, replacing the model format's "
                "(tflite_double_rounding, tflite_single_rounding, tflite_xnnpack, onnx_float, rknpu_out_cvt; docs/quantization.md)")
      ->check(CLI::IsMember(quant::requant_names()));
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
