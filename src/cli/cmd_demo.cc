// rkdeploy demo: the sampling showcase on DEIMv2-S shapes (until the model pipeline
// exists). Part 1 shows how the three MSDA methods differ on a rectangular (landscape)
// map; part 2 times the fast kernels against the readable references and checks that
// they agree bit for bit.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "cli/commands.h"
#include "runtime/detect.h"
#include "runtime/model.h"
#include "core/npy.h"
#include "core/output.h"
#include "core/thread_pool.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"

namespace rkd::cli {
namespace {

struct DemoArgs {
  int threads = 0;
  int runs = 20;
  uint32_t seed = 1;
  std::string save_dir;
  std::string models_dir, photo, draw;
  // Temporaries of the declared outputs (core/output.h): file name or "draw" -> path.
  std::map<std::string, std::string> tmp;
};

// Runs one DEIM model file on the photo; returns the detections (score >= 0) and prints
// the time of one warm run.
std::vector<runtime::Detection> detect_deim(const std::string& path, const runtime::Image& img, int threads, double* ms) {
  runtime::LoadOptions lo;
  lo.batch = 1;
  lo.exec.threads = threads;
  runtime::LoadedModel m = take(runtime::load_model(path, lo));
  runtime::DetectorConfig cfg = runtime::default_config(*m.graph);
  cfg.score_threshold = 0.f;
  const runtime::Prepared prep = take(runtime::preprocess(img, cfg, true));
  auto out = take(m.executor->run(prep.inputs));  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  out = take(m.executor->run(prep.inputs));
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return take(runtime::postprocess(out, cfg, prep, img));
}

// The DEIMv2-S-architecture model on a real photo, with default and with discrete sampling.
void run_model_demo(const DemoArgs& a) {
  const std::string def = a.models_dir + "/deimv2_s_arch.onnx", dis = a.models_dir + "/deimv2_s_arch_discrete.onnx";
  const runtime::Image img = take(runtime::load_image(a.photo));
  std::printf("\n== DEIMv2-S architecture end to end on %s (%lldx%lld) ==\n", a.photo.c_str(), static_cast<long long>(img.width),
              static_cast<long long>(img.height));
  std::printf("(random weights from a fixed seed: the boxes show the pipeline, not a trained detector)\n");
  double ms_def = 0, ms_dis = 0;
  const auto d1 = detect_deim(def, img, a.threads, &ms_def);
  const auto d2 = detect_deim(dis, img, a.threads, &ms_dis);
  const auto& names = runtime::coco_class_names();
  std::printf("  %-9s %-3s %-14s %6s  %s\n", "sampling", "#", "class", "score", "box x0,y0,x1,y1 (photo pixels)");
  for (int k = 0; k < 3 && k < static_cast<int>(std::min(d1.size(), d2.size())); ++k) {
    for (int v = 0; v < 2; ++v) {
      const auto& d = (v == 0 ? d1 : d2)[static_cast<size_t>(k)];
      std::printf("  %-9s %-3d %-14s %6.3f  %.1f,%.1f,%.1f,%.1f\n", v == 0 ? "default" : "discrete", k,
                  names[static_cast<size_t>(d.label) % names.size()].c_str(), d.score, d.x0, d.y0, d.x1, d.y1);
    }
  }
  // How far apart: match every default detection to the discrete detection of the same
  // class that overlaps it most (ranks reorder where scores are close).
  const size_t n = d1.size();
  size_t matched = 0;
  double iou_sum = 0, score_diff = 0, max_score_diff = 0;
  for (const auto& x : d1) {
    double best = 0;
    const runtime::Detection* bd = nullptr;
    for (const auto& y : d2) {
      if (y.label != x.label) continue;
      const double iou = runtime::box_iou(x, y);
      if (iou > best) {
        best = iou;
        bd = &y;
      }
    }
    iou_sum += best;
    if (best > 0.5) {
      ++matched;
      const double ds = std::fabs(static_cast<double>(x.score) - bd->score);
      score_diff += ds;
      max_score_diff = std::max(max_score_diff, ds);
    }
  }
  std::printf(
      "\n  default vs discrete, %zu detections each: %zu/%zu default boxes have a discrete box of the same class "
      "with IoU > 0.5 (mean best IoU %.3f); matched scores differ by %.4f on average (max %.4f)\n",
      n, matched, n, n ? iou_sum / static_cast<double>(n) : 0.0, matched ? score_diff / static_cast<double>(matched) : 0.0, max_score_diff);
  std::printf("  they are different models: a checkpoint must be evaluated with the sampling it was trained with\n");
  std::printf("  one warm run on the CPU executor: default %.1f ms, discrete %.1f ms (%d thread(s))\n", ms_def, ms_dis, global_thread_count());
  if (!a.draw.empty()) {
    runtime::Image out = img;
    std::vector<runtime::Detection> top(d1.begin(), d1.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(d1.size(), 10)));
    runtime::draw_detections(out, top);
    check(runtime::write_png(a.tmp.at("draw"), out));
    std::printf("  wrote %s (top 10 default-sampling boxes)\n", a.draw.c_str());
  }
}

// A smooth value field (what trained features look like at this scale), so that the
// differences between methods come from where they sample, not from noise.
Tensor make_value(int64_t B, const std::vector<MsdaLevelShape>& levels, int64_t heads, int64_t hd) {
  int64_t T = 0;
  for (const auto& l : levels) T += l.h * l.w;
  Tensor v = Tensor::empty(DType::f32, {B, T, heads, hd});
  float* p = v.data<float>();
  int64_t t = 0;
  for (const auto& l : levels) {
    for (int64_t y = 0; y < l.h; ++y) {
      for (int64_t x = 0; x < l.w; ++x, ++t) {
        for (int64_t b = 0; b < B; ++b) {
          for (int64_t m = 0; m < heads; ++m) {
            for (int64_t c = 0; c < hd; ++c) {
              const double fx = static_cast<double>(x) / static_cast<double>(l.w);
              const double fy = static_cast<double>(y) / static_cast<double>(l.h);
              p[((b * T + t) * heads + m) * hd + c] =
                  static_cast<float>(std::sin(6.0 * fx + 0.3 * static_cast<double>(c)) * std::cos(4.0 * fy + 0.2 * static_cast<double>(m)));
            }
          }
        }
      }
    }
  }
  return v;
}

void make_queries(int64_t B, int64_t Lq, int64_t heads, int64_t P, uint32_t seed, Tensor* loc, Tensor* w) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f), n(-2.0f, 2.0f);
  *loc = Tensor::empty(DType::f32, {B, Lq, heads, P, 2});
  *w = Tensor::empty(DType::f32, {B, Lq, heads, P});
  float* lp = loc->data<float>();
  for (int64_t i = 0; i < loc->numel(); ++i) lp[i] = u(rng);
  float* wp = w->data<float>();
  for (int64_t r = 0; r < B * Lq * heads; ++r) {  // softmax over all points of a head
    double s = 0;
    std::vector<double> e(static_cast<size_t>(P));
    for (int64_t k = 0; k < P; ++k) s += e[static_cast<size_t>(k)] = std::exp(static_cast<double>(n(rng)));
    for (int64_t k = 0; k < P; ++k) wp[r * P + k] = static_cast<float>(e[static_cast<size_t>(k)] / s);
  }
}

