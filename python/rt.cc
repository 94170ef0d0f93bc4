// rkdeploy._rt: rkdeploy.Runtime, the Python face of the embeddable runtime's C API
// (include/rkdeploy/rkdeploy.h, librkdeploy_rt) - what an application on the board needs and
// nothing else. Conversions only: every rule is the C API's.
//
// Contract:
//  - Runtime(path, backend="sim", device=None, cores=0, threads=0) is rkd_open(); a failing
//    status raises the rkdeploy error class of its kind (InvalidError, UnsupportedError,
//    IoError, InternalError; all rkdeploy.Error) with rkd_last_error()'s message.
//  - run(inputs) takes a dict name -> array (or one array for a one-input model), copies each
//    into the input's buffer (rkd_set_input: dtype and size must match, the error names the
//    input), runs, and returns a dict name -> array that owns a copy of each output.
//    input_buffer(name) is the input's own buffer as a writable array (no copy: what rkd_run
//    reads); run() without arguments runs on what the buffers hold.
//  - detect(image) takes a file path or an H x W x 3 uint8 array and returns the detections
//    as (label, name, score, x0, y0, x1, y1) named tuples, best first.
//  - The GIL is released while the runtime works. A Runtime is used by one thread at a time.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lock_without_gil.h"
#include "rkdeploy/rkdeploy.h"

namespace py = pybind11;

