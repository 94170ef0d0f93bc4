#include "ir/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

namespace rkd::ir {

std::optional<DType> dtype_from_onnx_code(int64_t code) {
  switch (code) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 3: return DType::i8;
    case 5: return DType::i16;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 9: return DType::b8;
    case 10: return DType::f16;
    case 16: return DType::bf16;
    default: return std::nullopt;
  }
}

std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  if (!v || !v->constant) return std::nullopt;
  const Tensor t = v->constant->contiguous();
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::i64) {
    std::copy(t.data<int64_t>(), t.data<int64_t>() + out.size(), out.begin());
  } else if (t.dtype() == DType::i32) {
    std::copy(t.data<int32_t>(), t.data<int32_t>() + out.size(), out.begin());
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<Shape> static_shape(const Value* v) {
  if (!v || !v->shape) return std::nullopt;
  Shape s;
  for (const Dim& d : *v->shape) {
    if (!d.is_static()) return std::nullopt;
    s.push_back(d.value);
  }
  return s;
}

namespace {

// Dimension products saturate at kHuge instead of overflowing: any shape that large is
// refused later by checked_shape_bytes (before anything is allocated).
constexpr int64_t kHuge = int64_t{1} << 62;
int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kHuge || r < -kHuge) return kHuge;
  return r;
}

Dims to_dims(const Shape& s) {
  Dims d;
  for (int64_t x : s) d.push_back(Dim{x, ""});
  return d;
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
          return bad("inferred shape " + dims_to_string(*shape) + " of output '" + o->name +
                     "' contradicts the shape " + dims_to_string(*o->shape) + " recorded in the model");
        }
        if (old.is_static() && !now.is_static()) (*shape)[k] = old;
      }
    } else if (o->shape && !o->shape->empty() && o->shape->size() != shape->size()) {
      return bad("inferred rank " + std::to_string(shape->size()) + " of output '" + o->name +
                 "' contradicts the rank " + std::to_string(o->shape->size()) + " recorded in the model");
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

Result<Dims> broadcast(const Ctx& c, const Dims& a, const Dims& b) {
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

using Fn = std::function<Status(const Ctx&)>;

Status same_as_input0(const Ctx& c) { return c.set(0, c.dtype(0), c.dims(0)); }

Status broadcast_op(const Ctx& c, std::optional<DType> out_dtype) {
  std::optional<Dims> d = c.dims(0);
  for (size_t i = 1; i < c.n.inputs.size() && d; ++i) {
    auto di = c.dims(i);
    if (!di) {
      d.reset();
      break;
    }
    RKD_ASSIGN(d, broadcast(c, *d, *di));
  }
  return c.set(0, out_dtype, d);
}

// Output spatial size of a convolution / pooling window.
Result<int64_t> window_out(const Ctx& c, int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pb, int64_t pe,
                           bool ceil_mode) {
  if (in > (int64_t{1} << 40)) return c.bad("spatial size beyond 2^40");
  const int64_t eff = dil * (k - 1) + 1;
  const int64_t span = in + pb + pe - eff;
  if (span < 0) {
    return c.bad("window " + std::to_string(eff) + " is larger than the padded input " + std::to_string(in + pb + pe));
  }
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // ceil_mode: the last window must start inside the input or left padding (PyTorch/ONNX rule).
  if (ceil_mode && (out - 1) * stride >= in + pb) --out;
  return out;
}

struct WindowAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad;
  bool ceil_mode = false;
};

Result<WindowAttrs> window_attrs(const Ctx& c, size_t spatial, const std::vector<int64_t>& kernel) {
  WindowAttrs w;
  w.kernel = kernel;
  RKD_ASSIGN(w.strides, c.n.attr_ints("strides", std::vector<int64_t>(spatial, 1)));
  RKD_ASSIGN(w.dilations, c.n.attr_ints("dilations", std::vector<int64_t>(spatial, 1)));
  RKD_ASSIGN(w.pads, c.n.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0)));
  RKD_ASSIGN(w.auto_pad, c.n.attr_string("auto_pad", "NOTSET"));
  RKD_ASSIGN(int64_t cm, c.n.attr_int("ceil_mode", 0));
  w.ceil_mode = cm != 0;
  if (w.kernel.size() != spatial || w.strides.size() != spatial || w.dilations.size() != spatial ||
      w.pads.size() != 2 * spatial) {
    return c.bad("kernel_shape/strides/dilations/pads do not match " + std::to_string(spatial) + " spatial dims");
  }
  constexpr int64_t kMaxWindow = int64_t{1} << 31;
  for (size_t i = 0; i < spatial; ++i) {
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.dilations[i] < 1) {
      return c.bad("kernel_shape, strides and dilations must be positive");
    }
    if (w.kernel[i] > kMaxWindow || w.strides[i] > kMaxWindow || w.dilations[i] > kMaxWindow ||
        w.pads[i] > kMaxWindow || w.pads[i + spatial] > kMaxWindow) {
      return c.bad("kernel_shape, strides, dilations or pads beyond 2^31");
    }
    if (w.pads[i] < 0 || w.pads[i + spatial] < 0) return c.bad("pads must be non-negative");
  }
  return w;
}

