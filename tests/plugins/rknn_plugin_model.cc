// A model written by `rkdeploy export --rknn-custom-op`, its custom nodes computed by the
// plugin libraries as the vendor runtime would call them, against rkdeploy's CPU executor:
//   rknn_plugin_model [--unfused] MODEL.onnx MSDA_PLUGIN.so GRID_SAMPLE_PLUGIN.so NAME=FILE.npy...
// rkdeploy loads the file (its importer expands the custom nodes back: the executor runs
// MSDAPrepare + MSDeformAttn and GridSample; with --unfused without deform-attn-fusion, which
// would otherwise fuse a file's expanded GridSamples again) and runs it once, keeping every value a node
// computes. For each custom site the plugin gets the site's input values as the runtime's
// tensor records, its attributes as the file gives them (integer arrays, through this
// harness's rknn_custom_op_get_op_attr), and the init / prepare / compute / destroy sequence; its
// output must equal the executor's value byte for byte. Prints one line per site; exit 1 on a
// difference or a failed callback.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/npy.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"
#include "kernels/rknn_custom_op_contract.h"
#include "plugins/rknn/rknn_abi.h"
#include "runtime/model.h"

namespace {

using namespace rkd;
namespace contract = rkd::rknn_contract;

std::map<std::string, std::vector<int64_t>> g_attrs;  // the node being driven

}  // namespace

extern "C" __attribute__((visibility("default"))) void rknn_custom_op_get_op_attr(rknn_custom_op_context*, const char* name,
                                                                                  rknn_custom_op_attr* out) {
  std::memset(out, 0, sizeof *out);
  auto it = g_attrs.find(name);
  if (it == g_attrs.end()) return;
  std::snprintf(out->name, sizeof out->name, "%s", name);
  out->dtype = RKNN_TENSOR_INT64;
  out->n_elems = static_cast<uint32_t>(it->second.size());
  out->data = it->second.data();
}

