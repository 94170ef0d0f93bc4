// The C API of include/rkdeploy/rkdeploy.h over the executor's artifact loading
// (runtime/load_artifact.h). Nothing here computes: every call checks its arguments, forwards,
// and turns an Error into a status and the thread's message.
#include <cstddef>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/passes/shape_inference.h"
#include "rkdeploy/rkdeploy.h"
#include "runtime/detect.h"
#include "runtime/load_artifact.h"
#include "runtime/npu_device.h"

using namespace rkd;

struct rkd_model {
  std::string path;
  runtime::LoadedModel loaded;
  std::vector<std::string> input_names, output_names;
  std::vector<Tensor> inputs;  // one per graph input, in the graph's order: rkd_run reads them in place
  // One per graph output, in the graph's order, allocated once at rkd_open (the pointers
  // rkd_output gives stay valid until rkd_close); each run copies its results into them.
  std::vector<Tensor> outputs;
  bool has_outputs = false;      // a run has filled `outputs`
  bool allow_nonfinite = false;  // options.allow_nonfinite
  // Calls on one model are serialised: a second thread waits (the executor's buffers, the
  // NPU session and the fed photo are the model's state).
  mutable std::mutex mu;
  // The detector config and the last photo fed (rkd_set_image*): its geometry for decoding.
  std::optional<runtime::DetectorConfig> config;
  std::optional<runtime::Image> image;
  runtime::Prepared prepared;
};

namespace {

thread_local std::string last_error;

rkd_status status_of(ErrorKind k) {
  switch (k) {
    case ErrorKind::invalid: return RKD_ERROR_INVALID;
    case ErrorKind::unsupported: return RKD_ERROR_UNSUPPORTED;
    case ErrorKind::io: return RKD_ERROR_IO;
    case ErrorKind::internal: return RKD_ERROR_INTERNAL;
  }
  return RKD_ERROR_INTERNAL;
}

rkd_status fail(const Error& e) {
  last_error = e.message;
  return status_of(e.kind);
}
rkd_status fail_invalid(const std::string& msg) { return fail(invalid(msg)); }

// Runs `f` (returning rkd_status), turning an escaped exception (allocation) into a status: no
// C++ exception crosses the C boundary.
template <typename F>
rkd_status guarded(F&& f) {
  try {
    last_error.clear();
    return f();
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return RKD_ERROR_IO;
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
    return RKD_ERROR_INTERNAL;
  }
}

rkd_dtype dtype_of(DType t) {
  switch (t) {
    case DType::f32: return RKD_FLOAT32;
    case DType::f16: return RKD_FLOAT16;
    case DType::bf16: return RKD_BFLOAT16;
    case DType::i8: return RKD_INT8;
    case DType::u8: return RKD_UINT8;
    case DType::i16: return RKD_INT16;
    case DType::i32: return RKD_INT32;
    case DType::i64: return RKD_INT64;
    case DType::b8: return RKD_BOOL;
  }
  return RKD_FLOAT32;
}

rkd_status info_of(const std::string& name, DType dtype, const Shape& shape, rkd_tensor_info* info) {
  if (shape.size() > RKD_MAX_DIMS) return fail(unsupported("tensor '" + name + "': rank " + std::to_string(shape.size()) + " over RKD_MAX_DIMS"));
  std::memset(info, 0, sizeof *info);
  info->name = name.c_str();
  info->dtype = dtype_of(dtype);
  info->rank = static_cast<int>(shape.size());
  size_t bytes = dtype_size(dtype);
  for (size_t d = 0; d < shape.size(); ++d) {
    info->dims[d] = shape[d];
    bytes *= static_cast<size_t>(shape[d]);
  }
  info->bytes = bytes;
  return RKD_OK;
}

rkd_status check_model(const rkd_model* m, const char* call) {
  if (!m) return fail_invalid(std::string(call) + ": model is NULL");
  return RKD_OK;
}

rkd_status check_index(const rkd_model* m, size_t index, size_t count, const char* what) {
  if (index >= count) {
    return fail_invalid(m->path + ": " + what + " index " + std::to_string(index) + " out of range (the model has " + std::to_string(count) + ")");
  }
  return RKD_OK;
}

rkd_status feed_image(rkd_model* m, runtime::Image img) {
  if (!m->config) {
    auto cfg = runtime::detector_config(*m->loaded.graph, "");
    if (!cfg.ok()) return fail(cfg.error().with_context(m->path));
    m->config = *cfg;
  }
  auto prep = runtime::preprocess(img, *m->config, runtime::takes_target_sizes(*m->loaded.graph));
  if (!prep.ok()) return fail(prep.error().with_context(m->path));
  for (size_t i = 0; i < m->input_names.size(); ++i) {
    auto it = prep->inputs.find(m->input_names[i]);
    if (it == prep->inputs.end()) return fail_invalid(m->path + ": the detector config gives no input '" + m->input_names[i] + "'");
    const Tensor src = it->second.contiguous();
    Tensor& dst = m->inputs[i];
    if (src.dtype() != dst.dtype() || src.shape() != dst.shape()) {
      return fail_invalid(m->path + ": input '" + m->input_names[i] + "': the preprocessed photo is " + dtype_name(src.dtype()) + " " +
                          shape_to_string(src.shape()) + ", the model takes " + dtype_name(dst.dtype()) + " " + shape_to_string(dst.shape()));
    }
    std::memcpy(dst.raw(), src.raw(), dst.nbytes());
  }
  m->prepared = std::move(*prep);
  m->prepared.inputs.clear();
  m->image = std::move(img);
  return RKD_OK;
}

}  // namespace