// Resolves auto_pad into explicit pads (ONNX: SAME_UPPER puts the extra pad at the end).
Status resolve_auto_pad(const Ctx& c, WindowAttrs& w, const Shape& in_spatial) {
  const size_t s = in_spatial.size();
  if (w.auto_pad == "NOTSET") return {};
  if (w.auto_pad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
    return {};
  }
  if (w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER") return c.bad("unknown auto_pad '" + w.auto_pad + "'");
  for (size_t i = 0; i < s; ++i) {
    const int64_t out = (in_spatial[i] + w.strides[i] - 1) / w.strides[i];
    const int64_t eff = w.dilations[i] * (w.kernel[i] - 1) + 1;
    const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + eff - in_spatial[i]);
    const int64_t small = total / 2, big = total - small;
    w.pads[i] = w.auto_pad == "SAME_UPPER" ? small : big;
    w.pads[i + s] = w.auto_pad == "SAME_UPPER" ? big : small;
  }
  return {};
}

Status window_op(const Ctx& c, bool conv) {
  auto x = c.dims(0);
  if (!x) return {};
  if (x->size() < 3) return c.bad("input must have rank >= 3 (N, C, spatial...), got " + dims_to_string(*x));
  const size_t spatial = x->size() - 2;
  std::vector<int64_t> kernel;
  Dim out_c = (*x)[1];
  if (conv) {
    auto w = c.dims(1);
    if (!w) return {};
    if (w->size() != x->size()) return c.bad("weight rank must equal input rank");
    RKD_ASSIGN(kernel, c.n.attr_ints("kernel_shape", {}));
    if (kernel.empty()) {
      for (size_t i = 2; i < w->size(); ++i) {
        if (!(*w)[i].is_static()) return {};
        kernel.push_back((*w)[i].value);
      }
    }
    out_c = (*w)[0];
    RKD_ASSIGN(int64_t group, c.n.attr_int("group", 1));
    if (group < 1) return c.bad("group must be >= 1");
    if ((*x)[1].is_static() && (*w)[1].is_static() && (*x)[1].value != (*w)[1].value * group) {
      return c.bad("input channels " + std::to_string((*x)[1].value) + " != weight channels " +
                   std::to_string((*w)[1].value) + " x group " + std::to_string(group));
    }
    if (out_c.is_static() && out_c.value % group != 0) return c.bad("output channels not divisible by group");
  } else {
    RKD_ASSIGN(kernel, c.n.attr_ints("kernel_shape", {}));
  }
  RKD_ASSIGN(WindowAttrs w, window_attrs(c, spatial, kernel));
  Dims out{(*x)[0], out_c};
  Shape in_spatial;
  for (size_t i = 0; i < spatial; ++i) {
    if (!(*x)[i + 2].is_static()) return c.set(0, c.dtype(0), std::nullopt);
    in_spatial.push_back((*x)[i + 2].value);
  }
  RKD_TRY(resolve_auto_pad(c, w, in_spatial));
  for (size_t i = 0; i < spatial; ++i) {
    RKD_ASSIGN(int64_t o, window_out(c, in_spatial[i], w.kernel[i], w.strides[i], w.dilations[i], w.pads[i],
                                     w.pads[i + spatial], w.ceil_mode));
    out.push_back(Dim{o, ""});
  }
  RKD_TRY(c.set(0, c.dtype(0), out));
  if (!conv && c.n.outputs.size() > 1) RKD_TRY(c.set(1, DType::i64, out));  // MaxPool indices
  return {};
}

Status conv_transpose(const Ctx& c) {
  auto x = c.dims(0), w = c.dims(1);
  if (!x || !w) return {};
  if (x->size() < 3 || w->size() != x->size()) return c.bad("input and weight must have the same rank >= 3");
  const size_t s = x->size() - 2;
  RKD_ASSIGN(int64_t group, c.n.attr_int("group", 1));
  RKD_ASSIGN(auto kernel, c.n.attr_ints("kernel_shape", {}));
  if (kernel.empty()) {
    for (size_t i = 2; i < w->size(); ++i) {
      if (!(*w)[i].is_static()) return {};
      kernel.push_back((*w)[i].value);
    }
  }
  RKD_ASSIGN(WindowAttrs wa, window_attrs(c, s, kernel));
  RKD_ASSIGN(auto out_pad, c.n.attr_ints("output_padding", std::vector<int64_t>(s, 0)));
  RKD_ASSIGN(auto out_shape, c.n.attr_ints("output_shape", {}));
  if (out_pad.size() != s) return c.bad("output_padding must have one value per spatial dim");
  for (int64_t v : out_pad) {
    if (v < 0 || v > (int64_t{1} << 31)) return c.bad("output_padding out of range");
  }
  Dims out{(*x)[0], (*w)[1].is_static() ? Dim{(*w)[1].value * group, ""} : Dim{}};
  for (size_t i = 0; i < s; ++i) {
    if (!out_shape.empty()) {
      out.push_back(Dim{out_shape[out_shape.size() - s + i], ""});
      continue;
    }
    if (!(*x)[i + 2].is_static()) return c.set(0, c.dtype(0), std::nullopt);
    const int64_t in = (*x)[i + 2].value;
    if (in > (int64_t{1} << 31)) return c.bad("spatial size beyond 2^31");
    int64_t o;
    if (wa.auto_pad == "SAME_UPPER" || wa.auto_pad == "SAME_LOWER") {
      o = in * wa.strides[i];
    } else {
      const int64_t pb = wa.auto_pad == "VALID" ? 0 : wa.pads[i], pe = wa.auto_pad == "VALID" ? 0 : wa.pads[i + s];
      o = wa.strides[i] * (in - 1) + out_pad[i] + ((kernel[i] - 1) * wa.dilations[i] + 1) - pb - pe;
    }
    if (o < 1) return c.bad("output size " + std::to_string(o) + " is not positive");
    out.push_back(Dim{o, ""});
  }
  return c.set(0, c.dtype(0), out);
}

