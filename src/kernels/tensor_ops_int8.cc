// The exact int8 products on every instruction set: Highway kernels behind the
// QConvAccumulator / QMatMulAccumulator contracts of tensor_ops.h.
//
// Exactness. Every operand is widened to int16 before it is multiplied (input bytes 0..255 or
// -128..127, weights -128..127), and the products are summed into int32 lanes by Highway's
// ReorderWidenMulAccumulate: on x86 vpmaddwd (two int16 x int16 products added into one int32
// lane; |a*b + c*d| <= 2 * 255 * 128 = 65280, far from overflow), on arm64 vmlal_s16 (one
// product per int32 lane). No step saturates or rounds, so the sums are those of int32
// arithmetic, as long as a sum of K products fits: K * 255 * 128 < 2^31, i.e. K <= 65793 taps
// (checked at init). The depthwise kernel multiplies in int16 (|x * w| <= 255 * 128 = 32640 <
// 2^15) and widens each product to int32 before adding it.
//
// Structure. Convolution is implicit GEMM over the padded channels-last uint8 buffer of the
// contract: a tile of kTileRows output pixels is gathered (im2col) into int16 rows of Kp
// (K = KH*KW*C/group taps, padded to even) and multiplied with the weights packed per panel
// of NR output channels as int16 pairs [Kp/2][NR][2]; the micro-kernel keeps MR x NV
// accumulator vectors in registers (NR = NV * lanes), K is blocked by kKBlock so that a panel's
// block stays in L1. Depthwise convolution (one input channel per group, one output channel
// per group) vectorises over channels instead. Work is split into (image, group, pixel tile)
// tasks on the OpenMP threads (tensor_ops_parallel.h).
//
// ISA coverage: whatever Highway compiles and the CPU and the RKD_MAX_ISA ceiling allow (SSE4,
// AVX2, AVX-512 on x86; NEON on arm64). Highway 1.0 has no int8 dot-product operation: on VNNI
// CPUs oneDNN's exact VNNI kernels are used instead (tensor_ops_dnnl.cc), and on arm64 CPUs
// with the DotProd extension the GEMM runs the sdot kernel of tensor_ops_int8_dotprod.cc (the
// depthwise kernel stays here). BENCHMARKS.md "Exact int8 GEMM candidates" has the speeds.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/tensor_ops_int8.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/isa.h"

#include <algorithm>
#include <cstring>

#include "kernels/tensor_ops_int8.h"

HWY_BEFORE_NAMESPACE();
namespace rkd::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using int8::kKBlockPairs;

#if HWY_TARGET == HWY_SCALAR
// Highway's one-lane target (CPUs without SSSE3) has no int16 pairs: plain loops with the same
// contracts (the same int32 sums).
size_t PanelWidth() { return 4; }
size_t TileRowsMultiple() { return 1; }
void GemmTile(const int16_t* a, size_t rows, size_t kp, const int16_t* b, size_t panels, const int32_t* init, int32_t* ct, size_t ldc) {
  const size_t nr = PanelWidth(), kp2 = kp / 2;
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < panels; ++j)
      for (size_t col = 0; col < nr; ++col) {
        int32_t sum = init[j * nr + col];
        for (size_t p = 0; p < kp2; ++p)
          for (size_t e = 0; e < 2; ++e) sum += a[r * kp + 2 * p + e] * b[((j * kp2 + p) * nr + col) * 2 + e];
        ct[r * ldc + j * nr + col] = sum;
      }
}
void WidenU8(const uint8_t* src, size_t n, int16_t* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}
void WidenI8(const int8_t* src, size_t n, int16_t* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}
size_t DepthwiseChannelMultiple() { return 1; }
void DepthwiseRow(const uint8_t* x, size_t pixel_step, size_t count, const int64_t* tap_offset, size_t taps, const int16_t* w, const int32_t* init,
                  size_t C, size_t Cp, int32_t* out) {
  for (size_t o = 0; o < count; ++o)
    for (size_t c = 0; c < C; ++c) {
      int32_t sum = init[c];
      for (size_t t = 0; t < taps; ++t) sum += x[o * pixel_step + static_cast<size_t>(tap_offset[t]) + c] * w[t * Cp + c];
      out[o * C + c] = sum;
    }
}
#else

using D32 = hn::ScalableTag<int32_t>;
using D16 = hn::Repartition<int16_t, D32>;

