// Convolution, transposed convolution and matrix products on oneDNN (tensor_ops.h).
//
// oneDNN is Debian's libdnnl (2.6, OpenMP runtime). Tensors stay in NCHW; the weights of
// a convolution are reordered once into the layout oneDNN prefers for the shape
// (format_tag::any) when the primitive is prepared.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/isa.h"
#include "kernels/tensor_ops.h"
#include "kernels/tensor_ops_int8.h"
#include "kernels/tensor_ops_xnnpack.h"
#include "kernels/tensor_ops_parallel.h"
#include "kernels/tensor_ops_simd.h"

namespace rkd::ops {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The ceiling (core/isa.h) as oneDNN's maximal ISA, set before oneDNN reads it (its first
// primitive or ISA query); everything here that touches oneDNN goes through engine().
bool onednn_honours_isa_ceiling() {
  static const bool applied = [] {
    dnnl::cpu_isa max = dnnl::cpu_isa::all;
    switch (isa_ceiling()) {
      case IsaLevel::native: return true;
      case IsaLevel::avx512_vnni: max = dnnl::cpu_isa::avx512_core_vnni; break;
      case IsaLevel::avx512: max = dnnl::cpu_isa::avx512_core; break;
      case IsaLevel::avx2_vnni: max = dnnl::cpu_isa::avx2_vnni; break;
      case IsaLevel::avx2: max = dnnl::cpu_isa::avx2; break;
      case IsaLevel::sse4: max = dnnl::cpu_isa::sse41; break;
    }
    // Fails only when oneDNN's ISA was fixed already (ONEDNN_MAX_CPU_ISA read by an earlier
    // call): then oneDNN's own setting stands, and dispatch_report() shows it.
    return dnnl_set_max_cpu_isa(static_cast<dnnl_cpu_isa_t>(max)) == dnnl_success;
  }();
  return applied;
}

dnnl::engine& engine() {
  static dnnl::engine e = [] {
    onednn_honours_isa_ceiling();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

memory::dims dims_of(const Shape& s) { return memory::dims(s.begin(), s.end()); }

tag plain_tag(size_t rank) {
  switch (rank) {
    case 1: return tag::a;
    case 2: return tag::ab;
    case 3: return tag::abc;
    case 4: return tag::abcd;
    case 5: return tag::abcde;
    default: return tag::abcdef;
  }
}

Error dnnl_error(const std::string& what, const dnnl::error& e) { return unsupported(what + ": oneDNN: " + e.what()); }

// [n][c][s] -> [n][s][c] in 32x32 tiles (both sides stay in cache lines), threaded over
// tiles of the global pool.

// A per-thread buffer that grows to the largest request (64-byte aligned).
uint8_t* conv_workspace(size_t bytes) {
  struct Buffer {
    std::unique_ptr<uint8_t, void (*)(void*)> p{nullptr, std::free};
    size_t size = 0;
  };
  thread_local Buffer b;
  if (bytes > b.size) {
    const size_t alloc = (bytes + 4095) / 4096 * 4096;
    b.p.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, alloc)));
    b.size = b.p ? alloc : 0;
  }
  return b.p.get();
}

// max(x, 0) with ONNX's NaN semantics (x < 0 ? 0 : x keeps NaN), in place, over the
// threads for a large output.
void relu_keeping_nan(float* p, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  math_parallel_for(chunks, n, [&](int64_t c) {
    float* q = p + c * kChunk;
    const int64_t m = std::min(kChunk, n - c * kChunk);
    for (int64_t i = 0; i < m; ++i) q[i] = q[i] < 0.f ? 0.f : q[i];
  });
}

