// The RKNN custom-operator plugins (plugins/rknn) driven as the vendor runtime drives them,
// through the header's records and callback sequence only: dlopen the library, get_rknn_custom_op,
// then init -> prepare -> compute (twice: the state is reused) -> destroy with
// rknn_custom_op_tensor records whose attributes (dims, format, type, size) and memory
// (virt_addr + offset) describe the tensors; the attributes come from this harness's
// rknn_custom_op_get_op_attr, the runtime's function the plugin calls back. Every output is
// compared bit for bit with the kernels the CPU executor runs for the same node (fast path,
// global pool), over random problems that cover every method and mode, float16 tensors, NHWC
// records and attribute element types; then every malformed record is refused with a message
// naming it. Runs natively and, in the cross build, under qemu-user's Cortex-A76 (NEON).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"
#include "kernels/rknn_custom_op_contract.h"
#include "plugins/rknn/rknn_abi.h"

namespace {

using namespace rkd;
namespace contract = rkd::rknn_contract;

// --- the runtime's side: node attributes per context --------------------------------------

struct AttrValue {
  rknn_tensor_type type = RKNN_TENSOR_INT64;
  std::vector<uint8_t> bytes;
  uint32_t n = 0;
};
std::map<const rknn_custom_op_context*, std::map<std::string, AttrValue>> g_attrs;

AttrValue ints(const std::vector<int64_t>& v, rknn_tensor_type type) {
  AttrValue a;
  a.type = type;
  a.n = static_cast<uint32_t>(v.size());
  for (int64_t x : v) {
    auto put = [&](const auto y) {
      const auto* p = reinterpret_cast<const uint8_t*>(&y);
      a.bytes.insert(a.bytes.end(), p, p + sizeof y);
    };
    if (type == RKNN_TENSOR_INT64) put(static_cast<int64_t>(x));
    else if (type == RKNN_TENSOR_INT32) put(static_cast<int32_t>(x));
    else if (type == RKNN_TENSOR_FLOAT32) put(static_cast<float>(x));
    else put(static_cast<uint8_t>(x));
  }
  return a;
}

}  // namespace

// The vendor runtime's function (exported by this executable: the plugin's weak reference binds to it).
extern "C" __attribute__((visibility("default"))) void rknn_custom_op_get_op_attr(rknn_custom_op_context* ctx, const char* name,
                                                                                  rknn_custom_op_attr* out) {
  std::memset(out, 0, sizeof *out);
  auto c = g_attrs.find(ctx);
  if (c == g_attrs.end()) return;
  auto a = c->second.find(name);
  if (a == c->second.end()) return;
  std::snprintf(out->name, sizeof out->name, "%s", name);
  out->dtype = a->second.type;
  out->n_elems = a->second.n;
  out->data = a->second.bytes.data();
}

namespace {

struct Plugin {
  void* handle = nullptr;
  rknn_custom_op* op = nullptr;
  const char* (*last_error)() = nullptr;
  explicit Plugin(const char* path) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return;
    auto get = reinterpret_cast<rknn_custom_op* (*)()>(dlsym(handle, "get_rknn_custom_op"));
    last_error = reinterpret_cast<const char* (*)()>(dlsym(handle, "rkd_rknn_last_error"));
    if (get) op = get();
  }
};

Plugin& msda_plugin() {
  static Plugin p(RKD_PLUGIN_MSDA);
  return p;
}
Plugin& grid_plugin() {
  static Plugin p(RKD_PLUGIN_GRID_SAMPLE);
  return p;
}

// A tensor as the runtime would hand it over: its bytes `offset` into a buffer, the record's
// dims in `fmt` (NHWC: the 4-D dims permuted), of `type`.
struct Record {
  std::vector<uint8_t> buffer;
  rknn_custom_op_tensor t;  // mem.virt_addr: set to buffer's data by drive() unless a test cleared it
  rknn_custom_op_tensor bound() {
    rknn_custom_op_tensor b = t;
    if (b.mem.virt_addr) b.mem.virt_addr = buffer.data();
    return b;
  }
};

Record record(const Tensor& value, const char* name, rknn_tensor_type type, rknn_tensor_format fmt, int32_t offset) {
  Tensor v = value;
  if (type == RKNN_TENSOR_FLOAT16) v = v.to(DType::f16).value();
  if (fmt == RKNN_TENSOR_NHWC) v = v.permute({0, 2, 3, 1}).value();
  v = v.contiguous();
  Record r;
  std::memset(&r.t, 0, sizeof r.t);
  r.buffer.assign(static_cast<size_t>(offset) + v.nbytes(), 0xa5);
  std::memcpy(r.buffer.data() + offset, v.raw(), v.nbytes());
  rknn_tensor_attr& a = r.t.attr;
  a.n_dims = static_cast<uint32_t>(v.rank());
  for (int i = 0; i < v.rank(); ++i) a.dims[i] = static_cast<uint32_t>(v.dim(i));
  std::snprintf(a.name, sizeof a.name, "%s", name);
  a.n_elems = static_cast<uint32_t>(v.numel());
  a.size = static_cast<uint32_t>(v.nbytes());
  a.fmt = fmt;
  a.type = type;
  r.t.mem.virt_addr = r.buffer.data();
  r.t.mem.offset = offset;
  r.t.mem.size = static_cast<uint32_t>(r.buffer.size());
  return r;
}

