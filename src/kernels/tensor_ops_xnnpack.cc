// Float convolution on XNNPACK (Debian libxnnpack-dev), for CPUs where oneDNN has only its
// reference kernels: Debian's oneDNN 2.6 has JIT kernels for x86 and for arm64 SVE, and the
// RK3588's Cortex-A76/A55 have no SVE, so there every convolution would be `gemm:ref`.
// XNNPACK has NEON (and x86) micro-kernels for dense, grouped and depthwise convolution.
//
// Contract (ConvPrimitive, tensor_ops.h): 2-D, not transposed, any groups, strides, dilations
// and padding; the input and output stay NCHW for the executor, converted around XNNPACK's
// NHWC by tiled transposes. The fused ReLU is applied after the operator with NaN kept (as the
// oneDNN path does: x < 0 ? 0 : x), SiLU as x * sigmoid(x) with the executor's sigmoid.
// XNNPACK clamps every output with min/max even at bounds of -inf / +inf, which turns NaN into
// an infinity: an input holding NaN or an infinity therefore runs on the oneDNN primitive
// given as the fallback (IEEE semantics, as on every other CPU). Left: finite inputs whose
// partial sums overflow to both infinities give NaN on oneDNN and an infinity here. Float
// results differ from oneDNN's by summation order only (tests/common/tolerance.h float_agree).
#include <pthreadpool.h>
#include <xnnpack.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "kernels/tensor_ops_parallel.h"
#include "kernels/tensor_ops_simd.h"
#include "kernels/tensor_ops_xnnpack.h"

namespace rkd::ops {
namespace {

Status xnn_status_error(const std::string& what, xnn_status st) {
  return unsupported(what + ": XNNPACK status " + std::to_string(static_cast<int>(st)));
}

// XNNPACK initialised once per process; its thread pool sized like the OpenMP one
// (set_math_threads), remade when that changes. Convolutions run one at a time.
std::mutex g_pool_mutex;
pthreadpool_t g_pool = nullptr;
size_t g_pool_threads = 0;

Status initialise() {
  static const xnn_status st = xnn_initialize(nullptr);
  return st == xnn_status_success ? Status{} : xnn_status_error("convolution (XNNPACK initialisation)", st);
}

pthreadpool_t thread_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  const size_t want = static_cast<size_t>(omp_threads());
  if (want <= 1) return nullptr;  // XNNPACK runs on the calling thread
  if (g_pool && g_pool_threads != want) {
    pthreadpool_destroy(g_pool);
    g_pool = nullptr;
  }
  if (!g_pool) {
    g_pool = pthreadpool_create(want);
    g_pool_threads = want;
  }
  return g_pool;
}

class XnnConv final : public ConvPrimitive {
 public:
  ~XnnConv() override {
    if (op_) xnn_delete_operator(op_);
  }
  Status init(const Shape& xs, const Tensor& w0, const Tensor* bias, const ConvParams& p, const Shape& os, const std::string& act,
              std::unique_ptr<ConvPrimitive> fallback) {
    RKD_TRY(initialise());
    fallback_ = std::move(fallback);
    if (xs.size() != 4 || w0.rank() != 4) return unsupported("convolution (XNNPACK): 2-D only");
    if (act == "relu") relu_after_ = true;
    else if (act == "silu") silu_after_ = true;
    else if (!act.empty()) return invalid("convolution: fused activation '" + act + "' is not relu or silu");
    const Tensor w = w0.contiguous();
    const int64_t g = p.group, M = w.dim(0), Cg = w.dim(1), KH = w.dim(2), KW = w.dim(3), Mg = M / g;
    // ONNX [M, C/g, KH, KW] -> XNNPACK [g][M/g][KH][KW][C/g].
    std::vector<float> k(static_cast<size_t>(w.numel()));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t ky = 0; ky < KH; ++ky)
          for (int64_t kx = 0; kx < KW; ++kx)
            k[static_cast<size_t>(((m * KH + ky) * KW + kx) * Cg + c)] = w.data<float>()[((m * Cg + c) * KH + ky) * KW + kx];
    const Tensor b = bias ? bias->contiguous() : Tensor();
    const float inf = std::numeric_limits<float>::infinity();
    const xnn_status st = xnn_create_convolution2d_nhwc_f32(
        static_cast<uint32_t>(p.pads[0]), static_cast<uint32_t>(p.pads[3]), static_cast<uint32_t>(p.pads[2]), static_cast<uint32_t>(p.pads[1]),
        static_cast<uint32_t>(KH), static_cast<uint32_t>(KW), static_cast<uint32_t>(p.strides[0]), static_cast<uint32_t>(p.strides[1]),
        static_cast<uint32_t>(p.dilations[0]), static_cast<uint32_t>(p.dilations[1]), static_cast<uint32_t>(g), static_cast<size_t>(Cg),
        static_cast<size_t>(Mg), static_cast<size_t>(xs[1]), static_cast<size_t>(M), k.data(), bias ? b.data<float>() : nullptr, -inf, inf, 0, &op_);
    if (st != xnn_status_success) return xnn_status_error("convolution (XNNPACK create)", st);
    xs_ = xs;
    os_ = os;
    return {};
  }

