#include "runtime/op_registry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "ir/op_info.h"
#include "ir/passes/shape_inference.h"
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

std::vector<int64_t> ints_of(const Tensor* t) {
  std::vector<int64_t> v;
  if (!t) return v;
  const Tensor d = t->contiguous();
  for (int64_t i = 0; i < d.numel(); ++i) {
    v.push_back(d.dtype() == DType::i32 ? d.data<int32_t>()[i] : d.data<int64_t>()[i]);
  }
  return v;
}

}  // namespace detail

namespace {

struct Registry {
  std::map<std::string, detail::Factory> onnx, rkdeploy;
};

const Registry& registry() {
  static const Registry r = [] {
    Registry m;
    detail::register_elementwise_ops(m.onnx);
    detail::register_layout_ops(m.onnx);
    detail::register_nn_ops(m.onnx);
    detail::register_int8_ops(m.onnx);
    detail::register_rkdeploy_ops(m.rkdeploy);
    return m;
  }();
  return r;
}

const detail::Factory* factory(const std::string& domain, const std::string& op_type) {
  const auto* m = domain.empty() || domain == "ai.onnx" ? &registry().onnx : domain == "rkdeploy" ? &registry().rkdeploy : nullptr;
  if (!m) return nullptr;
  auto it = m->find(op_type);
  return it == m->end() ? nullptr : &it->second;
}

}  // namespace

bool has_kernel(const std::string& domain, const std::string& op_type) { return factory(domain, op_type) != nullptr; }

std::vector<std::pair<std::string, std::string>> kernel_ops() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& [k, f] : registry().onnx) v.emplace_back("", k);
  for (const auto& [k, f] : registry().rkdeploy) v.emplace_back("rkdeploy", k);
  return v;
}

Result<Kernel> prepare_op(const ir::Node& n, int64_t opset) {
  if (!has_kernel(n.domain, n.op_type)) {
    return unsupported(n.describe() + ": no CPU kernel for " + (n.domain.empty() ? "" : n.domain + ".") + n.op_type);
  }
  if (ir::op_has(n, ir::kFloatOnly) && !n.inputs.empty() && n.inputs[0] && n.inputs[0]->dtype && *n.inputs[0]->dtype != DType::f32) {
    return unsupported(n.describe() + ": input of type " + dtype_name(*n.inputs[0]->dtype) + " (float32 only)");
  }
  return (*factory(n.domain, n.op_type))(n, opset);
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
