// Kernels of the "rkdeploy" domain: the ops rkdeploy's own passes create (ir/passes/fusion.h,
// quant/qlinear_lut.h, npu_conv.h), registered like every other family.
#include "runtime/op_registry_detail.h"

#include <array>
#include <cstring>
#include <memory>

#include "core/thread_pool.h"
#include "ir/passes/shape_inference.h"
#include "kernels/deform_attn.h"
#include "quant/int8.h"
#include "quant/int8_tflite.h"
#include "ir/op_info.h"
#include "runtime/npu_conv.h"

namespace rkd::runtime::detail {

namespace {

bool is_int8(DType t) { return t == DType::i8 || t == DType::u8; }

std::vector<int64_t> ints_attr(const Node& n, const char* key) {
  auto v = n.attr_ints(key, {});
  return v.ok() ? *v : std::vector<int64_t>{};
}

// The MSDA ops' level_h / level_w attributes (one value each per feature level).
Result<std::vector<MsdaLevelShape>> msda_levels(const Node& n) {
  std::vector<MsdaLevelShape> levels;
  const auto hs = ints_attr(n, "level_h"), ws = ints_attr(n, "level_w");
  if (hs.size() != ws.size() || hs.empty()) return invalid(n.describe() + ": level_h/level_w must have one value per level");
  for (size_t i = 0; i < hs.size(); ++i) levels.push_back(MsdaLevelShape{hs[i], ws[i]});
  return levels;
}

// rkdeploy.MSDAPrepare(value tokens [B, T, nH*c]) -> the prepared value layout (deform_attn.h).
Result<Kernel> msda_prepare(const Node& n) {
  RKD_ASSIGN(std::vector<MsdaLevelShape> levels, msda_levels(n));
  auto shared = std::make_shared<MsdaValue>();
  return Kernel([levels, shared](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    // Prepares straight into the planned output buffer: its geometry is the prepared
    // layout's, so msda_prepare_from_tokens reuses it instead of allocating.
    shared->data = out[0];
    RKD_TRY(msda_prepare_from_tokens(*in[0], levels, shared.get(), &ThreadPool::global()));
    if (shared->data.raw() != out[0].raw()) return Error{ErrorKind::internal, "MSDAPrepare: output buffer not reused"};
    return {};
  });
}

// rkdeploy.MSDeformAttn(prepared, locations, weights) -> [B, Q, nH*c] (deform_attn.h msda()).
Result<Kernel> msda_attention(const Node& n) {
  RKD_ASSIGN(std::vector<MsdaLevelShape> levels, msda_levels(n));
  RKD_ASSIGN(std::string m, n.attr_string("method", "default"));
  RKD_ASSIGN(MsdaMethod method, parse_msda_method(m));
  RKD_ASSIGN(int64_t head_dim, n.attr_int("head_dim", 0));
  const auto points = ints_attr(n, "points");
  return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    const Tensor& prep = *in[0];
    MsdaValue v;
    v.batch = prep.dim(0);
    v.heads = prep.dim(1);
    v.head_dim = head_dim;
    v.head_dim_padded = prep.dim(3);
    v.levels = levels;
    int64_t at = 0;
    for (const auto& l : levels) {
      v.level_start.push_back(at);
      at += l.h * l.w;
    }
    v.data = prep;
    MsdaOptions o;
    o.method = method;
    RKD_ASSIGN(Tensor y, msda(v, *in[1], *in[2], points, o, &ThreadPool::global()));
    std::memcpy(out[0].raw(), y.raw(), out[0].nbytes());
    return {};
  });
}

// Per-tensor parameters of input group i (inputs 3i + 1, 3i + 2) and of the output (the last two).
Result<quant::QTensorParams> group_params(const Node& n, size_t i) {
  const size_t s = 3 * i + 1;
  if (s + 1 >= n.inputs.size() || !n.inputs[s] || !n.inputs[s]->constant || !n.inputs[s + 1] || !n.inputs[s + 1]->constant) {
    return unsupported(n.describe() + ": scales and zero points must be per-tensor constants");
  }
  return quant::QTensorParams{static_cast<float>(n.inputs[s]->constant->get_as_double(0)),
                              static_cast<int32_t>(n.inputs[s + 1]->constant->get_as_double(0))};
}