Status global_pool(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  if (x->size() < 3) return c.bad("input must have rank >= 3");
  Dims out{(*x)[0], (*x)[1]};
  for (size_t i = 2; i < x->size(); ++i) out.push_back(Dim{1, ""});
  return c.set(0, c.dtype(0), out);
}

Status matmul(const Ctx& c) {
  auto a = c.dims(0), b = c.dims(1);
  if (!a || !b) return c.set(0, c.dtype(0), std::nullopt);
  if (a->empty() || b->empty()) return c.bad("MatMul inputs must have rank >= 1");
  Dims A = *a, B = *b;
  const bool a1 = A.size() == 1, b1 = B.size() == 1;
  if (a1) A.insert(A.begin(), Dim{1, ""});
  if (b1) B.push_back(Dim{1, ""});
  const Dim& k1 = A.back();
  const Dim& k2 = B[B.size() - 2];
  if (k1.is_static() && k2.is_static() && k1.value != k2.value) {
    return c.bad("inner dimensions differ: " + dims_to_string(*a) + " x " + dims_to_string(*b));
  }
  Dims ba(A.begin(), A.end() - 2), bb(B.begin(), B.end() - 2);
  RKD_ASSIGN(Dims out, broadcast(c, ba, bb));
  if (!a1) out.push_back(A[A.size() - 2]);
  if (!b1) out.push_back(B.back());
  return c.set(0, c.dtype(0), out);
}

Status gemm(const Ctx& c) {
  auto a = c.dims(0), b = c.dims(1);
  if (!a || !b) return {};
  if (a->size() != 2 || b->size() != 2) return c.bad("Gemm inputs must be 2-D");
  RKD_ASSIGN(int64_t ta, c.n.attr_int("transA", 0));
  RKD_ASSIGN(int64_t tb, c.n.attr_int("transB", 0));
  const Dim m = (*a)[ta ? 1 : 0], ka = (*a)[ta ? 0 : 1], kb = (*b)[tb ? 1 : 0], nn = (*b)[tb ? 0 : 1];
  if (ka.is_static() && kb.is_static() && ka.value != kb.value) return c.bad("inner dimensions differ");
  return c.set(0, c.dtype(0), Dims{m, nn});
}

Status concat(const Ctx& c) {
  RKD_ASSIGN(int64_t ax, c.n.attr_int("axis", 0));
  std::optional<Dims> out;
  for (size_t i = 0; i < c.n.inputs.size(); ++i) {
    auto d = c.dims(i);
    if (!d) return c.set(0, c.dtype(0), std::nullopt);
    RKD_ASSIGN(int64_t a, c.axis(ax, static_cast<int64_t>(d->size())));
    if (!out) {
      out = d;
      continue;
    }
    if (d->size() != out->size()) return c.bad("inputs have different ranks");
    for (size_t k = 0; k < d->size(); ++k) {
      Dim& o = (*out)[k];
      const Dim& x = (*d)[k];
      if (static_cast<int64_t>(k) == a) {
        o = (o.is_static() && x.is_static()) ? Dim{std::min(o.value + x.value, kHuge), ""} : Dim{};
      } else if (o.is_static() && x.is_static() && o.value != x.value) {
        return c.bad("input " + std::to_string(i) + " " + dims_to_string(*d) + " does not match " +
                     dims_to_string(*out) + " outside the concat axis");
      } else if (!o.is_static() && x.is_static()) {
        o = x;
      }
    }
  }
  return c.set(0, c.dtype(0), out);
}

Status split(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  RKD_ASSIGN(int64_t ax0, c.n.attr_int("axis", 0));
  RKD_ASSIGN(int64_t a, c.axis(ax0, static_cast<int64_t>(x->size())));
  const Dim& d = (*x)[static_cast<size_t>(a)];
  const int64_t parts = static_cast<int64_t>(c.n.outputs.size());
  std::vector<int64_t> sizes;
  if (c.in(1)) {
    auto s = constant_ints(c.in(1));
    if (!s) return {};
    sizes = *s;
  } else {
    RKD_ASSIGN(sizes, c.n.attr_ints("split", {}));
  }
  if (sizes.empty()) {
    if (!d.is_static()) return {};
    RKD_ASSIGN(int64_t num, c.n.attr_int("num_outputs", parts));
    const int64_t chunk = (d.value + num - 1) / num;
    for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, d.value - i * chunk)));
    if (c.n.attrs.count("num_outputs") == 0 && d.value % parts != 0) {
      return c.bad("dimension " + std::to_string(d.value) + " does not split evenly into " + std::to_string(parts));
    }
  }
  if (static_cast<int64_t>(sizes.size()) != parts) return c.bad("split has " + std::to_string(sizes.size()) +
                                                                 " sizes for " + std::to_string(parts) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return c.bad("negative split size");
    total += s;
  }
  if (d.is_static() && total != d.value) return c.bad("split sizes sum to " + std::to_string(total) +
                                                      ", dimension is " + std::to_string(d.value));
  for (int64_t i = 0; i < parts; ++i) {
    Dims o = *x;
    o[static_cast<size_t>(a)] = Dim{sizes[static_cast<size_t>(i)], ""};
    RKD_TRY(c.set(static_cast<size_t>(i), c.dtype(0), o));
  }
  return {};
}