extern "C" {

int rkd_api_version(void) { return RKD_API_VERSION; }
const char* rkd_version(void) { return RKD_VERSION; }
const char* rkd_last_error(void) { return last_error.c_str(); }

const char* rkd_status_name(rkd_status status) {
  switch (status) {
    case RKD_OK: return "ok";
    case RKD_ERROR_INVALID: return "invalid";
    case RKD_ERROR_UNSUPPORTED: return "unsupported";
    case RKD_ERROR_IO: return "io";
    case RKD_ERROR_INTERNAL: return "internal";
  }
  return "unknown status";
}

void rkd_options_init(rkd_options* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->backend = RKD_BACKEND_SIM;
}

rkd_status rkd_open(const char* path, const rkd_options* options, rkd_model** model) {
  return guarded([&]() -> rkd_status {
    if (!model) return fail_invalid("rkd_open: model is NULL");
    *model = nullptr;
    if (!path) return fail_invalid("rkd_open: path is NULL");
    rkd_options o;
    rkd_options_init(&o);
    if (options) {
      if (options->struct_size < offsetof(rkd_options, threads) + sizeof(int) || options->struct_size > sizeof o) {
        return fail_invalid("rkd_open: options.struct_size " + std::to_string(options->struct_size) +
                            " is not sizeof(rkd_options) of any API version (call rkd_options_init)");
      }
      std::memcpy(&o, options, options->struct_size);
    }
    // Read as its integer first: a caller's value outside the enum is no rkd_backend to load.
    std::underlying_type_t<rkd_backend> backend;
    std::memcpy(&backend, reinterpret_cast<const char*>(&o) + offsetof(rkd_options, backend), sizeof backend);
    if (backend != RKD_BACKEND_SIM && backend != RKD_BACKEND_DEVICE) {
      return fail_invalid("rkd_open: options.backend " + std::to_string(backend) + " is neither RKD_BACKEND_SIM nor RKD_BACKEND_DEVICE");
    }
    runtime::LoadOptions lo;
    lo.compile.int8 = true;
    lo.compile.npu_strategy = npu::lower::kDefaultStrategy;  // the artifact's own strategy is what runs
    if (Status t = check_thread_count(o.threads, "rkd_open: options.threads"); !t.ok()) return fail(t.error());
    lo.exec.threads = o.threads;
    if (o.backend == RKD_BACKEND_DEVICE) {
      runtime::NpuDeviceOptions d;
      if (o.device) d.path = o.device;
      if (o.cores < 0 || o.cores > static_cast<int>(npu::arch::kRk3588.cores)) {
        return fail_invalid("rkd_open: options.cores " + std::to_string(o.cores) + " is not 0 (all) or 1 to " +
                            std::to_string(npu::arch::kRk3588.cores));
      }
      if (o.cores > 0) d.cores = o.cores;
      auto dev = runtime::NpuDevice::open(d);
      if (!dev.ok()) return fail(dev.error());
      lo.compile.npu_mainline = (*dev)->mainline();
      lo.exec.npu_device = *dev;
    }
    auto loaded = runtime::load_artifact(path, lo);
    if (!loaded.ok()) return fail(loaded.error());
    auto m = std::make_unique<rkd_model>();
    m->path = path;
    m->allow_nonfinite = o.allow_nonfinite != 0;
    m->loaded = std::move(loaded).value();
    const ir::Graph& g = *m->loaded.graph;
    for (const ir::Value* v : g.inputs) {
      const auto shape = ir::static_shape(v);
      if (!shape || !v->dtype) return fail(unsupported(m->path + ": input '" + v->name + "' has no static shape"));
      m->input_names.push_back(v->name);
      m->inputs.push_back(Tensor::empty(*v->dtype, *shape));
    }
    for (const ir::Value* v : g.outputs) {
      const auto shape = ir::static_shape(v);
      if (!shape || !v->dtype) return fail(unsupported(m->path + ": output '" + v->name + "' has no static shape"));
      m->output_names.push_back(v->name);
      m->outputs.push_back(Tensor::empty(*v->dtype, *shape));
    }
    *model = m.release();
    return RKD_OK;
  });
}

void rkd_close(rkd_model* model) { delete model; }

size_t rkd_input_count(const rkd_model* model) { return model ? model->inputs.size() : 0; }
size_t rkd_output_count(const rkd_model* model) { return model ? model->output_names.size() : 0; }

rkd_status rkd_input_info(const rkd_model* model, size_t index, rkd_tensor_info* info) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_input_info")) return s;
    if (!info) return fail_invalid("rkd_input_info: info is NULL");
    if (rkd_status s = check_index(model, index, model->inputs.size(), "input")) return s;
    const Tensor& t = model->inputs[index];
    return info_of(model->input_names[index], t.dtype(), t.shape(), info);
  });
}