Status with_node(Status s, const std::string& what) { return s.ok() ? s : s.error().with_context(what); }

Result<Kernel> prepare_tflite(const Node& n) {
  RKD_ASSIGN(std::string op, n.attr_string("op", ""));
  RKD_ASSIGN(std::string rq_name, n.attr_string("rkd_requant", "tflite_double_rounding"));
  RKD_ASSIGN(quant::Requant rq, quant::parse_requant(rq_name));
  // rknpu_out_cvt is the NPU's convolution requantization; TFLite's other operators keep the
  // format's default.
  if (rq == quant::Requant::rknpu_out_cvt) rq = quant::Requant::tflite_double_rounding;
  RKD_ASSIGN(int64_t act_min, n.attr_int("act_min", -128));
  RKD_ASSIGN(int64_t act_max, n.attr_int("act_max", 127));
  if ((n.inputs.size() - 2) % 3 != 0 || n.inputs.size() < 5)
    return invalid(n.describe() + ": inputs are (q, scale, zero point) groups and the output's scale and zero point");
  const size_t groups = (n.inputs.size() - 2) / 3;
  std::vector<quant::QTensorParams> in;
  for (size_t i = 0; i < groups; ++i) {
    RKD_ASSIGN(auto p, group_params(n, i));
    in.push_back(p);
  }
  const quant::QTensorParams out{static_cast<float>(n.inputs[n.inputs.size() - 2]->constant->get_as_double(0)),
                                 static_cast<int32_t>(n.inputs.back()->constant->get_as_double(0))};
  const std::string what = n.describe();
  const quant::QTensorParams x = in[0];
  if (op == "Sigmoid" || op == "Tanh") {
    const quant::LutFunction f = op == "Sigmoid" ? quant::LutFunction::logistic : quant::LutFunction::tanh;
    return Kernel(
        [=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) { return with_node(quant::lut_activation(*t[0], f, x, out, y[0]), what); });
  }
  if (op == "HardSwish") {
    return Kernel(
        [=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) { return with_node(quant::tflite_hard_swish(*t[0], x, out, y[0]), what); });
  }
  if (op == "LeakyRelu") {
    RKD_ASSIGN(float alpha, n.attr_float("alpha", 0.01f));
    return Kernel([=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) {
      return with_node(quant::tflite_leaky_relu(*t[0], alpha, x, out, rq, y[0]), what);
    });
  }
  if (op == "Softmax") {
    return Kernel([=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) {
      return with_node(quant::tflite_softmax(*t[0], 1.f, x, out, y[0]), what);
    });
  }
  if (op == "ReduceMean") {
    const int rank = n.inputs[0]->shape ? static_cast<int>(n.inputs[0]->shape->size()) : 0;
    RKD_ASSIGN(auto axes0, n.attr_ints("axes", {}));
    std::vector<int64_t> axes;
    for (int64_t a : axes0) axes.push_back(a < 0 ? a + rank : a);
    if (axes.empty()) {
      for (int d = 0; d < rank; ++d) axes.push_back(d);
    }
    // TFLite's XNNPACK delegate takes MEAN as global average pooling: 4-D over height and
    // width (measured with and without keep_dims); those axes are 1, 2 where the tensor is
    // still NHWC here and 2, 3 where it is NCHW. Any other MEAN runs on TFLite's own kernel
    // (single rounding).
    std::vector<int64_t> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    const bool spatial = rank == 4 && (sorted == std::vector<int64_t>{1, 2} || sorted == std::vector<int64_t>{2, 3});
    const quant::Requant mean_rq = rq == quant::Requant::tflite_xnnpack && !spatial ? quant::Requant::tflite_single_rounding : rq;
    return Kernel([=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) {
      return with_node(quant::tflite_mean(*t[0], axes, x, out, mean_rq, y[0]), what);
    });
  }
  if (op == "Resize") {
    RKD_ASSIGN(std::string mode, n.attr_string("coordinate_transformation_mode", "half_pixel"));
    const bool align = mode == "align_corners", half = mode == "half_pixel";
    return Kernel([=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) {
      return with_node(quant::tflite_resize_bilinear(*t[0], align, half, rq, y[0]), what);
    });
  }
  if (op == "AveragePool" || op == "MaxPool") {
    quant::QPoolParams p;
    RKD_ASSIGN(p.kernel, n.attr_ints("kernel_shape", {}));
    RKD_ASSIGN(p.strides, n.attr_ints("strides", {1, 1}));
    RKD_ASSIGN(p.pads, n.attr_ints("pads", {0, 0, 0, 0}));
    RKD_ASSIGN(std::string auto_pad, n.attr_string("auto_pad", "NOTSET"));
    if (auto_pad != "NOTSET") {  // TensorFlow's SAME is ONNX's SAME_UPPER
      const auto xs = ir::static_shape(n.inputs[0]);
      if (!xs || xs->size() != 4 || p.kernel.size() != 2 || p.strides.size() != 2)
        return unsupported(n.describe() + ": auto_pad needs static shapes");
      if (Status st = ir::resolve_auto_pad(auto_pad, ir::WindowGeometry{{(*xs)[2], (*xs)[3]}, p.kernel, p.strides, {1, 1}, {}, false}, p.pads);
          !st.ok()) {
        return st.error().with_context(n.describe());
      }
    }
    p.act_min = static_cast<int32_t>(act_min);
    p.act_max = static_cast<int32_t>(act_max);
    if (x.scale != out.scale || x.zero_point != out.zero_point) return unsupported(what + ": pooling with different input and output quantization");
    const bool avg = op == "AveragePool";
    return Kernel([=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) {
      return with_node(avg ? quant::tflite_average_pool(*t[0], p, y[0]) : quant::tflite_max_pool(*t[0], p, y[0]), what);
    });
  }
  if (op == "Add" || op == "Sub" || op == "Mul") {
    quant::QBinaryParams p;
    p.a_scale = x.scale;
    p.a_zero_point = x.zero_point;
    p.b_scale = in[1].scale;
    p.b_zero_point = in[1].zero_point;
    p.out_scale = out.scale;
    p.out_zero_point = out.zero_point;
    p.act_min = static_cast<int32_t>(act_min);
    p.act_max = static_cast<int32_t>(act_max);
    p.convention = rq;
    return Kernel([=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) {
      return with_node(op == "Mul" ? quant::tflite_mul(*t[0], *t[3], p, y[0]) : quant::tflite_add(*t[0], *t[3], p, op == "Sub", y[0]), what);
    });
  }
  if (op == "Concat") {
    RKD_ASSIGN(int64_t axis, n.attr_int("axis", 0));
    return Kernel([=](const std::vector<const Tensor*>& t, std::vector<Tensor>& y) {
      std::vector<const Tensor*> xs;
      for (size_t i = 0; i < groups; ++i) xs.push_back(t[3 * i]);
      const int a = static_cast<int>(axis < 0 ? axis + y[0].rank() : axis);
      return with_node(quant::tflite_concat(xs, in, out, a, y[0]), what);
    });
  }
  return unsupported(what + ": no TFLite integer kernel for " + op);
}

