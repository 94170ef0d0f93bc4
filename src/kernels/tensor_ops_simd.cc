// Highway SIMD loops for the transcendental elementwise ops and row softmax of
// tensor_ops (dynamic dispatch: the best target of the running CPU).
//
// Accuracy (all float32): Exp is Highway's contrib Exp (documented within a few ULP);
// Sigmoid = 1 / (1 + Exp(-x)) with x clamped to [-88, 88] (the result is already 0 or 1
// to float precision there); NaN in gives NaN out (Exp, Sigmoid and a softmax row with a NaN,
// as in PyTorch and ONNX Runtime: Highway's Exp and a clamp through Min/Max would not); Erf is Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7,
// the same class of approximation ONNX Runtime's MLAS uses). These are float kernels
// compared with tolerance (tests/common/tolerance.h), not exact-semantics paths.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/tensor_ops_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/isa.h"
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/tensor_ops_simd.h"

HWY_BEFORE_NAMESPACE();
namespace rkd::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename F>
void MapTail(const float* x, float* y, int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(f(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    // Tail through a zero-padded buffer (Highway 1.0 has no partial loads).
    HWY_ALIGN float buf[hn::MaxLanes(d)] = {};
    const size_t rest = static_cast<size_t>(n - i);
    std::memcpy(buf, x + i, rest * sizeof(float));
    hn::Store(f(d, hn::Load(d, buf)), d, buf);
    std::memcpy(y + i, buf, rest * sizeof(float));
  }
}

struct ExpOp {
  template <class D, class V>
  V operator()(D d, V v) const {
    return hn::IfThenElse(hn::IsNaN(v), v, hn::CallExp(d, v));
  }
};
struct SigmoidOp {
  template <class D, class V>
  V operator()(D d, V v) const {
    const V c = hn::Min(hn::Max(v, hn::Set(d, -88.f)), hn::Set(d, 88.f));
    const V one = hn::Set(d, 1.f);
    return hn::IfThenElse(hn::IsNaN(v), v, hn::Div(one, hn::Add(one, hn::CallExp(d, hn::Neg(c)))));
  }
};
struct ErfOp {
  template <class D, class V>
  V operator()(D d, V v) const {
    const V a = hn::Abs(v);
    const V t = hn::Div(hn::Set(d, 1.f), hn::MulAdd(hn::Set(d, 0.3275911f), a, hn::Set(d, 1.f)));
    V p = hn::Set(d, 1.061405429f);
    p = hn::MulAdd(p, t, hn::Set(d, -1.453152027f));
    p = hn::MulAdd(p, t, hn::Set(d, 1.421413741f));
    p = hn::MulAdd(p, t, hn::Set(d, -0.284496736f));
    p = hn::MulAdd(p, t, hn::Set(d, 0.254829592f));
    p = hn::Mul(p, t);
    const V e = hn::CallExp(d, hn::Neg(hn::Mul(a, a)));
    const V r = hn::NegMulAdd(p, e, hn::Set(d, 1.f));
    return hn::CopySign(r, v);
  }
};

void MapExp(const float* x, float* y, int64_t n) { MapTail(x, y, n, ExpOp()); }
void MapSigmoid(const float* x, float* y, int64_t n) { MapTail(x, y, n, SigmoidOp()); }
void MapErf(const float* x, float* y, int64_t n) { MapTail(x, y, n, ErfOp()); }

void SoftmaxRow(const float* x, float* y, int64_t n, bool log) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  auto vmax = hn::Set(d, -INFINITY);
  auto nan = hn::Zero(d);  // all-ones lanes where a NaN was seen
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::LoadU(d, x + i);
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
    vmax = hn::Max(vmax, v);
  }
  bool any_nan = !hn::AllFalse(d, hn::MaskFromVec(nan));
  float m = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (; i < n; ++i) {
    any_nan |= std::isnan(x[i]);
    m = std::max(m, x[i]);
  }
  if (any_nan || (std::isinf(m) && m > 0)) {
    // A NaN, or +inf (inf - inf in the exponent), makes every value of the row NaN.
    std::fill(y, y + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  if (std::isinf(m) && m < 0) m = 0.f;  // a row of -inf: exp gives 0s, as the scalar loop
  const auto vm = hn::Set(d, m);
  auto vsum = hn::Zero(d);
  i = 0;
  for (; i + L <= n; i += L) {
    const auto e = hn::CallExp(d, hn::Sub(hn::LoadU(d, x + i), vm));
    if (!log) hn::StoreU(e, d, y + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < n; ++i) {
    const float e = std::exp(x[i] - m);
    if (!log) y[i] = e;
    sum += e;
  }
  if (log) {
    const float ls = std::log(sum);
    for (int64_t k = 0; k < n; ++k) y[k] = x[k] - m - ls;
    return;
  }
  const auto inv = hn::Set(d, 1.f / sum);
  i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Mul(hn::LoadU(d, y + i), inv), d, y + i);
  for (; i < n; ++i) y[i] *= 1.f / sum;
}

// One row of LayerNormalization: two passes (mean, then the mean of squared deviations).
void LayerNormRow(const float* x, const float* scale, const float* bias, float* y, int64_t n, float eps, float* mean_out, float* inv_out) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  auto vs = hn::Zero(d);
  int64_t i = 0;
  for (; i + L <= n; i += L) vs = hn::Add(vs, hn::LoadU(d, x + i));
  float sum = hn::GetLane(hn::SumOfLanes(d, vs));
  for (; i < n; ++i) sum += x[i];
  const float mu = sum / static_cast<float>(n);
  const auto vmu = hn::Set(d, mu);
  auto vv = hn::Zero(d);
  i = 0;
  for (; i + L <= n; i += L) {
    const auto dv = hn::Sub(hn::LoadU(d, x + i), vmu);
    vv = hn::MulAdd(dv, dv, vv);
  }
  float var = hn::GetLane(hn::SumOfLanes(d, vv));
  for (; i < n; ++i) var += (x[i] - mu) * (x[i] - mu);
  var /= static_cast<float>(n);
  const float inv = 1.f / std::sqrt(var + eps);
  const auto vinv = hn::Set(d, inv);
  i = 0;
  for (; i + L <= n; i += L) {
    auto v = hn::Mul(hn::Mul(hn::Sub(hn::LoadU(d, x + i), vmu), vinv), hn::LoadU(d, scale + i));
    if (bias) v = hn::Add(v, hn::LoadU(d, bias + i));
    hn::StoreU(v, d, y + i);
  }
  for (; i < n; ++i) {
    const float v = (x[i] - mu) * inv * scale[i];
    y[i] = bias ? v + bias[i] : v;
  }
  if (mean_out) *mean_out = mu;
  if (inv_out) *inv_out = inv;
}

