#include "quant/int8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/isa.h"
#include "quant/int8_access.h"

namespace rkd::quant {

namespace {

using detail::load_q;
using detail::multiply;
using detail::store_q;

// Index along `axis` of flat element i of a dense tensor of shape s.
int64_t axis_index(const Shape& s, int axis, int64_t i) {
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  return (i / inner) % s[static_cast<size_t>(axis)];
}

Status check_params(const QuantParams& p, const Shape& s, const char* what) {
  if (p.scales.empty() || p.scales.size() != p.zero_points.size()) {
    return invalid(std::string(what) + ": one zero point per scale is needed");
  }
  if (p.scales.size() > 1) {
    if (p.axis < 0 || p.axis >= static_cast<int>(s.size())) return invalid(std::string(what) + ": axis out of range");
    if (static_cast<int64_t>(p.scales.size()) != s[static_cast<size_t>(p.axis)]) {
      return invalid(std::string(what) + ": " + std::to_string(p.scales.size()) + " scales for axis size " +
                     std::to_string(s[static_cast<size_t>(p.axis)]));
    }
  }
  for (float sc : p.scales) {
    if (!(sc > 0) || !std::isfinite(sc)) return invalid(std::string(what) + ": scales must be positive and finite");
  }
  return {};
}

}  // namespace

Result<std::pair<int32_t, int32_t>> quantized_range(DType t) {
  if (t == DType::i8) return std::make_pair(-128, 127);
  if (t == DType::u8) return std::make_pair(0, 255);
  return unsupported(std::string("quantized type ") + dtype_name(t) + " (int8 or uint8)");
}

namespace {

// Per-tensor fast forms of quantize (half to even) and dequantize: the same operations as the
// general loops below, on typed pointers so that they vectorise.
template <typename T>
[[gnu::always_inline]] inline void quantize_even_body(const float* __restrict x, int64_t n, float scale, float zp, float lo, float hi,
                                                      T* __restrict y) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] / scale;
    const float r = v != v ? 0.f : std::nearbyint(v);  // NaN -> 0
    y[i] = static_cast<T>(static_cast<int32_t>(std::min(std::max(r + zp, lo), hi)));
  }
}
RKD_ISA_CLONES(quantize_even_i8, (const float* x, int64_t n, float scale, float zp, int8_t* y), (x, n, scale, zp, y),
               quantize_even_body(x, n, scale, zp, -128.f, 127.f, y))
RKD_ISA_CLONES(quantize_even_u8, (const float* x, int64_t n, float scale, float zp, uint8_t* y), (x, n, scale, zp, y),
               quantize_even_body(x, n, scale, zp, 0.f, 255.f, y))
template <typename T>
[[gnu::always_inline]] inline void dequantize_body(const T* __restrict q, int64_t n, int32_t zp, float scale, float* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(q[i]) - zp) * scale;
}
RKD_ISA_CLONES(dequantize_i8, (const int8_t* q, int64_t n, int32_t zp, float scale, float* y), (q, n, zp, scale, y),
               dequantize_body(q, n, zp, scale, y))
RKD_ISA_CLONES(dequantize_u8, (const uint8_t* q, int64_t n, int32_t zp, float scale, float* y), (q, n, zp, scale, y),
               dequantize_body(q, n, zp, scale, y))

}  // namespace

Status quantize(const Tensor& x0, const QuantParams& p, QuantizeRounding rounding, Tensor& out) {
  if (x0.dtype() != DType::f32) return invalid("quantize: input must be float32");
  RKD_ASSIGN(auto range, quantized_range(out.dtype()));
  RKD_TRY(check_params(p, x0.shape(), "quantize"));
  const Tensor x = x0.contiguous();
  const int64_t n = x.numel();
  if (p.scales.size() == 1 && rounding == QuantizeRounding::half_to_even && out.is_contiguous() && out.numel() == n) {
    const float zp = static_cast<float>(p.zero_points[0]);
    if (out.dtype() == DType::i8) quantize_even_i8(x.data<float>(), n, p.scales[0], zp, out.data<int8_t>());
    else quantize_even_u8(x.data<float>(), n, p.scales[0], zp, out.data<uint8_t>());
    return {};
  }
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = p.scales.size() == 1 ? 0 : static_cast<size_t>(axis_index(x.shape(), p.axis, i));
    const float v = x.data<float>()[i] / p.scales[k];
    float r;
    if (std::isnan(v)) r = 0.f;
    else if (rounding == QuantizeRounding::half_to_even) r = std::nearbyint(v);
    else r = std::round(v);
    const float q = std::min(std::max(r + static_cast<float>(p.zero_points[k]), static_cast<float>(range.first)), static_cast<float>(range.second));
    store_q(out, i, static_cast<int32_t>(q));
  }
  return {};
}