// rkdeploy.QLinearAdd / QLinearMul (from qdq-to-qlinear), inputs as com.microsoft's: A,
// A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp (B broadcasting to A one way); ONNX Runtime's
// arithmetic (quant::Requant::onnx_float) or, with rkd_requant = rknpu_out_cvt, the NPU's
// (quant::rknpu_add_plan, rknpu_mul_plan).
// QLinearSub / QLinearMax / QLinearMin: quant::qdq_binary (ONNX Runtime's float32
// DequantizeLinear -> op -> QuantizeLinear, or the NPU's task under rknpu_out_cvt).
Result<Kernel> qlinear_binary(const Node& n, bool mul, std::optional<quant::BinaryAlu> alu = std::nullopt) {
  for (size_t i : {1, 2, 4, 5, 6, 7}) {
    if (n.inputs.size() < 8 || !n.inputs[i] || !n.inputs[i]->constant || n.inputs[i]->constant->numel() != 1) {
      return unsupported(n.describe() + ": scales and zero points must be per-tensor constants");
    }
  }
  quant::QBinaryParams p;
  p.a_scale = static_cast<float>(n.inputs[1]->constant->get_as_double(0));
  p.a_zero_point = static_cast<int32_t>(n.inputs[2]->constant->get_as_double(0));
  p.b_scale = static_cast<float>(n.inputs[4]->constant->get_as_double(0));
  p.b_zero_point = static_cast<int32_t>(n.inputs[5]->constant->get_as_double(0));
  p.out_scale = static_cast<float>(n.inputs[6]->constant->get_as_double(0));
  p.out_zero_point = static_cast<int32_t>(n.inputs[7]->constant->get_as_double(0));
  const bool is_u8 = n.inputs[7]->constant->dtype() == DType::u8;
  p.act_min = is_u8 ? 0 : -128;
  p.act_max = is_u8 ? 255 : 127;
  RKD_ASSIGN(std::string rq_name, n.attr_string("rkd_requant", "onnx_float"));
  p.convention = rq_name == "rknpu_out_cvt" ? quant::Requant::rknpu_out_cvt : quant::Requant::onnx_float;
  const std::string what = n.describe();
  if (p.convention == quant::Requant::rknpu_out_cvt) {
    if (mul) {
      if (auto k = quant::rknpu_mul_plan(p); !k.ok()) return k.error().with_context(what);
    } else if (auto k = quant::rknpu_binary_plan(p, alu.value_or(quant::BinaryAlu::add)); !k.ok()) {
      return k.error().with_context(what);
    }
  }
  return Kernel([p, what, mul, alu](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    if (alu) return with_node(quant::qdq_binary(*in[0], *in[3], p, *alu, out[0]), what);
    return with_node(mul ? quant::tflite_mul(*in[0], *in[3], p, out[0]) : quant::tflite_add(*in[0], *in[3], p, false, out[0]), what);
  });
}