class DnnlConv final : public ConvPrimitive {
 public:
  Status init(const Shape& x_shape, const Tensor& weights0, const Tensor* bias, const ConvParams& p, bool transposed, const Shape& out_shape,
              const std::string& act) {
    try {
      const size_t sp = x_shape.size() - 2;
      const Tensor weights = weights0.contiguous();
      const int64_t g = p.group;
      memory::dims wd;
      memory::desc w_user;
      if (!transposed) {
        // ONNX [M, C/g, k...] = oihw (g = 1) or goihw with o = M/g.
        if (g == 1) {
          wd = dims_of(weights.shape());
          w_user = memory::desc(wd, dt::f32, plain_tag(wd.size()));
        } else {
          wd = {g, weights.shape()[0] / g};
          for (size_t i = 1; i < weights.shape().size(); ++i) wd.push_back(weights.shape()[i]);
          w_user = memory::desc(wd, dt::f32, plain_tag(wd.size()));
        }
      } else {
        // ONNX [C, M/g, k...]: oneDNN wants (g,) o, i, k... with o = output channels.
        const int64_t c = weights.shape()[0], mg = weights.shape()[1];
        if (g == 1) {
          wd = {mg, c};
        } else {
          wd = {g, mg, c / g};
        }
        for (size_t i = 2; i < weights.shape().size(); ++i) wd.push_back(weights.shape()[i]);
        // Strides of the ONNX buffer seen in oneDNN's dim order (o and i swapped).
        memory::dims st(wd.size());
        int64_t ksz = 1;
        for (size_t i = 2; i < weights.shape().size(); ++i) ksz *= weights.shape()[i];
        const memory::dims kst = [&] {
          memory::dims s(sp);
          int64_t acc = 1;
          for (size_t i = sp; i-- > 0;) {
            s[i] = acc;
            acc *= weights.shape()[i + 2];
          }
          return s;
        }();
        if (g == 1) {
          st = {ksz, mg * ksz};
        } else {
          st = {(c / g) * mg * ksz, ksz, mg * ksz};
        }
        st.insert(st.end(), kst.begin(), kst.end());
        w_user = memory::desc(wd, dt::f32, st);
      }
      // Few input channels (an RGB stem, a patch embedding): the source stays NCHW, where
      // oneDNN has dedicated first-layer kernels; asking for `any` picked channels-last
      // brgconv at 4-9 GMAC/s for these shapes.
      const bool few_channels = !transposed && x_shape[1] <= 4;
      const memory::desc src_md(dims_of(x_shape), dt::f32, few_channels ? plain_tag(x_shape.size()) : tag::any);
      const memory::desc dst_md(dims_of(out_shape), dt::f32, tag::any);
      src_user_ = memory::desc(dims_of(x_shape), dt::f32, plain_tag(x_shape.size()));
      dst_user_ = memory::desc(dims_of(out_shape), dt::f32, plain_tag(out_shape.size()));
      const memory::desc w_any(wd, dt::f32, tag::any);
      memory::dims strides(p.strides.begin(), p.strides.end()), dil, pl, pr;
      for (size_t i = 0; i < sp; ++i) {
        dil.push_back(p.dilations[i] - 1);
        pl.push_back(p.pads[i]);
        pr.push_back(p.pads[i + sp]);
      }
      if (transposed) {
        // The padded output of ConvTranspose: output_padding adds rows at the end, which
        // oneDNN expresses as less right padding.
        for (size_t i = 0; i < sp; ++i) {
          const int64_t full = (x_shape[i + 2] - 1) * p.strides[i] + (weights.shape()[i + 2] - 1) * p.dilations[i] + 1;
          pr[i] = full - pl[i] - out_shape[i + 2];
        }
      }
      dnnl::primitive_attr attr;
      // ReLU is applied after the primitive, not as oneDNN's post-op: with alpha 0 that is
      // vmaxps(x, 0), which turns NaN into 0 where ONNX's (and PyTorch's) Relu keeps it.
      // Swish (x * sigmoid(x)) keeps NaN and infinities as the unfused ops do.
      relu_after_ = act == "relu";
      if (act == "silu") {
        dnnl::post_ops po;
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
        attr.set_post_ops(po);
      } else if (!act.empty() && act != "relu") {
        return invalid("convolution: fused activation '" + act + "' is not relu or silu");
      }
      const int64_t oc = out_shape[1];
      memory::desc b_md;
      if (bias) b_md = memory::desc({oc}, dt::f32, tag::a);
      memory::desc w_pref;
      if (!transposed) {
        auto d = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, w_any, b_md,
                                                        dst_md, strides, dil, pl, pr)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, w_any,
                                                        dst_md, strides, dil, pl, pr);
        auto pd = dnnl::convolution_forward::primitive_desc(d, attr, engine());
        w_pref = pd.weights_desc();
        src_md_ = pd.src_desc();
        dst_md_ = pd.dst_desc();
        impl_ = pd.impl_info_str();
        prim_ = dnnl::convolution_forward(pd);
      } else {
        auto d = bias ? dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src_md, w_any,
                                                          b_md, dst_md, strides, dil, pl, pr)
                      : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src_md, w_any,
                                                          dst_md, strides, dil, pl, pr);
        auto pd = dnnl::deconvolution_forward::primitive_desc(d, attr, engine());
        w_pref = pd.weights_desc();
        src_md_ = pd.src_desc();
        dst_md_ = pd.dst_desc();
        impl_ = pd.impl_info_str();
        prim_ = dnnl::deconvolution_forward(pd);
      }
      // brgconv on AVX-512 wants channels-last (acdb...): oneDNN's jit:uni reorder for
      // NCHW -> NHWC measured 7.5 ms per 10 MB activation (a strided transpose); a tiled
      // transpose does it at memory speed.
      {
        memory::dims strides_cl(x_shape.size());
        int64_t acc = 1;
        strides_cl[1] = 1;
        acc = x_shape[1];
        for (size_t i = x_shape.size(); i-- > 2;) {
          strides_cl[i] = acc;
          acc *= x_shape[i];
        }
        strides_cl[0] = acc;
        src_channels_last_ = src_md_ == memory::desc(dims_of(x_shape), dt::f32, strides_cl);
      }
      if (src_md_ != src_user_) {
        src_buf_ = memory(src_md_, engine(), DNNL_MEMORY_NONE);
        src_reorder_ = dnnl::reorder(memory(src_user_, engine(), nullptr), src_buf_);
      }
      if (dst_md_ != dst_user_) {
        dst_buf_ = memory(dst_md_, engine(), DNNL_MEMORY_NONE);
        dst_reorder_ = dnnl::reorder(dst_buf_, memory(dst_user_, engine(), nullptr));
      }
      // Reorder the weights once into the primitive's layout (the user memory is only read).
      weights_ = memory(w_pref, engine());
      memory w_src(w_user, engine(), const_cast<void*>(weights.raw()));
      dnnl::stream s(engine());
      dnnl::reorder(w_src, weights_).execute(s, w_src, weights_);
      if (bias) {
        bias_copy_ = bias->clone();
        bias_ = memory(b_md, engine(), bias_copy_.raw());
        has_bias_ = true;
      }
      s.wait();
    } catch (const dnnl::error& e) {
      return dnnl_error("convolution", e);
    }
    return {};
  }

  Status run(const Tensor& x, Tensor& out) override {
    try {
      const Tensor xd = x.contiguous();
      // Activations stay NCHW between ops; when oneDNN's fastest kernel wants a blocked
      // layout (nChw16c on AVX-512) the input and output are reordered around it.
      memory src_user(src_user_, engine(), const_cast<void*>(xd.raw()));
      memory dst_user(dst_user_, engine(), out.raw());
      dnnl::stream s(engine());
      memory src = src_user, dst = dst_user;
      // The blocked copies live in one per-thread workspace shared by every convolution
      // (they run one at a time): a model's convolutions do not each keep their own.
      const size_t src_bytes = src_buf_ ? (src_md_.get_size() + 63) / 64 * 64 : 0;
      const size_t dst_bytes = dst_buf_ ? dst_md_.get_size() : 0;
      if (src_buf_ || dst_buf_) {
        uint8_t* ws = conv_workspace(src_bytes + dst_bytes);
        if (!ws) return io_error("convolution: out of memory for a " + std::to_string(src_bytes + dst_bytes) + "-byte workspace");
        if (src_buf_) src_buf_.set_data_handle(ws);
        if (dst_buf_) dst_buf_.set_data_handle(ws + src_bytes);
      }
      if (src_buf_) {
        if (src_channels_last_) {
          const Shape& xs = xd.shape();
          int64_t spatial = 1;
          for (size_t i = 2; i < xs.size(); ++i) spatial *= xs[i];
          transpose_planes(xd.data<float>(), static_cast<float*>(src_buf_.get_data_handle()), xs[0], xs[1], spatial);
        } else {
          src_reorder_.execute(s, src_user, src_buf_);
        }
        src = src_buf_;
      }
      if (dst_buf_) dst = dst_buf_;
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst}};
      if (has_bias_) args[DNNL_ARG_BIAS] = bias_;
      prim_.execute(s, args);
      if (dst_buf_) dst_reorder_.execute(s, dst_buf_, dst_user);
      s.wait();
    } catch (const dnnl::error& e) {
      return dnnl_error("convolution", e);
    }
    if (relu_after_) relu_keeping_nan(out.data<float>(), out.numel());
    return {};
  }
  std::string implementation() const override { return impl_; }

 private:
  dnnl::primitive prim_;
  memory::desc src_md_, dst_md_, src_user_, dst_user_;
  memory weights_, bias_, src_buf_, dst_buf_;
  dnnl::reorder src_reorder_, dst_reorder_;
  Tensor bias_copy_;
  bool has_bias_ = false;
  bool relu_after_ = false;
  bool src_channels_last_ = false;
  std::string impl_;
};