Status dequantize(const Tensor& q0, const QuantParams& p, Tensor& out) {
  if (q0.dtype() != DType::i8 && q0.dtype() != DType::u8 && q0.dtype() != DType::i32) {
    return invalid(std::string("dequantize: input type ") + dtype_name(q0.dtype()) + " (int8, uint8 or int32)");
  }
  RKD_TRY(check_params(p, q0.shape(), "dequantize"));
  const Tensor q = q0.contiguous();
  const int64_t n = q.numel();
  if (p.scales.size() == 1 && q.dtype() != DType::i32 && out.is_contiguous() && out.numel() == n) {
    if (q.dtype() == DType::i8) dequantize_i8(q.data<int8_t>(), n, p.zero_points[0], p.scales[0], out.data<float>());
    else dequantize_u8(q.data<uint8_t>(), n, p.zero_points[0], p.scales[0], out.data<float>());
    return {};
  }
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = p.scales.size() == 1 ? 0 : static_cast<size_t>(axis_index(q.shape(), p.axis, i));
    const int32_t v = q.dtype() == DType::i32 ? q.data<int32_t>()[i] : load_q(q, i);
    out.data<float>()[i] = static_cast<float>(v - p.zero_points[k]) * p.scales[k];
  }
  return {};
}

Status qlinear_conv(const Tensor& x0, int32_t x_zp, const Tensor& w0, const std::vector<int32_t>& w_zp, const Tensor& bias, const QConvParams& p,
                    const Requantizer& rq, Tensor& out) {
  if (x0.rank() != 4 || w0.rank() != 4 || out.rank() != 4) return unsupported("qlinear_conv: 2-D convolutions only");
  const Tensor x = x0.contiguous(), w = w0.contiguous();
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t M = w.dim(0), Cg = w.dim(1), KH = w.dim(2), KW = w.dim(3);
  const int64_t OH = out.dim(2), OW = out.dim(3);
  if (p.group < 1 || C != Cg * p.group || M % p.group != 0) return invalid("qlinear_conv: channels do not match the group");
  if (w_zp.size() != 1 && static_cast<int64_t>(w_zp.size()) != M) return invalid("qlinear_conv: w_zero_point size");
  if (rq.channels() != 1 && static_cast<int64_t>(rq.channels()) != M) return invalid("qlinear_conv: one scale per output channel");
  if (bias.defined() && (bias.dtype() != DType::i32 || bias.numel() != M)) return invalid("qlinear_conv: bias must be int32 [M]");
  // The accumulator bound of the contract.
  int64_t max_bias = 0;
  for (int64_t m = 0; bias.defined() && m < M; ++m) max_bias = std::max<int64_t>(max_bias, std::abs(static_cast<int64_t>(bias.data<int32_t>()[m])));
  if (Cg * KH * KW * 255 * 255 + max_bias > std::numeric_limits<int32_t>::max()) {
    return invalid("qlinear_conv: " + std::to_string(Cg * KH * KW) + " taps per output could overflow the int32 accumulator");
  }
  const int64_t Mg = M / p.group;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / Mg;
      const int32_t wz = w_zp[w_zp.size() == 1 ? 0 : static_cast<size_t>(m)];
      for (int64_t oy = 0; oy < OH; ++oy) {
        for (int64_t ox = 0; ox < OW; ++ox) {
          int32_t acc = bias.defined() ? bias.data<int32_t>()[m] : 0;
          for (int64_t c = 0; c < Cg; ++c) {
            for (int64_t ky = 0; ky < KH; ++ky) {
              const int64_t iy = oy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
              if (iy < 0 || iy >= H) continue;
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t ix = ox * p.strides[1] - p.pads[1] + kx * p.dilations[1];
                if (ix < 0 || ix >= W) continue;
                const int32_t xv = load_q(x, ((n * C + g * Cg + c) * H + iy) * W + ix) - x_zp;
                const int32_t wv = load_q(w, ((m * Cg + c) * KH + ky) * KW + kx) - wz;
                acc += xv * wv;
              }
            }
          }
          store_q(out, ((n * M + m) * OH + oy) * OW + ox, rq.apply(acc, static_cast<size_t>(m)));
        }
      }
    }
  }
  return {};
}