// rkdeploy.QLinearLut(x: int8|uint8, table: 256 codes of the output type, indexed by x's
// code in increasing order): y = table[x].
Result<Kernel> qlinear_lut(const Node& n) {
  if (n.inputs.size() != 2 || !n.inputs[0] || !n.inputs[0]->dtype || !is_int8(*n.inputs[0]->dtype) || !n.inputs[1] || !n.inputs[1]->constant ||
      n.inputs[1]->constant->numel() != 256 || !is_int8(n.inputs[1]->constant->dtype())) {
    return invalid(n.describe() + ": QLinearLut needs an 8-bit input and a constant table of 256 8-bit codes");
  }
  std::array<uint8_t, 256> table{};
  std::memcpy(table.data(), n.inputs[1]->constant->contiguous().raw(), 256);
  const uint8_t flip = *n.inputs[0]->dtype == DType::i8 ? 0x80 : 0;
  return Kernel([table, flip](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    const Tensor x = in[0]->contiguous();
    const auto* px = static_cast<const uint8_t*>(x.raw());
    auto* py = static_cast<uint8_t*>(out[0].raw());
    const int64_t count = x.numel();
    for (int64_t i = 0; i < count; ++i) py[i] = table[px[i] ^ flip];
    return {};
  });
}

}  // namespace

void register_rkdeploy_ops(std::map<std::string, Factory>& r) {
  r["MSDAPrepare"] = [](const Node& n, int64_t) { return msda_prepare(n); };
  r["MSDeformAttn"] = [](const Node& n, int64_t) { return msda_attention(n); };
  r["QLinearAdd"] = [](const Node& n, int64_t) { return qlinear_binary(n, false); };
  r["QLinearMul"] = [](const Node& n, int64_t) { return qlinear_binary(n, true); };
  r["QLinearSub"] = [](const Node& n, int64_t) { return qlinear_binary(n, false, quant::BinaryAlu::sub); };
  r["QLinearMax"] = [](const Node& n, int64_t) { return qlinear_binary(n, false, quant::BinaryAlu::max); };
  r["QLinearMin"] = [](const Node& n, int64_t) { return qlinear_binary(n, false, quant::BinaryAlu::min); };
  r["QLinearTflite"] = [](const Node& n, int64_t) { return prepare_tflite(n); };
  r["QLinearLut"] = [](const Node& n, int64_t) { return qlinear_lut(n); };
  // Every node the op table marks kOnNpu: its NPU kernel alone (the executor shares one device
  // memory between them instead: npu_conv.h).
  for (const ir::OpInfo& op : ir::op_table()) {
    if (op.domain == "rkdeploy" && op.has(ir::kOnNpu))
      r[std::string(op.op_type)] = [](const Node& n, int64_t) { return npu_node_kernel(n, nullptr); };
  }
}

}  // namespace rkd::runtime::detail
