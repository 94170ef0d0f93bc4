// Kernels added by following docs/adding-an-op.md, against double-precision definitions of
// their ONNX semantics: Mish (Debian's libonnx-testdata 1.12 has no case for it), and cases
// larger than the conformance data's for InstanceNormalization, IsNaN and IsInf (which
// tests/runtime/test_node_conformance.cc also runs). Float results use tests/common/
// tolerance.h's float_agree; bool results are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "common/tolerance.h"
#include "ir/passes/shape_inference.h"
#include "runtime/op_registry.h"

namespace rkd {
namespace {

struct OneNode {
  ir::Graph g;
  ir::Node* n = nullptr;
};

// One node `op` reading graph inputs of the given shapes (float32), shapes inferred.
void build(OneNode& o, const std::string& op, const std::vector<Shape>& shapes) {
  o.g.opset = 17;
  std::vector<ir::Value*> ins;
  for (size_t i = 0; i < shapes.size(); ++i) {
    char name[24];  // not "x" + to_string(i): gcc 12's -Wrestrict false positive
    std::snprintf(name, sizeof name, "x%zu", i);
    ir::Value* v = *o.g.add_value(name);
    v->dtype = DType::f32;
    ir::Dims d;
    for (int64_t k : shapes[i]) d.push_back(ir::Dim{k, ""});
    v->shape = d;
    o.g.inputs.push_back(v);
    ins.push_back(v);
  }
  o.n = *o.g.add_node(op, op, "", ins, {"y"});
}

Tensor run(OneNode& o, const std::vector<const Tensor*>& in) {
  EXPECT_TRUE(ir::infer_node(*o.n, o.g.opset).ok());
  auto out = runtime::evaluate_node(*o.n, o.g.opset, in);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().to_string());
  return out.ok() ? (*out)[0] : Tensor();
}

// Inputs that reach every branch: zeros of both signs, tiny and huge magnitudes, the
// softplus switch-over, infinities and NaN, and a dense sweep.
std::vector<float> sweep() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.f,
                          -0.f,
                          1e-30f,
                          -1e-30f,
                          1e-7f,
                          -1e-7f,
                          20.f,
                          -20.f,
                          88.f,
                          -88.f,
                          89.f,
                          -89.f,
                          1e30f,
                          -1e30f,
                          3.4e38f,
                          -3.4e38f,
                          inf,
                          -inf,
                          std::numeric_limits<float>::quiet_NaN()};
  for (int i = -4000; i <= 4000; ++i) v.push_back(static_cast<float>(i) / 200.f);
  return v;
}

TEST(OpKernels, MishMatchesItsDefinition) {
  const std::vector<float> xs = sweep();
  OneNode o;
  build(o, "Mish", {{static_cast<int64_t>(xs.size())}});
  Tensor x = Tensor::empty(DType::f32, {static_cast<int64_t>(xs.size())});
  std::copy(xs.begin(), xs.end(), x.data<float>());
  const Tensor y = run(o, {&x});
  ASSERT_TRUE(y.defined());
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    // softplus in double without overflow: log1p(exp(-|v|)) + max(v, 0). At -inf the
    // definition is -inf * tanh(0) = NaN, as ONNX's reference (numpy) and PyTorch compute it.
    const double want = v * std::tanh(std::log1p(std::exp(-std::fabs(v))) + std::max(v, 0.0));
    // Three transcendental steps (exp, log1p, tanh) and a product, each within an ulp or two.
    EXPECT_TRUE(test::float_agree(y.data<float>()[i], static_cast<float>(want), 0.0, 2))
        << "x = " << v << ": got " << y.data<float>()[i] << ", want " << want;
  }
}

TEST(OpKernels, IsNaNAndIsInfClassifyEveryKind) {
  const std::vector<float> xs = sweep();
  Tensor x = Tensor::empty(DType::f32, {static_cast<int64_t>(xs.size())});
  std::copy(xs.begin(), xs.end(), x.data<float>());
  OneNode nan;
  build(nan, "IsNaN", {x.shape()});
  const Tensor yn = run(nan, {&x});
  ASSERT_EQ(yn.dtype(), DType::b8);
  for (int neg = 0; neg < 2; ++neg) {
    for (int pos = 0; pos < 2; ++pos) {
      OneNode inf;
      build(inf, "IsInf", {x.shape()});
      inf.n->attrs["detect_negative"] = int64_t{neg};
      inf.n->attrs["detect_positive"] = int64_t{pos};
      const Tensor yi = run(inf, {&x});
      ASSERT_EQ(yi.dtype(), DType::b8);
      for (size_t i = 0; i < xs.size(); ++i) {
        const float v = xs[i];
        EXPECT_EQ(yn.data<uint8_t>()[i], v != v ? 1 : 0) << v;
        const bool want = (v == std::numeric_limits<float>::infinity() && pos) || (v == -std::numeric_limits<float>::infinity() && neg);
        EXPECT_EQ(yi.data<uint8_t>()[i], want ? 1 : 0) << v << " neg " << neg << " pos " << pos;
      }
    }
  }
}

TEST(OpKernels, InstanceNormalizationMatchesItsDefinition) {
  const Shape xs{2, 5, 7, 9, 3};  // 3-D spatial: any rank >= 3 is allowed
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  Tensor x = Tensor::empty(DType::f32, xs), scale = Tensor::empty(DType::f32, {5}), bias = Tensor::empty(DType::f32, {5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng) + 100.f;  // a large mean: cancellation
  for (int64_t c = 0; c < 5; ++c) scale.data<float>()[c] = u(rng), bias.data<float>()[c] = u(rng);
  const int64_t plane = 7 * 9 * 3;
  for (int64_t i = 0; i < plane; ++i) x.data<float>()[(1 * 5 + 2) * plane + i] = 4.f;  // one constant plane: variance 0
  OneNode o;
  build(o, "InstanceNormalization", {xs, {5}, {5}});
  o.n->attrs["epsilon"] = 1e-3f;
  const Tensor y = run(o, {&x, &scale, &bias});
  ASSERT_TRUE(y.defined());
  for (int64_t p = 0; p < 2 * 5; ++p) {
    const int64_t c = p % 5;
    const float* xr = x.data<float>() + p * plane;
    double m = 0, v = 0;
    for (int64_t i = 0; i < plane; ++i) m += xr[i];
    m /= plane;
    for (int64_t i = 0; i < plane; ++i) v += (xr[i] - m) * (xr[i] - m);
    v /= plane;
    const double k = scale.data<float>()[c] / std::sqrt(v + 1e-3);
    for (int64_t i = 0; i < plane; ++i) {
      const double want = (xr[i] - m) * k + bias.data<float>()[c];
      // x - mean in float32 (inputs near 100: |x| + |mean| is the magnitude), times k, plus B.
      const double mag = (std::fabs(xr[i]) + std::fabs(m)) * std::fabs(k) + std::fabs(bias.data<float>()[c]);
      EXPECT_TRUE(test::float_agree(y.data<float>()[p * plane + i], want, mag, 3)) << "plane " << p << " element " << i;
    }
  }
}

}  // namespace
}  // namespace rkd
