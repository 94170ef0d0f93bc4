// Shape functions of convolution, pooling, matrix products, Resize, GridSample, Einsum and
// LayerNormalization (see shape_inference.h for the contract).
#include <algorithm>
#include <cmath>
#include <map>

#include "ir/passes/shape_inference_ctx.h"

namespace rkd::ir {

Result<EinsumEquation> parse_einsum(const std::string& equation) {
  std::string eq;
  for (char ch : equation) {
    if (ch != ' ') eq += ch;
  }
  const auto arrow = eq.find("->");
  if (arrow == std::string::npos) return unsupported("Einsum: implicit-output equation '" + equation + "'");
  if (eq.find("...") != std::string::npos) return unsupported("Einsum: ellipsis in equation '" + equation + "'");
  EinsumEquation e;
  const std::string lhs = eq.substr(0, arrow);
  e.output = eq.substr(arrow + 2);
  size_t pos = 0;
  while (true) {
    const auto comma = lhs.find(',', pos);
    e.operands.push_back(lhs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return e;
}

Status resolve_auto_pad(const std::string& auto_pad, const WindowGeometry& g, std::vector<int64_t>& pads) {
  const size_t s = g.in.size();
  if (g.kernel.size() != s || g.strides.size() != s || g.dilations.size() != s || pads.size() != 2 * s ||
      (!g.output_padding.empty() && g.output_padding.size() != s)) {
    return invalid("auto_pad: kernel_shape/strides/dilations/pads do not match " + std::to_string(s) + " spatial dims");
  }
  if (auto_pad == "NOTSET") return {};
  if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
    return {};
  }
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return invalid("unknown auto_pad '" + auto_pad + "'");
  for (size_t i = 0; i < s; ++i) {
    if (g.strides[i] < 1) return invalid("auto_pad: strides must be positive");
    const int64_t k = (g.kernel[i] - 1) * g.dilations[i] + 1, op = g.output_padding.empty() ? 0 : g.output_padding[i];
    const int64_t total = g.transposed ? std::max<int64_t>(0, g.strides[i] * (g.in[i] - 1) + op + k - g.in[i] * g.strides[i])
                                       : std::max<int64_t>(0, ((g.in[i] + g.strides[i] - 1) / g.strides[i] - 1) * g.strides[i] + k - g.in[i]);
    const int64_t small = total / 2, big = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : big;
    pads[i + s] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return {};
}

}  // namespace rkd::ir

namespace rkd::ir::detail {

namespace {

// Output spatial size of a convolution / pooling window.
Result<int64_t> window_out(const Ctx& c, int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pb, int64_t pe, bool ceil_mode) {
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
  if (w.kernel.size() != spatial || w.strides.size() != spatial || w.dilations.size() != spatial || w.pads.size() != 2 * spatial) {
    return c.bad("kernel_shape/strides/dilations/pads do not match " + std::to_string(spatial) + " spatial dims");
  }
  constexpr int64_t kMaxWindow = int64_t{1} << 31;
  for (size_t i = 0; i < spatial; ++i) {
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.dilations[i] < 1) {
      return c.bad("kernel_shape, strides and dilations must be positive");
    }
    if (w.kernel[i] > kMaxWindow || w.strides[i] > kMaxWindow || w.dilations[i] > kMaxWindow || w.pads[i] > kMaxWindow ||
        w.pads[i + spatial] > kMaxWindow) {
      return c.bad("kernel_shape, strides, dilations or pads beyond 2^31");
    }
    if (w.pads[i] < 0 || w.pads[i + spatial] < 0) return c.bad("pads must be non-negative");
  }
  return w;
}

// Resolves auto_pad into explicit pads (resolve_auto_pad, shape_inference.h).
Status resolve_auto_pad(const Ctx& c, WindowAttrs& w, const Shape& in_spatial) {
  Status st = ir::resolve_auto_pad(w.auto_pad, WindowGeometry{in_spatial, w.kernel, w.strides, w.dilations, {}, false}, w.pads);
  return st.ok() ? st : c.bad(st.error().message);
}

// w_index: the weight's input (Conv 1, QLinearConv 3); out_dtype: the output's type;
// in_cl / out_cl: the input / output is [N, spatial..., C] (QLinearConv's
// rkd_input_channels_last / rkd_output_channels_last).
Status window_op(const Ctx& c, bool conv, size_t w_index = 1, std::optional<DType> out_dtype = std::nullopt, bool in_cl = false,
                 bool out_cl = false) {
  auto x = c.dims(0);
  if (!x) return {};
  if (in_cl && x->size() >= 3) x->insert(x->begin() + 1, x->back()), x->pop_back();  // as [N, C, spatial...]
  if (x->size() < 3) return c.bad("input must have rank >= 3 (N, C, spatial...), got " + dims_to_string(*x));
  const size_t spatial = x->size() - 2;
  std::vector<int64_t> kernel;
  Dim out_c = (*x)[1];
  if (conv) {
    auto w = c.dims(w_index);
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
      return c.bad("input channels " + std::to_string((*x)[1].value) + " != weight channels " + std::to_string((*w)[1].value) + " x group " +
                   std::to_string(group));
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
    RKD_ASSIGN(int64_t o, window_out(c, in_spatial[i], w.kernel[i], w.strides[i], w.dilations[i], w.pads[i], w.pads[i + spatial], w.ceil_mode));
    out.push_back(Dim{o, ""});
  }
  if (out_cl) out.push_back(out[1]), out.erase(out.begin() + 1);
  RKD_TRY(c.set(0, out_dtype ? out_dtype : c.dtype(0), out));
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

Status matmul(const Ctx& c, size_t b_index = 1, std::optional<DType> out_dtype = std::nullopt) {
  auto a = c.dims(0), b = c.dims(b_index);
  if (!a || !b) return c.set(0, out_dtype ? out_dtype : c.dtype(0), std::nullopt);
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
  return c.set(0, out_dtype ? out_dtype : c.dtype(0), out);
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

Status einsum(const Ctx& c) {
  RKD_ASSIGN(std::string eq, c.n.attr_string("equation", ""));
  auto parsed = parse_einsum(eq);
  if (!parsed.ok()) return parsed.error().with_context(c.n.describe());
  const std::vector<std::string>& terms = parsed->operands;
  const std::string& rhs = parsed->output;
  if (terms.size() != c.n.inputs.size())
    return c.bad("equation '" + eq + "' has " + std::to_string(terms.size()) + " operands, the node has " + std::to_string(c.n.inputs.size()));
  std::map<char, Dim> sizes;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto d = c.dims(i);
    if (!d) return c.set(0, c.dtype(0), std::nullopt);
    if (d->size() != terms[i].size())
      return c.bad("operand " + std::to_string(i) + " has rank " + std::to_string(d->size()) + ", the equation says " +
                   std::to_string(terms[i].size()));
    for (size_t k = 0; k < terms[i].size(); ++k) {
      const char l = terms[i][k];
      auto [it, fresh] = sizes.emplace(l, (*d)[k]);
      if (!fresh && it->second.is_static() && (*d)[k].is_static() && it->second.value != (*d)[k].value && (*d)[k].value != 1 &&
          it->second.value != 1) {
        return c.bad("label '" + std::string(1, l) + "' has sizes " + std::to_string(it->second.value) + " and " + std::to_string((*d)[k].value));
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
  if (sv->constant->numel() != static_cast<int64_t>(r))
    return c.bad("scales has " + std::to_string(sv->constant->numel()) + " values for rank " + std::to_string(r));
  for (size_t i = 0; i < r; ++i) {
    const double s = sv->constant->get_as_double(static_cast<int64_t>(i));
    if (!(s > 0)) return c.bad("scales must be positive");
    if (out[i].is_static()) {
      const double o = std::floor(static_cast<double>(out[i].value) * static_cast<float>(s));
      if (!(o < 1e15)) return c.bad("scale " + std::to_string(s) + " makes dimension " + std::to_string(i) + " too large");
      out[i] = Dim{static_cast<int64_t>(o), ""};
    } else if (s != 1.0) out[i] = Dim{};
  }
  return c.set(0, c.dtype(0), out);
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

}  // namespace

Status conv(const Ctx& c) { return window_op(c, true); }
Status pool(const Ctx& c) { return window_op(c, false); }
Status conv_transpose_op(const Ctx& c) { return conv_transpose(c); }
Status global_pool_op(const Ctx& c) { return global_pool(c); }
Status matmul_op(const Ctx& c) { return matmul(c); }
Status gemm_op(const Ctx& c) { return gemm(c); }
Status einsum_op(const Ctx& c) { return einsum(c); }
Status grid_sample_op(const Ctx& c) { return grid_sample(c); }
Status resize_op(const Ctx& c) { return resize(c); }
Status layer_norm_op(const Ctx& c) { return layer_norm(c); }
// Quantized forms: QLinearConv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B) and
// QLinearMatMul (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp); output type = y_zp's.
Status qlinear_conv(const Ctx& c) {
  RKD_ASSIGN(int64_t in_cl, c.n.attr_int("rkd_input_channels_last", 0));
  RKD_ASSIGN(int64_t out_cl, c.n.attr_int("rkd_output_channels_last", 0));
  return window_op(c, true, 3, c.dtype(7), in_cl != 0, out_cl != 0);
}
Status qlinear_matmul(const Ctx& c) { return matmul(c, 3, c.dtype(7)); }
Status quantize_linear(const Ctx& c) { return c.set(0, c.in(2) ? c.dtype(2) : std::optional<DType>(DType::u8), c.dims(0)); }
Status dequantize_linear(const Ctx& c) { return c.set(0, DType::f32, c.dims(0)); }

}  // namespace rkd::ir::detail