Status qlinear_matmul(const Tensor& a0, int32_t a_zp, const Tensor& b0, const std::vector<int32_t>& b_zp, const Requantizer& rq, Tensor& out,
                      const Tensor& bias) {
  const Tensor a = a0.contiguous(), b = b0.contiguous();
  if (a.rank() < 2 || b.rank() < 2) return unsupported("qlinear_matmul: operands of rank >= 2 only");
  const int64_t M = a.dim(-2), K = a.dim(-1), N = b.dim(-1);
  if (b.dim(-2) != K) return invalid("qlinear_matmul: inner dimensions differ");
  const int64_t batch = a.numel() / (M * K);
  const int64_t b_batch = b.numel() / (K * N);
  if (b_batch != 1 && b_batch != batch) return unsupported("qlinear_matmul: b must be 2-D or have a's batch");
  if (b_zp.size() != 1 && static_cast<int64_t>(b_zp.size()) != N) return invalid("qlinear_matmul: b_zero_point size");
  if (bias.defined() && (bias.dtype() != DType::i32 || bias.numel() != N)) return invalid("qlinear_matmul: bias must be int32 [N]");
  int64_t max_bias = 0;
  for (int64_t j = 0; bias.defined() && j < N; ++j) max_bias = std::max<int64_t>(max_bias, std::abs(static_cast<int64_t>(bias.data<int32_t>()[j])));
  if (K * 255 * 255 + max_bias > std::numeric_limits<int32_t>::max()) return invalid("qlinear_matmul: K could overflow the accumulator");
  for (int64_t bt = 0; bt < batch; ++bt) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        const int32_t bz = b_zp[b_zp.size() == 1 ? 0 : static_cast<size_t>(j)];
        int32_t acc = bias.defined() ? bias.data<int32_t>()[j] : 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += (load_q(a, (bt * M + i) * K + k) - a_zp) * (load_q(b, ((b_batch == 1 ? 0 : bt) * K + k) * N + j) - bz);
        }
        store_q(out, (bt * M + i) * N + j, rq.apply(acc, static_cast<size_t>(j)));
      }
    }
  }
  return {};
}

namespace {
// b's shape padded on the left to a's rank, when b broadcasts to a one way (each of its
// dimensions 1 or a's).
std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  if (b.size() > a.size()) return std::nullopt;
  Shape p(a.size() - b.size(), 1);
  p.insert(p.end(), b.begin(), b.end());
  for (size_t d = 0; d < a.size(); ++d) {
    if (p[d] != 1 && p[d] != a[d]) return std::nullopt;
  }
  return p;
}

// a's elements as runs [a0, a0 + n) over which b is one element (scalar: b[b0]) or the run
// of b's elements from b0 (a run of a's innermost dimensions that b has whole).
struct Run {
  int64_t a0 = 0, b0 = 0, n = 0;
  bool scalar = false;
};
template <typename F>
void for_each_run(const Shape& a, const Shape& bp, F f) {
  const size_t r = a.size();
  // The innermost dimensions b either has whole or broadcasts (size-1 dimensions of a fit both).
  size_t inner = r;
  bool scalar = false, decided = false;
  int64_t n = 1;
  while (inner > 0) {
    const size_t d = inner - 1;
    if (a[d] != 1) {
      const bool s = bp[d] == 1;
      if (decided && s != scalar) break;
      scalar = s;
      decided = true;
    }
    n *= a[d];
    --inner;
  }
  // b's strides over the outer dimensions (0 where it broadcasts).
  std::vector<int64_t> bstride(r, 0);
  int64_t st = 1;
  for (size_t d = r; d-- > 0;) {
    bstride[d] = bp[d] == 1 ? 0 : st;
    st *= bp[d];
  }
  std::vector<int64_t> idx(inner, 0);
  for (int64_t a0 = 0;; a0 += n) {
    int64_t b0 = 0;
    for (size_t d = 0; d < inner; ++d) b0 += idx[d] * bstride[d];
    if (n > 0) f(Run{a0, b0, n, scalar});
    size_t d = inner;
    while (d > 0 && ++idx[d - 1] == a[d - 1]) idx[--d] = 0;
    if (d == 0) return;
  }
}

// f(i, j) for every element i of a and the element j of b it meets (a and b contiguous, b
// broadcasting to a: check_binary).
template <typename F>
void for_each_element(const Tensor& a, const Tensor& b, F f) {
  for_each_run(a.shape(), *broadcast_shape(a.shape(), b.shape()), [&](const Run& r) {
    for (int64_t i = 0; i < r.n; ++i) f(r.a0 + i, r.scalar ? r.b0 : r.b0 + i);
  });
}

// f(pa, pb, n, po, scalar) over a's runs (for_each_run), with the element pointers of a's
// type: int8_t or uint8_t (f is generic over them).
template <typename F>
void for_each_typed_run(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  for_each_run(a.shape(), *broadcast_shape(a.shape(), b.shape()), [&](const Run& r) {
    if (a.dtype() == DType::i8) f(a.data<int8_t>() + r.a0, b.data<int8_t>() + r.b0, r.n, out.data<int8_t>() + r.a0, r.scalar);
    else f(a.data<uint8_t>() + r.a0, b.data<uint8_t>() + r.b0, r.n, out.data<uint8_t>() + r.a0, r.scalar);
  });
}