// ONNX Slice index clamping for one axis; returns the element count.
int64_t slice_count(int64_t dim, int64_t& start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start > end ? (start - end + (-step) - 1) / (-step) : 0;
}

Status slice(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (c.opset >= 10 && c.n.inputs.size() >= 3) {
    starts = constant_ints(c.in(1));
    ends = constant_ints(c.in(2));
    if (c.in(3)) axes = constant_ints(c.in(3));
    if (c.in(4)) steps = constant_ints(c.in(4));
    if (!starts || !ends || (c.in(3) && !axes) || (c.in(4) && !steps)) return c.set(0, c.dtype(0), std::nullopt);
  } else {
    RKD_ASSIGN(auto s, c.n.attr_ints("starts", {}));
    RKD_ASSIGN(auto e, c.n.attr_ints("ends", {}));
    starts = s;
    ends = e;
    if (c.n.attrs.count("axes")) {
      RKD_ASSIGN(auto a, c.n.attr_ints("axes", {}));
      axes = a;
    }
  }
  const size_t k = starts->size();
  if (ends->size() != k || (axes && axes->size() != k) || (steps && steps->size() != k)) {
    return c.bad("starts, ends, axes and steps must have the same length");
  }
  Dims out = *x;
  std::set<int64_t> seen;
  for (size_t i = 0; i < k; ++i) {
    RKD_ASSIGN(int64_t a, c.axis(axes ? (*axes)[i] : static_cast<int64_t>(i), static_cast<int64_t>(x->size())));
    if (!seen.insert(a).second) return c.bad("axis " + std::to_string(a) + " repeated");
    const int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0) return c.bad("step must not be 0");
    Dim& d = out[static_cast<size_t>(a)];
    if (!d.is_static()) {
      d = Dim{};
      continue;
    }
    int64_t st = (*starts)[i];
    d = Dim{slice_count(d.value, st, (*ends)[i], step), ""};
  }
  return c.set(0, c.dtype(0), out);
}

Status gather(const Ctx& c) {
  auto x = c.dims(0), idx = c.dims(1);
  if (!x || !idx) return c.set(0, c.dtype(0), std::nullopt);
  RKD_ASSIGN(int64_t ax0, c.n.attr_int("axis", 0));
  RKD_ASSIGN(int64_t a, c.axis(ax0, static_cast<int64_t>(x->size())));
  Dims out(x->begin(), x->begin() + a);
  out.insert(out.end(), idx->begin(), idx->end());
  out.insert(out.end(), x->begin() + a + 1, x->end());
  return c.set(0, c.dtype(0), out);
}

Result<Dims> reshape_dims(const Ctx& c, const Dims& in, const std::vector<int64_t>& spec, bool allowzero) {
  Dims out;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t s = spec[i];
    if (s == -1) {
      if (infer_at >= 0) return c.bad("more than one -1 in the target shape");
      infer_at = static_cast<int>(i);
      out.push_back(Dim{});
      continue;
    }
    if (s == 0 && !allowzero) {
      if (i >= in.size()) return c.bad("0 in the target shape at position " + std::to_string(i) + " beyond the input rank");
      out.push_back(in[i]);
      if (in[i].is_static()) known = known < 0 ? known : mul_sat(known, in[i].value);
      else known = -1;
      continue;
    }
    if (s < 0) return c.bad("invalid target dimension " + std::to_string(s));
    out.push_back(Dim{s, ""});
    if (known >= 0) known = mul_sat(known, s);
  }
  int64_t total = 1;
  bool total_known = true;
  for (const Dim& d : in) {
    if (!d.is_static()) total_known = false;
    else total = mul_sat(total, d.value);
  }
  if (infer_at >= 0) {
    if (total_known && known > 0) {
      if (total % known != 0) return c.bad("cannot reshape " + dims_to_string(in) + " to the target shape");
      out[static_cast<size_t>(infer_at)] = Dim{total / known, ""};
    } else if (total_known && known == 0 && total != 0) {
      return c.bad("cannot infer -1 next to a 0-sized dimension");
    }
  } else if (total_known && known >= 0 && total != known) {
    return c.bad("cannot reshape " + dims_to_string(in) + " (" + std::to_string(total) + " elements) to " +
                 dims_to_string(out) + " (" + std::to_string(known) + " elements)");
  }
  return out;
}

Status reshape(const Ctx& c) {
  auto x = c.dims(0);
  auto spec = constant_ints(c.in(1));
  if (!x || !spec) {
    // The rank is known from the shape input's length even when its values are not.
    auto sd = c.dims(1);
    if (sd && sd->size() == 1 && (*sd)[0].is_static()) {
      return c.set(0, c.dtype(0), Dims(static_cast<size_t>((*sd)[0].value)));
    }
    return c.set(0, c.dtype(0), std::nullopt);
  }
  RKD_ASSIGN(int64_t allowzero, c.n.attr_int("allowzero", 0));
  RKD_ASSIGN(Dims out, reshape_dims(c, *x, *spec, allowzero != 0));
  return c.set(0, c.dtype(0), out);
}

