#include "runtime/op_registry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "ir/shape_inference.h"
#include "kernels/grid_sample.h"
#include "kernels/tensor_ops.h"
#include "runtime/op_registry_detail.h"

namespace rkd::runtime {

namespace detail {

int norm_axis(int64_t a, int rank) { return static_cast<int>(a < 0 ? a + rank : a); }

int rank_of(const Node& n, size_t input) {
  const ir::Value* v = input < n.inputs.size() ? n.inputs[input] : nullptr;
  return v && v->shape ? static_cast<int>(v->shape->size()) : 0;
}

Result<int> checked_axis(const Node& n, int64_t a, int rank) {
  if (a < -rank || a >= rank) {
    return invalid(n.describe() + ": axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  }
  return norm_axis(a, rank);
}

Result<ops::ConvParams> conv_params(const Node& n, const Shape& x, const Shape& w, bool transposed) {
  const size_t sp = x.size() - 2;
  ops::ConvParams p;
  RKD_ASSIGN(p.strides, n.attr_ints("strides", std::vector<int64_t>(sp, 1)));
  RKD_ASSIGN(p.dilations, n.attr_ints("dilations", std::vector<int64_t>(sp, 1)));
  RKD_ASSIGN(p.pads, n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0)));
  RKD_ASSIGN(p.group, n.attr_int("group", 1));
  RKD_ASSIGN(p.output_padding, n.attr_ints("output_padding", std::vector<int64_t>(sp, 0)));
  RKD_ASSIGN(std::string auto_pad, n.attr_string("auto_pad", "NOTSET"));
  if (p.strides.size() != sp || p.dilations.size() != sp || p.pads.size() != 2 * sp) {
    return invalid(n.describe() + ": strides/dilations/pads do not match the spatial rank");
  }
  ir::WindowGeometry g{Shape(x.begin() + 2, x.end()), Shape(w.begin() + 2, w.end()), p.strides, p.dilations, p.output_padding, transposed};
  if (Status st = ir::resolve_auto_pad(auto_pad, g, p.pads); !st.ok()) return st.error().with_context(n.describe());
  return p;
}

}  // namespace detail

namespace {

using namespace detail;  // NOLINT: the helpers shared with op_registry_int8.cc

std::vector<int64_t> ints_of(const Tensor* t) {
  std::vector<int64_t> v;
  if (!t) return v;
  const Tensor d = t->contiguous();
  for (int64_t i = 0; i < d.numel(); ++i) {
    v.push_back(d.dtype() == DType::i32 ? d.data<int32_t>()[i] : d.data<int64_t>()[i]);
  }
  return v;
}

Kernel simple_unary(ops::Unary op, ops::UnaryParams p = {}) {
  return [op, p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::unary(op, *in[0], out[0], p); };
}

Factory unary_factory(ops::Unary op) {
  return [op](const Node&, int64_t) -> Result<Kernel> { return simple_unary(op); };
}

Factory binary_factory(ops::Binary op) {
  return [op](const Node& n, int64_t) -> Result<Kernel> {
    const std::string what = n.describe();
    return Kernel([op, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      // Variadic Min/Max/Sum fold pairwise into the output.
      if (in.size() == 1) {
        ops::copy_into(*in[0], out[0]);
        return {};
      }
      if (op == ops::Binary::pow && in[0]->dtype() != in[1]->dtype()) {
        // Pow allows an exponent of another type: computed in float32, cast to the base's type.
        Tensor a = Tensor::empty(DType::f32, in[0]->shape()), b = Tensor::empty(DType::f32, in[1]->shape());
        RKD_TRY(ops::cast(*in[0], a));
        RKD_TRY(ops::cast(*in[1], b));
        Tensor f = Tensor::empty(DType::f32, out[0].shape());
        RKD_TRY(ops::binary(op, a, b, f, what));
        return ops::cast(f, out[0]);
      }
      RKD_TRY(ops::binary(op, *in[0], *in[1], out[0], what));
      for (size_t i = 2; i < in.size(); ++i) {
        Tensor acc = out[0].clone();
        RKD_TRY(ops::binary(op, acc, *in[i], out[0], what));
      }
      return {};
    });
  };
}

Result<Kernel> copy_kernel() {
  return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    ops::copy_into(in[0]->with_layout(out[0].shape(), contiguous_strides(out[0].shape())), out[0]);
    return {};
  });
}