// A matrix product out[b] = a[b] x w[b] (+ bias [1.., N]) on strided operands of equal
// rank >= 2 (batch dims broadcast when 1).
Status dnnl_matmul(const Shape& as, const Shape& ast, const void* a, const Shape& bs, const Shape& bst, const void* b, const Tensor* bias,
                   Tensor& out) {
  try {
    const memory::desc a_md(dims_of(as), dt::f32, dims_of(ast));
    const memory::desc b_md(dims_of(bs), dt::f32, dims_of(bst));
    const memory::desc o_md(dims_of(out.shape()), dt::f32, plain_tag(out.shape().size()));
    memory::desc bias_md;
    Shape bias_shape(out.shape().size(), 1);
    if (bias) {
      bias_shape.back() = out.shape().back();
      bias_md = memory::desc(dims_of(bias_shape), dt::f32, plain_tag(bias_shape.size()));
    }
    auto d = bias ? dnnl::matmul::desc(a_md, b_md, bias_md, o_md) : dnnl::matmul::desc(a_md, b_md, o_md);
    auto pd = dnnl::matmul::primitive_desc(d, engine());
    dnnl::matmul prim(pd);
    memory am(a_md, engine(), const_cast<void*>(a)), bm(b_md, engine(), const_cast<void*>(b)), om(o_md, engine(), out.raw());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, om}};
    if (bias) args[DNNL_ARG_BIAS] = memory(bias_md, engine(), const_cast<void*>(bias->raw()));
    dnnl::stream s(engine());
    prim.execute(s, args);
    s.wait();
  } catch (const dnnl::error& e) {
    return dnnl_error("matmul", e);
  }
  return {};
}

