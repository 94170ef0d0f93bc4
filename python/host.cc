// rkdeploy._host: the workflows of the command line for Python (docs/python.md). Conversions
// only: every rule, check and message is the workflow's (src/workflows), and a report holds the
// fields of the workflow's result under the names the command line's --json uses.
//
// Contract:
//  - Arrays in: a C-contiguous NumPy array of a dtype rkdeploy has (float32, float16, int8,
//    uint8, int16, int32, int64, bool) is read in place (no copy; the array is kept alive while
//    rkdeploy holds it); any other array-like is converted to a C-contiguous copy first.
//  - Arrays out: each output tensor becomes an array over rkdeploy's own buffer (no copy); the
//    executor allocates fresh output buffers per run, so a returned array is never overwritten.
//  - Errors: a workflow's Error raises the rkdeploy exception of its kind (InvalidError,
//    UnsupportedError, IoError, InternalError; all rkdeploy.Error) with the same message the
//    command line prints after "rkdeploy: KIND: ".
//  - Long work releases the GIL. progress=callable(stage, done, total) is called (with the GIL)
//    as the workflow reports progress (core/progress.h); the sink is process-wide, so one call
//    with progress runs at a time. Every progress point is also where the work stops early: an
//    exception the callable raises, or a signal (Ctrl-C: KeyboardInterrupt; with or without a
//    callable), ends the work there, nothing is published, and the exception is raised.
//  - Files written (quantize, compile) follow the command line's output discipline
//    (core/output.h): a temporary beside the destination, renamed when complete.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>

#include "lock_without_gil.h"
#include <nlohmann/json.hpp>

#include "core/json_style.h"
#include "core/npy.h"
#include "core/output.h"
#include "core/progress.h"
#include "frontends/onnx/onnx_export.h"
#include "npu/lower/lower.h"
#include "npu/sim/sim.h"
#include "plan/plan.h"
#include "quant/calibrate.h"
#include "runtime/detect.h"
#include "runtime/model.h"
#include "workflows/accuracy.h"
#include "workflows/analyze.h"
#include "workflows/backend.h"
#include "workflows/bench.h"
#include "workflows/compile.h"
#include "workflows/eval.h"
#include "workflows/plan.h"
#include "workflows/quantize.h"
#include "workflows/run.h"

namespace py = pybind11;
using namespace rkd;

