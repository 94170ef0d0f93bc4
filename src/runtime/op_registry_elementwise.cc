// Kernels of the elementwise family: unary and binary arithmetic, comparisons, logic, Clip,
// Cast, Where.
#include "runtime/op_registry_detail.h"

#include <cmath>

#include "kernels/tensor_ops.h"

namespace rkd::runtime::detail {

namespace {

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

}  // namespace

void register_elementwise_ops(std::map<std::string, Factory>& r) {
  using U = ops::Unary;
  using B = ops::Binary;
  const std::pair<const char*, U> unary[] = {
      {"Relu", U::relu},   {"Sigmoid", U::sigmoid},   {"Tanh", U::tanh},   {"Erf", U::erf},         {"Sqrt", U::sqrt},
      {"Exp", U::exp},     {"Log", U::log},           {"Abs", U::abs},     {"Neg", U::neg},         {"Reciprocal", U::reciprocal},
      {"Floor", U::floor}, {"Ceil", U::ceil},         {"Round", U::round}, {"Sign", U::sign},       {"Sin", U::sin},
      {"Cos", U::cos},     {"Softplus", U::softplus}, {"Mish", U::mish},   {"Not", U::logical_not}, {"HardSwish", U::hard_swish}};
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
    // The attribute read into a bool before any branch on it: gcc 12 warns (-Wmaybe-uninitialized,
    // a false positive) on comparing a string moved out of a Result in this function.
    const auto approx = n.attr_string("approximate", "none");
    if (!approx.ok()) return approx.error();
    const bool tanh = *approx == "tanh";
    if (!tanh && *approx != "none") return invalid(n.describe() + ": approximate must be none or tanh");
    return simple_unary(tanh ? U::gelu_tanh : U::gelu_erf);
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
  r["Cast"] = [](const Node&, int64_t) -> Result<Kernel> {
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::cast(*in[0], out[0]); });
  };
  r["IsNaN"] = [](const Node&, int64_t) -> Result<Kernel> {
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::is_nan(*in[0], out[0]); });
  };
  r["IsInf"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(int64_t neg, n.attr_int("detect_negative", 1));
    RKD_ASSIGN(int64_t pos, n.attr_int("detect_positive", 1));
    return Kernel(
        [neg, pos](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::is_inf(*in[0], neg != 0, pos != 0, out[0]); });
  };
  r["Where"] = [](const Node&, int64_t) -> Result<Kernel> {
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::where(*in[0], *in[1], *in[2], out[0]); });
  };
}

}  // namespace rkd::runtime::detail