// A 2-D ConvTranspose whose kernel equals its stride (no padding, dilation 1, one group):
// every output pixel receives exactly one input pixel, so it is one GEMM
//   Y[hw, (m, i, j)] = sum_c X[c, hw] W[c, (m, i, j)]
// followed by a scatter of each (i, j) tap to out[m, h*kh + i, w*kw + j] (+ bias). oneDNN's
// deconvolution ran the DEIM adapter's 2x2/s2 upsampling at ~13 GMAC/s.
class PatchDeconv final : public ConvPrimitive {
 public:
  PatchDeconv(const Shape& x_shape, const Tensor& weights, const Tensor* bias, const Shape& out_shape)
      : xs_(x_shape), os_(out_shape), w_(weights.clone()) {
    if (bias) bias_ = bias->clone();
  }
  Status run(const Tensor& x0, Tensor& out) override {
    const Tensor x = x0.contiguous();
    const int64_t N = xs_[0], C = xs_[1], H = xs_[2], W = xs_[3];
    const int64_t M = w_.shape()[1], kh = w_.shape()[2], kw = w_.shape()[3];
    const int64_t HW = H * W, K = M * kh * kw;
    const size_t bytes = static_cast<size_t>(HW * K) * sizeof(float);
    uint8_t* ws = conv_workspace(bytes);
    if (!ws) return io_error("ConvTranspose: out of memory for a " + std::to_string(bytes) + "-byte workspace");
    Tensor y = Tensor::wrap(std::shared_ptr<uint8_t[]>(std::shared_ptr<uint8_t[]>(), ws), 0, DType::f32, {HW, K});
    const int64_t OH = os_[2], OW = os_[3];
    for (int64_t n = 0; n < N; ++n) {
      // A = X[n] seen as [HW, C] (a transposed view of the dense [C, HW]).
      RKD_TRY(dnnl_matmul({HW, C}, {1, HW}, x.data<float>() + n * C * HW, {C, K}, {K, 1}, w_.data<float>(), nullptr, y));
      const float* py = y.data<float>();
      float* po = out.data<float>() + n * M * OH * OW;
      omp_for(M, [&](int64_t m) {
        const float b = bias_.defined() ? bias_.data<float>()[m] : 0.f;
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t i = 0; i < kh; ++i) {
            float* row = po + (m * OH + h * kh + i) * OW;
            for (int64_t w = 0; w < W; ++w) {
              const float* src = py + (h * W + w) * K + (m * kh + i) * kw;
              for (int64_t j = 0; j < kw; ++j) row[w * kw + j] = src[j] + b;
            }
          }
        }
      });
    }
    return {};
  }
  std::string implementation() const override { return "rkdeploy:patch_deconv(gemm)"; }

 private:
  Shape xs_, os_;
  Tensor w_, bias_;
};

}  // namespace

