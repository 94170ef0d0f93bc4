// The callbacks of rkdeploy's two RKNN custom operators (rknn_custom_op_contract.h) over the
// sampling kernels of src/kernels (their fast paths: NEON on the boards' A76/A55, AVX2/AVX-512
// on x86 hosts), shared by the plugin libraries librkcst_msdeform_attn.so and
// librkcst_grid_sample.so.
//
// Contract with the vendor runtime (docs/rknn-custom-op.md):
//  - init (optional for the runtime; compute runs it when it was not called) reads the node's
//    attributes through rknn_custom_op_get_op_attr - integer arrays of any integer element type,
//    or float32 holding integers - checks them and keeps them in op_ctx->priv_data; destroy
//    frees that state. prepare checks the tensors' attributes.
//  - Tensors: float32 or float16, dims as the ONNX node's in NCHW / UNDEFINED format, or a 4-D
//    tensor in NHWC format whose dims are the NHWC ones (converted on the way in and out);
//    data at mem.virt_addr + mem.offset, attr.size bytes at least. NC1HWC2 and other dtypes are
//    refused. The output is written in its attribute's dtype and format.
//  - Every callback returns 0, or -1 with a message naming the operator, the tensor or
//    attribute and the rule, printed to stderr and kept for rkd_rknn_last_error().
//  - compute is exact: the same kernels, options and summation order as rkdeploy's CPU
//    executor, so a node's output equals the executor's bit for bit (the harness checks it).
#include "plugins/rknn/plugin.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"
#include "kernels/rknn_custom_op_contract.h"

// The runtime's; weak so that the library loads where no runtime provides it (the error then
// says so instead of the loader refusing the library).
extern "C" void rknn_custom_op_get_op_attr(rknn_custom_op_context*, const char*, rknn_custom_op_attr*) __attribute__((weak));

