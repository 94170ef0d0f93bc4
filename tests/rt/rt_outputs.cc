// A test client of the embeddable runtime's public API (include/rkdeploy/rkdeploy.hpp over the
// shared library) that `rkdeploy run --output-dir` can be compared with: the inputs from .npy
// files written into the runtime's own input buffers (rkd_input_buffer, no copy in the API), one
// run, every output to OUT_DIR/NAME.npy.
//   rt_outputs MODEL.rkd OUT_DIR NAME=FILE.npy... [--device NODE] [--cores N]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/npy.h"
#include "rkdeploy/rkdeploy.hpp"

namespace {

rkd::DType dtype_of(rkd_dtype t) {
  switch (t) {
    case RKD_FLOAT32: return rkd::DType::f32;
    case RKD_FLOAT16: return rkd::DType::f16;
    case RKD_BFLOAT16: return rkd::DType::bf16;
    case RKD_INT8: return rkd::DType::i8;
    case RKD_UINT8: return rkd::DType::u8;
    case RKD_INT16: return rkd::DType::i16;
    case RKD_INT32: return rkd::DType::i32;
    case RKD_INT64: return rkd::DType::i64;
    case RKD_BOOL: return rkd::DType::b8;
  }
  return rkd::DType::f32;
}

int fail(const std::string& m) {
  std::fprintf(stderr, "rt_outputs: %s\n", m.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: rt_outputs MODEL.rkd OUT_DIR NAME=FILE.npy... [--device NODE] [--cores N]");
  rkdeploy::Options o;
  std::vector<std::string> specs;
  std::string device;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      device = argv[++i];
      o.backend = RKD_BACKEND_DEVICE;
      o.device = device.c_str();
    } else if (a == "--cores" && i + 1 < argc) {
      o.cores = std::atoi(argv[++i]);
    } else {
      specs.push_back(a);
    }
  }
  try {
    rkdeploy::Model m(argv[1], o);
    for (const std::string& s : specs) {
      const size_t eq = s.find('=');
      if (eq == std::string::npos) return fail("expected NAME=FILE.npy: " + s);
      auto t = rkd::read_npy(s.substr(eq + 1));
      if (!t.ok()) return fail(t.error().to_string());
      const size_t i = m.input_index(s.substr(0, eq));
      const rkd_tensor_info info = m.input_info(i);
      const rkd::Tensor c = t->contiguous();
      if (c.nbytes() != info.bytes || dtype_of(info.dtype) != c.dtype()) return fail("input " + s + ": not the model's dtype and size");
      std::memcpy(m.input_buffer<void>(i), c.raw(), info.bytes);
    }
    m.run();
    for (size_t i = 0; i < m.output_count(); ++i) {
      const rkd_tensor_info info = m.output_info(i);
      rkd::Shape shape(info.dims, info.dims + info.rank);
      rkd::Tensor t = rkd::Tensor::empty(dtype_of(info.dtype), shape);
      size_t bytes = 0;
      const void* p = m.output<void>(i, &bytes);
      if (bytes != t.nbytes()) return fail(std::string("output ") + info.name + ": size differs from its info");
      std::memcpy(t.raw(), p, bytes);
      std::string name = info.name;
      for (char& ch : name)
        if (ch == '/' || ch == '\\' || ch == ':') ch = '_';
      auto st = rkd::write_npy(std::string(argv[2]) + "/" + name + ".npy", t);
      if (!st.ok()) return fail(st.error().to_string());
    }
  } catch (const rkdeploy::Error& e) {
    return fail(std::string(rkd_status_name(e.status())) + ": " + e.what());
  }
  return 0;
}