Result<Kernel> conv_factory(const Node& n, bool transposed) {
  const auto xs = ir::static_shape(n.inputs[0]);
  const auto ws = ir::static_shape(n.inputs[1]);
  const auto os = ir::static_shape(n.outputs[0]);
  if (!xs || !ws || !os) return unsupported(n.describe() + ": shapes must be static");
  if (!n.inputs[1]->constant) return unsupported(n.describe() + ": weights must be constant");
  const ir::Value* b = n.inputs.size() > 2 ? n.inputs[2] : nullptr;
  if (b && !b->constant) return unsupported(n.describe() + ": bias must be constant");
  RKD_ASSIGN(ops::ConvParams p, conv_params(n, *xs, *ws, transposed));
  RKD_ASSIGN(std::string act, n.attr_string("rkd_activation", ""));
  auto made = ops::make_conv(*xs, *n.inputs[1]->constant, b ? &*b->constant : nullptr, p, transposed, *os, act);
  if (!made.ok()) return made.error().with_context(n.describe());
  std::shared_ptr<ops::ConvPrimitive> prim = std::move(made).value();
  return Kernel([prim](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return prim->run(*in[0], out[0]); });
}

Result<ops::PoolParams> pool_params(const Node& n, const Shape& x) {
  const size_t sp = x.size() - 2;
  ops::PoolParams p;
  RKD_ASSIGN(p.kernel, n.attr_ints("kernel_shape", {}));
  RKD_ASSIGN(p.strides, n.attr_ints("strides", std::vector<int64_t>(sp, 1)));
  RKD_ASSIGN(p.dilations, n.attr_ints("dilations", std::vector<int64_t>(sp, 1)));
  RKD_ASSIGN(p.pads, n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0)));
  RKD_ASSIGN(int64_t cip, n.attr_int("count_include_pad", 0));
  RKD_ASSIGN(std::string auto_pad, n.attr_string("auto_pad", "NOTSET"));
  RKD_ASSIGN(int64_t storage, n.attr_int("storage_order", 0));
  if (storage != 0) return unsupported(n.describe() + ": storage_order=1");
  p.count_include_pad = cip != 0;
  if (p.kernel.size() != sp) return invalid(n.describe() + ": kernel_shape must have one value per spatial dim");
  if (p.strides.size() != sp || p.dilations.size() != sp || p.pads.size() != 2 * sp) {
    return invalid(n.describe() + ": strides/dilations/pads do not match the spatial rank");
  }
  ir::WindowGeometry g{Shape(x.begin() + 2, x.end()), p.kernel, p.strides, p.dilations, {}, false};
  if (Status st = ir::resolve_auto_pad(auto_pad, g, p.pads); !st.ok()) return st.error().with_context(n.describe());
  return p;
}

Result<Kernel> resize_factory(const Node& n, int64_t opset) {
  ops::ResizeParams p;
  RKD_ASSIGN(std::string mode, n.attr_string("mode", "nearest"));
  if (mode == "nearest") p.mode = ops::ResizeParams::Mode::nearest;
  else if (mode == "linear") p.mode = ops::ResizeParams::Mode::linear;
  else if (mode == "cubic") p.mode = ops::ResizeParams::Mode::cubic;
  else return invalid(n.describe() + ": unknown mode '" + mode + "'");
  RKD_ASSIGN(p.coordinate_transformation, n.attr_string("coordinate_transformation_mode", "half_pixel"));
  RKD_ASSIGN(p.nearest_mode, n.attr_string("nearest_mode", "round_prefer_floor"));
  RKD_ASSIGN(p.cubic_coeff_a, n.attr_float("cubic_coeff_a", -0.75f));
  RKD_ASSIGN(int64_t excl, n.attr_int("exclude_outside", 0));
  p.exclude_outside = excl != 0;
  RKD_ASSIGN(p.extrapolation_value, n.attr_float("extrapolation_value", 0.f));
  RKD_ASSIGN(int64_t antialias, n.attr_int("antialias", 0));
  RKD_ASSIGN(std::string keep, n.attr_string("keep_aspect_ratio_policy", "stretch"));
  if (antialias) return unsupported(n.describe() + ": antialias=1");
  if (n.attrs.count("axes")) return unsupported(n.describe() + ": the axes attribute");
  if (keep != "stretch") return unsupported(n.describe() + ": keep_aspect_ratio_policy=" + keep);
  static const char* kModes[] = {"half_pixel",    "tf_half_pixel_for_nn", "half_pixel_symmetric", "pytorch_half_pixel",
                                 "align_corners", "asymmetric",           "tf_crop_and_resize"};
  if (std::find(std::begin(kModes), std::end(kModes), p.coordinate_transformation) == std::end(kModes)) {
    return invalid(n.describe() + ": unknown coordinate_transformation_mode '" + p.coordinate_transformation + "'");
  }
  const size_t scales_at = opset >= 11 ? 2 : 1;
  return Kernel([p, scales_at](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) mutable -> Status {
    const Shape& xs = in[0]->shape();
    p.scales.assign(xs.size(), 1.f);
    const Tensor* sizes = in.size() > 3 ? in[3] : nullptr;
    const Tensor* scales = in.size() > scales_at ? in[scales_at] : nullptr;
    if (sizes && sizes->numel() > 0) {
      for (size_t i = 0; i < xs.size(); ++i) {
        p.scales[i] = static_cast<float>(out[0].shape()[i]) / static_cast<float>(xs[i]);
      }
    } else if (scales && scales->numel() > 0) {
      for (size_t i = 0; i < xs.size(); ++i) p.scales[i] = static_cast<float>(scales->get_as_double(static_cast<int64_t>(i)));
    }
    if (p.coordinate_transformation == "tf_crop_and_resize") {
      p.roi.clear();
      if (in.size() > 1 && in[1]) {
        for (int64_t i = 0; i < in[1]->numel(); ++i) p.roi.push_back(static_cast<float>(in[1]->get_as_double(i)));
      }
    }
    return ops::resize(*in[0], p, out[0]);
  });
}

