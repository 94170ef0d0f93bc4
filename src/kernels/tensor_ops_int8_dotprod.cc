// The int8 dot-product kernel: gemm_tile's contract (tensor_ops_int8.h) on int8 quads, for
// arm64 CPUs with the DotProd extension (ARMv8.2 sdot; the RK3588's Cortex-A76 and A55 have
// it): vdotq_s32 adds four int8 x int8 products into each int32 lane, |sum| <= 4 * 128 * 128 =
// 65536 per instruction, exact. Highway 1.0 has no such operation, so this one kernel is
// written with the Arm intrinsics, compiled for armv8.2-a+dotprod and called only where the
// kernel reports HWCAP_ASIMDDP. Elsewhere (x86, arm64 without DotProd) the same function is a
// plain loop, which tests can select to check the quad packing on any CPU.
#include <atomic>
#include <cstring>

#include "kernels/tensor_ops_int8.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace rkd::ops::int8 {
namespace {
std::atomic<int> g_mode{-1};  // -1: the hardware decides; 0: off; 1: on (the loop where no sdot)

bool hardware_dotprod() {
#if defined(__aarch64__)
  static const bool yes = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return yes;
#else
  return false;
#endif
}

// The definition, for CPUs without sdot.
void gemm_tile_quads_loop(const int8_t* a, size_t rows, size_t kp, const int8_t* b, size_t panels, const int32_t* init, int32_t* ct, size_t ldc) {
  const size_t nr = kDotprodPanel, kq = kp / 4;
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < panels; ++j)
      for (size_t col = 0; col < nr; ++col) {
        int32_t sum = init[j * nr + col];
        for (size_t p = 0; p < kq; ++p)
          for (size_t e = 0; e < 4; ++e) sum += a[r * kp + 4 * p + e] * b[((j * kq + p) * nr + col) * 4 + e];
        ct[r * ldc + j * nr + col] = sum;
      }
}

#if defined(__aarch64__)
// kDotprodRows rows x 4 vectors (16 columns) of accumulators, one row's 4 A bytes replicated
// per vector (ld1r), K blocked like gemm_tile.
__attribute__((target("arch=armv8.2-a+dotprod"))) void gemm_tile_sdot(const int8_t* a, size_t rows, size_t kp, const int8_t* b, size_t panels,
                                                                      const int32_t* init, int32_t* ct, size_t ldc) {
  constexpr size_t MR = kDotprodRows, NV = kDotprodPanel / 4;
  const size_t kq = kp / 4;
  for (size_t k0 = 0; k0 < kq; k0 += kKBlockQuads) {
    const size_t kb = kq - k0 < kKBlockQuads ? kq - k0 : kKBlockQuads;
    for (size_t j = 0; j < panels; ++j) {
      const int8_t* bj = b + (j * kq + k0) * kDotprodPanel * 4;
      for (size_t r = 0; r < rows; r += MR) {
        int32x4_t acc[MR][NV];
        for (size_t i = 0; i < MR; ++i)
          for (size_t v = 0; v < NV; ++v)
            acc[i][v] = vld1q_s32(k0 == 0 ? init + j * kDotprodPanel + v * 4 : ct + (r + i) * ldc + j * kDotprodPanel + v * 4);
        for (size_t p = 0; p < kb; ++p) {
          int8x16_t bv[NV];
          for (size_t v = 0; v < NV; ++v) bv[v] = vld1q_s8(bj + (p * kDotprodPanel + v * 4) * 4);
          for (size_t i = 0; i < MR; ++i) {
            int32_t quad;
            std::memcpy(&quad, a + (r + i) * kp + 4 * (k0 + p), sizeof quad);
            const int8x16_t av = vreinterpretq_s8_s32(vdupq_n_s32(quad));
            for (size_t v = 0; v < NV; ++v) acc[i][v] = vdotq_s32(acc[i][v], bv[v], av);
          }
        }
        for (size_t i = 0; i < MR; ++i)
          for (size_t v = 0; v < NV; ++v) vst1q_s32(ct + (r + i) * ldc + j * kDotprodPanel + v * 4, acc[i][v]);
      }
    }
  }
}
#endif
}  // namespace

bool dotprod() {
  const int mode = g_mode.load(std::memory_order_relaxed);
  return mode < 0 ? hardware_dotprod() : mode == 1;
}
void set_dotprod_for_test(int mode) { g_mode.store(mode, std::memory_order_relaxed); }

void gemm_tile_dotprod(const int8_t* a, size_t rows, size_t kp, const int8_t* b, size_t panels, const int32_t* init, int32_t* ct, size_t ldc) {
#if defined(__aarch64__)
  if (hardware_dotprod()) return gemm_tile_sdot(a, rows, kp, b, panels, init, ct, ldc);
#endif
  gemm_tile_quads_loop(a, rows, kp, b, panels, init, ct, ldc);
}

}  // namespace rkd::ops::int8