  Status run(const Tensor& x0, Tensor& out) override {
    const Tensor x = x0.contiguous();
    if (!all_finite(x.data<float>(), x.numel())) return fallback_->run(x, out);
    const int64_t N = xs_[0], C = xs_[1], H = xs_[2], W = xs_[3], M = os_[1], S = os_[2] * os_[3];
    thread_local std::vector<float> in, res;
    in.resize(static_cast<size_t>(x.numel()));
    res.resize(static_cast<size_t>(out.numel()));
    transpose_planes(x.data<float>(), in.data(), N, C, H * W);
    pthreadpool_t pool = thread_pool();
    xnn_status st =
        xnn_setup_convolution2d_nhwc_f32(op_, static_cast<size_t>(N), static_cast<size_t>(H), static_cast<size_t>(W), in.data(), res.data(), pool);
    if (st == xnn_status_success) st = xnn_run_operator(op_, pool);
    if (st != xnn_status_success) return xnn_status_error("convolution (XNNPACK run)", st);
    float* y = out.data<float>();
    transpose_planes(res.data(), y, N, S, M);
    const int64_t n = out.numel();
    if (relu_after_) {
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0.f ? 0.f : y[i];
    } else if (silu_after_) {
      thread_local std::vector<float> sig;
      sig.resize(static_cast<size_t>(n));
      simd_sigmoid(y, sig.data(), n);
      for (int64_t i = 0; i < n; ++i) y[i] *= sig[static_cast<size_t>(i)];
    }
    return {};
  }
  std::string implementation() const override { return "xnnpack:convolution2d_nhwc_f32"; }

 private:
  static bool all_finite(const float* p, int64_t n) {
    uint32_t bad = 0;  // exponent all ones: NaN or an infinity
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, p + i, sizeof u);
      bad |= static_cast<uint32_t>((u & 0x7f800000u) == 0x7f800000u);
    }
    return bad == 0;
  }

  xnn_operator_t op_ = nullptr;
  std::unique_ptr<ConvPrimitive> fallback_;
  Shape xs_, os_;
  bool relu_after_ = false, silu_after_ = false;
};

}  // namespace

Result<std::unique_ptr<ConvPrimitive>> make_conv_xnnpack(const Shape& x_shape, const Tensor& weights, const Tensor* bias, const ConvParams& p,
                                                         const Shape& out_shape, const std::string& fused_activation,
                                                         std::unique_ptr<ConvPrimitive> non_finite_fallback) {
  if (weights.dtype() != DType::f32 || (bias && bias->dtype() != DType::f32)) {
    return unsupported("convolution (XNNPACK): only float32 weights and bias");
  }
  auto c = std::make_unique<XnnConv>();
  if (!non_finite_fallback) return invalid("convolution (XNNPACK): no fallback for non-finite inputs");
  RKD_TRY(c->init(x_shape, weights, bias, p, out_shape, fused_activation, std::move(non_finite_fallback)));
  return std::unique_ptr<ConvPrimitive>(std::move(c));
}

}  // namespace rkd::ops