Result<Kernel> slice_factory(const Node& n, int64_t opset) {
  std::vector<int64_t> a_starts, a_ends, a_axes;
  const bool from_attrs = opset < 10;
  if (from_attrs) {
    RKD_ASSIGN(a_starts, n.attr_ints("starts", {}));
    RKD_ASSIGN(a_ends, n.attr_ints("ends", {}));
    RKD_ASSIGN(a_axes, n.attr_ints("axes", {}));
  }
  return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    const Tensor& x = *in[0];
    const int r = x.rank();
    std::vector<int64_t> starts = from_attrs ? a_starts : ints_of(in[1]);
    std::vector<int64_t> ends = from_attrs ? a_ends : ints_of(in[2]);
    std::vector<int64_t> axes = from_attrs ? a_axes : ints_of(in.size() > 3 ? in[3] : nullptr);
    std::vector<int64_t> steps = ints_of(!from_attrs && in.size() > 4 ? in[4] : nullptr);
    std::vector<int64_t> start(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1);
    for (size_t i = 0; i < starts.size(); ++i) {
      const int a = norm_axis(axes.empty() ? static_cast<int64_t>(i) : axes[i], r);
      const int64_t dim = x.shape()[static_cast<size_t>(a)];
      const int64_t st = steps.empty() ? 1 : steps[i];
      int64_t s = starts[i];
      if (s < 0) s += dim;
      s = st > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
      start[static_cast<size_t>(a)] = s;
      step[static_cast<size_t>(a)] = st;
    }
    ops::slice(x, start, step, out[0]);
    return {};
  });
}

Result<Kernel> reduce_factory(const Node& n, int64_t opset, ops::Reduce op) {
  const bool axes_input = n.op_type == "ReduceSum" ? opset >= 13 : opset >= 18;
  RKD_ASSIGN(auto attr_axes, n.attr_ints("axes", {}));
  RKD_ASSIGN(int64_t noop, n.attr_int("noop_with_empty_axes", 0));
  return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    const int r = in[0]->rank();
    std::vector<int64_t> axes = axes_input ? ints_of(in.size() > 1 ? in[1] : nullptr) : attr_axes;
    std::vector<bool> red(static_cast<size_t>(r), axes.empty() && !noop);
    for (int64_t a : axes) red[static_cast<size_t>(norm_axis(a, r))] = true;
    return ops::reduce(op, *in[0], red, out[0]);
  });
}