namespace {

rknn_custom_op_tensor record(const Tensor& t, const std::string& name) {
  rknn_custom_op_tensor r;
  std::memset(&r, 0, sizeof r);
  r.attr.n_dims = static_cast<uint32_t>(t.rank());
  for (int i = 0; i < t.rank(); ++i) r.attr.dims[i] = static_cast<uint32_t>(t.dim(i));
  std::snprintf(r.attr.name, sizeof r.attr.name, "%s", name.c_str());
  r.attr.n_elems = static_cast<uint32_t>(t.numel());
  r.attr.size = static_cast<uint32_t>(t.nbytes());
  r.attr.fmt = t.rank() == 4 ? RKNN_TENSOR_NCHW : RKNN_TENSOR_UNDEFINED;
  r.attr.type = RKNN_TENSOR_FLOAT32;
  r.mem.virt_addr = const_cast<void*>(t.raw());
  r.mem.size = r.attr.size;
  return r;
}

rknn_custom_op* load(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "rknn_plugin_model: %s\n", dlerror());
    return nullptr;
  }
  auto get = reinterpret_cast<rknn_custom_op* (*)()>(dlsym(h, "get_rknn_custom_op"));
  return get ? get() : nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const bool unfused = argc > 1 && std::string(argv[1]) == "--unfused";
  if (unfused) {
    --argc;
    ++argv;
  }
  if (argc < 5) {
    std::fprintf(stderr, "usage: rknn_plugin_model MODEL.onnx MSDA_PLUGIN.so GRID_SAMPLE_PLUGIN.so NAME=FILE.npy...\n");
    return 2;
  }
  rknn_custom_op* msda_op = load(argv[2]);
  rknn_custom_op* grid_op = load(argv[3]);
  if (!msda_op || !grid_op) return 1;
  std::map<std::string, Tensor> inputs;
  for (int i = 4; i < argc; ++i) {
    const std::string spec = argv[i];
    const size_t eq = spec.find('=');
    auto t = read_npy(spec.substr(eq + 1));
    if (eq == std::string::npos || !t.ok()) {
      std::fprintf(stderr, "rknn_plugin_model: bad input %s\n", spec.c_str());
      return 2;
    }
    inputs[spec.substr(0, eq)] = *t;
  }
  std::map<std::string, Tensor> values;  // every value a node computed
  runtime::LoadOptions lo;
  lo.batch = 1;
  lo.compile.fuse = !unfused;
  lo.exec.observe = [&](const ir::Value& v, const Tensor& t) { values[v.name] = t.contiguous().clone(); };
  auto m = runtime::load_model(argv[1], lo);
  if (!m.ok()) {
    std::fprintf(stderr, "rknn_plugin_model: %s\n", m.error().message.c_str());
    return 1;
  }
  for (const auto& [k, v] : inputs) values[k] = v;
  auto run = m->executor->run(inputs);
  if (!run.ok()) {
    std::fprintf(stderr, "rknn_plugin_model: %s\n", run.error().message.c_str());
    return 1;
  }
  int sites = 0, failures = 0;
  for (const auto& np : m->graph->nodes()) {
    const ir::Node& n = *np;
    rknn_custom_op* op = nullptr;
    std::vector<const ir::Value*> ins;
    g_attrs.clear();
    if (n.op_type == "MSDeformAttn") {
      op = msda_op;
      ins = {n.inputs[0]->producer->inputs[0], n.inputs[1], n.inputs[2]};  // MSDAPrepare's value
      g_attrs[contract::kLevelH] = n.attr_ints("level_h", {}).value();
      g_attrs[contract::kLevelW] = n.attr_ints("level_w", {}).value();
      g_attrs[contract::kPoints] = n.attr_ints("points", {}).value();
      g_attrs[contract::kMethod] = {static_cast<int64_t>(parse_msda_method(n.attr_string("method", "default").value()).value())};
    } else if (n.op_type == "GridSample") {
      op = grid_op;
      ins = {n.inputs[0], n.inputs[1]};
      g_attrs[contract::kMode] = {static_cast<int64_t>(parse_grid_sample_mode(n.attr_string("mode", "bilinear").value()).value())};
      g_attrs[contract::kPadding] = {static_cast<int64_t>(parse_grid_sample_padding(n.attr_string("padding_mode", "zeros").value()).value())};
      g_attrs[contract::kAlignCorners] = {n.attr_int("align_corners", 0).value()};
      g_attrs[contract::kConvention] = {static_cast<int64_t>(GridSampleConvention::onnx)};
    } else {
      continue;
    }
    ++sites;
    std::vector<rknn_custom_op_tensor> in;
    for (const ir::Value* v : ins) in.push_back(record(values.at(v->name), v->name));
    const Tensor& want = values.at(n.outputs[0]->name);
    Tensor got = Tensor::zeros(DType::f32, want.shape()).value();
    rknn_custom_op_tensor out = record(got, n.outputs[0]->name);
    rknn_custom_op_context ctx;
    std::memset(&ctx, 0, sizeof ctx);
    ctx.target = RKNN_TARGET_TYPE_CPU;
    const uint32_t k = static_cast<uint32_t>(in.size());
    int rc = op->init(&ctx, in.data(), k, &out, 1);
    if (rc == 0) rc = op->prepare(&ctx, in.data(), k, &out, 1);
    if (rc == 0) rc = op->compute(&ctx, in.data(), k, &out, 1);
    op->destroy(&ctx);
    const bool same = rc == 0 && want.dtype() == DType::f32 && std::memcmp(got.raw(), want.raw(), want.nbytes()) == 0;
    failures += !same;
    std::printf("%s %s: %s %s\n", op->op_type, n.name.c_str(), shape_to_string(want.shape()).c_str(),
                rc != 0 ? "callback failed" : (same ? "byte-identical to the executor" : "DIFFERS from the executor"));
  }
  std::printf("%d custom site(s), %d differing\n", sites, failures);
  return failures || sites == 0 ? 1 : 0;
}
