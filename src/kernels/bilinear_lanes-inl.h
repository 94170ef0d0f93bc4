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
  BilinearLanes<D> r;
  r.weight[0] = s * e;
  r.weight[1] = s * w;
  r.weight[2] = n * e;
  r.weight[3] = n * w;
  const auto xw_ok = hn::And(x0 >= zero, x0 < fW);
  const auto xe_ok = hn::And(x0 >= minus_one, x0 < fW - one);
  const auto yn_ok = hn::And(y0 >= zero, y0 < fH);
  const auto ys_ok = hn::And(y0 >= minus_one, y0 < fH - one);
  r.ok[0] = hn::And(yn_ok, xw_ok);
  r.ok[1] = hn::And(yn_ok, xe_ok);
  r.ok[2] = hn::And(ys_ok, xw_ok);
  r.ok[3] = hn::And(ys_ok, xe_ok);
  // Any usable corner implies x0 in [-1, W) and y0 in [-1, H): safe to convert.
  const auto xi = hn::ConvertTo(di, hn::IfThenElseZero(hn::Or(xw_ok, xe_ok), x0));
  const auto yi = hn::ConvertTo(di, hn::IfThenElseZero(hn::Or(yn_ok, ys_ok), y0));
  const auto base = yi * stride + xi;
  const auto one_i = hn::Set(di, 1);
  const hn::Vec<decltype(di)> off[4] = {base, base + one_i, base + stride, base + stride + one_i};
  for (int k = 0; k < 4; ++k) r.offset[k] = hn::IfThenElseZero(hn::RebindMask(di, r.ok[k]), off[k]);
  return r;
}
