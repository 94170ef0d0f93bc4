#include "runtime/op_registry_detail.h"

#include <limits>
#include <memory>
#include <optional>

#include "ir/passes/shape_inference.h"
#include "kernels/tensor_ops.h"
#include "quant/int8.h"

namespace rkd::runtime::detail {

namespace {

std::vector<float> floats_of(const Tensor* t) {
  std::vector<float> v;
  for (int64_t i = 0; t && i < t->numel(); ++i) v.push_back(static_cast<float>(t->get_as_double(i)));
  return v;
}
std::vector<int32_t> zero_points_of(const Tensor* t, size_t n) {
  std::vector<int32_t> v;
  for (int64_t i = 0; t && i < t->numel(); ++i) v.push_back(static_cast<int32_t>(t->get_as_double(i)));
  if (v.empty()) v.assign(std::max<size_t>(n, 1), 0);
  return v;
}

// QuantizeLinear / DequantizeLinear (ONNX: per tensor, or per axis when the scale has more
// than one element): the int8 semantics of src/quant with ONNX's rounding.
Result<Kernel> quant_linear_factory(const Node& n, bool quantize) {
  RKD_ASSIGN(int64_t a, n.attr_int("axis", 1));
  // The axis only matters for a per-axis scale; quant::quantize checks it then.
  const int axis = norm_axis(a, rank_of(n, 0));
  RKD_ASSIGN(int64_t block, n.attr_int("block_size", 0));
  if (block != 0) return unsupported(n.describe() + ": blocked quantization (block_size)");
  const std::string what = n.describe();
  return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    quant::QuantParams p;
    p.scales = floats_of(in[1]);
    p.zero_points = zero_points_of(in.size() > 2 ? in[2] : nullptr, p.scales.size());
    p.axis = axis;
    Status st = quantize ? quant::quantize(*in[0], p, quant::QuantizeRounding::half_to_even, out[0]) : quant::dequantize(*in[0], p, out[0]);
    return st.ok() ? st : st.error().with_context(what);
  });
}

// The requantizer of QLinearConv / QLinearMatMul (ONNX Runtime's convention) from inputs
// 1 (x scale), 4 (weight scales), 6 (y scale) and 7 (y zero point, whose type is the output's).
// Input i of n when it is a constant, else nullptr.
const Tensor* constant_input(const Node& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] && n.inputs[i]->constant ? &*n.inputs[i]->constant : nullptr;
}
// True for an absent tensor (a zero point defaults to 0) and for one holding only zeros.
bool all_zero(const Tensor* t) {
  for (int64_t i = 0; t && i < t->numel(); ++i) {
    if (t->get_as_double(i) != 0) return false;
  }
  return true;
}
// A requantized value (already in the type's range) into an int8 or uint8 tensor.
void store_int8(Tensor& y, int64_t at, int32_t v) {
  if (y.dtype() == DType::i8) y.data<int8_t>()[at] = static_cast<int8_t>(v);
  else y.data<uint8_t>()[at] = static_cast<uint8_t>(v);
}

// act: the fused activation's clamp (attributes rkd_act_min / rkd_act_max, set by
// qdq-to-qlinear for TFLite graphs), within the output type's range.
struct ActRange {
  int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
};

Result<ActRange> node_act_range(const Node& n) {
  ActRange a;
  RKD_ASSIGN(a.lo, n.attr_int("rkd_act_min", a.lo));
  RKD_ASSIGN(a.hi, n.attr_int("rkd_act_max", a.hi));
  return a;
}

Result<quant::Requantizer> qlinear_requantizer(const std::vector<const Tensor*>& in, DType out_type,
                                               quant::Requant convention = quant::Requant::onnx_float, ActRange act = {}) {
  RKD_ASSIGN(auto range, quant::quantized_range(out_type));
  if (in.size() < 8 || !in[1] || !in[4] || !in[6] || in[1]->numel() < 1 || in[6]->numel() < 1) {
    return invalid("QLinear op: scales missing");
  }
  const int32_t lo = static_cast<int32_t>(std::max<int64_t>(range.first, act.lo));
  const int32_t hi = static_cast<int32_t>(std::min<int64_t>(range.second, act.hi));
  return quant::Requantizer::make(convention, floats_of(in[1])[0], floats_of(in[4]), floats_of(in[6])[0], zero_points_of(in[7], 1)[0], lo, hi);
}

// The requantization convention of a QLinear node: its `rkd_requant` attribute (set by
// qdq-to-qlinear from the model's source format, e.g. TFLite), ONNX Runtime's otherwise.
Result<quant::Requant> node_requant(const Node& n) {
  RKD_ASSIGN(std::string name, n.attr_string("rkd_requant", "onnx_float"));
  auto r = quant::parse_requant(name);
  if (!r.ok()) return r.error().with_context(n.describe());
  return r;
}