Status check_binary(const Tensor& a, const Tensor& b, const QBinaryParams& p, const Tensor& out, const char* what) {
  if (a.dtype() != b.dtype() || a.dtype() != out.dtype()) return invalid(std::string(what) + ": operand types differ");
  if (auto r = quantized_range(a.dtype()); !r.ok()) return r.error();
  if (!broadcast_shape(a.shape(), b.shape())) return unsupported(std::string(what) + ": b does not broadcast to a's shape");
  if (out.shape() != a.shape()) return invalid(std::string(what) + ": output shape differs from a");
  if (!(p.a_scale > 0) || !(p.b_scale > 0) || !(p.out_scale > 0)) return invalid(std::string(what) + ": scales must be positive");
  if (p.act_min > p.act_max) return invalid(std::string(what) + ": empty activation range");
  return {};
}
}  // namespace

namespace {
// ONNX Runtime's QLinearAdd (MLAS, x86-64): the inputs scaled by float32 ratios to the
// output scale; a's term is added to b's with one fused multiply-add (exactly rounded, so the
// same in every clone); clamped a step beyond the output range, then rounded half to even by
// the 1.5 * 2^23 trick (exact for |v| < 2^22; the same as nearbyint in the default rounding mode).
struct OrtAdd {
  float ra, rb, lo, hi;
  int32_t a_zp, b_zp, out_zp, act_min, act_max;
  bool subtract, scalar_b;
};
template <typename T>
[[gnu::always_inline]] inline void ort_add_body(const OrtAdd& k, const T* __restrict pa, const T* __restrict pb, int64_t n, T* __restrict po) {
  const float sign = k.subtract ? -1.f : 1.f;
  for (int64_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(static_cast<int32_t>(pa[i]) - k.a_zp);
    const float vb = sign * (k.rb * static_cast<float>(static_cast<int32_t>(pb[k.scalar_b ? 0 : i]) - k.b_zp));
    const float v = std::min(std::max(std::fma(k.ra, fa, vb), k.lo), k.hi);
    const float r = (v + 12582912.f) - 12582912.f;
    const int32_t y = static_cast<int32_t>(r) + k.out_zp;
    po[i] = static_cast<T>(std::min(std::max(y, k.act_min), k.act_max));
  }
}
RKD_ISA_CLONES(ort_add_i8, (const OrtAdd& k, const int8_t* a, const int8_t* b, int64_t n, int8_t* y), (k, a, b, n, y), ort_add_body(k, a, b, n, y))
RKD_ISA_CLONES(ort_add_u8, (const OrtAdd& k, const uint8_t* a, const uint8_t* b, int64_t n, uint8_t* y), (k, a, b, n, y), ort_add_body(k, a, b, n, y))

// ONNX Runtime's QLinearMul (MLAS's SSE2 kernel): w = f32(f32(d_a d_b) * ratio) + f32(z_out)
// rounded at each step (this build never contracts them: -ffp-contract=off), then half to
// even and the saturating packs: clamp to [lo, hi] (the type's range, then the activation's).
// The rounding is the 1.5 * 2^23 trick on w clamped a step beyond [lo, hi] (exact there).
struct OrtMul {
  float ratio, zc, flo, fhi;
  int32_t a_zp, b_zp, lo, hi;
  bool scalar_b;
};
template <typename T>
[[gnu::always_inline]] inline void ort_mul_body(const OrtMul& k, const T* __restrict pa, const T* __restrict pb, int64_t n, T* __restrict po) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t prod = (static_cast<int32_t>(pa[i]) - k.a_zp) * (static_cast<int32_t>(pb[k.scalar_b ? 0 : i]) - k.b_zp);
    const float w = std::min(std::max(static_cast<float>(prod) * k.ratio + k.zc, k.flo), k.fhi);
    const float r = (w + 12582912.f) - 12582912.f;
    po[i] = static_cast<T>(std::min(std::max(static_cast<int32_t>(r), k.lo), k.hi));
  }
}
RKD_ISA_CLONES(ort_mul_i8, (const OrtMul& k, const int8_t* a, const int8_t* b, int64_t n, int8_t* y), (k, a, b, n, y), ort_mul_body(k, a, b, n, y))
RKD_ISA_CLONES(ort_mul_u8, (const OrtMul& k, const uint8_t* a, const uint8_t* b, int64_t n, uint8_t* y), (k, a, b, n, y), ort_mul_body(k, a, b, n, y))