rkd_status rkd_output_info(const rkd_model* model, size_t index, rkd_tensor_info* info) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_output_info")) return s;
    if (!info) return fail_invalid("rkd_output_info: info is NULL");
    if (rkd_status s = check_index(model, index, model->output_names.size(), "output")) return s;
    const Tensor& t = model->outputs[index];
    return info_of(model->output_names[index], t.dtype(), t.shape(), info);
  });
}

static rkd_status find_name(const rkd_model* model, const std::vector<std::string>& names, const char* name, size_t* index, const char* what) {
  if (rkd_status s = check_model(model, "rkd_find")) return s;
  if (!name || !index) return fail_invalid(std::string("rkd_find_") + what + ": name or index is NULL");
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      *index = i;
      return RKD_OK;
    }
  }
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  return fail_invalid(model->path + ": no " + what + " named '" + name + "' (the model has " + known + ")");
}

rkd_status rkd_find_input(const rkd_model* model, const char* name, size_t* index) {
  return guarded([&] { return find_name(model, model ? model->input_names : std::vector<std::string>{}, name, index, "input"); });
}
rkd_status rkd_find_output(const rkd_model* model, const char* name, size_t* index) {
  return guarded([&] { return find_name(model, model ? model->output_names : std::vector<std::string>{}, name, index, "output"); });
}

rkd_status rkd_input_buffer(rkd_model* model, size_t index, void** data) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_input_buffer")) return s;
    if (!data) return fail_invalid("rkd_input_buffer: data is NULL");
    if (rkd_status s = check_index(model, index, model->inputs.size(), "input")) return s;
    std::lock_guard<std::mutex> lock(model->mu);
    *data = model->inputs[index].raw();
    model->image.reset();
    return RKD_OK;
  });
}

rkd_status rkd_set_input(rkd_model* model, size_t index, const void* data, size_t bytes) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_set_input")) return s;
    if (rkd_status s = check_index(model, index, model->inputs.size(), "input")) return s;
    Tensor& t = model->inputs[index];
    if (bytes != t.nbytes()) {
      return fail_invalid(model->path + ": input '" + model->input_names[index] + "' takes " + std::to_string(t.nbytes()) + " bytes (" +
                          dtype_name(t.dtype()) + " " + shape_to_string(t.shape()) + "), got " + std::to_string(bytes));
    }
    if (!data && bytes) return fail_invalid("rkd_set_input: data is NULL");
    std::lock_guard<std::mutex> lock(model->mu);
    if (bytes) std::memcpy(t.raw(), data, bytes);
    model->image.reset();
    return RKD_OK;
  });
}