namespace {

py::object g_errors[5];  // per rkd_status: the exception class (index 0 unused)

[[noreturn]] void raise_status(rkd_status s) {
  const int k = (s >= RKD_ERROR_INVALID && s <= RKD_ERROR_INTERNAL) ? static_cast<int>(s) : static_cast<int>(RKD_ERROR_INTERNAL);
  PyErr_SetString(g_errors[k].ptr(), rkd_last_error());
  throw py::error_already_set();
}

void check(rkd_status s) {
  if (s != RKD_OK) raise_status(s);
}

[[noreturn]] void raise_invalid(const std::string& msg) {
  PyErr_SetString(g_errors[RKD_ERROR_INVALID].ptr(), msg.c_str());
  throw py::error_already_set();
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

// detect()'s photo as an H x W x 3 uint8 C-contiguous array. Another element type is refused,
// not cast: a float image in [0, 1] would become black.
py::array_t<uint8_t, py::array::c_style> rgb_image(const py::object& image) {
  py::array a = py::array::ensure(image);
  if (!a || a.ndim() != 3 || a.shape(2) != 3) raise_invalid("detect: the image must be a file path or an H x W x 3 uint8 array");
  if (!a.dtype().is(py::dtype::of<uint8_t>())) {
    raise_invalid("detect: the image is " + py::str(a.dtype()).cast<std::string>() +
                  "; it must be uint8 RGB in 0..255 (a float image in [0, 1]: (image * 255).round().astype(numpy.uint8))");
  }
  return py::array_t<uint8_t, py::array::c_style>::ensure(a);
}

// The numpy dtype of an rkd_dtype (bfloat16 has none).
py::dtype numpy_dtype(rkd_dtype d) {
  static const char* names[] = {"float32", "float16", "", "int8", "uint8", "int16", "int32", "int64", "bool"};
  const int i = static_cast<int>(d);
  if (i < 0 || i > 8 || names[i][0] == 0) throw py::type_error("bfloat16 tensors have no numpy dtype");
  return py::dtype(names[i]);
}

struct Info {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  size_t bytes = 0;
};

Info info_of(const rkd_tensor_info& t) {
  Info i;
  i.name = t.name;
  i.shape.assign(t.dims, t.dims + t.rank);
  i.dtype = t.dtype == RKD_BFLOAT16 ? "bfloat16" : py::str(numpy_dtype(t.dtype)).cast<std::string>();
  i.bytes = t.bytes;
  return i;
}

class Runtime {
 public:
  Runtime(const std::string& path, const std::string& backend, const std::optional<std::string>& device, int cores, int threads,
          bool allow_nonfinite) {
    rkd_options o;
    rkd_options_init(&o);
    if (backend == "sim") {
      o.backend = RKD_BACKEND_SIM;
    } else if (backend == "device") {
      o.backend = RKD_BACKEND_DEVICE;
    } else {
      PyErr_SetString(g_errors[RKD_ERROR_INVALID].ptr(), ("backend '" + backend + "': the runtime has sim and device").c_str());
      throw py::error_already_set();
    }
    if (device) o.device = device->c_str();
    o.cores = cores;
    o.threads = threads;
    o.allow_nonfinite = allow_nonfinite ? 1 : 0;
    rkd_model* m = nullptr;
    rkd_status s;
    {
      py::gil_scoped_release nogil;
      s = rkd_open(path.c_str(), &o, &m);
    }
    check(s);
    model_.reset(m);
  }

  std::vector<Info> inputs() const { return infos(rkd_input_count(m()), rkd_input_info); }
  std::vector<Info> outputs() const { return infos(rkd_output_count(m()), rkd_output_info); }

  py::array input_buffer(const std::string& name) {
    size_t i = 0;
    check(rkd_find_input(m(), name.c_str(), &i));
    rkd_tensor_info t;
    check(rkd_input_info(m(), i, &t));
    void* data = nullptr;
    check(rkd_input_buffer(model_.get(), i, &data));
    std::vector<py::ssize_t> shape(t.dims, t.dims + t.rank);
    // The buffer lives as long as the model: the array keeps this Runtime alive.
    return py::array(numpy_dtype(t.dtype), shape, data, py::cast(this, py::return_value_policy::reference));
  }

  py::dict run(const py::object& inputs) {
    const auto lock = exclusive();
    if (!inputs.is_none()) set_inputs(inputs);
    rkd_status s;
    {
      py::gil_scoped_release nogil;
      s = rkd_run(model_.get());
    }
    check(s);
    py::dict out;
    for (size_t i = 0; i < rkd_output_count(m()); ++i) {
      rkd_tensor_info t;
      check(rkd_output_info(m(), i, &t));
      const void* data = nullptr;
      size_t bytes = 0;
      check(rkd_output(m(), i, &data, &bytes));
      std::vector<py::ssize_t> shape(t.dims, t.dims + t.rank);
      py::array a(numpy_dtype(t.dtype), shape);  // owns its copy: the next run overwrites the runtime's
      std::memcpy(a.mutable_data(), data, bytes);
      out[py::str(t.name)] = a;
    }
    return out;
  }

  py::list detect(const py::object& image) {
    const auto lock = exclusive();
    rkd_status s;
    if (py::isinstance<py::str>(image)) {
      const std::string path = image.cast<std::string>();
      py::gil_scoped_release nogil;
      s = rkd_set_image_file(model_.get(), path.c_str());
    } else {
      auto a = rgb_image(image);
      py::gil_scoped_release nogil;
      s = rkd_set_image(model_.get(), a.data(), static_cast<int>(a.shape(1)), static_cast<int>(a.shape(0)));
    }
    check(s);
    {
      py::gil_scoped_release nogil;
      s = rkd_run(model_.get());
    }
    check(s);
    size_t n = 0;
    check(rkd_detections(m(), nullptr, 0, &n));
    std::vector<rkd_detection> d(n);
    check(rkd_detections(m(), d.data(), d.size(), &n));
    py::object make = py::module_::import("rkdeploy._types").attr("Detection");
    py::list out;
    for (const rkd_detection& x : d) {
      const char* name = rkd_class_name(x.label);
      out.append(make(x.label, name ? py::object(py::str(name)) : py::none(), x.score, x.x0, x.y0, x.x1, x.y1));
    }
    return out;
  }

 private:
  struct Close {
    void operator()(rkd_model* p) const { rkd_close(p); }
  };
  std::unique_ptr<rkd_model, Close> model_;
  // One call at a time per Runtime, from setting the inputs to copying the outputs (the C API
  // serialises each call; this keeps a run and its outputs together).
  std::mutex mu_;
  std::unique_lock<std::mutex> exclusive() { return rkd_python::lock_without_gil(mu_); }

  const rkd_model* m() const { return model_.get(); }

  template <typename F>
  std::vector<Info> infos(size_t n, F f) const {
    std::vector<Info> v;
    for (size_t i = 0; i < n; ++i) {
      rkd_tensor_info t;
      check(f(m(), i, &t));
      v.push_back(info_of(t));
    }
    return v;
  }

  void set_inputs(const py::object& inputs) {
    py::dict d;
    if (py::isinstance<py::dict>(inputs)) {
      d = inputs.cast<py::dict>();
    } else {
      if (rkd_input_count(m()) != 1) throw py::value_error("run: the model has several inputs; give a dict name -> array");
      rkd_tensor_info t;
      check(rkd_input_info(m(), 0, &t));
      d[py::str(t.name)] = inputs;
    }
    for (auto [k, v] : d) {
      const std::string name = py::str(k);
      size_t i = 0;
      check(rkd_find_input(m(), name.c_str(), &i));
      rkd_tensor_info t;
      check(rkd_input_info(m(), i, &t));
      py::array a = py::array::ensure(v, py::array::c_style);
      if (!a) throw py::value_error("input '" + name + "': not an array");
      if (!a.dtype().is(numpy_dtype(t.dtype))) {
        raise_invalid("input '" + name + "': dtype " + py::str(a.dtype()).cast<std::string>() + ", the model expects " +
                      py::str(numpy_dtype(t.dtype)).cast<std::string>());
      }
      // The same bytes in another shape (NHWC for NCHW, flattened) would run on scrambled data.
      if (a.ndim() != t.rank || !std::equal(t.dims, t.dims + t.rank, a.shape())) {
        raise_invalid("input '" + name + "': shape " + shape_text(std::vector<int64_t>(a.shape(), a.shape() + a.ndim())) + ", the model expects " +
                      shape_text(std::vector<int64_t>(t.dims, t.dims + t.rank)));
      }
      check(rkd_set_input(model_.get(), i, a.data(), static_cast<size_t>(a.nbytes())));
    }
  }
};

}  // namespace

PYBIND11_MODULE(_rt, m) {
  m.doc() = "rkdeploy's embeddable runtime (librkdeploy_rt): run a compiled .rkd artifact";
  py::object types = py::module_::import("rkdeploy._types");
  g_errors[RKD_ERROR_INVALID] = types.attr("InvalidError");
  g_errors[RKD_ERROR_UNSUPPORTED] = types.attr("UnsupportedError");
  g_errors[RKD_ERROR_IO] = types.attr("IoError");
  g_errors[RKD_ERROR_INTERNAL] = types.attr("InternalError");
  m.attr("runtime_version") = rkd_version();
  py::object tensor_info = types.attr("TensorInfo");
  py::class_<Runtime>(m, "Runtime", "A compiled artifact (.rkd) loaded on the NPU simulator or a board's NPU (docs/python.md)")
      .def(py::init<const std::string&, const std::string&, const std::optional<std::string>&, int, int, bool>(), py::arg("path"),
           py::arg("backend") = "sim", py::arg("device") = py::none(), py::arg("cores") = 0, py::arg("threads") = 0,
           py::arg("allow_nonfinite") = false)
      .def_property_readonly("inputs",
                             [tensor_info](const Runtime& r) {
                               py::list l;
                               for (const Info& i : r.inputs()) l.append(tensor_info(i.name, py::tuple(py::cast(i.shape)), i.dtype));
                               return l;
                             })
      .def_property_readonly("outputs",
                             [tensor_info](const Runtime& r) {
                               py::list l;
                               for (const Info& i : r.outputs()) l.append(tensor_info(i.name, py::tuple(py::cast(i.shape)), i.dtype));
                               return l;
                             })
      .def("input_buffer", &Runtime::input_buffer, py::arg("name"), "the input's buffer (no copy), which run() reads")
      .def("run", &Runtime::run, py::arg("inputs") = py::none(), "inputs: dict name -> array (or one array); returns dict name -> array")
      .def("detect", &Runtime::detect, py::arg("image"), "a photo (path or H x W x 3 uint8 array) -> detections, best first");
}