void transpose_planes(const float* src, float* dst, int64_t n, int64_t c, int64_t s) {
  constexpr int64_t T = 32;
  const int64_t tc = (c + T - 1) / T, ts = (s + T - 1) / T;
  omp_for(n * tc, [&](int64_t task) {
    const int64_t b = task / tc, c0 = (task % tc) * T, c1 = std::min(c, c0 + T);
    const float* sp = src + b * c * s;
    float* dp = dst + b * c * s;
    for (int64_t t = 0; t < ts; ++t) {
      const int64_t s0 = t * T, s1 = std::min(s, s0 + T);
      for (int64_t j = s0; j < s1; ++j) {
        for (int64_t i = c0; i < c1; ++i) dp[j * c + i] = sp[i * s + j];
      }
    }
  });
}

bool onednn_int8_exact() {
#if !defined(__x86_64__)
  return false;  // oneDNN's int8 products are x86 JIT kernels (VNNI) or reference code elsewhere
#else
  static const bool ok = [] {
    engine();
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx ||
           isa == dnnl::cpu_isa::avx2_vnni;
  }();
  return ok;
#endif
}

std::string onednn_isa_name() {
#if !defined(__x86_64__)
  return "aarch64";  // oneDNN's cpu_isa values name x86 instruction sets only
#else
  engine();
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other (" + std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa())) + ")";
  }
#endif
}

std::vector<std::pair<std::string, std::string>> dispatch_report() {
  const int clones = x86_clone_level();
  return {
      {"isa_ceiling", isa_level_name(isa_ceiling())},
      {"highway_target", highway_dispatched_target()},
      {"onednn_isa", onednn_isa_name()},
      {"int8_products", onednn_int8_exact() ? "onednn_vnni"
                        : int8::dotprod()   ? "neon_dotprod"
                                            : std::string("highway_") + highway_dispatched_target()},
      {"vectorised_loops", clones == 4   ? "x86-64-v4"
                           : clones == 3 ? "x86-64-v3"
                                         : "baseline"},
  };
}

namespace {
class QConvDnnl final : public QConvAccumulator {
 public:
  Status init(const Shape& xs, DType xt, int32_t x_zp, const Tensor& w0, const ConvParams& p, const Shape& os) {
    RKD_TRY(check_qconv_operands(xs, xt, w0, os));
    const Tensor w = w0.contiguous();
    n_ = xs[0];
    c_ = xs[1];
    m_ = w.dim(0);
    offset_ = xt == DType::i8 ? 128 : 0;
    zp_u8_ = x_zp + offset_;
    if (zp_u8_ < 0 || zp_u8_ > 255) return invalid("int8 convolution: zero point out of range");
    pt_ = p.pads[0];
    pl_ = p.pads[1];
    hp_ = xs[2] + p.pads[0] + p.pads[2];
    wp_ = xs[3] + p.pads[1] + p.pads[3];
    const int64_t taps = w.numel() / m_;
    for (int64_t m = 0; m < m_; ++m) {
      int32_t sum = 0;
      for (int64_t k = 0; k < taps; ++k) sum += w.data<int8_t>()[m * taps + k];
      compensation_.push_back(zp_u8_ * sum);
    }
    try {
      const memory::dims src_dims = {n_, c_, hp_, wp_};
      const memory::desc src_md(src_dims, dt::u8, tag::nhwc);
      const memory::desc dst_md(dims_of(os), dt::s32, tag::nhwc);
      memory::dims wd;
      tag wtag;
      if (p.group == 1) {
        wd = {m_, w.dim(1), w.dim(2), w.dim(3)};
        wtag = tag::oihw;
      } else {
        wd = {p.group, m_ / p.group, w.dim(1), w.dim(2), w.dim(3)};
        wtag = tag::goihw;
      }
      const memory::desc w_any(wd, dt::s8, tag::any);
      const memory::dims strides = {p.strides[0], p.strides[1]};
      const memory::dims dil = {p.dilations[0] - 1, p.dilations[1] - 1};
      const memory::dims zero = {0, 0};
      auto d = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, w_any, dst_md,
                                               strides, dil, zero, zero);
      auto pd = dnnl::convolution_forward::primitive_desc(d, engine());
      if (pd.dst_desc() != dst_md || pd.src_desc() != src_md) return unsupported("int8 convolution: unexpected layouts");
      impl_ = pd.impl_info_str();
      prim_ = dnnl::convolution_forward(pd);
      weights_ = memory(pd.weights_desc(), engine());
      memory w_src(memory::desc(wd, dt::s8, wtag), engine(), const_cast<void*>(w.raw()));
      dnnl::stream st(engine());
      dnnl::reorder(w_src, weights_).execute(st, w_src, weights_);
      st.wait();
      src_md_ = src_md;
      dst_md_ = dst_md;
    } catch (const dnnl::error& e) {
      return dnnl_error("int8 convolution", e);
    }
    padded_ = Tensor::empty(DType::u8, {n_, hp_, wp_, c_});
    uint8_t* pp = padded_.data<uint8_t>();
    std::fill(pp, pp + padded_.numel(), static_cast<uint8_t>(zp_u8_));  // the padding; run() rewrites only the interior
    return {};
  }