// Micro-kernel shape per target: MR rows x NV vectors of accumulators (two per pair on NEON,
// where ReorderWidenMulAccumulate uses its second sum), the MR broadcast rows and one B vector
// within the register file (AVX-512: 32 registers; AVX2/SSE4: 16; NEON: 32). Chosen by
// measurement (bench_int8_gemm, docs/design-decisions.md "Exact int8 products on every ISA"):
// on AVX2, 4x2 and 2x4 ran at 120-140 GOP/s where 4x3 spilled accumulators (77-91) and 2x6 or
// 1x8 lose to panel padding when M is not a multiple of the panel width; NV = 2 keeps the
// panel (NR = 16 int32 on AVX2, 32 on AVX-512) close to the detectors' channel counts.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3_ZEN4
constexpr size_t kMR = 8, kNV = 2;
#else
constexpr size_t kMR = 4, kNV = 2;
#endif

size_t PanelWidth() { return kNV * hn::Lanes(D32()); }
size_t TileRowsMultiple() { return kMR; }

// ct[r][0..NR) (+)= init[0..NR) + sum over pairs p < kp2 of a[r][2p..2p+1] . b[p][col][0..1],
// for r < kMR. a: kMR rows of lda int16; b: [kp2][NR][2] int16, aligned; ct: kMR rows of ldc
// (any alignment).
HWY_INLINE void MicroKernel(const int16_t* HWY_RESTRICT a, size_t lda, const int16_t* HWY_RESTRICT b, size_t kp2, const int32_t* HWY_RESTRICT init,
                            bool accumulate, int32_t* HWY_RESTRICT ct, size_t ldc) {
  const D32 d32;
  const D16 d16;
  const size_t L = hn::Lanes(d32);
  using V = hn::Vec<D32>;
  V s0[kMR][kNV], s1[kMR][kNV];
  for (size_t r = 0; r < kMR; ++r) {
    for (size_t v = 0; v < kNV; ++v) {
      s0[r][v] = hn::Zero(d32);
      s1[r][v] = hn::Zero(d32);
    }
  }
  for (size_t p = 0; p < kp2; ++p) {
    const int16_t* bp = b + p * kNV * L * 2;
    hn::Vec<D16> av[kMR];
    for (size_t r = 0; r < kMR; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * p, sizeof pair);
      av[r] = hn::BitCast(d16, hn::Set(d32, pair));
    }
    for (size_t v = 0; v < kNV; ++v) {
      const auto bv = hn::Load(d16, bp + v * L * 2);
      for (size_t r = 0; r < kMR; ++r) s0[r][v] = hn::ReorderWidenMulAccumulate(d32, av[r], bv, s0[r][v], s1[r][v]);
    }
  }
  for (size_t r = 0; r < kMR; ++r) {
    int32_t* row = ct + r * ldc;
    for (size_t v = 0; v < kNV; ++v) {
      V sum = hn::RearrangeToOddPlusEven(s0[r][v], s1[r][v]);
      sum = accumulate ? sum + hn::LoadU(d32, row + v * L) : sum + hn::Load(d32, init + v * L);
      hn::StoreU(sum, d32, row + v * L);
    }
  }
}

// ct [rows, Np] = init + a [rows, Kp] x packed b, rows a multiple of kMR; Np = panels * NR.
// a: lda = Kp int16 per row; b: panels of [Kp/2][NR][2]; ct: rows of ldc >= Np.
void GemmTile(const int16_t* a, size_t rows, size_t kp, const int16_t* b, size_t panels, const int32_t* init, int32_t* ct, size_t ldc) {
  const size_t nr = PanelWidth();
  const size_t kp2 = kp / 2;
  for (size_t k0 = 0; k0 < kp2; k0 += kKBlockPairs) {
    const size_t kb = std::min(kKBlockPairs, kp2 - k0);
    for (size_t j = 0; j < panels; ++j) {
      const int16_t* bj = b + (j * kp2 + k0) * nr * 2;
      for (size_t r = 0; r < rows; r += kMR) {
        MicroKernel(a + r * kp + 2 * k0, kp, bj, kb, init + j * nr, k0 != 0, ct + r * ldc + j * nr, ldc);
      }
    }
  }
}

// dst[0..n) = int16(src[0..n)) for uint8 or int8 source bytes.
template <typename T>
HWY_INLINE void WidenRow(const T* HWY_RESTRICT src, size_t n, int16_t* HWY_RESTRICT dst) {
  const D16 d16;
  const hn::Rebind<T, D16> d8;
  const size_t L = hn::Lanes(d16);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::PromoteTo(d16, hn::LoadU(d8, src + i)), d16, dst + i);
  for (; i < n; ++i) dst[i] = static_cast<int16_t>(src[i]);
}
void WidenU8(const uint8_t* src, size_t n, int16_t* dst) { WidenRow(src, n, dst); }
void WidenI8(const int8_t* src, size_t n, int16_t* dst) { WidenRow(src, n, dst); }

