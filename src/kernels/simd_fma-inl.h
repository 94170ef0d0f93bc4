// Private to src/kernels, included inside HWY_NAMESPACE by the SIMD kernels (no include
// guard: Highway re-includes it once per target).
//
// FusedMulAdd(d, a, b, c) = a * b + c rounded once, on every target. Highway's MulAdd is
// fused on AVX2, AVX-512 and AArch64 NEON, but falls back to a separate multiply and add
// on targets without FMA instructions (SSSE3, SSE4, EMU128, SCALAR); there we compute each
// lane with std::fma so that the SIMD kernels keep agreeing with the reference bit for bit.
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SSE4
template <class D, class V>
HWY_INLINE V FusedMulAdd(D d, V a, V b, V c) {
  HWY_ALIGN float fa[16], fb[16], fc[16];  // these targets have at most 4 float lanes
  hwy::HWY_NAMESPACE::Store(a, d, fa);
  hwy::HWY_NAMESPACE::Store(b, d, fb);
  hwy::HWY_NAMESPACE::Store(c, d, fc);
  for (size_t i = 0; i < hwy::HWY_NAMESPACE::Lanes(d); ++i) fa[i] = std::fma(fa[i], fb[i], fc[i]);
  return hwy::HWY_NAMESPACE::Load(d, fa);
}
#else
template <class D, class V>
HWY_INLINE V FusedMulAdd(D /*d*/, V a, V b, V c) {
  return hwy::HWY_NAMESPACE::MulAdd(a, b, c);
}
#endif