  uint8_t* padded_input() override { return padded_.data<uint8_t>(); }

  Status run(const Tensor& x, Tensor& acc) override {
    fill_padded_nhwc(x, padded_.data<uint8_t>(), hp_, wp_, pt_, pl_);
    return run_filled(acc);
  }

  Status run_raw(const Tensor& x, Tensor& acc, bool x_channels_last) override {
    fill_padded_nhwc(x, padded_.data<uint8_t>(), hp_, wp_, pt_, pl_, x_channels_last);
    return run_filled_raw(acc);
  }
  const std::vector<int32_t>& compensation() const override { return compensation_; }

  Status run_filled(Tensor& acc) override {
    RKD_TRY(run_filled_raw(acc));
    // Every padded tap holds the zero point, so sum((x_u8 - zp_u8) w) = raw - zp_u8 * sum(w).
    int32_t* a = acc.data<int32_t>();
    const int64_t pixels = acc.numel() / m_;
    for (int64_t i = 0; i < pixels; ++i) {
      for (int64_t m = 0; m < m_; ++m) a[i * m_ + m] -= compensation_[static_cast<size_t>(m)];
    }
    return {};
  }

  Status run_filled_raw(Tensor& acc) override {
    uint8_t* pp = padded_.data<uint8_t>();
    try {
      memory src(src_md_, engine(), pp), dst(dst_md_, engine(), acc.raw());
      dnnl::stream st(engine());
      prim_.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst}});
      st.wait();
    } catch (const dnnl::error& e) {
      return dnnl_error("int8 convolution", e);
    }
    return {};
  }
  std::string implementation() const override { return impl_; }

 private:
  dnnl::convolution_forward prim_;
  memory weights_;
  memory::desc src_md_, dst_md_;
  std::string impl_;
  std::vector<int32_t> compensation_;  // zp_u8 * sum(w[m])
  Tensor padded_;
  int64_t n_ = 0, c_ = 0, m_ = 0, hp_ = 0, wp_ = 0, pt_ = 0, pl_ = 0;
  int32_t offset_ = 0, zp_u8_ = 0;
};
}  // namespace

Result<std::unique_ptr<QConvAccumulator>> make_qconv_accumulator(const Shape& x_shape, DType x_type, int32_t x_zero_point, const Tensor& weights,
                                                                 const ConvParams& p, const Shape& out_shape, Int8Engine engine) {
  if (engine == Int8Engine::highway || (engine == Int8Engine::automatic && !onednn_int8_exact())) {
    return make_qconv_accumulator_highway(x_shape, x_type, x_zero_point, weights, p, out_shape);
  }
  if (!onednn_int8_exact()) return unsupported("int8 convolution: oneDNN has no VNNI instructions on this CPU");
  auto q = std::make_unique<QConvDnnl>();
  RKD_TRY(q->init(x_shape, x_type, x_zero_point, weights, p, out_shape));
  return std::unique_ptr<QConvAccumulator>(std::move(q));
}