Result<Kernel> grid_sample_factory(const Node& n, int64_t) {
  GridSampleOptions o;
  RKD_ASSIGN(std::string mode, n.attr_string("mode", "bilinear"));
  RKD_ASSIGN(std::string padding, n.attr_string("padding_mode", "zeros"));
  RKD_ASSIGN(int64_t ac, n.attr_int("align_corners", 0));
  // GridSample-16 says bilinear/nearest/bicubic, -20 linear/nearest/cubic.
  if (mode == "bilinear" || mode == "linear") o.mode = GridSampleMode::bilinear;
  else if (mode == "nearest") o.mode = GridSampleMode::nearest;
  else if (mode == "bicubic" || mode == "cubic") o.mode = GridSampleMode::bicubic;
  else return invalid(n.describe() + ": unknown mode '" + mode + "'");
  if (padding == "zeros") o.padding = GridSamplePadding::zeros;
  else if (padding == "border") o.padding = GridSamplePadding::border;
  else if (padding == "reflection") o.padding = GridSamplePadding::reflection;
  else return invalid(n.describe() + ": unknown padding_mode '" + padding + "'");
  o.align_corners = ac != 0;
  o.convention = GridSampleConvention::onnx;
  return Kernel([o](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    RKD_ASSIGN(Tensor y, grid_sample(*in[0], *in[1], o));
    ops::copy_into(y, out[0]);
    return {};
  });
}

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> m = [] {
    std::map<std::string, Factory> r;
    using U = ops::Unary;
    using B = ops::Binary;
    const std::pair<const char*, U> unary[] = {{"Relu", U::relu},
                                               {"Sigmoid", U::sigmoid},
                                               {"Tanh", U::tanh},
                                               {"Erf", U::erf},
                                               {"Sqrt", U::sqrt},
                                               {"Exp", U::exp},
                                               {"Log", U::log},
                                               {"Abs", U::abs},
                                               {"Neg", U::neg},
                                               {"Reciprocal", U::reciprocal},
                                               {"Floor", U::floor},
                                               {"Ceil", U::ceil},
                                               {"Round", U::round},
                                               {"Sign", U::sign},
                                               {"Sin", U::sin},
                                               {"Cos", U::cos},
                                               {"Softplus", U::softplus},
                                               {"Not", U::logical_not},
                                               {"HardSwish", U::hard_swish}};
    for (const auto& [name, op] : unary) r[name] = unary_factory(op);
    const std::pair<const char*, B> binary[] = {{"Add", B::add},
                                                {"Sub", B::sub},
                                                {"Mul", B::mul},
                                                {"Div", B::div},
                                                {"Pow", B::pow},
                                                {"Min", B::min},
                                                {"Max", B::max},
                                                {"Sum", B::add},
                                                {"PRelu", B::prelu},
                                                {"Equal", B::equal},
                                                {"Less", B::less},
                                                {"Greater", B::greater},
                                                {"LessOrEqual", B::less_equal},
                                                {"GreaterOrEqual", B::greater_equal},
                                                {"And", B::logical_and},
                                                {"Or", B::logical_or},
                                                {"Xor", B::logical_xor}};
    for (const auto& [name, op] : binary) r[name] = binary_factory(op);
    r["Mod"] = [](const Node& n, int64_t o) -> Result<Kernel> {
      RKD_ASSIGN(int64_t f, n.attr_int("fmod", 0));
      return binary_factory(f ? B::fmod : B::mod)(n, o);
    };
    r["Mean"] = [](const Node& n, int64_t) -> Result<Kernel> {
      const std::string what = n.describe();
      return Kernel([what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::copy_into(*in[0], out[0]);
        for (size_t i = 1; i < in.size(); ++i) {
          Tensor acc = out[0].clone();
          RKD_TRY(ops::binary(B::add, acc, *in[i], out[0], what));
        }
        float* p = out[0].data<float>();
        for (int64_t i = 0; i < out[0].numel(); ++i) p[i] /= static_cast<float>(in.size());
        return {};
      });
    };
    r["LeakyRelu"] = [](const Node& n, int64_t) -> Result<Kernel> {
      ops::UnaryParams p;
      RKD_ASSIGN(p.alpha, n.attr_float("alpha", 0.01f));
      return simple_unary(U::leaky_relu, p);
    };
    r["Elu"] = [](const Node& n, int64_t) -> Result<Kernel> {
      ops::UnaryParams p;
      RKD_ASSIGN(p.alpha, n.attr_float("alpha", 1.f));
      return simple_unary(U::elu, p);
    };
    r["Selu"] = [](const Node& n, int64_t) -> Result<Kernel> {
      ops::UnaryParams p;
      RKD_ASSIGN(p.alpha, n.attr_float("alpha", 1.67326319217681884765625f));
      RKD_ASSIGN(p.gamma, n.attr_float("gamma", 1.05070102214813232421875f));
      return simple_unary(U::selu, p);
    };
    r["HardSigmoid"] = [](const Node& n, int64_t) -> Result<Kernel> {
      ops::UnaryParams p;
      RKD_ASSIGN(p.alpha, n.attr_float("alpha", 0.2f));
      RKD_ASSIGN(p.beta, n.attr_float("beta", 0.5f));
      return simple_unary(U::hard_sigmoid, p);
    };
    r["Gelu"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(std::string approx, n.attr_string("approximate", "none"));
      if (approx != "none" && approx != "tanh") return invalid(n.describe() + ": approximate must be none or tanh");
      return simple_unary(approx == "tanh" ? U::gelu_tanh : U::gelu_erf);
    };
    r["Clip"] = [](const Node& n, int64_t opset) -> Result<Kernel> {
      ops::UnaryParams p;
      if (opset < 11) {
        RKD_ASSIGN(p.lo, n.attr_float("min", -INFINITY));
        RKD_ASSIGN(p.hi, n.attr_float("max", INFINITY));
      }
      return Kernel([p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
        ops::UnaryParams q = p;
        if (in.size() > 1 && in[1]) q.lo = static_cast<float>(in[1]->get_as_double(0));
        if (in.size() > 2 && in[2]) q.hi = static_cast<float>(in[2]->get_as_double(0));
        return ops::unary(U::clip, *in[0], out[0], q);
      });
    };
    for (const char* v : {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"}) {
      r[v] = [](const Node&, int64_t) { return copy_kernel(); };
    }
    r["Dropout"] = [](const Node& n, int64_t) -> Result<Kernel> {
      if (n.inputs.size() > 2 && n.inputs[2]) {
        const ir::Value* tm = n.inputs[2];
        if (!tm->constant || tm->constant->get_as_double(0) != 0) {
          return unsupported(n.describe() + ": training-mode Dropout (random) is not an inference op");
        }
      }
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::copy_into(*in[0], out[0]);
        if (out.size() > 1 && out[1].defined()) std::fill_n(out[1].data<uint8_t>(), out[1].numel(), uint8_t{1});
        return {};
      });
    };
    r["Cast"] = [](const Node&, int64_t) -> Result<Kernel> {
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::cast(*in[0], out[0]); });
    };
    r["Where"] = [](const Node&, int64_t) -> Result<Kernel> {
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::where(*in[0], *in[1], *in[2], out[0]); });
    };
    for (const char* sm : {"Softmax", "LogSoftmax"}) {
      r[sm] = [](const Node& n, int64_t opset) -> Result<Kernel> {
        if (opset < 13) return unsupported(n.describe() + ": Softmax before opset 13 (2-D coercion semantics)");
        RKD_ASSIGN(int64_t a, n.attr_int("axis", -1));
        RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
        const bool log = n.op_type == "LogSoftmax";
        return Kernel([axis, log](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          ops::softmax(*in[0], axis, log, out[0]);
          return {};
        });
      };
    }
    r["LayerNormalization"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t a, n.attr_int("axis", -1));
      RKD_ASSIGN(float eps, n.attr_float("epsilon", 1e-5f));
      RKD_ASSIGN(int64_t stash, n.attr_int("stash_type", 1));
      if (stash != 1) return unsupported(n.describe() + ": stash_type other than float32");
      RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
      return Kernel([axis, eps](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        Tensor* mean = out.size() > 1 && out[1].defined() ? &out[1] : nullptr;
        Tensor* inv = out.size() > 2 && out[2].defined() ? &out[2] : nullptr;
        ops::layer_norm(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, axis, eps, out[0], mean, inv);
        return {};
      });
    };
    r["BatchNormalization"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(float eps, n.attr_float("epsilon", 1e-5f));
      RKD_ASSIGN(int64_t training, n.attr_int("training_mode", 0));
      if (training) return unsupported(n.describe() + ": training_mode=1");
      return Kernel([eps](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::batch_norm(*in[0], *in[1], *in[2], *in[3], *in[4], eps, out[0]);
        return {};
      });
    };
    r["Conv"] = [](const Node& n, int64_t) { return conv_factory(n, false); };
    r["ConvTranspose"] = [](const Node& n, int64_t) { return conv_factory(n, true); };
    r["MaxPool"] = [](const Node& n, int64_t) -> Result<Kernel> {
      const auto xs = ir::static_shape(n.inputs[0]);
      if (!xs) return unsupported(n.describe() + ": shapes must be static");
      if (n.outputs.size() > 1 && n.outputs[1]) return unsupported(n.describe() + ": the Indices output");
      RKD_ASSIGN(ops::PoolParams p, pool_params(n, *xs));
      const DType t = n.inputs[0]->dtype.value_or(DType::f32);
      const bool dense_2d = xs->size() == 4 && std::all_of(p.dilations.begin(), p.dilations.end(), [](int64_t d) { return d == 1; });
      if (t != DType::f32 && !((t == DType::i8 || t == DType::u8) && dense_2d)) {
        return unsupported(n.describe() + ": input of type " + dtype_name(t) + " (float32, or 8-bit integers in 2-D without dilation)");
      }
      return Kernel([p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::max_pool(*in[0], p, out[0]);
        return {};
      });
    };
    r["AveragePool"] = [](const Node& n, int64_t) -> Result<Kernel> {
      const auto xs = ir::static_shape(n.inputs[0]);
      if (!xs) return unsupported(n.describe() + ": shapes must be static");
      RKD_ASSIGN(ops::PoolParams p, pool_params(n, *xs));
      return Kernel([p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::average_pool(*in[0], p, out[0]);
        return {};
      });
    };
    for (const char* g : {"GlobalAveragePool", "GlobalMaxPool"}) {
      r[g] = [](const Node& n, int64_t) -> Result<Kernel> {
        const bool max = n.op_type == "GlobalMaxPool";
        return Kernel([max](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          ops::global_pool(*in[0], max, out[0]);
          return {};
        });
      };
    }
    r["Resize"] = resize_factory;
    r["MatMul"] = [](const Node&, int64_t) -> Result<Kernel> {
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::matmul(*in[0], *in[1], out[0]); });
    };
    r["Gemm"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t ta, n.attr_int("transA", 0));
      RKD_ASSIGN(int64_t tb, n.attr_int("transB", 0));
      RKD_ASSIGN(float alpha, n.attr_float("alpha", 1.f));
      RKD_ASSIGN(float beta, n.attr_float("beta", 1.f));
      return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
        return ops::gemm(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, ta != 0, tb != 0, alpha, beta, out[0]);
      });
    };
    r["Einsum"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(std::string eq, n.attr_string("equation", ""));
      auto parsed = ir::parse_einsum(eq);
      if (!parsed.ok()) return parsed.error().with_context(n.describe());
      return Kernel(
          [e = *parsed](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::einsum(e.operands, e.output, in, out[0]); });
    };
    r["Concat"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
      RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
      return Kernel([axis](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::concat(in, axis, out[0]);
        return {};
      });
    };
    r["Split"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
      RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
      return Kernel([axis](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        int64_t at = 0;
        for (Tensor& o : out) {
          const int64_t len = o.shape()[static_cast<size_t>(axis)];
          if (o.defined()) {
            RKD_ASSIGN(Tensor v, in[0]->slice(axis, at, at + len));
            ops::copy_into(v, o);
          }
          at += len;
        }
        return {};
      });
    };
    r["Slice"] = slice_factory;
    // Gather and GatherElements: one axis attribute, errors prefixed with the node.
    using GatherFn = Status (*)(const Tensor&, const Tensor&, int, Tensor&);
    for (const auto& [name, fn] :
         {std::pair<const char*, GatherFn>{"Gather", ops::gather}, std::pair<const char*, GatherFn>{"GatherElements", ops::gather_elements}}) {
      r[name] = [fn = fn](const Node& n, int64_t) -> Result<Kernel> {
        RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
        RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
        const std::string what = n.describe();
        return Kernel([fn, axis, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          Status s = fn(*in[0], *in[1], axis, out[0]);
          return s.ok() ? s : s.error().with_context(what);
        });
      };
    }
    r["GatherND"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t bd, n.attr_int("batch_dims", 0));
      if (bd < 0) return invalid(n.describe() + ": batch_dims must not be negative");
      const std::string what = n.describe();
      return Kernel([bd, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        Status s = ops::gather_nd(*in[0], *in[1], static_cast<int>(bd), out[0]);
        return s.ok() ? s : s.error().with_context(what);
      });
    };
    r["ScatterND"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(std::string red, n.attr_string("reduction", "none"));
      return Kernel(
          [red](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::scatter_nd(*in[0], *in[1], *in[2], red, out[0]); });
    };
    r["ScatterElements"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(std::string red, n.attr_string("reduction", "none"));
      RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
      RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
      return Kernel([red, axis](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
        return ops::scatter_elements(*in[0], *in[1], *in[2], axis, red, out[0]);
      });
    };
    r["Transpose"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(auto perm, n.attr_ints("perm", {}));
      const int rank = rank_of(n, 0);
      if (perm.empty()) {
        for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
      }
      return Kernel([perm](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::transpose(*in[0], perm, out[0]);
        return {};
      });
    };
    r["Expand"] = [](const Node&, int64_t) -> Result<Kernel> {
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::copy_into(*in[0], out[0]);
        return {};
      });
    };
    r["Tile"] = [](const Node&, int64_t) -> Result<Kernel> {
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::tile(*in[0], out[0]);
        return {};
      });
    };
    r["Pad"] = [](const Node& n, int64_t opset) -> Result<Kernel> {
      RKD_ASSIGN(std::string mode, n.attr_string("mode", "constant"));
      ops::PadMode pm;
      if (mode == "constant") pm = ops::PadMode::constant;
      else if (mode == "reflect") pm = ops::PadMode::reflect;
      else if (mode == "edge") pm = ops::PadMode::edge;
      else if (mode == "wrap") pm = ops::PadMode::wrap;
      else return invalid(n.describe() + ": unknown mode '" + mode + "'");
      RKD_ASSIGN(auto attr_pads, n.attr_ints("pads", {}));
      RKD_ASSIGN(float attr_value, n.attr_float("value", 0.f));
      return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const int rank = in[0]->rank();
        std::vector<int64_t> p = opset >= 11 ? ints_of(in[1]) : attr_pads;
        double value = attr_value;
        if (opset >= 11 && in.size() > 2 && in[2] && in[2]->numel() > 0) value = in[2]->get_as_double(0);
        std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
        if (in.size() > 3 && in[3]) {
          const auto axes = ints_of(in[3]);
          for (size_t i = 0; i < axes.size(); ++i) {
            const int a = norm_axis(axes[i], rank);
            full[static_cast<size_t>(a)] = p[i];
            full[static_cast<size_t>(a + rank)] = p[i + axes.size()];
          }
        } else {
          full = p;
        }
        return ops::pad(*in[0], full, pm, value, out[0]);
      });
    };
    r["Shape"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t start, n.attr_int("start", 0));
      return Kernel([start](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const int64_t rank = in[0]->rank();
        int64_t s = start < 0 ? start + rank : start;
        s = std::clamp<int64_t>(s, 0, rank);
        for (int64_t i = 0; i < out[0].numel(); ++i) out[0].data<int64_t>()[i] = in[0]->shape()[static_cast<size_t>(s + i)];
        return {};
      });
    };
    r["Size"] = [](const Node&, int64_t) -> Result<Kernel> {
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        out[0].data<int64_t>()[0] = in[0]->numel();
        return {};
      });
    };
    r["ConstantOfShape"] = [](const Node& n, int64_t) -> Result<Kernel> {
      Tensor value = Tensor::from_floats({1}, std::vector<float>{0.f});
      if (auto it = n.attrs.find("value"); it != n.attrs.end()) {
        const Tensor* t = std::get_if<Tensor>(&it->second);
        if (!t || t->numel() != 1) return invalid(n.describe() + ": value must be a one-element tensor");
        value = *t;
      }
      return Kernel([value](const std::vector<const Tensor*>&, std::vector<Tensor>& out) -> Status {
        ops::fill(out[0], value.with_layout({}, {}));
        return {};
      });
    };
    r["Constant"] = [](const Node& n, int64_t) -> Result<Kernel> {
      Tensor value;
      for (const auto& [k, a] : n.attrs) {
        if (const Tensor* t = std::get_if<Tensor>(&a)) value = *t;
        else if (const float* f = std::get_if<float>(&a)) value = Tensor::from_floats({}, std::vector<float>{*f});
        else if (const auto* fs = std::get_if<std::vector<float>>(&a)) value = Tensor::from_floats({static_cast<int64_t>(fs->size())}, *fs);
        else if (const int64_t* i = std::get_if<int64_t>(&a)) {
          value = Tensor::empty(DType::i64, {});
          value.data<int64_t>()[0] = *i;
        } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) {
          value = Tensor::empty(DType::i64, {static_cast<int64_t>(is->size())});
          std::copy(is->begin(), is->end(), value.data<int64_t>());
        }
      }
      if (!value.defined()) return unsupported(n.describe() + ": Constant without a tensor, float(s) or int(s) value");
      return Kernel([value](const std::vector<const Tensor*>&, std::vector<Tensor>& out) -> Status {
        ops::copy_into(value, out[0]);
        return {};
      });
    };
    r["Range"] = [](const Node&, int64_t) -> Result<Kernel> {
      return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        ops::range(in[0]->get_as_double(0), in[2]->get_as_double(0), out[0]);
        return {};
      });
    };
    const std::pair<const char*, ops::Reduce> reductions[] = {{"ReduceSum", ops::Reduce::sum},
                                                              {"ReduceMean", ops::Reduce::mean},
                                                              {"ReduceMax", ops::Reduce::max},
                                                              {"ReduceMin", ops::Reduce::min},
                                                              {"ReduceProd", ops::Reduce::prod},
                                                              {"ReduceL2", ops::Reduce::l2},
                                                              {"ReduceSumSquare", ops::Reduce::sum_square}};
    for (const auto& [name, op] : reductions) {
      r[name] = [op](const Node& n, int64_t opset) { return reduce_factory(n, opset, op); };
    }
    for (const char* am : {"ArgMax", "ArgMin"}) {
      r[am] = [](const Node& n, int64_t) -> Result<Kernel> {
        RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
        RKD_ASSIGN(int64_t last, n.attr_int("select_last_index", 0));
        RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
        const bool max = n.op_type == "ArgMax";
        return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          if (in[0]->dtype() != DType::f32) return unsupported("ArgMax/ArgMin on non-float32 input");
          ops::arg_reduce(*in[0], axis, max, last != 0, out[0]);
          return {};
        });
      };
    }
    r["TopK"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t a, n.attr_int("axis", -1));
      RKD_ASSIGN(int64_t largest, n.attr_int("largest", 1));
      RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
      return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        if (in[0]->dtype() != DType::f32) return unsupported("TopK on non-float32 input");
        ops::topk(*in[0], out[0].shape()[static_cast<size_t>(axis)], axis, largest != 0, out[0], out[1]);
        return {};
      });
    };
    r["CumSum"] = [](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t excl, n.attr_int("exclusive", 0));
      RKD_ASSIGN(int64_t rev, n.attr_int("reverse", 0));
      return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
        const int axis = norm_axis(ints_of(in[1]).at(0), in[0]->rank());
        return ops::cumsum(*in[0], axis, excl != 0, rev != 0, out[0]);
      });
    };
    r["GridSample"] = grid_sample_factory;
    register_int8_ops(r);
    return r;
  }();
  return m;
}

}  // namespace

