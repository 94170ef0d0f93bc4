// Private to src/kernels, included inside HWY_NAMESPACE (after simd_fma-inl.h) by the SIMD
// kernels; no include guard: Highway re-includes it once per target.
//
// BilinearLanes: the four bilinear corners of one vector of pixel coordinates (x, y),
// computed lane-wise with exactly the operations of the scalar reference
// (grid_sample_coords.h): x0 = floor(x), wx = x - x0, weights (1-wy)(1-wx), (1-wy)wx,
// wy(1-wx), wy wx; corner k is inside when its column is in [0, W) and its row in [0, H)
// (NaN coordinates are inside nowhere). `offset[k]` = row * stride + column of corner k,
// valid only where ok[k] (0 elsewhere, so it is always a safe index).
template <class D>
struct BilinearLanes {
  hn::Vec<D> weight[4];
  hn::Mask<D> ok[4];
  hn::Vec<hn::RebindToSigned<D>> offset[4];
};

template <class D>
HWY_INLINE BilinearLanes<D> ComputeBilinearLanes(D d, hn::Vec<D> x, hn::Vec<D> y, hn::Vec<D> fW, hn::Vec<D> fH,
                                                 hn::Vec<hn::RebindToSigned<D>> stride) {
  const hn::RebindToSigned<D> di;
  const auto one = hn::Set(d, 1.0f), zero = hn::Zero(d), minus_one = hn::Set(d, -1.0f);
  const auto x0 = hn::Floor(x), y0 = hn::Floor(y);
  const auto w = x - x0, e = one - w;
  const auto n = y - y0, s = one - n;
  const auto xw_ok = hn::And(x0 >= zero, x0 < fW);
  const auto xe_ok = hn::And(x0 >= minus_one, x0 < fW - one);
  const auto yn_ok = hn::And(y0 >= zero, y0 < fH);
  const auto ys_ok = hn::And(y0 >= minus_one, y0 < fH - one);
  const auto ok_nw = hn::And(yn_ok, xw_ok), ok_ne = hn::And(yn_ok, xe_ok);
  const auto ok_sw = hn::And(ys_ok, xw_ok), ok_se = hn::And(ys_ok, xe_ok);
  // Any usable corner implies x0 in [-1, W) and y0 in [-1, H): safe to convert.
  const auto xi = hn::ConvertTo(di, hn::IfThenElseZero(hn::Or(xw_ok, xe_ok), x0));
  const auto yi = hn::ConvertTo(di, hn::IfThenElseZero(hn::Or(yn_ok, ys_ok), y0));
  const auto base = yi * stride + xi;
  const auto one_i = hn::Set(di, 1);
  // Aggregate initialisation, no lambdas: NEON vector types must not be default-constructed
  // or handled in functions outside Highway's target attributes.
  return BilinearLanes<D>{
      {s * e, s * w, n * e, n * w},
      {ok_nw, ok_ne, ok_sw, ok_se},
      {hn::IfThenElseZero(hn::RebindMask(di, ok_nw), base), hn::IfThenElseZero(hn::RebindMask(di, ok_ne), base + one_i),
       hn::IfThenElseZero(hn::RebindMask(di, ok_sw), base + stride), hn::IfThenElseZero(hn::RebindMask(di, ok_se), base + stride + one_i)}};
}