// The output record's bytes as a tensor in the ONNX layout, float32.
Tensor output_of(const Record& r, const Shape& onnx_shape) {
  const bool nhwc = r.t.attr.fmt == RKNN_TENSOR_NHWC;
  const Shape stored = nhwc ? Shape{onnx_shape[0], onnx_shape[2], onnx_shape[3], onnx_shape[1]} : onnx_shape;
  const DType dt = r.t.attr.type == RKNN_TENSOR_FLOAT16 ? DType::f16 : DType::f32;
  Tensor t = Tensor::zeros(dt, stored).value();
  std::memcpy(t.raw(), r.buffer.data() + r.t.mem.offset, t.nbytes());
  if (nhwc) t = t.permute({0, 3, 1, 2}).value().contiguous();
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

Tensor random_tensor(std::mt19937& rng, const Shape& s, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, s).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Runs init, prepare, compute twice and destroy; returns compute's status (and the others' first failure).
int drive(Plugin& p, std::map<std::string, AttrValue> attrs, std::vector<Record>& in, Record& out) {
  rknn_custom_op_context ctx;
  std::memset(&ctx, 0, sizeof ctx);
  ctx.target = RKNN_TARGET_TYPE_CPU;
  g_attrs[&ctx] = std::move(attrs);
  std::vector<rknn_custom_op_tensor> ins;
  for (auto& r : in) ins.push_back(r.bound());
  rknn_custom_op_tensor o = out.bound();
  const uint32_t n = static_cast<uint32_t>(ins.size());
  int rc = p.op->init(&ctx, ins.data(), n, &o, 1);
  if (rc == 0) rc = p.op->prepare(&ctx, ins.data(), n, &o, 1);
  if (rc == 0) rc = p.op->compute(&ctx, ins.data(), n, &o, 1);
  if (rc == 0) rc = p.op->compute(&ctx, ins.data(), n, &o, 1);
  EXPECT_EQ(p.op->destroy(&ctx), 0);
  EXPECT_EQ(ctx.priv_data, nullptr);
  g_attrs.erase(&ctx);
  return rc;
}

TEST(RknnPlugin, RecordsAsTheVendorConventionWants) {
  for (Plugin* p : {&msda_plugin(), &grid_plugin()}) {
    ASSERT_NE(p->handle, nullptr) << dlerror();
    ASSERT_NE(p->op, nullptr);
    EXPECT_EQ(p->op->version, static_cast<uint32_t>(contract::kVersion));
    EXPECT_EQ(p->op->target, RKNN_TARGET_TYPE_CPU);
    EXPECT_EQ(std::strncmp(p->op->op_type, "cst", 3), 0);
    EXPECT_NE(p->op->compute, nullptr);
    EXPECT_EQ(p->op->compute_native, nullptr);
    EXPECT_EQ(p->op->cl_source_size, 0u);
  }
  EXPECT_STREQ(msda_plugin().op->op_type, contract::kMsdaType);
  EXPECT_STREQ(grid_plugin().op->op_type, contract::kGridSampleType);
}

struct MsdaCase {
  std::vector<MsdaLevelShape> levels;
  std::vector<int64_t> points;
  int64_t batch, heads, head_dim, queries;
  MsdaMethod method;
};