namespace rkd::rknn_plugin {
namespace {

namespace contract = rkd::rknn_contract;

thread_local std::string g_error;

int fail(const char* op, const Error& e) {
  g_error = std::string(op) + ": " + e.message;
  std::fprintf(stderr, "rkdeploy rknn plugin: %s\n", g_error.c_str());
  return -1;
}

Result<DType> dtype_of(rknn_tensor_type t, const std::string& what) {
  if (t == RKNN_TENSOR_FLOAT32) return DType::f32;
  if (t == RKNN_TENSOR_FLOAT16) return DType::f16;
  return unsupported(what + ": element type " + std::to_string(static_cast<int>(t)) + " (float32 or float16 only)");
}

std::string tensor_name(const rknn_custom_op_tensor& x, const char* role) {
  const size_t n = strnlen(x.attr.name, RKNN_MAX_NAME_LEN);
  const std::string name(x.attr.name, n);
  return n && name != role ? std::string(role) + " '" + name + "'" : std::string(role);
}

// The tensor's dims as the ONNX node has them (NHWC dims permuted back).
Result<Shape> onnx_dims(const rknn_custom_op_tensor& x, const std::string& what) {
  const rknn_tensor_attr& a = x.attr;
  if (a.n_dims < 1 || a.n_dims > RKNN_MAX_DIMS) return invalid(what + ": n_dims " + std::to_string(a.n_dims));
  Shape s(a.dims, a.dims + a.n_dims);
  if (a.fmt == RKNN_TENSOR_NC1HWC2) return unsupported(what + ": format NC1HWC2 (NCHW, NHWC or UNDEFINED only)");
  if (a.fmt == RKNN_TENSOR_NHWC && a.n_dims == 4) s = {s[0], s[3], s[1], s[2]};
  else if (a.fmt != RKNN_TENSOR_NCHW && a.fmt != RKNN_TENSOR_UNDEFINED && a.fmt != RKNN_TENSOR_NHWC)
    return invalid(what + ": format " + std::to_string(static_cast<int>(a.fmt)));
  return s;
}

bool nhwc(const rknn_custom_op_tensor& x) { return x.attr.fmt == RKNN_TENSOR_NHWC && x.attr.n_dims == 4; }

// The bytes the tensor's record describes, checked against its attributes.
Result<uint8_t*> data_of(const rknn_custom_op_tensor& x, DType dt, int64_t elems, const std::string& what) {
  const rknn_tensor_attr& a = x.attr;
  if (!x.mem.virt_addr) return invalid(what + ": mem.virt_addr is NULL");
  if (x.mem.offset < 0) return invalid(what + ": mem.offset " + std::to_string(x.mem.offset));
  if (a.n_elems != 0 && static_cast<int64_t>(a.n_elems) != elems)
    return invalid(what + ": n_elems " + std::to_string(a.n_elems) + " but the dims hold " + std::to_string(elems));
  const uint64_t bytes = static_cast<uint64_t>(elems) * dtype_size(dt);
  if (a.size < bytes) return invalid(what + ": size " + std::to_string(a.size) + " bytes, the dims need " + std::to_string(bytes));
  if (x.mem.size != 0 && static_cast<uint64_t>(x.mem.size) < static_cast<uint64_t>(x.mem.offset) + bytes)
    return invalid(what + ": mem.size " + std::to_string(x.mem.size) + " is short of offset + " + std::to_string(bytes) + " bytes");
  return static_cast<uint8_t*>(x.mem.virt_addr) + x.mem.offset;
}

// An input as a dense tensor in the ONNX node's layout (in place unless NHWC).
Result<Tensor> input_tensor(const rknn_custom_op_tensor& x, const std::string& what) {
  RKD_ASSIGN(const DType dt, dtype_of(x.attr.type, what));
  RKD_ASSIGN(const Shape dims, onnx_dims(x, what));
  RKD_ASSIGN(const uint64_t elems, checked_numel(dims, what));
  RKD_ASSIGN(uint8_t * p, data_of(x, dt, static_cast<int64_t>(elems), what));
  const std::shared_ptr<uint8_t[]> unowned(p, [](uint8_t*) {});
  if (!nhwc(x)) return Tensor::wrap(unowned, 0, dt, dims);
  const Tensor stored = Tensor::wrap(unowned, 0, dt, {dims[0], dims[2], dims[3], dims[1]});
  RKD_ASSIGN(Tensor t, stored.permute({0, 3, 1, 2}));
  return t.contiguous();
}

// Writes `value` (the ONNX node's layout) into the output in its dtype and format.
Status write_output(rknn_custom_op_tensor& y, const Tensor& value, const std::string& what) {
  RKD_ASSIGN(const DType dt, dtype_of(y.attr.type, what));
  RKD_ASSIGN(const Shape dims, onnx_dims(y, what));
  if (dims != value.shape()) return invalid(what + ": dims " + shape_to_string(dims) + ", the operator computes " + shape_to_string(value.shape()));
  RKD_ASSIGN(uint8_t * p, data_of(y, dt, value.numel(), what));
  RKD_ASSIGN(Tensor typed, value.to(dt));
  if (nhwc(y)) {
    RKD_ASSIGN(Tensor t, typed.permute({0, 2, 3, 1}));
    typed = t.contiguous();
  } else {
    typed = typed.contiguous();
  }
  std::memcpy(p, typed.raw(), typed.nbytes());
  return {};
}

// An integer attribute array of the node (every integer element type; float32 holding integers).
Result<std::vector<int64_t>> int_attr(rknn_custom_op_context* ctx, const char* name) {
  if (!rknn_custom_op_get_op_attr) return unsupported("no rknn_custom_op_get_op_attr in the process: load the plugin into the RKNN runtime");
  rknn_custom_op_attr a;
  std::memset(&a, 0, sizeof a);
  rknn_custom_op_get_op_attr(ctx, name, &a);
  if (!a.data || a.n_elems == 0) return invalid(std::string("attribute '") + name + "' is missing");
  std::vector<int64_t> v(a.n_elems);
  for (uint32_t i = 0; i < a.n_elems; ++i) {
    switch (a.dtype) {
      case RKNN_TENSOR_INT64: v[i] = static_cast<const int64_t*>(a.data)[i]; break;
      case RKNN_TENSOR_INT32: v[i] = static_cast<const int32_t*>(a.data)[i]; break;
      case RKNN_TENSOR_UINT32: v[i] = static_cast<const uint32_t*>(a.data)[i]; break;
      case RKNN_TENSOR_INT16: v[i] = static_cast<const int16_t*>(a.data)[i]; break;
      case RKNN_TENSOR_UINT16: v[i] = static_cast<const uint16_t*>(a.data)[i]; break;
      case RKNN_TENSOR_INT8: v[i] = static_cast<const int8_t*>(a.data)[i]; break;
      case RKNN_TENSOR_UINT8: v[i] = static_cast<const uint8_t*>(a.data)[i]; break;
      case RKNN_TENSOR_FLOAT32: {
        const float f = static_cast<const float*>(a.data)[i];
        if (!(f >= -1e9f && f <= 1e9f) || f != static_cast<float>(static_cast<int64_t>(f)))
          return invalid(std::string("attribute '") + name + "': element " + std::to_string(i) + " is not an integer");
        v[i] = static_cast<int64_t>(f);
        break;
      }
      default: return invalid(std::string("attribute '") + name + "': element type " + std::to_string(static_cast<int>(a.dtype)));
    }
  }
  return v;
}

Result<int64_t> one_int(rknn_custom_op_context* ctx, const char* name, int64_t count) {
  RKD_ASSIGN(auto v, int_attr(ctx, name));
  if (v.size() != 1) return invalid(std::string("attribute '") + name + "' must hold one value, it holds " + std::to_string(v.size()));
  if (v[0] < 0 || v[0] >= count) return invalid(std::string("attribute '") + name + "' = " + std::to_string(v[0]) + " is not a known code");
  return v[0];
}

Status check_counts(uint32_t n_in, uint32_t want_in, uint32_t n_out) {
  if (n_in != want_in) return invalid(std::to_string(n_in) + " inputs, the operator takes " + std::to_string(want_in));
  if (n_out != 1) return invalid(std::to_string(n_out) + " outputs, the operator has 1");
  return {};
}

// --- cstMSDeformAttn --------------------------------------------------------------------

struct MsdaState {
  std::vector<MsdaLevelShape> levels;
  std::vector<int64_t> points;
  MsdaMethod method = MsdaMethod::bilinear;
  MsdaValue prepared;  // reused between computes (allocated once per geometry)
};

Result<std::unique_ptr<MsdaState>> msda_state(rknn_custom_op_context* ctx) {
  auto s = std::make_unique<MsdaState>();
  RKD_ASSIGN(auto hs, int_attr(ctx, contract::kLevelH));
  RKD_ASSIGN(auto ws, int_attr(ctx, contract::kLevelW));
  RKD_ASSIGN(s->points, int_attr(ctx, contract::kPoints));
  if (hs.size() != ws.size() || hs.size() != s->points.size())
    return invalid("attributes level_h, level_w and points must have one value per level (" + std::to_string(hs.size()) + ", " +
                   std::to_string(ws.size()) + ", " + std::to_string(s->points.size()) + ")");
  for (size_t l = 0; l < hs.size(); ++l) {
    if (hs[l] < 1 || ws[l] < 1) return invalid("level " + std::to_string(l) + ": H and W must be at least 1");
    s->levels.push_back({hs[l], ws[l]});
  }
  RKD_ASSIGN(const int64_t m, one_int(ctx, contract::kMethod, contract::kMethodCount));
  s->method = static_cast<MsdaMethod>(m);
  return s;
}

template <typename State, typename Make>
Result<State*> state_of(rknn_custom_op_context* ctx, Make make) {
  if (!ctx) return invalid("op_ctx is NULL");
  if (!ctx->priv_data) {
    RKD_ASSIGN(auto s, make(ctx));
    ctx->priv_data = s.release();
  }
  return static_cast<State*>(ctx->priv_data);
}

Status msda_compute(rknn_custom_op_context* ctx, rknn_custom_op_tensor* in, uint32_t n_in, rknn_custom_op_tensor* out, uint32_t n_out) {
  RKD_TRY(check_counts(n_in, 3, n_out));
  RKD_ASSIGN(MsdaState * s, state_of<MsdaState>(ctx, msda_state));
  RKD_ASSIGN(const Tensor value, input_tensor(in[0], tensor_name(in[0], "value")));
  RKD_ASSIGN(const Tensor locations, input_tensor(in[1], tensor_name(in[1], "locations")));
  RKD_ASSIGN(const Tensor weights, input_tensor(in[2], tensor_name(in[2], "weights")));
  RKD_TRY(msda_prepare_from_tokens(value, s->levels, &s->prepared, &ThreadPool::global()));
  MsdaOptions o;
  o.method = s->method;
  RKD_ASSIGN(const Tensor y, msda(s->prepared, locations, weights, s->points, o, &ThreadPool::global()));
  return write_output(out[0], y, tensor_name(out[0], "output"));
}

// --- cstGridSample ----------------------------------------------------------------------

struct GridSampleState {
  GridSampleOptions options;
};

Result<std::unique_ptr<GridSampleState>> grid_sample_state(rknn_custom_op_context* ctx) {
  auto s = std::make_unique<GridSampleState>();
  RKD_ASSIGN(const int64_t mode, one_int(ctx, contract::kMode, contract::kModeCount));
  RKD_ASSIGN(const int64_t padding, one_int(ctx, contract::kPadding, contract::kPaddingCount));
  RKD_ASSIGN(const int64_t align, one_int(ctx, contract::kAlignCorners, 2));
  RKD_ASSIGN(const int64_t convention, one_int(ctx, contract::kConvention, contract::kConventionCount));
  s->options.mode = static_cast<GridSampleMode>(mode);
  s->options.padding = static_cast<GridSamplePadding>(padding);
  s->options.align_corners = align != 0;
  s->options.convention = static_cast<GridSampleConvention>(convention);
  return s;
}

Status grid_sample_compute(rknn_custom_op_context* ctx, rknn_custom_op_tensor* in, uint32_t n_in, rknn_custom_op_tensor* out, uint32_t n_out) {
  RKD_TRY(check_counts(n_in, 2, n_out));
  RKD_ASSIGN(GridSampleState * s, state_of<GridSampleState>(ctx, grid_sample_state));
  RKD_ASSIGN(const Tensor input, input_tensor(in[0], tensor_name(in[0], "input")));
  RKD_ASSIGN(const Tensor grid, input_tensor(in[1], tensor_name(in[1], "grid")));
  RKD_ASSIGN(const Tensor y, grid_sample(input, grid, s->options, KernelImpl::fast, &ThreadPool::global()));
  return write_output(out[0], y, tensor_name(out[0], "output"));
}

// Each callback converted to the runtime's convention (0 or -1), never throwing.
template <Status (*F)(rknn_custom_op_context*, rknn_custom_op_tensor*, uint32_t, rknn_custom_op_tensor*, uint32_t)>
int callback(const char* op, rknn_custom_op_context* ctx, rknn_custom_op_tensor* in, uint32_t n_in, rknn_custom_op_tensor* out, uint32_t n_out) {
  try {
    const Status s = F(ctx, in, n_in, out, n_out);
    return s.ok() ? 0 : fail(op, s.error());
  } catch (const std::exception& e) {
    return fail(op, Error{ErrorKind::internal, e.what()});
  }
}

template <typename State, typename Make>
int init_state(const char* op, rknn_custom_op_context* ctx, Make make) {
  try {
    const auto s = state_of<State>(ctx, make);
    return s.ok() ? 0 : fail(op, s.error());
  } catch (const std::exception& e) {
    return fail(op, Error{ErrorKind::internal, e.what()});
  }
}

template <typename T>
Status status_of(const Result<T>& r) {
  if (!r.ok()) return r.error();
  return {};
}

// prepare: the tensors' attributes alone (no data needed yet).
Status check_inputs(rknn_custom_op_tensor* in, uint32_t n_in, rknn_custom_op_tensor* out, uint32_t n_out, uint32_t want_in) {
  RKD_TRY(check_counts(n_in, want_in, n_out));
  for (uint32_t i = 0; i < n_in; ++i) {
    RKD_TRY(status_of(dtype_of(in[i].attr.type, tensor_name(in[i], "input"))));
    RKD_TRY(status_of(onnx_dims(in[i], tensor_name(in[i], "input"))));
  }
  RKD_TRY(status_of(dtype_of(out[0].attr.type, tensor_name(out[0], "output"))));
  return status_of(onnx_dims(out[0], tensor_name(out[0], "output")));
}

// An operator: its type, state, input count and compute.
struct MsdaOp {
  using State = MsdaState;
  static constexpr const char* type = contract::kMsdaType;
  static constexpr uint32_t inputs = 3;
  static Result<std::unique_ptr<State>> make(rknn_custom_op_context* c) { return msda_state(c); }
  static constexpr auto compute = msda_compute;
};
struct GridSampleOp {
  using State = GridSampleState;
  static constexpr const char* type = contract::kGridSampleType;
  static constexpr uint32_t inputs = 2;
  static Result<std::unique_ptr<State>> make(rknn_custom_op_context* c) { return grid_sample_state(c); }
  static constexpr auto compute = grid_sample_compute;
};

// The operator's record with its callbacks (built once).
template <typename Op>
rknn_custom_op* record() {
  static rknn_custom_op op = [] {
    rknn_custom_op o;
    std::memset(&o, 0, sizeof o);
    o.version = contract::kVersion;
    o.target = RKNN_TARGET_TYPE_CPU;
    std::snprintf(o.op_type, sizeof o.op_type, "%s", Op::type);
    o.init = [](rknn_custom_op_context* c, rknn_custom_op_tensor*, uint32_t, rknn_custom_op_tensor*, uint32_t) {
      return init_state<typename Op::State>(Op::type, c, Op::make);
    };
    o.prepare = [](rknn_custom_op_context*, rknn_custom_op_tensor* in, uint32_t n_in, rknn_custom_op_tensor* out, uint32_t n_out) {
      const Status s = check_inputs(in, n_in, out, n_out, Op::inputs);
      return s.ok() ? 0 : fail(Op::type, s.error());
    };
    o.compute = [](rknn_custom_op_context* c, rknn_custom_op_tensor* in, uint32_t n_in, rknn_custom_op_tensor* out, uint32_t n_out) {
      return callback<Op::compute>(Op::type, c, in, n_in, out, n_out);
    };
    o.destroy = [](rknn_custom_op_context* c) {
      if (c) {
        delete static_cast<typename Op::State*>(c->priv_data);
        c->priv_data = nullptr;
      }
      return 0;
    };
    return o;
  }();
  return &op;
}

}  // namespace

rknn_custom_op* msdeform_attn_op() { return record<MsdaOp>(); }
rknn_custom_op* grid_sample_op() { return record<GridSampleOp>(); }

const char* last_error() { return g_error.c_str(); }

}  // namespace rkd::rknn_plugin