// The target HWY_DYNAMIC_DISPATCH runs (every Highway kernel of the project picks the same one:
// the best the CPU supports among those compiled and not disabled by the ISA ceiling).
const char* DispatchedTarget() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace rkd::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd::ops {

RKD_HIGHWAY_HONOURS_ISA_CEILING;
HWY_EXPORT(MapExp);
HWY_EXPORT(MapSigmoid);
HWY_EXPORT(MapErf);
HWY_EXPORT(SoftmaxRow);
HWY_EXPORT(LayerNormRow);
HWY_EXPORT(DispatchedTarget);

const char* highway_dispatched_target() { return HWY_DYNAMIC_DISPATCH(DispatchedTarget)(); }
void simd_exp(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(MapExp)(x, y, n); }
void simd_sigmoid(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(MapSigmoid)(x, y, n); }
void simd_erf(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(MapErf)(x, y, n); }
void simd_softmax_row(const float* x, float* y, int64_t n, bool log) { HWY_DYNAMIC_DISPATCH(SoftmaxRow)(x, y, n, log); }
void simd_layer_norm_row(const float* x, const float* scale, const float* bias, float* y, int64_t n, float eps, float* mean, float* inv_std) {
  HWY_DYNAMIC_DISPATCH(LayerNormRow)(x, scale, bias, y, n, eps, mean, inv_std);
}
}  // namespace rkd::ops
#endif