TEST(RknnPlugin, MsDeformAttnEqualsTheExecutorsKernel) {
  std::mt19937 rng(20261206);
  std::uniform_int_distribution<int> d(1, 9);
  int cases = 0, refused = 0;
  for (int it = 0; it < 90; ++it) {
    MsdaCase c;
    const int L = 1 + it % 4;
    for (int l = 0; l < L; ++l) {
      c.levels.push_back({d(rng), d(rng)});
      c.points.push_back(1 + (it + l) % 4);
    }
    c.batch = 1 + it % 2;
    c.heads = 1 + it % 3;
    c.head_dim = (it % 5 == 0) ? 8 : 1 + d(rng) * 2 % 17;
    c.queries = 1 + d(rng) % 7;
    c.method = static_cast<MsdaMethod>(it % 3);
    int64_t T = 0, P = 0;
    for (const auto& l : c.levels) T += l.h * l.w;
    for (int64_t p : c.points) P += p;
    const Tensor value = random_tensor(rng, {c.batch, T, c.heads, c.head_dim}, -2, 2);
    const Tensor loc = random_tensor(rng, {c.batch, c.queries, c.heads, P, 2}, -0.2f, 1.2f);
    const Tensor w = random_tensor(rng, {c.batch, c.queries, c.heads, P}, 0, 1);
    const auto half = (it % 7 == 3) ? RKNN_TENSOR_FLOAT16 : RKNN_TENSOR_FLOAT32;
    // The executor's computation (runtime/op_registry_rkdeploy.cc: MSDAPrepare then MSDeformAttn).
    const Tensor v_in = half == RKNN_TENSOR_FLOAT16 ? value.to(DType::f16).value() : value;
    const Tensor l_in = half == RKNN_TENSOR_FLOAT16 ? loc.to(DType::f16).value() : loc;
    const Tensor w_in = half == RKNN_TENSOR_FLOAT16 ? w.to(DType::f16).value() : w;
    MsdaOptions o;
    o.method = c.method;
    auto prepared = msda_prepare_from_tokens(v_in, c.levels);
    ASSERT_TRUE(prepared.ok()) << prepared.error().message;
    const auto want = msda(*prepared, l_in, w_in, c.points, o, &ThreadPool::global());

    std::vector<Record> in{record(value, "value", half, RKNN_TENSOR_UNDEFINED, 0), record(loc, "locations", half, RKNN_TENSOR_UNDEFINED, 16),
                           record(w, "weights", half, RKNN_TENSOR_NCHW, 4)};
    const Shape out_shape{c.batch, c.queries, c.heads * c.head_dim};
    Record out = record(Tensor::zeros(DType::f32, out_shape).value(), "out", half, RKNN_TENSOR_UNDEFINED, 8);
    std::vector<int64_t> hs, ws;
    for (const auto& l : c.levels) {
      hs.push_back(l.h);
      ws.push_back(l.w);
    }
    const rknn_tensor_type at = it % 3 == 0 ? RKNN_TENSOR_INT64 : (it % 3 == 1 ? RKNN_TENSOR_INT32 : RKNN_TENSOR_FLOAT32);
    const int rc = drive(msda_plugin(),
                         {{contract::kLevelH, ints(hs, at)},
                          {contract::kLevelW, ints(ws, at)},
                          {contract::kPoints, ints(c.points, at)},
                          {contract::kMethod, ints({static_cast<int64_t>(c.method)}, at)}},
                         in, out);
    if (!want.ok()) {
      // The historical discrete clamp on a map taller than wide: the kernel refuses, so must the plugin.
      ASSERT_EQ(c.method, MsdaMethod::discrete) << want.error().message;
      EXPECT_NE(rc, 0);
      EXPECT_NE(std::string(msda_plugin().last_error()).find(want.error().message), std::string::npos) << msda_plugin().last_error();
      ++refused;
      continue;
    }
    ASSERT_EQ(rc, 0) << msda_plugin().last_error();
    const Tensor expect = half == RKNN_TENSOR_FLOAT16 ? want->to(DType::f16).value() : *want;
    EXPECT_TRUE(same_bits(output_of(out, out_shape), expect)) << "case " << it << " method " << to_string(c.method);
    ++cases;
  }
  EXPECT_GT(cases, 60);
  std::printf("cstMSDeformAttn: %d random problems bit-identical to the executor's kernel, %d refused as the kernel refuses them\n", cases, refused);
}