// The ISA clones by element type.
void ort_add(const OrtAdd& k, const int8_t* a, const int8_t* b, int64_t n, int8_t* y) { ort_add_i8(k, a, b, n, y); }
void ort_add(const OrtAdd& k, const uint8_t* a, const uint8_t* b, int64_t n, uint8_t* y) { ort_add_u8(k, a, b, n, y); }
void ort_mul(const OrtMul& k, const int8_t* a, const int8_t* b, int64_t n, int8_t* y) { ort_mul_i8(k, a, b, n, y); }
void ort_mul(const OrtMul& k, const uint8_t* a, const uint8_t* b, int64_t n, uint8_t* y) { ort_mul_u8(k, a, b, n, y); }

// The NPU's Mul (rknpu_mul_value) on one run: y = clamp(round_half_even(d_a d_b S / 2^H) + z).
template <typename T>
void rknpu_mul_run(const RknpuMul& k, const QBinaryParams& p, const T* pa, const T* pb, int64_t n, bool scalar_b, T* po) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = rknpu_mul_value(k, static_cast<int32_t>(pa[i]) - p.a_zero_point, static_cast<int32_t>(pb[scalar_b ? 0 : i]) - p.b_zero_point);
    po[i] = static_cast<T>(std::clamp<int64_t>(v + p.out_zero_point, p.act_min, p.act_max));
  }
}
}  // namespace

const char* to_string(BinaryAlu a) {
  switch (a) {
    case BinaryAlu::add: return "Add";
    case BinaryAlu::sub: return "Sub";
    case BinaryAlu::max: return "Max";
    case BinaryAlu::min: return "Min";
  }
  return "?";
}

Result<RknpuAdd> rknpu_binary_plan(const QBinaryParams& p, BinaryAlu alu, bool b_broadcast) {
  const std::string op = to_string(alu);
  if (!(p.a_scale > 0) || !(p.b_scale > 0) || !(p.out_scale > 0)) return invalid(op + ": scales must be positive");
  RknpuAdd k;
  k.alu = alu;
  // The larger scale is the main input (the EW term is then at most K), except a Sub's (the ALU
  // subtracts the EW term) and a broadcast b's (ERDMA reads it per channel): a is main and K
  // shrinks until K s_b / s_a < 2^15.
  k.b_is_main = alu != BinaryAlu::sub && !b_broadcast && p.b_scale > p.a_scale;
  const double sm = k.b_is_main ? p.b_scale : p.a_scale, se = k.b_is_main ? p.a_scale : p.b_scale;
  while (k.main_mul > 1 && k.main_mul * se / sm >= 32767.5) k.main_mul /= 2;
  auto ew = quantize_multiplier_15(k.main_mul * se / sm);
  if (!ew.ok()) return unsupported(op + ": operand scale ratio " + std::to_string(se / sm) + " outside the EW converter's range");
  k.ew = *ew;
  auto out = quantize_multiplier_15(sm / (k.main_mul * static_cast<double>(p.out_scale)));
  if (!out.ok()) return unsupported(op + ": output multiplier " + std::to_string(sm / p.out_scale) + " outside OUT_CVT's range");
  k.out = *out;
  return k;
}

namespace {
// v / 2^s rounded half up (even = false) or half to even, exact in int64.
int64_t shift_round(int64_t v, int s, bool even) {
  if (s == 0) return v;
  const int64_t f = v >> s, rem = v & ((int64_t{1} << s) - 1), half = int64_t{1} << (s - 1);
  return f + (rem > half || (rem == half && (!even || (f & 1))) ? 1 : 0);
}
}  // namespace

Result<RknpuLeakyRelu> rknpu_leaky_relu_plan(double x_scale, double y_scale, double alpha) {
  if (!(x_scale > 0) || !(y_scale > 0)) return invalid("LeakyRelu: scales must be positive");
  if (!(alpha > 0 && alpha < 1))
    return unsupported("LeakyRelu: alpha " + std::to_string(alpha) + " outside (0, 1) (the NPU form takes max(x, alpha x))");
  RknpuLeakyRelu k;
  auto a = quantize_multiplier_15(k.main_mul * alpha);
  if (!a.ok()) return unsupported("LeakyRelu: alpha " + std::to_string(alpha) + " outside the EW converter's range");
  k.alpha = *a;
  auto out = quantize_multiplier_15(x_scale / (k.main_mul * y_scale));
  if (!out.ok()) return unsupported("LeakyRelu: multiplier " + std::to_string(x_scale / y_scale) + " outside OUT_CVT's range");
  k.out = *out;
  return k;
}

int64_t rknpu_leaky_relu_value(const RknpuLeakyRelu& k, int32_t dx) {
  const int64_t v =
      std::max<int64_t>(static_cast<int64_t>(dx) * k.main_mul, shift_round(static_cast<int64_t>(dx) * k.alpha.scale, k.alpha.shift, false));
  return shift_round(v * k.out.scale, k.out.shift, true);
}