Status flatten(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  RKD_ASSIGN(int64_t ax0, c.n.attr_int("axis", 1));
  const int64_t r = static_cast<int64_t>(x->size());
  if (ax0 < -r || ax0 > r) return c.bad("axis out of range");
  const int64_t a = ax0 < 0 ? ax0 + r : ax0;
  auto prod = [&](int64_t b, int64_t e) -> Dim {
    int64_t p = 1;
    for (int64_t i = b; i < e; ++i) {
      if (!(*x)[static_cast<size_t>(i)].is_static()) return Dim{};
      p = mul_sat(p, (*x)[static_cast<size_t>(i)].value);
    }
    return Dim{p, ""};
  };
  return c.set(0, c.dtype(0), Dims{prod(0, a), prod(a, r)});
}

Status transpose(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  RKD_ASSIGN(auto perm, c.n.attr_ints("perm", {}));
  const size_t r = x->size();
  if (perm.empty()) {
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  }
  if (perm.size() != r) return c.bad("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
  Dims out;
  std::vector<bool> used(r, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(r) || used[static_cast<size_t>(p)]) return c.bad("perm is not a permutation");
    used[static_cast<size_t>(p)] = true;
    out.push_back((*x)[static_cast<size_t>(p)]);
  }
  return c.set(0, c.dtype(0), out);
}

Result<std::optional<std::vector<int64_t>>> axes_of(const Ctx& c, size_t input_index, int64_t attr_opset_limit) {
  if (c.opset < attr_opset_limit) {
    if (!c.n.attrs.count("axes")) return std::optional<std::vector<int64_t>>{};
    RKD_ASSIGN(auto a, c.n.attr_ints("axes", {}));
    return std::optional<std::vector<int64_t>>{a};
  }
  if (!c.in(input_index)) return std::optional<std::vector<int64_t>>{};
  auto a = constant_ints(c.in(input_index));
  if (!a) return unsupported(c.n.describe() + ": axes input is not a constant");
  return std::optional<std::vector<int64_t>>{*a};
}

Status squeeze(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  auto axes_r = axes_of(c, 1, 13);
  if (!axes_r.ok()) return c.set(0, c.dtype(0), std::nullopt);
  const auto& axes = *axes_r;
  const int64_t r = static_cast<int64_t>(x->size());
  std::set<int64_t> drop;
  if (axes) {
    for (int64_t a0 : *axes) {
      RKD_ASSIGN(int64_t a, c.axis(a0, r));
      const Dim& d = (*x)[static_cast<size_t>(a)];
      if (d.is_static() && d.value != 1) return c.bad("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(d.value));
      drop.insert(a);
    }
  } else {
    for (int64_t i = 0; i < r; ++i) {
      const Dim& d = (*x)[static_cast<size_t>(i)];
      if (!d.is_static()) return c.set(0, c.dtype(0), std::nullopt);
      if (d.value == 1) drop.insert(i);
    }
  }
  Dims out;
  for (int64_t i = 0; i < r; ++i) {
    if (!drop.count(i)) out.push_back((*x)[static_cast<size_t>(i)]);
  }
  return c.set(0, c.dtype(0), out);
}

Status unsqueeze(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  auto axes_r = axes_of(c, 1, 13);
  if (!axes_r.ok() || !*axes_r) return c.set(0, c.dtype(0), std::nullopt);
  const auto& axes = **axes_r;
  const int64_t r = static_cast<int64_t>(x->size() + axes.size());
  std::set<int64_t> ins;
  for (int64_t a0 : axes) {
    RKD_ASSIGN(int64_t a, c.axis(a0, r));
    if (!ins.insert(a).second) return c.bad("axis " + std::to_string(a) + " repeated");
  }
  Dims out;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins.count(i) ? Dim{1, ""} : (*x)[k++]);
  return c.set(0, c.dtype(0), out);
}

Status expand(const Ctx& c) {
  auto x = c.dims(0);
  auto s = constant_ints(c.in(1));
  if (!x || !s) return c.set(0, c.dtype(0), std::nullopt);
  RKD_ASSIGN(Dims out, broadcast(c, *x, to_dims(*s)));
  return c.set(0, c.dtype(0), out);
}

Status tile(const Ctx& c) {
  auto x = c.dims(0);
  auto rep = constant_ints(c.in(1));
  if (!x || !rep) return c.set(0, c.dtype(0), std::nullopt);
  if (rep->size() != x->size()) return c.bad("repeats has " + std::to_string(rep->size()) + " values for rank " + std::to_string(x->size()));
  Dims out = *x;
  for (size_t i = 0; i < out.size(); ++i) {
    if ((*rep)[i] < 0) return c.bad("negative repeat");
    out[i] = out[i].is_static() ? Dim{mul_sat(out[i].value, (*rep)[i]), ""} : ((*rep)[i] == 1 ? out[i] : Dim{});
  }
  return c.set(0, c.dtype(0), out);
}