TEST(RknnPlugin, GridSampleEqualsTheExecutorsKernel) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(1, 9);
  int cases = 0;
  for (int mode = 0; mode < 3; ++mode) {
    for (int pad = 0; pad < 3; ++pad) {
      for (int align = 0; align < 2; ++align) {
        for (int variant = 0; variant < 3; ++variant) {
          const int64_t N = 1 + variant % 2, C = d(rng), H = d(rng), W = d(rng), Ho = d(rng), Wo = d(rng);
          const Tensor input = random_tensor(rng, {N, C, H, W}, -3, 3);
          const Tensor grid = random_tensor(rng, {N, Ho, Wo, 2}, -1.3f, 1.3f);
          GridSampleOptions o;
          o.mode = static_cast<GridSampleMode>(mode);
          o.padding = static_cast<GridSamplePadding>(pad);
          o.align_corners = align != 0;
          o.convention = static_cast<GridSampleConvention>(variant % 2);
          const auto type = variant == 2 ? RKNN_TENSOR_FLOAT16 : RKNN_TENSOR_FLOAT32;
          const Tensor in_t = type == RKNN_TENSOR_FLOAT16 ? input.to(DType::f16).value() : input;
          const Tensor grid_t = type == RKNN_TENSOR_FLOAT16 ? grid.to(DType::f16).value() : grid;
          const auto want = grid_sample(in_t, grid_t, o, KernelImpl::fast, &ThreadPool::global());
          ASSERT_TRUE(want.ok()) << want.error().message;
          // NHWC records for the image tensors in one variant (the runtime's native 4-D layout).
          const auto fmt = variant == 1 ? RKNN_TENSOR_NHWC : RKNN_TENSOR_NCHW;
          std::vector<Record> in{record(input, "input", type, fmt, 0), record(grid, "grid", type, RKNN_TENSOR_UNDEFINED, 12)};
          const Shape out_shape{N, C, Ho, Wo};
          Record out = record(Tensor::zeros(DType::f32, out_shape).value(), "out", type, fmt, 0);
          const int rc = drive(grid_plugin(),
                               {{contract::kMode, ints({mode}, RKNN_TENSOR_INT64)},
                                {contract::kPadding, ints({pad}, RKNN_TENSOR_INT64)},
                                {contract::kAlignCorners, ints({align}, RKNN_TENSOR_INT64)},
                                {contract::kConvention, ints({variant % 2}, RKNN_TENSOR_INT64)}},
                               in, out);
          ASSERT_EQ(rc, 0) << grid_plugin().last_error();
          EXPECT_TRUE(same_bits(output_of(out, out_shape), *want))
              << to_string(o.mode) << " " << to_string(o.padding) << " align " << align << " variant " << variant;
          ++cases;
        }
      }
    }
  }
  std::printf("cstGridSample: %d problems (3 modes x 3 paddings x 2 align_corners x float32/NHWC/float16, both conventions) bit-identical\n", cases);
}

TEST(RknnPlugin, MalformedRecordsAreRefusedByName) {
  std::mt19937 rng(3);
  const Tensor input = random_tensor(rng, {1, 2, 3, 4}, -1, 1), grid = random_tensor(rng, {1, 2, 2, 2}, -1, 1);
  const std::map<std::string, AttrValue> good{{contract::kMode, ints({0}, RKNN_TENSOR_INT64)},
                                              {contract::kPadding, ints({0}, RKNN_TENSOR_INT64)},
                                              {contract::kAlignCorners, ints({0}, RKNN_TENSOR_INT64)},
                                              {contract::kConvention, ints({1}, RKNN_TENSOR_INT64)}};
  auto attempt = [&](auto edit, std::map<std::string, AttrValue> attrs, const std::string& expect) {
    std::vector<Record> in{record(input, "input", RKNN_TENSOR_FLOAT32, RKNN_TENSOR_NCHW, 0),
                           record(grid, "grid", RKNN_TENSOR_FLOAT32, RKNN_TENSOR_UNDEFINED, 0)};
    Record out = record(Tensor::zeros(DType::f32, {1, 2, 2, 2}).value(), "out", RKNN_TENSOR_FLOAT32, RKNN_TENSOR_NCHW, 0);
    edit(in, out);
    EXPECT_NE(drive(grid_plugin(), attrs, in, out), 0) << expect;
    EXPECT_NE(std::string(grid_plugin().last_error()).find(expect), std::string::npos) << grid_plugin().last_error() << " / " << expect;
  };
  auto none = [](std::vector<Record>&, Record&) {};
  auto no_mode = good;
  no_mode.erase(contract::kMode);
  attempt(none, no_mode, "attribute 'mode' is missing");
  auto bad_mode = good;
  bad_mode[contract::kMode] = ints({7}, RKNN_TENSOR_INT64);
  attempt(none, bad_mode, "attribute 'mode' = 7 is not a known code");
  attempt([](auto& in, auto&) { in[0].t.mem.virt_addr = nullptr; }, good, "input: mem.virt_addr is NULL");
  attempt([](auto& in, auto&) { in[1].t.attr.size = 4; }, good, "grid: size 4 bytes, the dims need 32");
  attempt([](auto& in, auto&) { in[0].t.attr.type = RKNN_TENSOR_INT8; }, good, "input: element type 2 (float32 or float16 only)");
  attempt([](auto& in, auto&) { in[0].t.attr.fmt = RKNN_TENSOR_NC1HWC2; }, good, "format NC1HWC2");
  attempt([](auto& in, auto&) { in[0].t.attr.n_elems = 5; }, good, "n_elems 5 but the dims hold 24");
  attempt([](auto&, auto& out) { out.t.attr.dims[3] = 3; }, good, "output 'out': dims [1, 2, 2, 3], the operator computes [1, 2, 2, 2]");
  attempt([](auto& in, auto&) { in.pop_back(); }, good, "1 inputs, the operator takes 2");
  attempt(
      [](auto& in, auto&) {
        in[1].t.attr.dims[3] = 3;
        in[1].t.attr.n_elems = 12;
        in[1].t.attr.size = 48;
      },
      good, "grid");
}

}  // namespace