// Built once when every scale and the output zero point are constants (the usual case).
Result<std::optional<quant::Requantizer>> constant_qlinear_requantizer(const Node& n) {
  std::vector<const Tensor*> in(n.inputs.size(), nullptr);
  for (size_t i : {1u, 4u, 6u, 7u}) {
    if (i >= n.inputs.size() || !n.inputs[i] || !n.inputs[i]->constant) return std::optional<quant::Requantizer>{};
    in[i] = &*n.inputs[i]->constant;
  }
  const ir::Value* y = n.outputs.empty() ? nullptr : n.outputs[0];
  if (!y || !y->dtype) return std::optional<quant::Requantizer>{};
  RKD_ASSIGN(quant::Requant conv, node_requant(n));
  RKD_ASSIGN(ActRange act, node_act_range(n));
  auto rq = qlinear_requantizer(in, *y->dtype, conv, act);
  if (!rq.ok()) return rq.error().with_context(n.describe());
  return std::optional<quant::Requantizer>(*rq);
}

}  // namespace

void register_int8_ops(std::map<std::string, Factory>& r) {
  r["QuantizeLinear"] = [](const Node& n, int64_t) { return quant_linear_factory(n, true); };
  r["DequantizeLinear"] = [](const Node& n, int64_t) { return quant_linear_factory(n, false); };
  // QOperator forms, requantized with ONNX Runtime's convention (quant::Requant::onnx_float).
  r["QLinearConv"] = [](const Node& n, int64_t) -> Result<Kernel> {
    // rkd_input_channels_last / rkd_output_channels_last (int8-channels-last pass): input 0 /
    // the output are [N, H, W, C]; xs and os below are the NCHW geometry either way.
    RKD_ASSIGN(const int64_t in_cl, n.attr_int("rkd_input_channels_last", 0));
    RKD_ASSIGN(const int64_t out_cl, n.attr_int("rkd_output_channels_last", 0));
    auto xs = ir::static_shape(n.inputs[0]);
    const auto ws = n.inputs.size() > 3 ? ir::static_shape(n.inputs[3]) : std::nullopt;
    auto os = ir::static_shape(n.outputs[0]);
    if (!xs || !ws || xs->size() != 4) return unsupported(n.describe() + ": 2-D QLinearConv with static shapes only");
    if ((in_cl || out_cl) && (!os || os->size() != 4)) return unsupported(n.describe() + ": channels-last QLinearConv needs a static 4-D output");
    if (in_cl) xs = Shape{(*xs)[0], (*xs)[3], (*xs)[1], (*xs)[2]};
    if (out_cl) os = Shape{(*os)[0], (*os)[3], (*os)[1], (*os)[2]};
    RKD_ASSIGN(ops::ConvParams cp, conv_params(n, *xs, *ws, false));
    const quant::QConvParams p{cp.strides, cp.dilations, cp.pads, cp.group};
    RKD_ASSIGN(auto rq0, constant_qlinear_requantizer(n));
    const std::string what = n.describe();
    // Fast path (ops::QConvAccumulator): constant int8 weights with zero points 0, a constant
    // input zero point and requantizer; the int32 accumulators are exact, and the bias and
    // requantization below are the reference's, so the outputs are bit for bit the same.
    auto constant = [&](size_t i) { return constant_input(n, i); };
    const Tensor* w = constant(3);
    const Tensor* wz = constant(5);
    const Tensor* xz = constant(2);
    bool fast = rq0 && w && w->dtype() == DType::i8 && n.inputs[0]->dtype && os && (n.inputs.size() < 9 || !n.inputs[8] || constant(8));
    fast = fast && all_zero(wz);
    if (fast) {
      const int32_t x_zp = xz ? static_cast<int32_t>(xz->get_as_double(0)) : 0;
      auto acc = ops::make_qconv_accumulator(*xs, *n.inputs[0]->dtype, x_zp, *w, cp, *os);
      if (acc.ok()) {
        std::shared_ptr<ops::QConvAccumulator> a = std::move(acc).value();
        // The raw sums with the zero-point compensation folded into the bias (one pass fewer),
        // in int32's wrap-around arithmetic: (raw - c) + b and raw + (b - c) are the same there.
        Tensor bias = Tensor::empty(DType::i32, {(*os)[1]});
        for (int64_t m = 0; m < (*os)[1]; ++m) {
          const auto b = static_cast<uint32_t>(constant(8) ? static_cast<int32_t>(constant(8)->get_as_double(m)) : 0);
          bias.data<int32_t>()[m] = static_cast<int32_t>(b - static_cast<uint32_t>(a->compensation()[static_cast<size_t>(m)]));
        }
        auto buf = std::make_shared<Tensor>(Tensor::empty(DType::i32, {(*os)[0], (*os)[2], (*os)[3], (*os)[1]}));
        const quant::Requantizer rq = *rq0;
        auto plan = std::make_shared<const quant::Requantizer::PlanesPlan>(rq.plan_planes(bias.data<int32_t>(), (*os)[1]));
        const int64_t N = (*os)[0], M = (*os)[1], HW = (*os)[2] * (*os)[3];
        return Kernel([a, buf, plan, rq, what, in_cl, out_cl, N, M, HW](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          Status st = a->run_raw(*in[0], *buf, in_cl != 0);
          if (!st.ok()) return st.error().with_context(what);
          const int32_t* ac = buf->data<int32_t>();  // [N, OH, OW, M]
          auto* py = static_cast<uint8_t*>(out[0].raw());
          if (out_cl) {
            rq.apply_to_rows(*plan, ac, N * HW, py);
          } else {
            for (int64_t nn = 0; nn < N; ++nn) rq.apply_to_planes(*plan, ac + nn * HW * M, HW, py + nn * M * HW, HW);
          }
          return {};
        });
      }
    }
    RKD_ASSIGN(quant::Requant convention, node_requant(n));
    RKD_ASSIGN(ActRange act, node_act_range(n));
    return Kernel([p, what, rq0, convention, act, in_cl, out_cl](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      RKD_ASSIGN(quant::Requantizer rq, rq0 ? Result<quant::Requantizer>(*rq0) : qlinear_requantizer(in, out[0].dtype(), convention, act));
      const Tensor bias = in.size() > 8 && in[8] ? *in[8] : Tensor();
      // The reference on NCHW: channels-last operands through copies.
      Tensor x = *in[0];
      if (in_cl) {
        x = Tensor::empty(in[0]->dtype(), {in[0]->dim(0), in[0]->dim(3), in[0]->dim(1), in[0]->dim(2)});
        ops::transpose(*in[0], {0, 3, 1, 2}, x);
      }
      Tensor& y = out[0];
      Tensor yc = out_cl ? Tensor::empty(y.dtype(), {y.dim(0), y.dim(3), y.dim(1), y.dim(2)}) : y;
      Status st = quant::qlinear_conv(x, zero_points_of(in[2], 1)[0], *in[3], zero_points_of(in[5], rq.channels()), bias, p, rq, yc);
      if (!st.ok()) return st.error().with_context(what);
      if (out_cl) ops::transpose(yc, {0, 2, 3, 1}, y);
      return {};
    });
  };
  r["QLinearMatMul"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(auto rq0, constant_qlinear_requantizer(n));
    const std::string what = n.describe();
    // Fast path (ops::QMatMulAccumulator) for a constant symmetric int8 B [K, N], as for
    // QLinearConv: exact accumulators, the reference's requantization.
    auto constant = [&](size_t i) { return constant_input(n, i); };
    const Tensor* b = constant(3);
    const Tensor* bz = constant(5);
    const auto as = ir::static_shape(n.inputs[0]);
    bool fast = rq0 && b && b->rank() == 2 && b->dtype() == DType::i8 && as && !as->empty() && n.inputs[0]->dtype;
    fast = fast && all_zero(bz) && (n.inputs.size() < 9 || !n.inputs[8] || (constant(8) && constant(8)->numel() == b->dim(1)));
    if (fast && as->back() == b->dim(0)) {
      int64_t rows = 1;
      for (size_t d = 0; d + 1 < as->size(); ++d) rows *= (*as)[d];
      const int32_t a_zp = constant(2) ? static_cast<int32_t>(constant(2)->get_as_double(0)) : 0;
      auto acc = ops::make_qmatmul_accumulator(rows, *n.inputs[0]->dtype, a_zp, *b);
      if (acc.ok() && constant(2)) {
        std::shared_ptr<ops::QMatMulAccumulator> a = std::move(acc).value();
        const int64_t N = b->dim(1);
        auto buf = std::make_shared<Tensor>(Tensor::empty(DType::i32, {rows, N}));
        const quant::Requantizer rq = *rq0;
        const Tensor bias = constant(8) ? constant(8)->contiguous() : Tensor();
        return Kernel([a, buf, rq, rows, N, bias, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          Status st = a->run(*in[0], *buf);
          if (!st.ok()) return st.error().with_context(what);
          const int32_t* ac = buf->data<int32_t>();
          const int32_t* bb = bias.defined() ? bias.data<int32_t>() : nullptr;
          Tensor& y = out[0];
          for (int64_t i = 0; i < rows * N; ++i) store_int8(y, i, rq.apply(ac[i] + (bb ? bb[i % N] : 0), static_cast<size_t>(i % N)));
          return {};
        });
      }
    }
    RKD_ASSIGN(quant::Requant convention, node_requant(n));
    RKD_ASSIGN(ActRange act, node_act_range(n));
    return Kernel([what, rq0, convention, act](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      RKD_ASSIGN(quant::Requantizer rq, rq0 ? Result<quant::Requantizer>(*rq0) : qlinear_requantizer(in, out[0].dtype(), convention, act));
      const Tensor bias = in.size() > 8 && in[8] ? *in[8] : Tensor();
      Status st = quant::qlinear_matmul(*in[0], zero_points_of(in[2], 1)[0], *in[3], zero_points_of(in[5], rq.channels()), rq, out[0], bias);
      return st.ok() ? st : st.error().with_context(what);
    });
  };
}

}  // namespace rkd::runtime::detail