double median_us(int runs, const std::function<void()>& fn) {
  std::vector<double> t;
  fn();  // warm-up
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    const auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

bool identical(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0; }

void run_demo(const DemoArgs& a) {
  set_global_thread_count(a.threads);
  const int64_t B = 1, heads = 8, hd = 24, Lq = 300;
  const std::vector<int64_t> points = {3, 6, 3};
  const int64_t P = 12;

  std::printf("rkdeploy demo: DEIMv2-S decoder sampling (heads 8, head_dim 24, 300 queries, points 3,6,3)\n");
  std::printf("threads: %d\n\n", global_thread_count());

  // ---- Part 1: methods side by side on a landscape 384x640 input (maps 48x80, 24x40, 12x20).
  const std::vector<MsdaLevelShape> rect = {{48, 80}, {24, 40}, {12, 20}};
  const Tensor vr = make_value(B, rect, heads, hd);
  Tensor loc, w;
  make_queries(B, Lq, heads, P, a.seed, &loc, &w);
  const MsdaValue pv = take(msda_prepare_from_tokens(vr, rect));
  std::printf("1. Three sampling methods on a rectangular map (384x640 input: levels 48x80, 24x40, 12x20)\n");
  std::printf("   value: a smooth field; locations uniform in [0,1]; weights softmax over 12 points\n\n");
  MsdaOptions opt;
  opt.method = MsdaMethod::bilinear;
  const Tensor ref = take(msda(pv, loc, w, points, opt));
  // Fraction of sampled points whose column the historical H-1 clamp moves.
  int64_t clamped = 0;
  const float* lp = loc.data<float>();
  std::vector<size_t> level_of;  // level of each of the P points
  for (size_t l = 0; l < points.size(); ++l) level_of.insert(level_of.end(), static_cast<size_t>(points[l]), l);
  for (int64_t i = 0; i < loc.numel() / 2; ++i) {
    const auto& lv = rect[level_of[static_cast<size_t>(i % P)]];
    const int64_t ix = static_cast<int64_t>(lp[2 * i] * static_cast<float>(lv.w) + 0.5f);
    if (ix > lv.h - 1) ++clamped;
  }
  std::printf("   %-16s %16s %16s %28s\n", "method", "max|d| vs default", "mean|d|", "points moved by x<=H-1 clamp");
  for (MsdaMethod m : {MsdaMethod::bilinear, MsdaMethod::discrete, MsdaMethod::discrete_fixed}) {
    opt.method = m;
    const Tensor y = take(msda(pv, loc, w, points, opt));
    double mx = 0, sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double d = std::fabs(static_cast<double>(y.data<float>()[i]) - ref.data<float>()[i]);
      mx = std::max(mx, d);
      sum += d;
    }
    char moved[64] = "-";
    if (m == MsdaMethod::discrete) {
      std::snprintf(moved, sizeof moved, "%.1f%%", 100.0 * static_cast<double>(clamped) / static_cast<double>(loc.numel() / 2));
    }
    std::printf("   %-16s %16.4f %16.4f %28s\n", to_string(m), mx, sum / static_cast<double>(y.numel()), moved);
  }
  std::printf(
      "\n   discrete reads one pixel (half a pixel off grid_sample 'nearest') and clamps x to H-1:\n"
      "   on this landscape map every point right of column H-1 reads column H-1. discrete_fixed\n"
      "   removes the clamp bug but is still not bilinear: a model trained with one method must\n"
      "   run with that method.\n\n");

  // ---- Part 2: timing on the square DEIMv2-S maps (640x640 input).
  const std::vector<MsdaLevelShape> sq = {{80, 80}, {40, 40}, {20, 20}};
  const Tensor vs = make_value(B, sq, heads, hd);
  const MsdaValue pvs = take(msda_prepare_from_tokens(vs, sq));
  std::printf("2. Fast kernels vs readable references, 640x640 maps (80x80, 40x40, 20x20), median of %d runs\n\n", a.runs);
  std::printf("   %-34s %12s %12s %8s %14s\n", "kernel", "reference us", "fast us", "ratio", "bit-identical");
  for (MsdaMethod m : {MsdaMethod::bilinear, MsdaMethod::discrete, MsdaMethod::discrete_fixed}) {
    MsdaOptions o;
    o.method = m;
    o.impl = KernelImpl::reference;
    Tensor yr, yf;
    const double tr = median_us(std::max(3, a.runs / 4), [&] { yr = take(msda(pvs, loc, w, points, o)); });
    o.impl = KernelImpl::fast;
    const double tf = median_us(a.runs, [&] { yf = take(msda(pvs, loc, w, points, o)); });
    std::printf("   %-34s %12.1f %12.1f %7.1fx %14s\n", (std::string("deform-attn layer, ") + to_string(m)).c_str(), tr, tf, tr / tf,
                identical(yr, yf) ? "yes" : "NO");
  }
  // GridSample at the level-0 call of the decoder: value [8, 24, 80, 80], grid [8, 300, 3, 2].
  Tensor gin = Tensor::empty(DType::f32, {8, 24, 80, 80});
  Tensor grid = Tensor::empty(DType::f32, {8, 300, 3, 2});
  {
    std::mt19937 rng(a.seed + 1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < gin.numel(); ++i) gin.data<float>()[i] = u(rng);
    for (int64_t i = 0; i < grid.numel(); ++i) grid.data<float>()[i] = u(rng);
  }
  for (GridSampleMode mode : {GridSampleMode::bilinear, GridSampleMode::nearest}) {
    GridSampleOptions go;
    go.mode = mode;
    Tensor yr, yf;
    const double tr = median_us(std::max(3, a.runs / 4), [&] { yr = take(grid_sample(gin, grid, go, KernelImpl::reference)); });
    const double tf = median_us(a.runs, [&] { yf = take(grid_sample(gin, grid, go, KernelImpl::fast)); });
    std::printf("   %-34s %12.1f %12.1f %7.1fx %14s\n", (std::string("grid_sample level 0, ") + to_string(mode)).c_str(), tr, tf, tr / tf,
                identical(yr, yf) ? "yes" : "NO");
  }
  std::printf("\n   Peer ratios (PyTorch, ONNX Runtime) are measured by 'make bench'; see BENCHMARKS.md.\n");

  if (!a.save_dir.empty()) {
    check(write_npy(a.tmp.at("value.npy"), vs));
    check(write_npy(a.tmp.at("locations.npy"), loc));
    check(write_npy(a.tmp.at("weights.npy"), w));
    check(write_npy(a.tmp.at("gs_input.npy"), gin));
    check(write_npy(a.tmp.at("gs_grid.npy"), grid));
    std::printf(
        "\nwrote the DEIMv2-S example inputs to %s: value.npy [1, 8400, 8, 24], locations.npy "
        "[1, 300, 8, 12, 2], weights.npy [1, 300, 8, 12], gs_input.npy [8, 24, 80, 80], gs_grid.npy [8, 300, 3, 2]\n",
        a.save_dir.c_str());
  }
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* demo = app.add_subcommand("demo",
                                      "Showcase on DEIMv2-S shapes: the three deformable-attention sampling methods "
                                      "on a rectangular map, and fast vs reference kernel timings");
  add_threads_option(demo, a->threads, "worker threads (0 = all cores)")->capture_default_str();
  demo->add_option("--runs", a->runs, "timed runs per kernel")->capture_default_str()->check(CLI::Range(1, 100000));
  demo->add_option("--seed", a->seed, "random seed for locations and weights")->capture_default_str();
  demo->add_option("--save", a->save_dir,
                   "also write the example inputs (.npy) into this folder (created if absent; "
                   "files of the same names replaced, nothing else touched)");
  demo->add_option("--models", a->models_dir,
                   "folder with deimv2_s_arch.onnx and deimv2_s_arch_discrete.onnx "
                   "(make models): also run them end to end on --photo");
  demo->add_option("--photo", a->photo, "photo for the model run (e.g. skimage's astronaut.png)");
  demo->add_option("--draw", a->draw, "write the photo with the default model's top boxes to this PNG");
  demo->callback([a] {
    if (!a->models_dir.empty() && a->photo.empty()) fail(invalid("--models needs --photo"));
    if (!a->draw.empty() && a->models_dir.empty()) fail(invalid("--draw needs --models and --photo (it draws the model run's boxes)"));
    OutputTransaction out_tx({a->models_dir, a->photo});
    if (!a->save_dir.empty()) {
      check(out_tx.files_in(a->save_dir));
      for (const char* f : {"value.npy", "locations.npy", "weights.npy", "gs_input.npy", "gs_grid.npy"}) {
        a->tmp[f] = take(out_tx.file((std::filesystem::path(a->save_dir) / f).string()));
      }
    }
    if (!a->draw.empty()) a->tmp["draw"] = take(out_tx.file(a->draw));
    run_demo(*a);
    if (!a->models_dir.empty()) run_model_demo(*a);
    check(out_tx.publish());
  });
}

}  // namespace rkd::cli