rkd_status rkd_run(rkd_model* model) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_run")) return s;
    std::lock_guard<std::mutex> lock(model->mu);
    std::map<std::string, Tensor> in;
    for (size_t i = 0; i < model->inputs.size(); ++i) in[model->input_names[i]] = model->inputs[i];
    // The same checks as `rkdeploy run` (runtime/detect.h check_run_inputs).
    if (Status c = runtime::check_run_inputs(in, model->allow_nonfinite); !c.ok()) return fail(c.error().with_context(model->path));
    model->has_outputs = false;
    auto out = model->loaded.executor->run(in);
    if (!out.ok()) return fail(out.error().with_context(model->path));
    for (size_t i = 0; i < model->output_names.size(); ++i) {
      const Tensor src = out->at(model->output_names[i]).contiguous();
      Tensor& dst = model->outputs[i];
      if (src.dtype() != dst.dtype() || src.nbytes() != dst.nbytes()) {
        return fail(Error{ErrorKind::internal, model->path + ": output '" + model->output_names[i] + "' came out " + dtype_name(src.dtype()) + " " +
                                                   shape_to_string(src.shape()) + ", declared " + dtype_name(dst.dtype()) + " " +
                                                   shape_to_string(dst.shape())});
      }
      std::memcpy(dst.raw(), src.raw(), dst.nbytes());
    }
    model->has_outputs = true;
    return RKD_OK;
  });
}

rkd_status rkd_output(const rkd_model* model, size_t index, const void** data, size_t* bytes) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_output")) return s;
    if (!data || !bytes) return fail_invalid("rkd_output: data or bytes is NULL");
    if (rkd_status s = check_index(model, index, model->output_names.size(), "output")) return s;
    std::lock_guard<std::mutex> lock(model->mu);
    if (!model->has_outputs) return fail_invalid(model->path + ": no output yet (rkd_run first)");
    *data = model->outputs[index].raw();
    *bytes = model->outputs[index].nbytes();
    return RKD_OK;
  });
}

rkd_status rkd_set_image(rkd_model* model, const uint8_t* rgb, int width, int height) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_set_image")) return s;
    if (!rgb) return fail_invalid("rkd_set_image: rgb is NULL");
    if (width <= 0 || height <= 0 || width > runtime::kMaxImageSide || height > runtime::kMaxImageSide) {
      return fail_invalid("rkd_set_image: " + std::to_string(width) + " x " + std::to_string(height) + " pixels; each side must be 1 to " +
                          std::to_string(runtime::kMaxImageSide));
    }
    runtime::Image img;
    img.width = width;
    img.height = height;
    img.rgb.assign(rgb, rgb + static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
    std::lock_guard<std::mutex> lock(model->mu);
    return feed_image(model, std::move(img));
  });
}

rkd_status rkd_set_image_file(rkd_model* model, const char* path) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_set_image_file")) return s;
    if (!path) return fail_invalid("rkd_set_image_file: path is NULL");
    auto img = runtime::load_image(path);
    if (!img.ok()) return fail(img.error());
    std::lock_guard<std::mutex> lock(model->mu);
    return feed_image(model, std::move(img).value());
  });
}

rkd_status rkd_detections(const rkd_model* model, rkd_detection* out, size_t capacity, size_t* count) {
  return guarded([&]() -> rkd_status {
    if (rkd_status s = check_model(model, "rkd_detections")) return s;
    if (!count || (!out && capacity)) return fail_invalid("rkd_detections: count is NULL, or out is NULL with a capacity");
    std::lock_guard<std::mutex> lock(model->mu);
    if (!model->image) return fail_invalid(model->path + ": no photo fed since the inputs were last set (rkd_set_image or rkd_set_image_file first)");
    if (!model->has_outputs) return fail_invalid(model->path + ": no output yet (rkd_run first)");
    std::map<std::string, Tensor> outputs;
    for (size_t i = 0; i < model->outputs.size(); ++i) outputs[model->output_names[i]] = model->outputs[i];
    auto dets = runtime::postprocess(outputs, *model->config, model->prepared, *model->image);
    if (!dets.ok()) return fail(dets.error().with_context(model->path));
    *count = dets->size();
    for (size_t i = 0; i < dets->size() && i < capacity; ++i) {
      const runtime::Detection& d = (*dets)[i];
      out[i] = rkd_detection{d.label, d.score, d.x0, d.y0, d.x1, d.y1};
    }
    return RKD_OK;
  });
}

const char* rkd_class_name(int64_t label) {
  const auto& names = runtime::coco_class_names();
  return label >= 0 && label < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(label)].c_str() : nullptr;
}

}  // extern "C"