Status pad(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  std::optional<std::vector<int64_t>> pads;
  if (c.opset >= 11) pads = constant_ints(c.in(1));
  else {
    RKD_ASSIGN(auto p, c.n.attr_ints("pads", {}));
    pads = p;
  }
  if (!pads) return c.set(0, c.dtype(0), std::nullopt);
  const size_t r = x->size();
  std::vector<int64_t> axes;
  if (c.in(3)) {
    auto a = constant_ints(c.in(3));
    if (!a) return c.set(0, c.dtype(0), std::nullopt);
    for (int64_t a0 : *a) {
      RKD_ASSIGN(int64_t aa, c.axis(a0, static_cast<int64_t>(r)));
      axes.push_back(aa);
    }
  } else {
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (pads->size() != 2 * axes.size()) return c.bad("pads has " + std::to_string(pads->size()) + " values for " + std::to_string(axes.size()) + " axes");
  Dims out = *x;
  for (size_t i = 0; i < axes.size(); ++i) {
    Dim& d = out[static_cast<size_t>(axes[i])];
    if (!d.is_static()) continue;
    const int64_t pb = (*pads)[i], pe = (*pads)[i + axes.size()];
    if (pb > kHuge / 4 || pe > kHuge / 4 || pb < -kHuge / 4 || pe < -kHuge / 4) return c.bad("pads out of range");
    const int64_t v = d.value + pb + pe;
    if (v < 0) return c.bad("padding makes a dimension negative");
    d = Dim{v, ""};
  }
  return c.set(0, c.dtype(0), out);
}

Status shape_op(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return c.set(0, DType::i64, std::nullopt);
  const int64_t r = static_cast<int64_t>(x->size());
  RKD_ASSIGN(int64_t start, c.n.attr_int("start", 0));
  RKD_ASSIGN(int64_t end, c.n.attr_int("end", r));
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  return c.set(0, DType::i64, Dims{Dim{std::max<int64_t>(0, end - start), ""}});
}

Status constant_of_shape(const Ctx& c) {
  DType dt = DType::f32;
  if (auto it = c.n.attrs.find("value"); it != c.n.attrs.end()) {
    if (const Tensor* t = std::get_if<Tensor>(&it->second)) dt = t->dtype();
  }
  auto s = constant_ints(c.in(0));
  if (!s) return c.set(0, dt, std::nullopt);
  for (int64_t d : *s) {
    if (d < 0) return c.bad("negative dimension in the shape input");
  }
  return c.set(0, dt, to_dims(*s));
}

Status range(const Ctx& c) {
  const auto dt = c.dtype(0);
  auto st = c.in(0), li = c.in(1), de = c.in(2);
  if (!st || !li || !de || !st->constant || !li->constant || !de->constant) return c.set(0, dt, Dims{Dim{}});
  const double s = st->constant->get_as_double(0), l = li->constant->get_as_double(0), d = de->constant->get_as_double(0);
  if (d == 0) return c.bad("delta must not be 0");
  const double n = std::ceil((l - s) / d);
  if (!(n < 1e12)) return c.bad("too many elements");
  return c.set(0, dt, Dims{Dim{std::max<int64_t>(0, static_cast<int64_t>(n)), ""}});
}

Status reduce(const Ctx& c, int64_t axes_input_opset) {
  auto x = c.dims(0);
  if (!x) return {};
  auto axes_r = axes_of(c, 1, axes_input_opset);
  if (!axes_r.ok()) return c.set(0, c.dtype(0), std::nullopt);
  RKD_ASSIGN(int64_t keep, c.n.attr_int("keepdims", 1));
  RKD_ASSIGN(int64_t noop, c.n.attr_int("noop_with_empty_axes", 0));
  const int64_t r = static_cast<int64_t>(x->size());
  std::set<int64_t> red;
  if (*axes_r && !(*axes_r)->empty()) {
    for (int64_t a0 : **axes_r) {
      RKD_ASSIGN(int64_t a, c.axis(a0, r));
      red.insert(a);
    }
  } else if (!noop) {
    for (int64_t i = 0; i < r; ++i) red.insert(i);
  }
  Dims out;
  for (int64_t i = 0; i < r; ++i) {
    if (!red.count(i)) out.push_back((*x)[static_cast<size_t>(i)]);
    else if (keep) out.push_back(Dim{1, ""});
  }
  return c.set(0, c.dtype(0), out);
}

Status arg_reduce(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return c.set(0, DType::i64, std::nullopt);
  RKD_ASSIGN(int64_t ax0, c.n.attr_int("axis", 0));
  RKD_ASSIGN(int64_t keep, c.n.attr_int("keepdims", 1));
  RKD_ASSIGN(int64_t a, c.axis(ax0, static_cast<int64_t>(x->size())));
  Dims out;
  for (int64_t i = 0; i < static_cast<int64_t>(x->size()); ++i) {
    if (i != a) out.push_back((*x)[static_cast<size_t>(i)]);
    else if (keep) out.push_back(Dim{1, ""});
  }
  return c.set(0, DType::i64, out);
}

Status topk(const Ctx& c) {
  auto x = c.dims(0);
  auto k = constant_ints(c.in(1));
  if (!x || !k) {
    RKD_TRY(c.set(0, c.dtype(0), std::nullopt));
    return c.set(1, DType::i64, std::nullopt);
  }
  if (k->size() != 1 || (*k)[0] < 0) return c.bad("K must be one non-negative value");
  RKD_ASSIGN(int64_t ax0, c.n.attr_int("axis", -1));
  RKD_ASSIGN(int64_t a, c.axis(ax0, static_cast<int64_t>(x->size())));
  Dims out = *x;
  const Dim& d = out[static_cast<size_t>(a)];
  if (d.is_static() && (*k)[0] > d.value) {
    return c.bad("K = " + std::to_string((*k)[0]) + " exceeds the axis size " + std::to_string(d.value));
  }
  out[static_cast<size_t>(a)] = Dim{(*k)[0], ""};
  RKD_TRY(c.set(0, c.dtype(0), out));
  return c.set(1, DType::i64, out);
}

Status einsum(const Ctx& c) {
  RKD_ASSIGN(std::string eq, c.n.attr_string("equation", ""));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const auto arrow = eq.find("->");
  if (arrow == std::string::npos) return c.unsup("implicit-output equations ('" + eq + "') are not supported");
  if (eq.find("...") != std::string::npos) return c.unsup("ellipsis in equation '" + eq + "' is not supported");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), rhs = eq.substr(arrow + 2);
  size_t pos = 0;
  while (true) {
    const auto comma = lhs.find(',', pos);
    terms.push_back(lhs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (terms.size() != c.n.inputs.size()) return c.bad("equation '" + eq + "' has " + std::to_string(terms.size()) +
                                                      " operands, the node has " + std::to_string(c.n.inputs.size()));
  std::map<char, Dim> sizes;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto d = c.dims(i);
    if (!d) return c.set(0, c.dtype(0), std::nullopt);
    if (d->size() != terms[i].size()) return c.bad("operand " + std::to_string(i) + " has rank " + std::to_string(d->size()) +
                                                   ", the equation says " + std::to_string(terms[i].size()));
    for (size_t k = 0; k < terms[i].size(); ++k) {
      const char l = terms[i][k];
      auto [it, fresh] = sizes.emplace(l, (*d)[k]);
      if (!fresh && it->second.is_static() && (*d)[k].is_static() && it->second.value != (*d)[k].value &&
          (*d)[k].value != 1 && it->second.value != 1) {
        return c.bad("label '" + std::string(1, l) + "' has sizes " + std::to_string(it->second.value) + " and " +
                     std::to_string((*d)[k].value));
      }
      if (!fresh && it->second.is_static() && it->second.value == 1) it->second = (*d)[k];
    }
  }
  Dims out;
  for (char l : rhs) {
    auto it = sizes.find(l);
    if (it == sizes.end()) return c.bad("output label '" + std::string(1, l) + "' is not in any operand");
    out.push_back(it->second);
  }
  return c.set(0, c.dtype(0), out);
}

Status grid_sample(const Ctx& c) {
  auto x = c.dims(0), g = c.dims(1);
  if (!x || !g) return c.set(0, c.dtype(0), std::nullopt);
  if (x->size() != g->size() || (x->size() != 4 && x->size() != 5)) return c.bad("input and grid must both be 4-D or 5-D");
  Dims out{(*x)[0], (*x)[1]};
  for (size_t i = 1; i + 1 < g->size(); ++i) out.push_back((*g)[i]);
  return c.set(0, c.dtype(0), out);
}

Status resize(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  if (c.n.attrs.count("axes")) return c.set(0, c.dtype(0), std::nullopt);
  const size_t r = x->size();
  Dims out = *x;
  if (auto sizes = constant_ints(c.in(3)); sizes && !sizes->empty()) {
    if (sizes->size() != r) return c.bad("sizes has " + std::to_string(sizes->size()) + " values for rank " + std::to_string(r));
    for (size_t i = 0; i < r; ++i) out[i] = Dim{(*sizes)[i], ""};
    return c.set(0, c.dtype(0), out);
  }
  const Value* sv = c.in(2);
  if (!sv || !sv->constant || sv->constant->numel() == 0) return c.set(0, c.dtype(0), std::nullopt);
  if (sv->constant->numel() != static_cast<int64_t>(r)) return c.bad("scales has " + std::to_string(sv->constant->numel()) + " values for rank " + std::to_string(r));
  for (size_t i = 0; i < r; ++i) {
    const double s = sv->constant->get_as_double(static_cast<int64_t>(i));
    if (!(s > 0)) return c.bad("scales must be positive");
    if (out[i].is_static()) {
      const double o = std::floor(static_cast<double>(out[i].value) * static_cast<float>(s));
      if (!(o < 1e15)) return c.bad("scale " + std::to_string(s) + " makes dimension " + std::to_string(i) + " too large");
      out[i] = Dim{static_cast<int64_t>(o), ""};
    }
    else if (s != 1.0) out[i] = Dim{};
  }
  return c.set(0, c.dtype(0), out);
}

Status constant(const Ctx& c) {
  for (const auto& [k, a] : c.n.attrs) {
    if (const Tensor* t = std::get_if<Tensor>(&a)) return c.set(0, t->dtype(), to_dims(t->shape()));
    if (k == "value_float") return c.set(0, DType::f32, Dims{});
    if (k == "value_int") return c.set(0, DType::i64, Dims{});
    if (const auto* f = std::get_if<std::vector<float>>(&a)) return c.set(0, DType::f32, Dims{Dim{static_cast<int64_t>(f->size()), ""}});
    if (const auto* i = std::get_if<std::vector<int64_t>>(&a)) return c.set(0, DType::i64, Dims{Dim{static_cast<int64_t>(i->size()), ""}});
  }
  return c.unsup("Constant without a tensor, float(s) or int(s) value");
}

Status layer_norm(const Ctx& c) {
  auto x = c.dims(0);
  RKD_TRY(c.set(0, c.dtype(0), x));
  if (!x) return {};
  RKD_ASSIGN(int64_t ax0, c.n.attr_int("axis", -1));
  RKD_ASSIGN(int64_t a, c.axis(ax0, static_cast<int64_t>(x->size())));
  Dims stat = *x;
  for (size_t i = static_cast<size_t>(a); i < stat.size(); ++i) stat[i] = Dim{1, ""};
  RKD_TRY(c.set(1, DType::f32, stat));
  return c.set(2, DType::f32, stat);
}

Status cast(const Ctx& c) {
  RKD_ASSIGN(int64_t to, c.n.attr_int("to", 0));
  auto dt = dtype_from_onnx_code(to);
  if (!dt) return c.unsup("cast to ONNX data type " + std::to_string(to) + " is not supported");
  return c.set(0, dt, c.dims(0));
}

Status where(const Ctx& c) {
  std::optional<Dims> d = c.dims(0);
  for (size_t i = 1; i < 3 && d; ++i) {
    auto di = c.dims(i);
    if (!di) {
      d.reset();
      break;
    }
    RKD_ASSIGN(d, broadcast(c, *d, *di));
  }
  return c.set(0, c.dtype(1), d);
}

const std::map<std::string, Fn>& table() {
  static const std::map<std::string, Fn> t = [] {
    std::map<std::string, Fn> m;
    for (const char* op : {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf", "Gelu", "Sqrt",
                           "Exp", "Log", "Abs", "Neg", "Reciprocal", "Not", "Clip", "Identity", "Softmax",
                           "LogSoftmax", "CumSum", "BatchNormalization", "Floor", "Ceil", "Round", "Sign", "Sin",
                           "Cos", "Softplus", "Elu", "Selu", "Mish", "ScatterND", "ScatterElements", "Dropout",
                           "InstanceNormalization"}) {
      m[op] = [](const Ctx& c) -> Status {
        RKD_TRY(same_as_input0(c));
        if (c.n.op_type == "Dropout") return c.set(1, DType::b8, c.dims(0));
        return Status{};
      };
    }
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max", "Sum", "Mean", "Mod", "PRelu"}) {
      m[op] = [](const Ctx& c) { return broadcast_op(c, c.dtype(0)); };
    }
    for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}) {
      m[op] = [](const Ctx& c) { return broadcast_op(c, DType::b8); };
    }
    for (const char* op : {"IsNaN", "IsInf"}) m[op] = [](const Ctx& c) { return c.set(0, DType::b8, c.dims(0)); };
    m["Where"] = where;
    m["Cast"] = cast;
    m["Conv"] = [](const Ctx& c) { return window_op(c, true); };
    m["MaxPool"] = [](const Ctx& c) { return window_op(c, false); };
    m["AveragePool"] = [](const Ctx& c) { return window_op(c, false); };
    m["ConvTranspose"] = conv_transpose;
    m["GlobalAveragePool"] = global_pool;
    m["GlobalMaxPool"] = global_pool;
    m["MatMul"] = matmul;
    m["Gemm"] = gemm;
    m["Concat"] = concat;
    m["Split"] = split;
    m["Slice"] = slice;
    m["Gather"] = gather;
    m["GatherElements"] = [](const Ctx& c) { return c.set(0, c.dtype(0), c.dims(1)); };
    m["Reshape"] = reshape;
    m["Flatten"] = flatten;
    m["Transpose"] = transpose;
    m["Squeeze"] = squeeze;
    m["Unsqueeze"] = unsqueeze;
    m["Expand"] = expand;
    m["Tile"] = tile;
    m["Pad"] = pad;
    m["Shape"] = shape_op;
    m["Size"] = [](const Ctx& c) { return c.set(0, DType::i64, Dims{}); };
    m["ConstantOfShape"] = constant_of_shape;
    m["Range"] = range;
    m["Constant"] = constant;
    m["ReduceSum"] = [](const Ctx& c) { return reduce(c, 13); };
    for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare"}) {
      m[op] = [](const Ctx& c) { return reduce(c, 18); };
    }
    m["ArgMax"] = arg_reduce;
    m["ArgMin"] = arg_reduce;
    m["TopK"] = topk;
    m["Einsum"] = einsum;
    m["GridSample"] = grid_sample;
    m["Resize"] = resize;
    m["LayerNormalization"] = layer_norm;
    return m;
  }();
  return t;
}

}  // namespace

bool has_shape_function(const std::string& op_type) { return table().count(op_type) > 0; }

Status infer_node(Node& n, int64_t opset) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return {};  // custom ops infer their own shapes at creation
  auto it = table().find(n.op_type);
  if (it == table().end()) return {};
  return it->second(Ctx{n, opset});
}

Pass shape_inference_pass() {
  return Pass{"shape-inference", [](Graph& g) -> Status {
                for (const auto& n : g.nodes()) RKD_TRY(infer_node(*n, g.opset));
                return {};
              }};
}

}  // namespace rkd::ir