Result<Tensor> rknpu_leaky_relu_table(DType t, double x_scale, int32_t x_zero_point, double y_scale, int32_t y_zero_point, double alpha) {
  RKD_ASSIGN(auto range, quantized_range(t));
  RKD_ASSIGN(RknpuLeakyRelu k, rknpu_leaky_relu_plan(x_scale, y_scale, alpha));
  Tensor table = Tensor::empty(t, {256});
  for (int32_t i = 0; i < 256; ++i) {
    const int32_t code = range.first + i;
    const int64_t y = rknpu_leaky_relu_value(k, code - x_zero_point) + y_zero_point;
    store_q(table, i, static_cast<int32_t>(std::clamp<int64_t>(y, range.first, range.second)));
  }
  return table;
}

int64_t rknpu_add_value(const RknpuAdd& k, int32_t dm, int32_t de) {
  const int64_t m = static_cast<int64_t>(dm) * k.main_mul, e = shift_round(static_cast<int64_t>(de) * k.ew.scale, k.ew.shift, false);
  int64_t v = m + e;
  if (k.alu == BinaryAlu::sub) v = m - e;
  else if (k.alu == BinaryAlu::max) v = std::max(m, e);
  else if (k.alu == BinaryAlu::min) v = std::min(m, e);
  return shift_round(v * k.out.scale, k.out.shift, true);
}

Status qdq_binary(const Tensor& a0, const Tensor& b0, const QBinaryParams& p, BinaryAlu alu, Tensor& out) {
  const std::string op = to_string(alu);
  RKD_TRY(check_binary(a0, b0, p, out, op.c_str()));
  const Tensor a = a0.contiguous(), b = b0.contiguous();
  if (p.convention == Requant::rknpu_out_cvt) {
    RKD_ASSIGN(RknpuAdd k, rknpu_binary_plan(p, alu, b.shape() != a.shape()));
    for_each_element(a, b, [&](int64_t i, int64_t j) {
      const int32_t da = load_q(a, i) - p.a_zero_point, db = load_q(b, j) - p.b_zero_point;
      const int64_t v = k.b_is_main ? rknpu_add_value(k, db, da) : rknpu_add_value(k, da, db);
      store_q(out, i, static_cast<int32_t>(std::clamp<int64_t>(v + p.out_zero_point, p.act_min, p.act_max)));
    });
    return {};
  }
  if (p.convention != Requant::onnx_float || alu == BinaryAlu::add) return unsupported(op + ": convention " + to_string(p.convention));
  Tensor fa = Tensor::empty(DType::f32, a.shape()), fb = Tensor::empty(DType::f32, b.shape()), fy = Tensor::empty(DType::f32, a.shape());
  RKD_TRY(dequantize(a, QuantParams{{p.a_scale}, {p.a_zero_point}}, fa));
  RKD_TRY(dequantize(b, QuantParams{{p.b_scale}, {p.b_zero_point}}, fb));
  const float* xa = fa.data<float>();
  const float* xb = fb.data<float>();
  float* y = fy.data<float>();
  for_each_element(a, b, [&](int64_t i, int64_t j) {
    y[i] = alu == BinaryAlu::sub ? xa[i] - xb[j] : alu == BinaryAlu::max ? std::max(xa[i], xb[j]) : std::min(xa[i], xb[j]);
  });
  RKD_TRY(quantize(fy, QuantParams{{p.out_scale}, {p.out_zero_point}}, QuantizeRounding::half_to_even, out));
  for (int64_t i = 0; i < out.numel(); ++i) store_q(out, i, std::clamp(load_q(out, i), p.act_min, p.act_max));
  return {};
}