namespace {
class QMatMulDnnl final : public QMatMulAccumulator {
 public:
  Status init(int64_t rows, DType at, int32_t a_zp, const Tensor& b0) {
    RKD_TRY(check_qmatmul_operands(at, b0));
    const Tensor b = b0.contiguous();
    rows_ = rows;
    k_ = b.dim(0);
    n_ = b.dim(1);
    signed_ = at == DType::i8;
    zp_u8_ = a_zp + (signed_ ? 128 : 0);
    if (zp_u8_ < 0 || zp_u8_ > 255) return invalid("int8 matmul: zero point out of range");
    colsum_.assign(static_cast<size_t>(n_), 0);
    for (int64_t kk = 0; kk < k_; ++kk) {
      for (int64_t j = 0; j < n_; ++j) colsum_[static_cast<size_t>(j)] += b.data<int8_t>()[kk * n_ + j];
    }
    try {
      const memory::desc a_md({rows_, k_}, dt::u8, tag::ab), c_md({rows_, n_}, dt::s32, tag::ab);
      const memory::desc b_any({k_, n_}, dt::s8, tag::any);
      auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_any, c_md), engine());
      prim_ = dnnl::matmul(pd);
      weights_ = memory(pd.weights_desc(), engine());
      memory b_src(memory::desc({k_, n_}, dt::s8, tag::ab), engine(), const_cast<void*>(b.raw()));
      dnnl::stream st(engine());
      dnnl::reorder(b_src, weights_).execute(st, b_src, weights_);
      st.wait();
      a_md_ = a_md;
      c_md_ = c_md;
    } catch (const dnnl::error& e) {
      return dnnl_error("int8 matmul", e);
    }
    a_u8_ = Tensor::empty(DType::u8, {rows_, k_});
    return {};
  }
  Status run(const Tensor& a0, Tensor& acc) override {
    const Tensor a = a0.contiguous();
    uint8_t* pa = a_u8_.data<uint8_t>();
    const int64_t total = rows_ * k_;
    if (signed_) {
      for (int64_t i = 0; i < total; ++i) pa[i] = static_cast<uint8_t>(a.data<int8_t>()[i] + 128);
    } else {
      std::memcpy(pa, a.raw(), static_cast<size_t>(total));
    }
    try {
      memory am(a_md_, engine(), pa), cm(c_md_, engine(), acc.raw());
      dnnl::stream st(engine());
      prim_.execute(st, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, cm}});
      st.wait();
    } catch (const dnnl::error& e) {
      return dnnl_error("int8 matmul", e);
    }
    int32_t* c = acc.data<int32_t>();
    for (int64_t r = 0; r < rows_; ++r) {
      for (int64_t j = 0; j < n_; ++j) c[r * n_ + j] -= zp_u8_ * colsum_[static_cast<size_t>(j)];
    }
    return {};
  }

 private:
  dnnl::matmul prim_;
  memory weights_;
  memory::desc a_md_, c_md_;
  std::vector<int32_t> colsum_;
  Tensor a_u8_;
  int64_t rows_ = 0, k_ = 0, n_ = 0;
  int32_t zp_u8_ = 0;
  bool signed_ = true;
};
}  // namespace

Result<std::unique_ptr<QMatMulAccumulator>> make_qmatmul_accumulator(int64_t rows, DType a_type, int32_t a_zero_point, const Tensor& b,
                                                                     Int8Engine engine) {
  if (engine == Int8Engine::highway || (engine == Int8Engine::automatic && !onednn_int8_exact())) {
    return make_qmatmul_accumulator_highway(rows, a_type, a_zero_point, b);
  }
  if (!onednn_int8_exact()) return unsupported("int8 matmul: oneDNN has no VNNI instructions on this CPU");
  auto q = std::make_unique<QMatMulDnnl>();
  RKD_TRY(q->init(rows, a_type, a_zero_point, b));
  return std::unique_ptr<QMatMulAccumulator>(std::move(q));
}

Result<std::unique_ptr<ConvPrimitive>> make_conv(const Shape& x_shape, const Tensor& weights, const Tensor* bias, const ConvParams& p,
                                                 bool transposed, const Shape& out_shape, const std::string& fused_activation, ConvEngine engine) {
  if (weights.dtype() != DType::f32 || (bias && bias->dtype() != DType::f32)) {
    return unsupported("convolution: only float32 weights and bias");
  }
  const bool xnn_shape = !transposed && x_shape.size() == 4;
  if (engine == ConvEngine::xnnpack && !xnn_shape) return unsupported("convolution (XNNPACK): 2-D, not transposed, only");
  if (x_shape.size() < 3 || x_shape.size() > 5) return unsupported("convolution: 1-D, 2-D or 3-D only");
  const bool patch = transposed && x_shape.size() == 4 && p.group == 1 && fused_activation.empty() && weights.rank() == 4 && p.strides.size() == 2 &&
                     weights.shape()[2] == p.strides[0] && weights.shape()[3] == p.strides[1] && p.dilations == std::vector<int64_t>{1, 1} &&
                     std::all_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v == 0; }) && out_shape[2] == x_shape[2] * p.strides[0] &&
                     out_shape[3] == x_shape[3] * p.strides[1];
  if (patch) return std::unique_ptr<ConvPrimitive>(std::make_unique<PatchDeconv>(x_shape, weights, bias, out_shape));
  auto c = std::make_unique<DnnlConv>();
  RKD_TRY(c->init(x_shape, weights, bias, p, transposed, out_shape, fused_activation));
  // oneDNN's reference implementations ("gemm:ref", "ref:any") are loops: XNNPACK instead,
  // with the oneDNN primitive kept for inputs holding NaN or infinities.
  const std::string impl = c->implementation();
  const bool reference = impl == "gemm:ref" || impl.rfind("ref", 0) == 0;
  if (engine == ConvEngine::xnnpack || (engine == ConvEngine::automatic && xnn_shape && reference)) {
    auto x = make_conv_xnnpack(x_shape, weights, bias, p, out_shape, fused_activation, std::move(c));
    if (x.ok() || engine == ConvEngine::xnnpack) return x;
    c = std::make_unique<DnnlConv>();  // XNNPACK refused the shape: oneDNN after all
    RKD_TRY(c->init(x_shape, weights, bias, p, transposed, out_shape, fused_activation));
  }
  return std::unique_ptr<ConvPrimitive>(std::move(c));
}

