// Included inside HWY_NAMESPACE (with `hn` = hwy::HWY_NAMESPACE) by the SIMD layout code of core
// and the NPU lowering; no include guard: Highway re-includes it once per target.
//
// Transpose16(v): v[0..15] are 16 rows of 16 bytes; afterwards v[j] holds column j (byte i of
// v[j] = byte j of row i before). Four rounds of zipping row i with row i + 8 (byte
// interleaves), on 128-bit vectors, which every target but HWY_SCALAR has.
#if HWY_TARGET != HWY_SCALAR
HWY_INLINE void Transpose16(hn::Vec128<uint8_t>* v) {
  const hn::Full128<uint8_t> d;
  for (int round = 0; round < 4; ++round) {
    hn::Vec128<uint8_t> n[16];
    for (int i = 0; i < 8; ++i) {
      n[2 * i] = hn::InterleaveLower(d, v[i], v[i + 8]);
      n[2 * i + 1] = hn::InterleaveUpper(d, v[i], v[i + 8]);
    }
    for (int i = 0; i < 16; ++i) v[i] = n[i];
  }
}
#endif