Status tflite_add(const Tensor& a0, const Tensor& b0, const QBinaryParams& p, bool subtract, Tensor& out) {
  RKD_TRY(check_binary(a0, b0, p, out, subtract ? "Sub" : "Add"));
  const Tensor a = a0.contiguous(), b = b0.contiguous();
  if (p.convention == Requant::onnx_float) {
    const OrtAdd k{p.a_scale / p.out_scale,
                   p.b_scale / p.out_scale,
                   static_cast<float>(p.act_min - p.out_zero_point) - 1.f,
                   static_cast<float>(p.act_max - p.out_zero_point) + 1.f,
                   p.a_zero_point,
                   p.b_zero_point,
                   p.out_zero_point,
                   p.act_min,
                   p.act_max,
                   subtract,
                   false};
    for_each_typed_run(a, b, out, [&](const auto* pa, const auto* pb, int64_t n, auto* po, bool scalar) {
      OrtAdd kr = k;
      kr.scalar_b = scalar;
      ort_add(kr, pa, pb, n, po);
    });
    return {};
  }
  if (p.convention == Requant::rknpu_out_cvt) {
    if (subtract) return unsupported("Sub: rknpu_out_cvt's Sub is qdq_binary's");
    RKD_ASSIGN(RknpuAdd k, rknpu_binary_plan(p, BinaryAlu::add, b.shape() != a.shape()));
    for_each_element(a, b, [&](int64_t i, int64_t j) {
      const int32_t da = load_q(a, i) - p.a_zero_point, db = load_q(b, j) - p.b_zero_point;
      const int64_t v = k.b_is_main ? rknpu_add_value(k, db, da) : rknpu_add_value(k, da, db);
      store_q(out, i, static_cast<int32_t>(std::clamp<int64_t>(v + p.out_zero_point, p.act_min, p.act_max)));
    });
    return {};
  }
  constexpr int kLeftShift = 20;
  const double twice_max = 2.0 * std::max<double>(p.a_scale, p.b_scale);
  RKD_ASSIGN(QuantizedMultiplier ma, quantize_multiplier(p.a_scale / twice_max));
  RKD_ASSIGN(QuantizedMultiplier mb, quantize_multiplier(p.b_scale / twice_max));
  RKD_ASSIGN(QuantizedMultiplier mo, quantize_multiplier(twice_max / (static_cast<double>(1 << kLeftShift) * p.out_scale)));
  for_each_element(a, b, [&](int64_t i, int64_t j) {
    const int32_t va = multiply(p.convention, (load_q(a, i) - p.a_zero_point) * (1 << kLeftShift), ma);
    const int32_t vb = multiply(p.convention, (load_q(b, j) - p.b_zero_point) * (1 << kLeftShift), mb);
    const int32_t y = multiply(p.convention, subtract ? va - vb : va + vb, mo) + p.out_zero_point;
    store_q(out, i, std::clamp(y, p.act_min, p.act_max));
  });
  return {};
}

Result<RknpuMul> rknpu_mul_plan(const QBinaryParams& p) {
  if (!(p.a_scale > 0) || !(p.b_scale > 0) || !(p.out_scale > 0)) return invalid("Mul: scales must be positive");
  const double m = static_cast<double>(p.a_scale) * p.b_scale / p.out_scale;
  auto out = quantize_multiplier_15(m);
  if (!out.ok()) return unsupported("Mul: output multiplier " + std::to_string(m) + " outside OUT_CVT's range");
  return RknpuMul{*out};
}

int64_t rknpu_mul_value(const RknpuMul& k, int32_t da, int32_t db) {
  return shift_round(static_cast<int64_t>(da) * db * k.out.scale, k.out.shift, true);
}

Status tflite_mul(const Tensor& a0, const Tensor& b0, const QBinaryParams& p, Tensor& out) {
  RKD_TRY(check_binary(a0, b0, p, out, "Mul"));
  const Tensor a = a0.contiguous(), b = b0.contiguous();
  auto prod = [&](int64_t i, int64_t j) { return (load_q(a, i) - p.a_zero_point) * (load_q(b, j) - p.b_zero_point); };
  if (p.convention == Requant::tflite_xnnpack) {
    // XNNPACK's qs8/qu8 vmul, "fp32" requantization: float32 scale, round half to even.
    const float scale = p.a_scale * p.b_scale / p.out_scale;
    const float lo = static_cast<float>(p.act_min - p.out_zero_point), hi = static_cast<float>(p.act_max - p.out_zero_point);
    for_each_element(a, b, [&](int64_t i, int64_t j) {
      const float v = std::clamp(static_cast<float>(prod(i, j)) * scale, lo, hi);
      store_q(out, i, static_cast<int32_t>(std::nearbyint(v)) + p.out_zero_point);
    });
    return {};
  }
  if (p.convention == Requant::onnx_float) {
    RKD_ASSIGN(auto range, quantized_range(a.dtype()));
    const float ab = p.a_scale * p.b_scale;  // float32, rounded before the division as MLAS's expression
    OrtMul k{ab / p.out_scale,
             static_cast<float>(p.out_zero_point),
             static_cast<float>(range.first - 1),
             static_cast<float>(range.second + 1),
             p.a_zero_point,
             p.b_zero_point,
             std::max(range.first, p.act_min),
             std::min(range.second, p.act_max),
             false};
    for_each_typed_run(a, b, out, [&](const auto* pa, const auto* pb, int64_t n, auto* po, bool scalar) {
      OrtMul kr = k;
      kr.scalar_b = scalar;
      ort_mul(kr, pa, pb, n, po);
    });
    return {};
  }
  if (p.convention == Requant::rknpu_out_cvt) {
    RKD_ASSIGN(RknpuMul k, rknpu_mul_plan(p));
    for_each_typed_run(a, b, out,
                       [&](const auto* pa, const auto* pb, int64_t n, auto* po, bool scalar) { rknpu_mul_run(k, p, pa, pb, n, scalar, po); });
    return {};
  }
  RKD_ASSIGN(QuantizedMultiplier m, quantize_multiplier(static_cast<double>(p.a_scale) * p.b_scale / p.out_scale));
  for_each_element(a, b, [&](int64_t i, int64_t j) {
    const int32_t y = multiply(p.convention, prod(i, j), m) + p.out_zero_point;
    store_q(out, i, std::clamp(y, p.act_min, p.act_max));
  });
  return {};
}

