#include "quant/int8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rkd::quant {

namespace {

int32_t load_q(const Tensor& t, int64_t i) {
  return t.dtype() == DType::i8 ? static_cast<int32_t>(t.data<int8_t>()[i]) : static_cast<int32_t>(t.data<uint8_t>()[i]);
}

void store_q(Tensor& t, int64_t i, int32_t v) {
  if (t.dtype() == DType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(v);
  else t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
}

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

Status quantize(const Tensor& x0, const QuantParams& p, QuantizeRounding rounding, Tensor& out) {
  if (x0.dtype() != DType::f32) return invalid("quantize: input must be float32");
  RKD_ASSIGN(auto range, quantized_range(out.dtype()));
  RKD_TRY(check_params(p, x0.shape(), "quantize"));
  const Tensor x = x0.contiguous();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const size_t k = p.scales.size() == 1 ? 0 : static_cast<size_t>(axis_index(x.shape(), p.axis, i));
    const float v = x.data<float>()[i] / p.scales[k];
    float r;
    if (std::isnan(v)) r = 0.f;
    else if (rounding == QuantizeRounding::half_to_even) r = std::nearbyint(v);
    else r = std::round(v);
    const float q = std::min(std::max(r + static_cast<float>(p.zero_points[k]), static_cast<float>(range.first)),
                             static_cast<float>(range.second));
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
  for (int64_t i = 0; i < q.numel(); ++i) {
    const size_t k = p.scales.size() == 1 ? 0 : static_cast<size_t>(axis_index(q.shape(), p.axis, i));
    const int32_t v = q.dtype() == DType::i32 ? q.data<int32_t>()[i] : load_q(q, i);
    out.data<float>()[i] = static_cast<float>(v - p.zero_points[k]) * p.scales[k];
  }
  return {};
}

Status qlinear_conv(const Tensor& x0, int32_t x_zp, const Tensor& w0, const std::vector<int32_t>& w_zp,
                    const Tensor& bias, const QConvParams& p, const Requantizer& rq, Tensor& out) {
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

Status qlinear_matmul(const Tensor& a0, int32_t a_zp, const Tensor& b0, const std::vector<int32_t>& b_zp,
                      const Requantizer& rq, Tensor& out) {
  const Tensor a = a0.contiguous(), b = b0.contiguous();
  if (a.rank() < 2 || b.rank() < 2) return unsupported("qlinear_matmul: operands of rank >= 2 only");
  const int64_t M = a.dim(-2), K = a.dim(-1), N = b.dim(-1);
  if (b.dim(-2) != K) return invalid("qlinear_matmul: inner dimensions differ");
  const int64_t batch = a.numel() / (M * K);
  const int64_t b_batch = b.numel() / (K * N);
  if (b_batch != 1 && b_batch != batch) return unsupported("qlinear_matmul: b must be 2-D or have a's batch");
  if (b_zp.size() != 1 && static_cast<int64_t>(b_zp.size()) != N) return invalid("qlinear_matmul: b_zero_point size");
  if (K * 255 * 255 > std::numeric_limits<int32_t>::max()) return invalid("qlinear_matmul: K could overflow the accumulator");
  for (int64_t bt = 0; bt < batch; ++bt) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        const int32_t bz = b_zp[b_zp.size() == 1 ? 0 : static_cast<size_t>(j)];
        int32_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += (load_q(a, (bt * M + i) * K + k) - a_zp) * (load_q(b, ((b_batch == 1 ? 0 : bt) * K + k) * N + j) - bz);
        }
        store_q(out, (bt * M + i) * N + j, rq.apply(acc, static_cast<size_t>(j)));
      }
    }
  }
  return {};
}

}  // namespace rkd::quant
