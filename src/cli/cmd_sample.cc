// rkdeploy sample grid | deform-attn: run the sampling kernels on .npy files.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/json_style.h"
#include "core/npy.h"
#include "core/output.h"
#include "core/thread_pool.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"

namespace rkd::cli {

namespace {

struct GridArgs {
  std::string input, grid, output, mode = "bilinear", padding = "zeros", convention = "pytorch", impl = "fast";
  int align_corners = 0;
  int threads = 0;
  bool json = false;
};

struct DeformArgs {
  std::string value, locations, weights, output, shapes, points, method = "default", impl = "fast";
  int threads = 0;
  bool json = false;
};

// One line of human output, or the JSON object documented in docs/cli-json.md.
void report(bool json, const std::string& command, const std::string& output, const Tensor& y, double elapsed_us, nlohmann::ordered_json options) {
  if (!json) {
    std::printf("wrote %s %s %s (%.1f us)\n", output.c_str(), shape_to_string(y.shape()).c_str(), dtype_name(y.dtype()), elapsed_us);
    return;
  }
  nlohmann::ordered_json j;
  j["command"] = command;
  j["output"] = output;
  j["shape"] = y.shape();
  j["dtype"] = dtype_name(y.dtype());
  j["elapsed_us"] = std::round(elapsed_us * 10) / 10;
  j["threads"] = global_thread_count();
  j["options"] = std::move(options);
  std::cout << json_text(j);
}

double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

KernelImpl parse_impl(const std::string& s) {
  if (s == "fast") return KernelImpl::fast;
  if (s == "reference") return KernelImpl::reference;
  fail(invalid("impl: '" + s + "' is not one of fast, reference"));
}

void run_grid(const GridArgs& a) {
  GridSampleOptions opt;
  opt.mode = take(parse_grid_sample_mode(a.mode));
  opt.padding = take(parse_grid_sample_padding(a.padding));
  opt.convention = take(parse_grid_sample_convention(a.convention));
  opt.align_corners = a.align_corners != 0;
  const KernelImpl impl = parse_impl(a.impl);
  set_global_thread_count(a.threads);
  OutputTransaction out_tx({a.input, a.grid});
  const std::string out_tmp = take(out_tx.file(a.output));
  const Tensor x = take(read_npy(a.input));
  const Tensor g = take(read_npy(a.grid));
  const auto t0 = std::chrono::steady_clock::now();
  auto y = grid_sample(x, g, opt, impl);
  const double us = micros_since(t0);
  if (!y.ok()) fail(y.error().with_context("sample grid (" + a.input + ", " + a.grid + ")"));
  check(write_npy(out_tmp, *y));
  check(out_tx.publish());
  report(a.json, "sample grid", a.output, *y, us,
         {{"mode", to_string(opt.mode)},
          {"padding", to_string(opt.padding)},
          {"align_corners", opt.align_corners ? 1 : 0},
          {"convention", to_string(opt.convention)},
          {"impl", a.impl}});
}

void run_deform(const DeformArgs& a) {
  MsdaOptions opt;
  opt.method = take(parse_msda_method(a.method));
  opt.impl = parse_impl(a.impl);
  opt.require_finite_weights = true;
  set_global_thread_count(a.threads);
  const auto shapes = take(parse_level_shapes(a.shapes));
  const auto points = take(parse_points(a.points));
  OutputTransaction out_tx({a.value, a.locations, a.weights});
  const std::string out_tmp = take(out_tx.file(a.output));
  const Tensor v = take(read_npy(a.value));
  const Tensor loc = take(read_npy(a.locations));
  const Tensor w = take(read_npy(a.weights));
  auto prepared = msda_prepare_from_tokens(v, shapes);
  if (!prepared.ok()) fail(prepared.error().with_context(a.value));
  const auto t0 = std::chrono::steady_clock::now();
  auto y = msda(*prepared, loc, w, points, opt);
  const double us = micros_since(t0);
  if (!y.ok()) fail(y.error().with_context("sample deform-attn (" + a.locations + ", " + a.weights + ")"));
  check(write_npy(out_tmp, *y));
  check(out_tx.publish());
  report(a.json, "sample deform-attn", a.output, *y, us,
         {{"method", to_string(opt.method)}, {"shapes", a.shapes}, {"points", a.points}, {"impl", a.impl}});
}

}  // namespace

void add_sample_commands(CLI::App& app) {
  CLI::App* sample = app.add_subcommand("sample", "Run the CPU sampling kernels (GridSample, deformable attention) on .npy files");
  sample->require_subcommand(1);

  auto ga = std::make_shared<GridArgs>();
  CLI::App* grid = sample->add_subcommand("grid",
                                          "GridSample (ONNX GridSample-16/20/22, PyTorch grid_sample) on X (N,C,H,W) or (N,C,D,H,W) with grid "
                                          "(N,Ho,Wo,2) or (N,Do,Ho,Wo,3). float32/float16 .npy; output has the input's dtype.");
  grid->add_option("--input", ga->input, "input tensor X (.npy)")->required();
  grid->add_option("--grid", ga->grid, "sampling grid G (.npy), last axis (x, y[, z]) in [-1, 1]")->required();
  grid->add_option("--mode", ga->mode, "bilinear|linear, nearest, bicubic|cubic")->capture_default_str();
  grid->add_option("--padding", ga->padding, "zeros, border, reflection")->capture_default_str();
  grid->add_option("--align-corners", ga->align_corners, "0 or 1")->capture_default_str()->check(CLI::IsMember({0, 1}));
  grid->add_option("--convention", ga->convention,
                   "pytorch (default; bit-exact with PyTorch's CPU kernel) or onnx (ONNX Runtime's order and "
                   "nearest/reflection rules)")
      ->capture_default_str();
  grid->add_option("--impl", ga->impl, "fast or reference")->capture_default_str();
  add_threads_option(grid, ga->threads, "worker threads (0 = all cores)")->capture_default_str();
  grid->add_option("-o,--output", ga->output, "output .npy (written atomically)")->required();
  grid->add_flag("--json", ga->json, "print a JSON object (docs/cli-json.md) instead of a line");
  grid->footer(
      "Semantics (docs/sampling.md): pytorch convention = PyTorch's CPU kernel bit for bit in 2-D bilinear/nearest "
      "(fused multiply-adds included); onnx convention = ONNX Runtime's order, and nearest rounds before padding. "
      "Non-finite coordinates behave as in PyTorch.");
  grid->callback([ga] { run_grid(*ga); });

  auto da = std::make_shared<DeformArgs>();
  CLI::App* deform = sample->add_subcommand("deform-attn",
                                            "Fused multi-scale deformable attention core (DEIM/D-FINE/RT-DETR decoders): value [B, sum(HW), heads, "
                                            "head_dim], locations [B, Lq, heads, points, 2] in [0,1], weights [B, Lq, heads, points] -> [B, Lq, "
                                            "heads*head_dim]");
  deform->add_option("--value", da->value, "value tensor (.npy)")->required();
  deform->add_option("--shapes", da->shapes, "level shapes HxW, e.g. 80x80,40x40,20x20")->required();
  deform->add_option("--points", da->points, "points per level, e.g. 3,6,3")->required();
  deform->add_option("--locations", da->locations, "sampling locations (.npy)")->required();
  deform->add_option("--weights", da->weights, "attention weights (.npy); must be finite")->required();
  deform->add_option("--method", da->method, "default, discrete, discrete_fixed")->capture_default_str();
  deform->add_option("--impl", da->impl, "fast or reference")->capture_default_str();
  add_threads_option(deform, da->threads, "worker threads (0 = all cores)")->capture_default_str();
  deform->add_option("-o,--output", da->output, "output .npy (written atomically)")->required();
  deform->add_flag("--json", da->json, "print a JSON object (docs/cli-json.md) instead of a line");
  deform->footer(
      "Methods (docs/sampling.md): default = GridSample(bilinear, zeros, align_corners=0) on 2*loc-1 per level, "
      "weighted sum; discrete = the historical integer path int(loc*size+0.5) with BOTH coordinates clamped to H-1 "
      "(reproduced bit for bit; refused where PyTorch raises IndexError); discrete_fixed = x clamped to W-1. "
      "Discrete methods are different models, not approximations.");
  deform->callback([da] { run_deform(*da); });
}

}  // namespace rkd::cli