Status matmul(const Tensor& a0, const Tensor& b0, Tensor& out) {
  const Tensor a = a0.contiguous();
  const Tensor b = b0.contiguous();
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const size_t r = std::max<size_t>(std::max(as.size(), bs.size()), 2);
  while (as.size() < r) as.insert(as.begin(), 1);
  while (bs.size() < r) bs.insert(bs.begin(), 1);
  Shape os(r);
  for (size_t i = 0; i + 2 < r; ++i) os[i] = std::max(as[i], bs[i]);
  os[r - 2] = as[r - 2];
  os[r - 1] = bs[r - 1];
  if (as[r - 1] == 0 || out.numel() == 0) {
    std::fill_n(out.data<float>(), out.numel(), 0.f);
    return {};
  }
  // When b has no batch of its own (a weight matrix), a's batch dims fold into M: one
  // [prod(batch) * M, K] x [K, N] product instead of prod(batch) small ones (PyTorch's
  // attention exports [L, 1, E] x [E, 3E] with L = 1600 batches of one row).
  bool b_unbatched = true;
  for (size_t i = 0; i + 2 < r; ++i) b_unbatched = b_unbatched && bs[i] == 1;
  if (b_unbatched && r > 2) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < r; ++i) rows *= as[i];
    const Shape a2{rows, as[r - 1]}, b2{bs[r - 2], bs[r - 1]}, o2{rows, bs[r - 1]};
    Tensor o = out.with_layout(o2, contiguous_strides(o2));
    return dnnl_matmul(a2, contiguous_strides(a2), a.raw(), b2, contiguous_strides(b2), b.raw(), nullptr, o);
  }
  Tensor o = out.with_layout(os, contiguous_strides(os));
  // oneDNN 2.6 broadcasts batch dims of src and weights only up to 12-D and asks
  // consistent ranks; operands keep dense strides, broadcast dims have size 1.
  return dnnl_matmul(as, contiguous_strides(as), a.raw(), bs, contiguous_strides(bs), b.raw(), nullptr, o);
}

Status gemm(const Tensor& a0, const Tensor& b0, const Tensor* c, bool trans_a, bool trans_b, float alpha, float beta, Tensor& out) {
  const Tensor a = a0.contiguous();
  const Tensor b = b0.contiguous();
  const int64_t m = out.shape()[0], n = out.shape()[1];
  const int64_t k = trans_a ? a.shape()[0] : a.shape()[1];
  Shape as{m, k}, ast = trans_a ? Shape{1, m} : Shape{k, 1};
  Shape bs{k, n}, bst = trans_b ? Shape{1, k} : Shape{n, 1};
  const bool bias_fused = c && alpha == 1.f && beta == 1.f && c->dtype() == DType::f32 && c->is_contiguous() &&
                          (c->numel() == n && (c->rank() == 1 || (c->rank() == 2 && c->shape()[0] == 1)));
  if (k == 0) {
    std::fill_n(out.data<float>(), out.numel(), 0.f);
  } else {
    RKD_TRY(dnnl_matmul(as, ast, a.raw(), bs, bst, b.raw(), bias_fused ? c : nullptr, out));
  }
  if (bias_fused) return {};
  float* po = out.data<float>();
  if (alpha != 1.f) {
    for (int64_t i = 0; i < m * n; ++i) po[i] *= alpha;
  }
  if (c && beta != 0.f) {
    Tensor cb = broadcast_view(*c, out.shape());
    Tensor cd = Tensor::empty(DType::f32, out.shape());
    copy_into(cb, cd);
    for (int64_t i = 0; i < m * n; ++i) po[i] += beta * cd.data<float>()[i];
  }
  return {};
}

void set_math_threads(int threads) { omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs()); }
void math_parallel_for(int64_t n, int64_t work, const std::function<void(int64_t)>& fn) {
  constexpr int64_t kMinParallelWork = int64_t{1} << 17;
  if (work < kMinParallelWork) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  omp_for(n, fn);
}

}  // namespace rkd::ops
