// Shared machinery of the shape functions (private to src/ir): the per-node context, dim
// arithmetic, broadcasting, and the shape functions op_info.cc's table points at.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "ir/passes/shape_inference.h"

namespace rkd::ir::detail {

// Dimension products saturate at kHuge instead of overflowing: any shape that large is
// refused later by checked_shape_bytes (before anything is allocated).
constexpr int64_t kHuge = int64_t{1} << 62;
inline int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kHuge || r < -kHuge) return kHuge;
  return r;
}

struct Ctx {
  Node& n;
  int64_t opset;

  const Value* in(size_t i) const { return i < n.inputs.size() ? n.inputs[i] : nullptr; }
  std::optional<Dims> dims(size_t i) const {
    const Value* v = in(i);
    return v ? v->shape : std::nullopt;
  }
  std::optional<DType> dtype(size_t i) const {
    const Value* v = in(i);
    return v ? v->dtype : std::nullopt;
  }
  Error bad(const std::string& msg) const { return invalid(n.describe() + ": " + msg); }
  Error unsup(const std::string& msg) const { return unsupported(n.describe() + ": " + msg); }

  // Sets output i; checks against a static shape already present.
  Status set(size_t i, std::optional<DType> dt, std::optional<Dims> shape) const {
    if (i >= n.outputs.size() || !n.outputs[i]) return {};
    Value* o = n.outputs[i];
    if (dt) o->dtype = dt;
    if (!shape) return {};
    if (o->shape && o->shape->size() == shape->size()) {
      for (size_t k = 0; k < shape->size(); ++k) {
        const Dim& old = (*o->shape)[k];
        const Dim& now = (*shape)[k];
        if (old.is_static() && now.is_static() && old.value != now.value) {
          return bad("inferred shape " + dims_to_string(*shape) + " of output '" + o->name + "' contradicts the shape " + dims_to_string(*o->shape) +
                     " recorded in the model");
        }
        if (old.is_static() && !now.is_static()) (*shape)[k] = old;
      }
    } else if (o->shape && !o->shape->empty() && o->shape->size() != shape->size()) {
      return bad("inferred rank " + std::to_string(shape->size()) + " of output '" + o->name + "' contradicts the rank " +
                 std::to_string(o->shape->size()) + " recorded in the model");
    }
    o->shape = std::move(shape);
    return {};
  }
  Result<int64_t> axis(int64_t a, int64_t rank, const char* what = "axis") const {
    if (a < -rank || a >= rank) {
      return bad(std::string(what) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    }
    return a < 0 ? a + rank : a;
  }
};

inline Result<Dims> broadcast(const Ctx& c, const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim one{1, ""};
    const Dim& x = i + a.size() >= r ? a[i + a.size() - r] : one;
    const Dim& y = i + b.size() >= r ? b[i + b.size() - r] : one;
    if (x.is_static() && y.is_static()) {
      if (x.value != y.value && x.value != 1 && y.value != 1) {
        return c.bad("cannot broadcast " + dims_to_string(a) + " with " + dims_to_string(b));
      }
      out[i] = Dim{x.value == 1 ? y.value : x.value, ""};
    } else if (x.is_static()) {
      out[i] = x.value == 1 ? y : x;
    } else if (y.is_static()) {
      out[i] = y.value == 1 ? x : y;
    } else {
      out[i] = x.symbol == y.symbol ? x : Dim{};
    }
  }
  return out;
}

// The shape functions op_info's table names (shape_inference.cc: elementwise, layout,
// reduction; shape_inference_nn.cc: convolution, pooling, products, resize, sampling,
// quantization). Each sets the node's outputs as infer_node() documents.
Status same_shape(const Ctx& c);       // output 0: input 0's type and shape
Status dropout(const Ctx& c);          // same_shape, and the optional mask as bool
Status same_shape_bool(const Ctx& c);  // input 0's shape, bool
Status broadcast_same_type(const Ctx& c);
Status broadcast_to_bool(const Ctx& c);
Status where(const Ctx& c);
Status cast(const Ctx& c);
Status concat(const Ctx& c);
Status split(const Ctx& c);
Status slice(const Ctx& c);
Status gather(const Ctx& c);
Status gather_nd(const Ctx& c);
Status gather_elements(const Ctx& c);
Status reshape(const Ctx& c);
Status flatten(const Ctx& c);
Status transpose(const Ctx& c);
Status depth_to_space(const Ctx& c);
Status squeeze(const Ctx& c);
Status unsqueeze(const Ctx& c);
Status expand(const Ctx& c);
Status tile(const Ctx& c);
Status pad(const Ctx& c);
Status shape_op(const Ctx& c);
Status size_op(const Ctx& c);
Status constant_of_shape(const Ctx& c);
Status range(const Ctx& c);
Status constant(const Ctx& c);
Status reduce_sum(const Ctx& c);      // axes an input from opset 13
Status reduce_opset18(const Ctx& c);  // the other reductions: axes an input from opset 18
Status arg_reduce(const Ctx& c);
Status topk(const Ctx& c);
Status conv(const Ctx& c);
Status pool(const Ctx& c);
Status conv_transpose_op(const Ctx& c);
Status global_pool_op(const Ctx& c);
Status matmul_op(const Ctx& c);
Status gemm_op(const Ctx& c);
Status einsum_op(const Ctx& c);
Status grid_sample_op(const Ctx& c);
Status resize_op(const Ctx& c);
Status layer_norm_op(const Ctx& c);
Status qlinear_conv(const Ctx& c);
Status qlinear_matmul(const Ctx& c);
Status quantize_linear(const Ctx& c);
Status dequantize_linear(const Ctx& c);
// The "rkdeploy" domain (shape_inference_rkdeploy.cc).
Status qlinear_binary(const Ctx& c);
Status resize_maybe_edge_padded(const Ctx& c);
Status qlinear_lut(const Ctx& c);
Status qlinear_tflite(const Ctx& c);
Status msda_prepare_shape(const Ctx& c);
Status msda_attention_shape(const Ctx& c);

}  // namespace rkd::ir::detail
