#include "ir/passes/shape_inference.h"
#include "ir/passes/shape_inference_ctx.h"
#include "ir/op_info.h"

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

namespace detail {

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
        return c.bad("input " + std::to_string(i) + " " + dims_to_string(*d) + " does not match " + dims_to_string(*out) +
                     " outside the concat axis");
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
  if (static_cast<int64_t>(sizes.size()) != parts)
    return c.bad("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(parts) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return c.bad("negative split size");
    total += s;
  }
  if (d.is_static() && total != d.value) return c.bad("split sizes sum to " + std::to_string(total) + ", dimension is " + std::to_string(d.value));
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

// GatherND: indices.shape[:-1] + data.shape[batch_dims + q:].
Status gather_nd(const Ctx& c) {
  auto x = c.dims(0), idx = c.dims(1);
  if (!x || !idx) return c.set(0, c.dtype(0), std::nullopt);
  RKD_ASSIGN(int64_t bd, c.n.attr_int("batch_dims", 0));
  if (idx->empty() || !idx->back().is_static()) return c.set(0, c.dtype(0), std::nullopt);
  const int64_t q = idx->back().value;
  if (bd < 0 || q < 1 || bd + q > static_cast<int64_t>(x->size()) || bd >= static_cast<int64_t>(idx->size())) {
    return c.bad("batch_dims " + std::to_string(bd) + " and an index depth of " + std::to_string(q) + " do not fit data of rank " +
                 std::to_string(x->size()));
  }
  Dims out(idx->begin(), idx->end() - 1);
  out.insert(out.end(), x->begin() + bd + q, x->end());
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
    return c.bad("cannot reshape " + dims_to_string(in) + " (" + std::to_string(total) + " elements) to " + dims_to_string(out) + " (" +
                 std::to_string(known) + " elements)");
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

// [N, C, H, W] -> [N, C / b^2, H b, W b].
Status depth_to_space(const Ctx& c) {
  auto x = c.dims(0);
  if (!x) return {};
  if (x->size() != 4) return c.bad("the input must be [N, C, H, W]");
  RKD_ASSIGN(int64_t b, c.n.attr_int("blocksize", 0));
  RKD_ASSIGN(std::string mode, c.n.attr_string("mode", "DCR"));
  if (b < 1) return c.bad("blocksize must be positive");
  if (mode != "DCR" && mode != "CRD") return c.bad("mode must be DCR or CRD, not " + mode);
  Dims out = *x;
  const Dim& ch = (*x)[1];
  if (ch.is_static()) {
    if (ch.value % (b * b) != 0) return c.bad("channels " + std::to_string(ch.value) + " are not a multiple of blocksize^2");
    out[1] = Dim{ch.value / (b * b), ""};
  } else {
    out[1] = Dim{};
  }
  for (size_t i : {size_t{2}, size_t{3}}) out[i] = (*x)[i].is_static() ? Dim{(*x)[i].value * b, ""} : Dim{};
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
  if (pads->size() != 2 * axes.size())
    return c.bad("pads has " + std::to_string(pads->size()) + " values for " + std::to_string(axes.size()) + " axes");
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

Status same_shape(const Ctx& c) { return same_as_input0(c); }
Status dropout(const Ctx& c) {
  RKD_TRY(same_as_input0(c));
  return c.set(1, DType::b8, c.dims(0));
}
Status broadcast_same_type(const Ctx& c) { return broadcast_op(c, c.dtype(0)); }
Status broadcast_to_bool(const Ctx& c) { return broadcast_op(c, DType::b8); }
Status same_shape_bool(const Ctx& c) { return c.set(0, DType::b8, c.dims(0)); }
Status gather_elements(const Ctx& c) { return c.set(0, c.dtype(0), c.dims(1)); }
Status size_op(const Ctx& c) { return c.set(0, DType::i64, Dims{}); }
Status reduce_sum(const Ctx& c) { return reduce(c, 13); }
Status reduce_opset18(const Ctx& c) { return reduce(c, 18); }

}  // namespace detail

bool has_shape_function(const std::string& op_type) {
  const OpInfo* op = find_op("", op_type);
  return op && op->shape;
}

Status infer_node(Node& n, int64_t opset) {
  const OpInfo* op = find_op(n.domain, n.op_type);
  if (!op || !op->shape) return {};  // unknown ops, and ops whose creator sets their shapes
  return op->shape(detail::Ctx{n, opset});
}

namespace {

std::string type_and_shape(const std::optional<DType>& t, const std::optional<Dims>& d) {
  return (t ? std::string(dtype_name(*t)) : std::string("no type")) + " " + (d ? dims_to_string(*d) : std::string("[unknown rank]"));
}

bool all_static(const std::optional<Dims>& d) {
  if (!d) return false;
  for (const Dim& x : *d)
    if (!x.is_static()) return false;
  return true;
}

bool same_static(const Dims& a, const Dims& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].value != b[i].value) return false;
  return true;
}

}  // namespace

Status verify_declared_shapes(Graph& g) {
  for (const Value* v : g.inputs) {
    if (!v->dtype || !all_static(v->shape)) {
      return invalid("graph input '" + v->name + "': needs a type and a static shape, declared " + type_and_shape(v->dtype, v->shape));
    }
  }
  for (const auto& v : g.values()) {
    if (!v->constant) continue;
    const Dims t = to_dims(v->constant->shape());
    if (!v->dtype || *v->dtype != v->constant->dtype() || !v->shape || !same_static(*v->shape, t)) {
      return invalid("constant '" + v->name + "': declared " + type_and_shape(v->dtype, v->shape) + ", its tensor is " +
                     type_and_shape(v->constant->dtype(), t));
    }
  }
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    const OpInfo* op = find_op(n.domain, n.op_type);
    if (!op || !op->shape) return invalid(n.describe() + ": no shape rule for this operator, so its outputs cannot be checked");
    std::vector<std::pair<std::optional<DType>, std::optional<Dims>>> declared;
    for (Value* o : n.outputs) {
      declared.emplace_back(o ? o->dtype : std::nullopt, o ? o->shape : std::nullopt);
      if (o) o->dtype.reset(), o->shape.reset();
    }
    RKD_TRY(infer_node(n, g.opset));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value* o = n.outputs[i];
      if (!o) continue;
      const auto& [dt, dims] = declared[i];
      if (!o->dtype || !all_static(o->shape)) {
        return invalid(n.describe() + ": output '" + o->name + "' is declared " + type_and_shape(dt, dims) +
                       " but its type and shape do not follow from the node's inputs and attributes (derived " + type_and_shape(o->dtype, o->shape) +
                       ")");
      }
      if (!dt || *dt != *o->dtype || !dims || !same_static(*dims, *o->shape)) {
        return invalid(n.describe() + ": output '" + o->name + "' is declared " + type_and_shape(dt, dims) + ", its inputs and attributes give " +
                       type_and_shape(o->dtype, o->shape));
      }
    }
  }
  return {};
}

Pass shape_inference_pass() {
  return Pass{"shape-inference", [](Graph& g) -> Status {
                for (const auto& n : g.nodes()) RKD_TRY(infer_node(*n, g.opset));
                return {};
              }};
}

}  // namespace rkd::ir
