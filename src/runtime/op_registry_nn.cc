// Kernels of the nn family: normalizations, softmax, convolution, pooling, resize, products,
// reductions, selection (ArgMax, TopK), CumSum, GridSample.
#include "runtime/op_registry_detail.h"

#include <cmath>

#include "ir/passes/shape_inference.h"
#include "kernels/grid_sample.h"
#include "kernels/tensor_ops.h"

namespace rkd::runtime::detail {

namespace {

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

}  // namespace

Result<ops::ResizeParams> resize_attrs(const Node& n) {
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
  return p;
}

void resize_scales(ops::ResizeParams& p, const Shape& xs, const Shape& ys, const Tensor* scales, const Tensor* sizes) {
  p.scales.assign(xs.size(), 1.f);
  if (sizes && sizes->numel() > 0) {
    for (size_t i = 0; i < xs.size(); ++i) p.scales[i] = static_cast<float>(ys[i]) / static_cast<float>(xs[i]);
  } else if (scales && scales->numel() > 0) {
    for (size_t i = 0; i < xs.size(); ++i) p.scales[i] = static_cast<float>(scales->get_as_double(static_cast<int64_t>(i)));
  }
}

namespace {

Result<Kernel> resize_factory(const Node& n, int64_t opset) {
  RKD_ASSIGN(ops::ResizeParams p, resize_attrs(n));
  const size_t scales_at = opset >= 11 ? 2 : 1;
  return Kernel([p, scales_at](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) mutable -> Status {
    resize_scales(p, in[0]->shape(), out[0].shape(), in.size() > scales_at ? in[scales_at] : nullptr, in.size() > 3 ? in[3] : nullptr);
    if (p.coordinate_transformation == "tf_crop_and_resize") {
      p.roi.clear();
      if (in.size() > 1 && in[1]) {
        for (int64_t i = 0; i < in[1]->numel(); ++i) p.roi.push_back(static_cast<float>(in[1]->get_as_double(i)));
      }
    }
    return ops::resize(*in[0], p, out[0]);
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

}  // namespace

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

void register_nn_ops(std::map<std::string, Factory>& r) {
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
  r["InstanceNormalization"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(float eps, n.attr_float("epsilon", 1e-5f));
    if (rank_of(n, 0) < 3) return invalid(n.describe() + ": input must be [N, C, D1, ...]");
    return Kernel([eps](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      if (in[1]->numel() != in[0]->dim(1) || in[2]->numel() != in[0]->dim(1))
        return invalid("InstanceNormalization: scale and B must have C elements");
      ops::instance_norm(*in[0], *in[1], *in[2], eps, out[0]);
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
  const std::pair<const char*, ops::Reduce> reductions[] = {{"ReduceSum", ops::Reduce::sum},
                                                            {"ReduceMean", ops::Reduce::mean},
                                                            {"ReduceMax", ops::Reduce::max},
                                                            {"ReduceMin", ops::Reduce::min},
                                                            {"ReduceProd", ops::Reduce::prod},
                                                            {"ReduceL2", ops::Reduce::l2},
                                                            {"ReduceSumSquare", ops::Reduce::sum_square}};
  for (const auto& entry : reductions) {
    const ops::Reduce op = entry.second;  // a copy: clang 14 cannot capture a structured binding
    r[entry.first] = [op](const Node& n, int64_t opset) { return reduce_factory(n, opset, op); };
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
}

}  // namespace rkd::runtime::detail