namespace {
template <typename Reduce>
Status pool(const Tensor& x0, const QPoolParams& p, Tensor& out, Reduce reduce) {
  if (x0.rank() != 4 || out.rank() != 4) return unsupported("pool: 2-D only");
  if (x0.dtype() != out.dtype()) return invalid("pool: input and output types differ");
  if (p.kernel.size() != 2 || p.strides.size() != 2 || p.pads.size() != 4) return invalid("pool: kernel/strides/pads sizes");
  const Tensor x = x0.contiguous();
  const int64_t planes = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3), OH = out.dim(2), OW = out.dim(3);
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int64_t y0 = std::max<int64_t>(oy * p.strides[0] - p.pads[0], 0), y1 = std::min(oy * p.strides[0] - p.pads[0] + p.kernel[0], H);
        const int64_t x0i = std::max<int64_t>(ox * p.strides[1] - p.pads[1], 0), x1 = std::min(ox * p.strides[1] - p.pads[1] + p.kernel[1], W);
        std::vector<int32_t> vals;
        for (int64_t yy = y0; yy < y1; ++yy) {
          for (int64_t xx = x0i; xx < x1; ++xx) vals.push_back(load_q(x, (pl * H + yy) * W + xx));
        }
        if (vals.empty()) return invalid("pool: a window lies entirely in the padding");
        store_q(out, (pl * OH + oy) * OW + ox, std::clamp(reduce(vals), p.act_min, p.act_max));
      }
    }
  }
  return {};
}
}  // namespace

Status tflite_average_pool(const Tensor& x, const QPoolParams& p, Tensor& out) {
  return pool(x, p, out, [](const std::vector<int32_t>& v) {
    int32_t acc = 0;
    for (int32_t e : v) acc += e;
    const int32_t n = static_cast<int32_t>(v.size());
    return acc > 0 ? (acc + n / 2) / n : (acc - n / 2) / n;  // half away from zero
  });
}

Status tflite_concat(const std::vector<const Tensor*>& inputs, const std::vector<QTensorParams>& in_params, const QTensorParams& out_params, int axis,
                     Tensor& out) {
  if (inputs.size() != in_params.size() || inputs.empty()) return invalid("Concatenation: one set of parameters per input");
  RKD_ASSIGN(auto range, quantized_range(out.dtype()));
  if (axis < 0 || axis >= out.rank()) return invalid("Concatenation: axis out of range");
  if (!(out_params.scale > 0)) return invalid("Concatenation: output scale must be positive");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out.dim(d);
  for (int d = axis + 1; d < out.rank(); ++d) inner *= out.dim(d);
  int64_t total_axis = 0;
  for (const Tensor* t : inputs) {
    if (t->dtype() != out.dtype() || t->rank() != out.rank()) return invalid("Concatenation: inputs must match the output's type and rank");
    total_axis += t->dim(axis);
  }
  if (total_axis != out.dim(axis)) return invalid("Concatenation: input sizes do not add up to the output's");
  const float inverse_out = 1.f / out_params.scale;
  int64_t at = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor x = inputs[i]->contiguous();
    const int64_t n = x.dim(axis) * inner;
    const bool same = in_params[i].scale == out_params.scale && in_params[i].zero_point == out_params.zero_point;
    const float scale = in_params[i].scale * inverse_out;
    const float bias = static_cast<float>(-in_params[i].zero_point) * scale;
    for (int64_t k = 0; k < outer; ++k) {
      for (int64_t j = 0; j < n; ++j) {
        const int32_t v = load_q(x, k * n + j);
        int32_t y = v;
        if (!same) {
          const float prod = static_cast<float>(v) * scale;
          y = static_cast<int32_t>(std::round(prod + bias)) + out_params.zero_point;
        }
        store_q(out, k * out.dim(axis) * inner + at * inner + j, std::clamp(y, range.first, range.second));
      }
    }
    at += x.dim(axis);
  }
  return {};
}

Status tflite_max_pool(const Tensor& x, const QPoolParams& p, Tensor& out) {
  return pool(x, p, out, [](const std::vector<int32_t>& v) { return *std::max_element(v.begin(), v.end()); });
}

}  // namespace rkd::quant