namespace {

py::object g_errors[4];  // per ErrorKind: the exception class

[[noreturn]] void raise(const Error& e) {
  PyErr_SetString(g_errors[static_cast<int>(e.kind)].ptr(), e.message.c_str());
  throw py::error_already_set();
}

template <typename T>
T take(Result<T> r) {
  if (!r.ok()) raise(r.error());
  return std::move(r).value();
}
void check(const Status& s) {
  if (!s.ok()) raise(s.error());
}

// Set while this thread runs a progress callback: rkdeploy's calls are refused there (the
// callback runs inside another call, which holds the progress sink).
thread_local bool in_progress_callback = false;

// Runs f() (which returns a Result or Status) without the GIL, with `progress` as the progress
// sink for its duration. A signal that arrived meanwhile (Ctrl-C: KeyboardInterrupt) is raised
// as soon as f() returns, before the caller publishes anything.
template <typename F>
auto work(const py::object& progress, F f) {
  if (in_progress_callback) {
    raise(invalid("an rkdeploy call from inside a progress callback: the callback reports another call's progress; make the call after it returns"));
  }
  static std::mutex one_at_a_time;
  std::unique_ptr<py::error_already_set> raised;
  std::unique_lock<std::mutex> lock(one_at_a_time, std::defer_lock);
  if (!progress.is_none()) {
    {
      py::gil_scoped_release nogil;
      lock.lock();
    }
    set_progress_sink([&progress, &raised](const std::string& stage, int64_t done, int64_t total) {
      py::gil_scoped_acquire gil;
      if (raised) return;
      in_progress_callback = true;
      try {
        progress(stage, done, total);
      } catch (py::error_already_set& e) {
        raised = std::make_unique<py::error_already_set>(std::move(e));
      }
      in_progress_callback = false;
    });
  }
  struct Reset {
    bool on;
    ~Reset() {
      if (on) set_progress_sink(nullptr);
    }
  } reset{!progress.is_none()};
  // At every progress point: a pending signal (Ctrl-C) or the callback's exception stops the
  // work there; it unwinds through its Result and the exception is raised below.
  ScopedCancelCheck cancel([&raised] {
    py::gil_scoped_acquire gil;
    if (raised) return true;
    if (PyErr_CheckSignals() == 0) return false;
    raised = std::make_unique<py::error_already_set>();
    return true;
  });
  auto r = [&] {
    py::gil_scoped_release nogil;
    return f();
  }();
  if (raised) throw std::move(*raised);
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  return r;
}

// --- arrays -----------------------------------------------------------------------------

Tensor tensor_of(const py::handle& obj, const std::string& what) {
  py::array a = py::array::ensure(obj, py::array::c_style);
  if (!a) throw py::type_error(what + ": not an array");
  const std::string name = py::str(a.dtype());
  const auto dt = dtype_from_name(name);
  if (!dt || *dt == DType::bf16) {
    std::string known;
    for (DType d : kAllDTypes) {
      if (d != DType::bf16) known += (known.empty() ? "" : ", ") + std::string(dtype_name(d));
    }
    raise(invalid(what + ": dtype " + name + " is not one rkdeploy reads (" + known + "); convert it, e.g. with .astype(numpy.float32)"));
  }
  Shape shape(a.shape(), a.shape() + a.ndim());
  auto* keep = new py::object(a);
  std::shared_ptr<uint8_t[]> owner(static_cast<uint8_t*>(const_cast<void*>(a.data())), [keep](uint8_t*) {
    py::gil_scoped_acquire gil;
    delete keep;
  });
  return Tensor::wrap(owner, 0, *dt, shape);
}

py::array array_of(const Tensor& t) {
  Tensor c = t.is_contiguous() ? t : t.contiguous();
  if (c.dtype() == DType::bf16) c = take(c.to(DType::f32));
  auto* hold = new Tensor(c);
  py::capsule owner(hold, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(c.shape().begin(), c.shape().end());
  return py::array(py::dtype(dtype_name(c.dtype())), shape, hold->raw(), owner);
}

py::dict arrays_of(const std::map<std::string, Tensor>& m) {
  py::dict d;
  for (const auto& [k, v] : m) d[py::str(k)] = array_of(v);
  return d;
}

// A dict name -> array, or one array for the model's only input `only` ("" when it has several).
std::map<std::string, Tensor> tensors_of(const py::handle& obj, const std::string& only, const std::string& what) {
  std::map<std::string, Tensor> m;
  if (py::isinstance<py::dict>(obj)) {
    for (auto [k, v] : obj.cast<py::dict>()) {
      const std::string name = py::str(k);
      m[name] = tensor_of(v, what + " '" + name + "'");
    }
    return m;
  }
  if (only.empty()) throw py::type_error(what + ": the model has several inputs; give a dict name -> array");
  m[only] = tensor_of(obj, what + " '" + only + "'");
  return m;
}

std::string only_input(const ir::Graph& g) { return g.inputs.size() == 1 ? g.inputs[0]->name : ""; }

py::object types() { return py::module_::import("rkdeploy._types"); }

py::object tensor_info(const ir::Value* v) {
  py::object shape = py::none();  // unknown rank
  if (v->shape) {
    py::list dims;
    for (const ir::Dim& d : *v->shape) {
      if (d.is_static()) dims.append(d.value);
      else dims.append(py::str(d.to_string()));  // a symbolic or unknown dimension
    }
    shape = py::tuple(dims);
  }
  return types().attr("TensorInfo")(v->name, shape, v->dtype ? dtype_name(*v->dtype) : "unknown");
}

py::list detections_of(const std::vector<runtime::Detection>& d) {
  const auto& names = runtime::coco_class_names();
  py::object make = types().attr("Detection");
  py::list out;
  for (const auto& x : d) {
    const bool named = x.label >= 0 && x.label < static_cast<int64_t>(names.size());
    out.append(make(x.label, named ? py::object(py::str(names[static_cast<size_t>(x.label)])) : py::none(), x.score, x.x0, x.y0, x.x1, x.y1));
  }
  return out;
}

runtime::Image image_of(const py::handle& obj) {
  if (py::isinstance<py::str>(obj)) return take(runtime::load_image(obj.cast<std::string>()));
  py::array any = py::array::ensure(obj);
  if (!any || any.ndim() != 3 || any.shape(2) != 3) throw py::value_error("image: a file path or an H x W x 3 uint8 array (RGB)");
  // Refused, not cast: a float image in [0, 1] would become black.
  if (!any.dtype().is(py::dtype::of<uint8_t>())) {
    raise(invalid("image: the array is " + py::str(any.dtype()).cast<std::string>() +
                  "; it must be uint8 RGB in 0..255 (a float image in [0, 1]: (image * 255).round().astype(numpy.uint8))"));
  }
  auto a = py::array_t<uint8_t, py::array::c_style>::ensure(any);
  runtime::Image img;
  img.height = a.shape(0);
  img.width = a.shape(1);
  img.rgb.assign(a.data(), a.data() + a.size());
  return img;
}

py::object json_of(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

std::string opt(const std::optional<std::string>& s) { return s.value_or(""); }

// A model's inputs from `inputs` (arrays) or `image` (a photo through the detector config):
// exactly one of them.
std::map<std::string, Tensor> model_inputs(const std::string& model, const py::object& inputs, const std::optional<std::string>& image,
                                           const std::optional<std::string>& config) {
  if (inputs.is_none() == !image.has_value()) raise(invalid("give the input: image=PHOTO or inputs={NAME: array}"));
  if (image) return take(runtime::model_inputs(model, *image, opt(config), {}));
  std::string only;
  if (!py::isinstance<py::dict>(inputs)) {
    auto g = take(workflows::load_portable(model));
    only = only_input(*g);
  }
  return tensors_of(inputs, only, "input");
}

workflows::BackendChoice backend_of(const std::string& backend, const std::optional<std::string>& strategy, const std::optional<std::string>& requant,
                                    const std::vector<std::string>& sim, const std::optional<std::string>& device, int cores, bool fuse_npu_add,
                                    bool npu_round_trips) {
  workflows::BackendChoice b;
  b.backend = backend;
  b.strategy = opt(strategy);
  b.requant = opt(requant);
  b.sim_knobs = sim;
  b.device = opt(device);
  b.cores = cores;
  b.fuse_npu_add = fuse_npu_add;
  b.npu_round_trips = npu_round_trips;
  return b;
}

// --- Model ------------------------------------------------------------------------------

class Model {
 public:
  Model(const std::string& path, const workflows::BackendChoice& b, int threads, int64_t batch) : path_(path), backend_(b) {
    if (batch < 1 || batch > kMaxBatch) raise(invalid("batch " + std::to_string(batch) + ": must be 1 to " + std::to_string(kMaxBatch)));
    check(check_thread_count(threads, "threads"));
    runtime::LoadOptions lo;
    lo.batch = batch;
    lo.exec.threads = threads;
    check(workflows::configure_backend(b, lo.compile, lo.exec));
    m_ = work(py::none(), [&] { return runtime::load_model(path, lo); });
    if (!m_.ok()) raise(m_.error());
  }
  py::list inputs() const {
    py::list l;
    for (const ir::Value* v : g().inputs) l.append(tensor_info(v));
    return l;
  }
  py::list outputs() const {
    py::list l;
    for (const ir::Value* v : g().outputs) l.append(tensor_info(v));
    return l;
  }
  py::dict run(const py::object& inputs, bool allow_nonfinite) {
    const auto in = tensors_of(inputs, only_input(g()), "input");
    check(runtime::check_run_inputs(in, allow_nonfinite));
    const auto lock = exclusive();
    return arrays_of(take(work(py::none(), [&] { return m().executor->run(in); })));
  }
  py::list detect(const py::object& image, const std::optional<std::string>& config) {
    const runtime::Image img = image_of(image);
    const auto lock = exclusive();
    const auto dets = work(py::none(), [&]() -> Result<std::vector<runtime::Detection>> {
      RKD_ASSIGN(const runtime::DetectorConfig cfg, runtime::detector_config(g(), opt(config)));
      RKD_ASSIGN(const runtime::Prepared prep, runtime::preprocess(img, cfg, runtime::takes_target_sizes(g())));
      RKD_TRY(runtime::check_detector_inputs(prep.inputs));
      RKD_ASSIGN(const auto outputs, m().executor->run(prep.inputs));
      return runtime::postprocess(outputs, cfg, prep, img);
    });
    return detections_of(take(dets));
  }
  std::vector<std::string> placement() const { return workflows::npu_report_lines(backend_, m()); }
  std::vector<std::string> notes() const { return m().notes; }
  std::string backend() const { return workflows::backend_description(backend_); }
  std::string path() const { return path_; }

 private:
  std::string path_;
  workflows::BackendChoice backend_;
  Result<runtime::LoadedModel> m_ = invalid("not loaded");
  // One run at a time per Model (the executor's buffers and NPU session are its state).
  std::mutex mu_;
  std::unique_lock<std::mutex> exclusive() { return rkd_python::lock_without_gil(mu_); }
  const runtime::LoadedModel& m() const { return m_.value(); }
  runtime::LoadedModel& m() { return m_.value(); }
  const ir::Graph& g() const { return *m().graph; }
};

// --- quantize ---------------------------------------------------------------------------

workflows::CalibrationSet calibration_of(const std::string& model, const py::object& calib, int images, const std::optional<std::string>& config) {
  if (py::isinstance<py::str>(calib)) {
    const std::string path = calib.cast<std::string>();
    return take(work(py::none(), [&] { return workflows::open_calibration_for(model, {path, images, opt(config)}); }));
  }
  auto g = take(workflows::load_portable(model));
  const std::string only = only_input(*g);
  std::vector<workflows::Sample> samples;
  if (images < 1) raise(invalid("images " + std::to_string(images) + ": must be at least 1"));
  // Whether `images` samples are taken (an endless iterator stops there); Ctrl-C stops the reading.
  auto full = [&] {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    return static_cast<int>(samples.size()) >= images;
  };
  auto add = [&](const py::handle& item) {
    if (!full()) samples.push_back(tensors_of(item, only, "calibration sample " + std::to_string(samples.size())));
  };
  if (py::isinstance<py::dict>(calib)) {
    // name -> array of samples along axis 0.
    std::map<std::string, py::array> members;
    py::ssize_t n = -1;
    for (auto [k, v] : calib.cast<py::dict>()) {
      py::array a = py::array::ensure(v);
      if (!a || a.ndim() < 1) raise(invalid("calibration member '" + py::str(k).cast<std::string>() + "' needs a leading sample axis"));
      if (n >= 0 && a.shape(0) != n) raise(invalid("calibration members hold different sample counts"));
      n = a.shape(0);
      members[py::str(k)] = a;
    }
    for (py::ssize_t i = 0; i < n && !full(); ++i) {
      py::dict d;
      for (auto& [k, a] : members) d[py::str(k)] = a[py::slice(i, i + 1, 1)];
      add(d);
    }
  } else if (py::isinstance<py::array>(calib)) {
    // One input's samples along axis 0.
    py::array a = calib.cast<py::array>();
    if (a.ndim() < 1) raise(invalid("calibration array needs a leading sample axis"));
    for (py::ssize_t i = 0; i < a.shape(0) && !full(); ++i) add(a[py::slice(i, i + 1, 1)]);
  } else {
    // An iterable of samples (arrays for a one-input model, or dicts), each batch 1.
    for (const py::handle item : calib) {
      if (full()) break;
      add(item);
    }
  }
  return take(workflows::calibration_from_samples(std::move(samples), *g, "calibration samples"));
}

py::dict quantize(const std::string& model, const py::object& calib, const std::string& output, const std::optional<std::string>& config, int images,
                  const std::string& method, std::optional<double> percentile, std::optional<bool> per_channel, const std::string& dtype,
                  bool symmetric_activations, const std::vector<std::string>& keep_float, bool float_outputs, const std::string& target,
                  double auto_hybrid, const std::optional<std::string>& hybrid_images, int threads, bool allow_nonfinite,
                  const py::object& progress) {
  const bool u8 = dtype == "uint8";
  if (!u8 && dtype != "int8") raise(invalid("dtype '" + dtype + "': int8 or uint8"));
  if (u8 && per_channel.value_or(false)) raise(invalid("dtype uint8: weights are per tensor (TFLite's uint8 scheme); drop per_channel"));
  if (percentile && method != "percentile") raise(invalid("percentile applies to method 'percentile' only (the method is " + method + ")"));
  OutputTransaction out_tx({model, py::isinstance<py::str>(calib) ? calib.cast<std::string>() : "", opt(config), opt(hybrid_images)});
  const std::string out_tmp = take(out_tx.file(output));
  workflows::QuantizeOptions o;
  o.qdq.dtype = u8 ? DType::u8 : DType::i8;
  o.method = take(quant::calib_method_from_name(method));
  o.percentile = percentile.value_or(o.percentile);
  o.qdq.per_channel = per_channel.value_or(!u8);
  o.qdq.symmetric_activations = symmetric_activations;
  o.threads = threads;
  o.qdq.keep_float.insert(keep_float.begin(), keep_float.end());
  o.qdq.float_outputs = float_outputs;
  if (target != "none") o.target = take(plan::find_target(target, plan::default_targets_dir()));
  o.hybrid.min_ap50 = auto_hybrid;
  o.hybrid.images = opt(hybrid_images);
  o.allow_nonfinite = allow_nonfinite;
  o.source = py::isinstance<py::str>(calib) ? calib.cast<std::string>() : "calibration samples";
  check(workflows::check_quantize_options(o));
  const workflows::CalibrationSet samples = calibration_of(model, calib, images, config);
  const auto q = take(work(progress, [&]() -> Result<workflows::QuantizedModel> {
    RKD_ASSIGN(auto r, workflows::quantize_model(model, samples, o));
    RKD_TRY(onnx_frontend::export_onnx_file(*r.graph, out_tmp));
    return r;
  }));
  check(out_tx.publish());  // not when the progress callback raised (work() throws)
  py::dict d = json_of(workflows::quantize_summary_json(q, o, target));
  d["model"] = model;
  d["output"] = output;
  return d;
}

// --- eval -------------------------------------------------------------------------------

py::dict evaluate(const std::string& model, const std::string& images, const std::optional<std::string>& annotations,
                  const std::optional<std::string>& reference, const std::optional<std::string>& config,
                  const std::optional<std::string>& reference_config, float score_threshold, float reference_margin, int max_images,
                  const workflows::BackendChoice& b, int threads, const py::object& progress) {
  if (annotations.has_value() == reference.has_value()) raise(invalid("eval needs one of annotations=COCO.json and reference=MODEL"));
  workflows::EvalOptions o;
  o.images = images;
  o.annotations = opt(annotations);
  o.reference = opt(reference);
  o.config = opt(config);
  o.reference_config = opt(reference_config);
  o.score_threshold = score_threshold;
  o.reference_margin = reference_margin;
  o.max_images = max_images;
  o.load.exec.threads = threads;
  check(workflows::configure_backend(b, o.load.compile, o.load.exec));
  const auto r = take(work(progress, [&] { return workflows::evaluate_model(model, o); }));
  const auto names = quant::CocoSummary::names();
  const auto values = r.metrics.summary.values();
  py::dict metrics;
  for (size_t i = 0; i < names.size(); ++i) metrics[names[i]] = values[i];
  int64_t ignored = 0;
  for (const auto& g : r.ground_truth.boxes) ignored += g.ignore;
  py::dict d;
  d["model"] = model;
  d["backend"] = workflows::backend_description(b);
  d["images"] = r.ground_truth.images.size();
  d["ground_truth"] = py::dict(py::arg("kind") = reference ? "reference" : "annotations", py::arg("path") = reference ? *reference : *annotations,
                               py::arg("boxes") = static_cast<int64_t>(r.ground_truth.boxes.size()) - ignored, py::arg("ignored_boxes") = ignored,
                               py::arg("categories") = r.ground_truth.categories.size());
  d["matched50"] = r.metrics.matched50();
  d["metrics"] = metrics;
  py::list cats;
  for (const auto& c : r.metrics.categories) {
    cats.append(py::dict(py::arg("id") = c.category, py::arg("ground_truth") = c.ground_truth, py::arg("detections") = c.detections,
                         py::arg("matched50") = c.matched50, py::arg("AP") = c.ap, py::arg("AP50") = c.ap50, py::arg("AR100") = c.ar100));
  }
  d["categories"] = cats;
  d["detections"] = json_of(workflows::coco_results_json(r.detections));
  d["labels_outside_categories"] = r.labels_outside;
  d["notes"] = r.notes;
  return d;
}

// --- accuracy, analyze, compile, plan, bench --------------------------------------------

py::dict accuracy(const std::string& float_model, const std::string& quant_model, const py::object& inputs, const std::optional<std::string>& image,
                  const std::optional<std::string>& config, int threads, bool allow_nonfinite, const std::optional<std::string>& html) {
  const auto in = model_inputs(float_model, inputs, image, config);
  check(runtime::check_detector_inputs(in));
  if (!allow_nonfinite) check(runtime::check_finite_inputs(in));
  OutputTransaction out_tx({float_model, quant_model, opt(image), opt(config)});
  const std::string html_tmp = html ? take(out_tx.file(*html)) : "";
  const auto rep = take(work(py::none(), [&] { return workflows::analyze_accuracy(float_model, quant_model, in, threads); }));
  if (html) {
    const std::string page = workflows::accuracy_html(rep);
    check(write_file_atomic(html_tmp, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(page.data()), page.size())));
    check(out_tx.publish());
  }
  return json_of(workflows::accuracy_json(rep));
}

py::dict analyze(const std::string& model, const py::object& inputs, const std::optional<std::string>& image,
                 const std::optional<std::string>& config, const std::vector<std::string>& strategies, const std::optional<std::string>& requant,
                 const std::vector<std::string>& sim, int threads, bool allow_nonfinite) {
  const auto in = model_inputs(model, inputs, image, config);
  if (!allow_nonfinite) check(runtime::check_finite_inputs(in));
  std::vector<npu::lower::Strategy> st;
  for (const std::string& s : strategies) st.push_back(take(npu::lower::parse_strategy(s)));
  if (st.empty()) st = npu::lower::all_strategies();
  npu::sim::Quirks q;
  for (const std::string& k : sim) check(npu::sim::set_knob(q, k));
  const auto rep = take(work(py::none(), [&] { return workflows::analyze_npu(model, in, st, q, threads, {}, opt(requant)); }));
  return json_of(workflows::npu_analysis_json(rep));
}

py::dict compile(const std::string& model, const std::string& output, const std::optional<std::string>& strategy,
                 const std::optional<std::string>& config, bool mainline) {
  const npu::lower::Strategy st = strategy ? take(npu::lower::parse_strategy(*strategy)) : npu::lower::kDefaultStrategy;
  OutputTransaction out_tx({model, opt(config)});
  const std::string tmp = take(out_tx.file(output));
  const auto s = take(work(py::none(), [&]() -> Result<workflows::ArtifactSummary> {
    RKD_ASSIGN(auto r, workflows::compile_artifact(model, st, tmp, mainline, opt(config)));
    return r;
  }));
  check(out_tx.publish());
  return py::dict(py::arg("model") = model, py::arg("output") = output, py::arg("strategy") = npu::lower::strategy_name(st),
                  py::arg("mainline") = mainline, py::arg("npu_nodes") = s.npu_nodes, py::arg("cpu_nodes") = s.cpu_nodes, py::arg("views") = s.views,
                  py::arg("device_bytes") = s.device_bytes, py::arg("file_bytes") = s.file_bytes);
}

py::dict plan_model(const std::string& model, const std::string& target, const py::object& inputs, const std::optional<std::string>& image,
                    const std::optional<std::string>& config, const std::vector<std::string>& variants,
                    const std::optional<std::string>& discrete_model, int threads, int warmup, int runs, bool allow_nonfinite,
                    const py::object& progress) {
  plan::PlanReport rep;
  rep.target = take(plan::find_target(target, plan::default_targets_dir()));
  workflows::PlanOptions po;
  po.model = model;
  po.discrete_model = opt(discrete_model);
  po.threads = threads;
  po.warmup = warmup;
  po.runs = runs;
  for (const std::string& v : variants) po.variants.push_back(take(plan::parse_variant(v)));
  if (po.variants.empty()) po.variants = plan::default_variants(rep.target);
  po.inputs = model_inputs(model, inputs, image, config);
  if (!allow_nonfinite) check(runtime::check_finite_inputs(po.inputs));
  rep.model = model;
  rep.discrete_model = po.discrete_model;
  rep.plans = take(work(progress, [&] { return workflows::plan_model(po, rep.target); }));
  rep.host = workflows::environment();
  rep.host["runs"] = std::to_string(runs);
  return json_of(plan::plan_json(rep));
}

py::dict bench(const std::string& model, const workflows::BackendChoice& b, const std::optional<std::string>& image,
               const std::optional<std::string>& config, const std::vector<std::string>& inputs, int warmup, int runs, int threads,
               bool allow_nonfinite, const py::object& progress) {
  workflows::BenchOptions o;
  o.model = model;
  o.backend = b;
  o.image = opt(image);
  o.config = opt(config);
  o.inputs = inputs;
  o.warmup = warmup;
  o.runs = runs;
  o.threads = threads;
  o.allow_nonfinite = allow_nonfinite;
  const auto r = take(work(progress, [&] { return workflows::bench(o); }));
  py::dict d = json_of(workflows::bench_json(r));
  d["model"] = model;
  d["backend"] = b.backend;
  d["warmup"] = warmup;
  d["runs"] = runs;
  return d;
}

void export_onnx(const std::string& model, const std::string& output) {
  OutputTransaction out_tx({model});
  const std::string tmp = take(out_tx.file(output));
  check(work(py::none(), [&]() -> Status {
    RKD_ASSIGN(auto g, workflows::load_portable(model));
    return onnx_frontend::export_onnx_file(*g, tmp);
  }));
  check(out_tx.publish());
}

// The back-end keyword arguments every call that runs a model takes.
#define RKD_BACKEND_ARGS                                                                                                                      \
  py::arg("backend") = "cpu", py::arg("strategy") = py::none(), py::arg("requant") = py::none(), py::arg("sim") = std::vector<std::string>{}, \
  py::arg("device") = py::none(), py::arg("cores") = static_cast<int>(npu::arch::kRk3588.cores), py::arg("fuse_npu_add") = false,             \
  py::arg("npu_round_trips") = false

}  // namespace

PYBIND11_MODULE(_host, m) {
  m.doc() = "rkdeploy's workflows: load, quantize, evaluate, analyze, compile, run, plan and bench detection models (docs/python.md)";
  py::object t = types();
  g_errors[static_cast<int>(ErrorKind::invalid)] = t.attr("InvalidError");
  g_errors[static_cast<int>(ErrorKind::unsupported)] = t.attr("UnsupportedError");
  g_errors[static_cast<int>(ErrorKind::io)] = t.attr("IoError");
  g_errors[static_cast<int>(ErrorKind::internal)] = t.attr("InternalError");
  m.attr("backends") = workflows::backend_names();
  m.attr("strategies") = [] {
    std::vector<std::string> v;
    for (const auto s : npu::lower::all_strategies()) v.push_back(npu::lower::strategy_name(s));
    return v;
  }();
  m.def(
      "environment", [] { return json_of(json_record<nlohmann::json>(workflows::environment()).dump()); },
      "this host and build, as measurement reports record them (bench's environment)");

  py::class_<Model>(m, "Model", "a model file (ONNX, TFLite, TF.js or a compiled .rkd) loaded on one back end")
      .def(py::init([](const std::string& path, const std::string& backend, const std::optional<std::string>& strategy,
                       const std::optional<std::string>& requant, const std::vector<std::string>& sim, const std::optional<std::string>& device,
                       int cores, bool fuse_npu_add, bool npu_round_trips, int threads, int64_t batch) {
             return std::make_unique<Model>(path, backend_of(backend, strategy, requant, sim, device, cores, fuse_npu_add, npu_round_trips), threads,
                                            batch);
           }),
           py::arg("path"), RKD_BACKEND_ARGS, py::arg("threads") = 0, py::arg("batch") = 1)
      .def_property_readonly("path", &Model::path)
      .def_property_readonly("inputs", &Model::inputs)
      .def_property_readonly("outputs", &Model::outputs)
      .def_property_readonly("backend", &Model::backend)
      .def_property_readonly("placement", &Model::placement, "with sim or device: what the NPU took and what stayed on the CPU")
      .def_property_readonly("notes", &Model::notes)
      .def("run", &Model::run, py::arg("inputs"), py::arg("allow_nonfinite") = false,
           "inputs: dict name -> array (or one array); returns dict name -> array. NaN or infinite float inputs are refused unless allow_nonfinite")
      .def("detect", &Model::detect, py::arg("image"), py::arg("config") = py::none(),
           "a photo (path or H x W x 3 uint8 RGB array) through the detector config -> detections, best first");

  m.def("quantize", &quantize, py::arg("model"), py::arg("calib"), py::arg("output"), py::kw_only(), py::arg("config") = py::none(),
        py::arg("images") = 100, py::arg("method") = "minmax", py::arg("percentile") = py::none(), py::arg("per_channel") = py::none(),
        py::arg("dtype") = "int8", py::arg("symmetric_activations") = false, py::arg("keep_float") = std::vector<std::string>{},
        py::arg("float_outputs") = false, py::arg("target") = "rk3588-rkdeploy", py::arg("auto_hybrid") = 0.0, py::arg("hybrid_images") = py::none(),
        py::arg("threads") = 0, py::arg("allow_nonfinite") = false, py::arg("progress") = py::none(),
        "post-training quantization to an ONNX QDQ model (rkdeploy quantize)");
  m.def(
      "evaluate",
      [](const std::string& model, const std::string& images, const std::optional<std::string>& annotations,
         const std::optional<std::string>& reference, const std::optional<std::string>& config, const std::optional<std::string>& reference_config,
         float score_threshold, float reference_margin, int max_images, const std::string& backend, const std::optional<std::string>& strategy,
         const std::optional<std::string>& requant, const std::vector<std::string>& sim, const std::optional<std::string>& device, int cores,
         bool fuse_npu_add, bool npu_round_trips, int threads, const py::object& progress) {
        return evaluate(model, images, annotations, reference, config, reference_config, score_threshold, reference_margin, max_images,
                        backend_of(backend, strategy, requant, sim, device, cores, fuse_npu_add, npu_round_trips), threads, progress);
      },
      py::arg("model"), py::arg("images"), py::kw_only(), py::arg("annotations") = py::none(), py::arg("reference") = py::none(),
      py::arg("config") = py::none(), py::arg("reference_config") = py::none(), py::arg("score_threshold") = 0.001f,
      py::arg("reference_margin") = 0.f, py::arg("max_images") = 0, RKD_BACKEND_ARGS, py::arg("threads") = 0, py::arg("progress") = py::none(),
      "COCO detection metrics against labels or a reference model's detections (rkdeploy eval)");
  m.def("accuracy", &accuracy, py::arg("float_model"), py::arg("quant_model"), py::kw_only(), py::arg("inputs") = py::none(),
        py::arg("image") = py::none(), py::arg("config") = py::none(), py::arg("threads") = 0, py::arg("allow_nonfinite") = false,
        py::arg("html") = py::none(), "per-layer quantization error, entire and single modes (rkdeploy accuracy)");
  m.def("analyze", &analyze, py::arg("model"), py::kw_only(), py::arg("inputs") = py::none(), py::arg("image") = py::none(),
        py::arg("config") = py::none(), py::arg("strategies") = std::vector<std::string>{}, py::arg("requant") = py::none(),
        py::arg("sim") = std::vector<std::string>{}, py::arg("threads") = 0, py::arg("allow_nonfinite") = false,
        "every int8 convolution lowered with each NPU strategy, simulated and compared (rkdeploy analyze)");
  m.def("compile", &compile, py::arg("model"), py::arg("output"), py::kw_only(), py::arg("strategy") = py::none(), py::arg("config") = py::none(),
        py::arg("mainline") = false, "a quantized model as a deployable .rkd artifact (rkdeploy compile -o MODEL.rkd)");
  m.def("plan", &plan_model, py::arg("model"), py::kw_only(), py::arg("target") = "rk3588-rkdeploy", py::arg("inputs") = py::none(),
        py::arg("image") = py::none(), py::arg("config") = py::none(), py::arg("variants") = std::vector<std::string>{},
        py::arg("discrete_model") = py::none(), py::arg("threads") = 1, py::arg("warmup") = 1, py::arg("runs") = 3,
        py::arg("allow_nonfinite") = false, py::arg("progress") = py::none(),
        "placement, boundaries and latency per deployment variant (rkdeploy plan)");
  m.def(
      "bench",
      [](const std::string& model, const std::optional<std::string>& image, const std::optional<std::string>& config,
         const std::vector<std::string>& inputs, int warmup, int runs, const std::string& backend, const std::optional<std::string>& strategy,
         const std::optional<std::string>& requant, const std::vector<std::string>& sim, const std::optional<std::string>& device, int cores,
         bool fuse_npu_add, bool npu_round_trips, int threads, bool allow_nonfinite, const py::object& progress) {
        return bench(model, backend_of(backend, strategy, requant, sim, device, cores, fuse_npu_add, npu_round_trips), image, config, inputs, warmup,
                     runs, threads, allow_nonfinite, progress);
      },
      py::arg("model"), py::kw_only(), py::arg("image") = py::none(), py::arg("config") = py::none(), py::arg("inputs") = std::vector<std::string>{},
      py::arg("warmup") = 3, py::arg("runs") = 20, RKD_BACKEND_ARGS, py::arg("threads") = 1, py::arg("allow_nonfinite") = false,
      py::arg("progress") = py::none(), "P50/P95 latency on this host (rkdeploy bench; P95 None with fewer than 20 runs)");
  m.def("export", &export_onnx, py::arg("model"), py::arg("output"), "the model as standard ONNX, folded (rkdeploy export)");
}