bool is_view_op(const std::string& op_type) {
  return op_type == "Reshape" || op_type == "Flatten" || op_type == "Squeeze" || op_type == "Unsqueeze" || op_type == "Identity";
}

bool has_kernel(const std::string& domain, const std::string& op_type) {
  return (domain.empty() || domain == "ai.onnx") && registry().count(op_type) > 0;
}

std::vector<std::string> kernel_op_types() {
  std::vector<std::string> v;
  for (const auto& [k, f] : registry()) v.push_back(k);
  return v;
}

Result<Kernel> prepare_op(const ir::Node& n, int64_t opset) {
  if (!has_kernel(n.domain, n.op_type)) {
    return unsupported(n.describe() + ": no CPU kernel for " + (n.domain.empty() ? "" : n.domain + ".") + n.op_type);
  }
  // One list, packed (clang-format would put one name per line).
  // clang-format off
  static const std::set<std::string> kFloatOnly = {
      "Conv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Resize",
      "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "MatMul", "Gemm", "Einsum",
      "GridSample", "Sigmoid", "Tanh", "Erf", "Gelu", "Sqrt", "Exp", "Log", "Reciprocal", "HardSigmoid",
      "HardSwish", "LeakyRelu", "Elu", "Selu", "Softplus", "Sin", "Cos", "Floor", "Ceil", "Round", "ArgMax",
      "ArgMin", "TopK"};
  // clang-format on
  if (kFloatOnly.count(n.op_type) && !n.inputs.empty() && n.inputs[0] && n.inputs[0]->dtype && *n.inputs[0]->dtype != DType::f32) {
    return unsupported(n.describe() + ": input of type " + dtype_name(*n.inputs[0]->dtype) + " (float32 only)");
  }
  return registry().at(n.op_type)(n, opset);
}

Result<std::vector<Tensor>> evaluate_node(const ir::Node& n, int64_t opset, const std::vector<const Tensor*>& in) {
  RKD_ASSIGN(Kernel k, prepare_op(n, opset));
  std::vector<Tensor> out;
  for (const ir::Value* o : n.outputs) {
    if (!o) {
      out.emplace_back();
      continue;
    }
    auto s = ir::static_shape(o);
    if (!s || !o->dtype) return unsupported(n.describe() + ": output '" + o->name + "' has no static shape");
    RKD_ASSIGN(Tensor t, Tensor::zeros(*o->dtype, *s));
    out.push_back(std::move(t));
  }
  RKD_TRY(k(in, out));
  return out;
}

}  // namespace rkd::runtime