// Depthwise rows (one input and one output channel per group): for each of `count` output
// pixels o (input offset o * pixel_step bytes from x), out[o][c] = init[c] + sum over taps t of
// x[o * pixel_step + tap_offset[t] + c] * w[t][c], for c < C. w: [taps][Cp] int16 and init: [Cp],
// Cp = C rounded up to int16 lanes, zero beyond C; x may be read up to Cp - C bytes past a pixel
// (the caller's buffer has that slack). out: rows of C int32.
size_t DepthwiseChannelMultiple() { return hn::Lanes(D16()); }
void DepthwiseRow(const uint8_t* x, size_t pixel_step, size_t count, const int64_t* tap_offset, size_t taps, const int16_t* w, const int32_t* init,
                  size_t C, size_t Cp, int32_t* out) {
  const D16 d16;
  const hn::Rebind<uint8_t, D16> d8;
  const hn::Half<D16> dh16;
  const hn::Rebind<int32_t, decltype(dh16)> d32;
  const size_t L = hn::Lanes(d16), H = hn::Lanes(d32);
  HWY_ALIGN int32_t tail[2 * hn::MaxLanes(d32)];
  for (size_t o = 0; o < count; ++o) {
    const uint8_t* xo = x + o * pixel_step;
    int32_t* yo = out + o * C;
    for (size_t c = 0; c < Cp; c += L) {
      auto lo = hn::Load(d32, init + c), hi = hn::Load(d32, init + c + H);
      for (size_t t = 0; t < taps; ++t) {
        const auto xv = hn::PromoteTo(d16, hn::LoadU(d8, xo + tap_offset[t] + c));
        const auto prod = xv * hn::Load(d16, w + t * Cp + c);  // |x * w| <= 32640: exact in int16
        lo = lo + hn::PromoteTo(d32, hn::LowerHalf(dh16, prod));
        hi = hi + hn::PromoteTo(d32, hn::UpperHalf(dh16, prod));
      }
      if (c + L <= C) {
        hn::StoreU(lo, d32, yo + c);
        hn::StoreU(hi, d32, yo + c + H);
      } else {
        hn::Store(lo, d32, tail);
        hn::Store(hi, d32, tail + H);
        std::memcpy(yo + c, tail, (C - c) * sizeof(int32_t));
      }
    }
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace rkd::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd::ops::int8 {

RKD_HIGHWAY_HONOURS_ISA_CEILING;
HWY_EXPORT(PanelWidth);
HWY_EXPORT(TileRowsMultiple);
HWY_EXPORT(GemmTile);
HWY_EXPORT(WidenU8);
HWY_EXPORT(WidenI8);
HWY_EXPORT(DepthwiseChannelMultiple);
HWY_EXPORT(DepthwiseRow);

size_t panel_width() { return HWY_DYNAMIC_DISPATCH(PanelWidth)(); }
size_t tile_rows_multiple() { return HWY_DYNAMIC_DISPATCH(TileRowsMultiple)(); }
void gemm_tile(const int16_t* a, size_t rows, size_t kp, const int16_t* b, size_t panels, const int32_t* init, int32_t* ct, size_t ldc) {
  HWY_DYNAMIC_DISPATCH(GemmTile)(a, rows, kp, b, panels, init, ct, ldc);
}
void widen(const uint8_t* src, size_t n, int16_t* dst) { HWY_DYNAMIC_DISPATCH(WidenU8)(src, n, dst); }
void widen(const int8_t* src, size_t n, int16_t* dst) { HWY_DYNAMIC_DISPATCH(WidenI8)(src, n, dst); }
size_t depthwise_channel_multiple() { return HWY_DYNAMIC_DISPATCH(DepthwiseChannelMultiple)(); }
void depthwise_row(const uint8_t* x, size_t pixel_step, size_t count, const int64_t* tap_offset, size_t taps, const int16_t* w, const int32_t* init,
                   size_t C, size_t Cp, int32_t* out) {
  HWY_DYNAMIC_DISPATCH(DepthwiseRow)(x, pixel_step, count, tap_offset, taps, w, init, C, Cp, out);
}

}  // namespace rkd::ops::int8
#endif
