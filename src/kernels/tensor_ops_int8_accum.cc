// QConvAccumulator and QMatMulAccumulator on rkdeploy's int8 kernels (the Highway ones of
// tensor_ops_int8.cc, the sdot one of tensor_ops_int8_dotprod.cc): weight packing in the
// current kernel's format, the padded input, im2col tiles and the task split.
#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/transpose.h"
#include "kernels/tensor_ops_int8.h"
#include "kernels/tensor_ops_parallel.h"
#include "kernels/tensor_ops_simd.h"

namespace rkd::ops {

namespace {
// n bytes from src to dst, each XOR flip (a loop the compiler vectorises).
void copy_flipped(const uint8_t* __restrict src, int64_t n, uint8_t flip, uint8_t* __restrict dst) {
  if (flip == 0) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] ^ flip;
}
}  // namespace

void fill_padded_nhwc(const Tensor& x0, uint8_t* pp, int64_t hp, int64_t wp, int64_t pt, int64_t pl, bool channels_last) {
  const Tensor x = x0.contiguous();
  const uint8_t flip = x.dtype() == DType::i8 ? 0x80 : 0;  // int8 + 128 as uint8
  const auto* src = static_cast<const uint8_t*>(x.raw());
  if (channels_last) {  // [N, H, W, C]: rows copied as they are (one copy per image without column padding)
    const int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3);
    for (int64_t n = 0; n < N; ++n) {
      if (wp == W) {
        copy_flipped(src + n * H * W * C, H * W * C, flip, pp + (n * hp + pt) * wp * C);
        continue;
      }
      for (int64_t y = 0; y < H; ++y) copy_flipped(src + (n * H + y) * W * C, W * C, flip, pp + ((n * hp + y + pt) * wp + pl) * C);
    }
    return;
  }
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  for (int64_t n = 0; n < N; ++n) {
    if (wp == W) {  // no column padding: the image's rows are contiguous in both layouts, one C x HW transpose
      transpose_bytes(src + n * C * H * W, C, H * W, H * W, pp + (n * hp + pt) * wp * C, C, flip);
      continue;
    }
    for (int64_t y = 0; y < H; ++y) {
      // The row's C x W bytes (plane stride H * W) to W x C.
      transpose_bytes(src + (n * C * H + y) * W, C, W, H * W, pp + ((n * hp + y + pt) * wp + pl) * C, C, flip);
    }
  }
}

Status check_qconv_operands(const Shape& xs, DType xt, const Tensor& w, const Shape& os) {
  if (xs.size() != 4 || w.rank() != 4 || os.size() != 4) return unsupported("int8 convolution: 2-D only");
  if (xt != DType::i8 && xt != DType::u8) return invalid("int8 convolution: input must be int8 or uint8");
  if (w.dtype() != DType::i8) return unsupported("int8 convolution: weights must be int8");
  return {};
}

Status check_qmatmul_operands(DType a_type, const Tensor& b) {
  if (b.rank() != 2 || b.dtype() != DType::i8) return unsupported("int8 matmul: B must be 2-D int8");
  if (a_type != DType::i8 && a_type != DType::u8) return invalid("int8 matmul: A must be int8 or uint8");
  return {};
}

namespace {

template <typename T>
struct Aligned {
  hwy::AlignedFreeUniquePtr<T[]> p;
  size_t size = 0;
  T* get(size_t n) {  // at least n elements, zero when newly allocated
    if (n > size) {
      p = hwy::AllocateAligned<T>(n);
      std::fill_n(p.get(), n, T{0});
      size = n;
    }
    return p.get();
  }
};

// Per-thread scratch of a tile: the im2col rows (int16 for the Highway kernels, int8 for the
// dot-product kernels) and the panel-wide results.
struct Scratch {
  Aligned<int16_t> a16;
  Aligned<int8_t> a8;
  Aligned<int32_t> c;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// How the products are computed on this CPU now: Highway's int16 pairs, or (arm64 with the
// DotProd extension) int8 quads through sdot. Rows of A hold K values padded to k_multiple.
struct Format {
  bool quads = false;
  size_t nr = 0, mr = 0, k_multiple = 2;
  bool operator==(const Format&) const = default;
};
Format current_format() {
  if (int8::dotprod()) return {true, int8::kDotprodPanel, int8::kDotprodRows, 4};
  return {false, int8::panel_width(), int8::tile_rows_multiple(), 2};
}
// The quads hold A as int8: uint8 sources are stored ^ 0x80 (value - 128), and the products
// start from 128 * sum(w) to give them back.
int32_t source_offset(const Format& f, bool source_unsigned) { return f.quads && source_unsigned ? 128 : 0; }

// One row of A in the format's type: n source bytes at column `at`.
void put_row(const Format& f, Scratch& s, size_t row, size_t kp, size_t at, const uint8_t* src, size_t n, bool source_unsigned) {
  if (f.quads) {
    int8_t* dst = s.a8.get(0) + row * kp + at;
    if (source_unsigned) {
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<int8_t>(src[i] ^ 0x80);
    } else {
      std::memcpy(dst, src, n);
    }
  } else if (source_unsigned) {
    int8::widen(src, n, s.a16.get(0) + row * kp + at);
  } else {
    int8::widen(reinterpret_cast<const int8_t*>(src), n, s.a16.get(0) + row * kp + at);
  }
}
// Zeroes a row's padding [K, kp).
void pad_row(const Format& f, Scratch& s, size_t row, size_t kp, size_t K) {
  for (size_t k = K; k < kp; ++k) {
    if (f.quads) s.a8.get(0)[row * kp + k] = 0;
    else s.a16.get(0)[row * kp + k] = 0;
  }
}
void reserve_rows(const Format& f, Scratch& s, size_t kp) {
  if (f.quads) s.a8.get(int8::kTileRows * kp);
  else s.a16.get(int8::kTileRows * kp);
}

// The weights of `groups` independent products, each [cols][K] int8 (K contiguous per output
// column), packed for the current format, with the per-column constants the products start
// from.
class PackedWeights {
 public:
  void init(std::vector<int8_t> rows, int64_t groups, int64_t cols, int64_t K) {
    rows_ = std::move(rows);
    groups_ = groups;
    cols_ = cols;
    K_ = K;
    sums_.assign(static_cast<size_t>(groups * cols), 0);
    for (int64_t i = 0; i < groups * cols; ++i)
      for (int64_t k = 0; k < K; ++k) sums_[static_cast<size_t>(i)] += rows_[static_cast<size_t>(i * K + k)];
    format_ = Format{};
  }
  // Packs for format f (again when it differs from the one packed for: a test or the ISA
  // ceiling may change the target between init and run). The products start from
  // (offset - zero_point) * sum(w) (offset: source_offset) or, raw, offset * sum(w).
  void ensure(const Format& f, int32_t zero_point, int32_t offset) {
    if (f == format_ && zero_point == zp_ && offset == offset_) return;
    format_ = f;
    zp_ = zero_point;
    offset_ = offset;
    const size_t nr = f.nr, q = f.quads ? 4 : 2;
    kp_ = (static_cast<size_t>(K_) + q - 1) / q * q;
    panels_ = (static_cast<size_t>(cols_) + nr - 1) / nr;
    const size_t np = panels_ * nr, kq = kp_ / q;
    const size_t total = static_cast<size_t>(groups_) * np * kp_;
    if (f.quads) packed8_ = hwy::AllocateAligned<int8_t>(total);
    else packed16_ = hwy::AllocateAligned<int16_t>(total);
    init_raw_ = hwy::AllocateAligned<int32_t>(static_cast<size_t>(groups_) * np);
    init_ = hwy::AllocateAligned<int32_t>(static_cast<size_t>(groups_) * np);
    for (int64_t g = 0; g < groups_; ++g) {
      const size_t base = static_cast<size_t>(g) * np * kp_;
      for (size_t j = 0; j < panels_; ++j)
        for (size_t p = 0; p < kq; ++p)
          for (size_t col = 0; col < nr; ++col)
            for (size_t e = 0; e < q; ++e) {
              const size_t m = j * nr + col, k = q * p + e;
              const bool in = m < static_cast<size_t>(cols_) && k < static_cast<size_t>(K_);
              const int8_t v = in ? rows_[(static_cast<size_t>(g * cols_) + m) * static_cast<size_t>(K_) + k] : 0;
              const size_t at = base + ((j * kq + p) * nr + col) * q + e;
              if (f.quads) packed8_[at] = v;
              else packed16_[at] = v;
            }
      for (size_t m = 0; m < np; ++m) {
        const int32_t sum = m < static_cast<size_t>(cols_) ? sums_[static_cast<size_t>(g * cols_) + m] : 0;
        init_raw_[static_cast<size_t>(g) * np + m] = offset * sum;
        init_[static_cast<size_t>(g) * np + m] = (offset - zero_point) * sum;
      }
    }
  }
  size_t kp() const { return kp_; }
  size_t panels() const { return panels_; }
  size_t np() const { return panels_ * format_.nr; }
  const int16_t* group16(int64_t g) const { return packed16_.get() + static_cast<size_t>(g) * np() * kp_; }
  const int8_t* group8(int64_t g) const { return packed8_.get() + static_cast<size_t>(g) * np() * kp_; }
  const int32_t* start(int64_t g, bool raw) const { return (raw ? init_raw_.get() : init_.get()) + static_cast<size_t>(g) * np(); }

 private:
  std::vector<int8_t> rows_;
  std::vector<int32_t> sums_;
  int64_t groups_ = 0, cols_ = 0, K_ = 0;
  size_t kp_ = 0, panels_ = 0;
  int32_t zp_ = 0, offset_ = 0;
  Format format_;
  hwy::AlignedFreeUniquePtr<int16_t[]> packed16_;
  hwy::AlignedFreeUniquePtr<int8_t[]> packed8_;
  hwy::AlignedFreeUniquePtr<int32_t[]> init_raw_, init_;
};

// Runs the product of one tile: rows (<= kTileRows) of A already gathered into the scratch,
// the first `cols` results of each row copied to out rows of ldo int32.
void tile_product(const Format& f, Scratch& s, size_t rows, const PackedWeights& pw, int64_t g, bool raw, int64_t cols, int32_t* out, int64_t ldo) {
  const size_t padded_rows = (rows + f.mr - 1) / f.mr * f.mr;
  // Straight into out when every computed row and column is a real one; else through the
  // tile buffer, whose valid part is copied.
  const bool direct = padded_rows == rows && static_cast<size_t>(cols) == pw.np();
  int32_t* ct = direct ? out : s.c.get(int8::kTileRows * pw.np());
  const size_t ldc = direct ? static_cast<size_t>(ldo) : pw.np();
  if (f.quads) {
    int8::gemm_tile_dotprod(s.a8.get(0), padded_rows, pw.kp(), pw.group8(g), pw.panels(), pw.start(g, raw), ct, ldc);
  } else {
    int8::gemm_tile(s.a16.get(0), padded_rows, pw.kp(), pw.group16(g), pw.panels(), pw.start(g, raw), ct, ldc);
  }
  if (direct) return;
  for (size_t r = 0; r < rows; ++r) std::memcpy(out + static_cast<int64_t>(r) * ldo, ct + r * pw.np(), static_cast<size_t>(cols) * sizeof(int32_t));
}

class QConvHighway final : public QConvAccumulator {
 public:
  Status init(const Shape& xs, DType xt, int32_t x_zp, const Tensor& w0, const ConvParams& p, const Shape& os) {
    RKD_TRY(check_qconv_operands(xs, xt, w0, os));
    const Tensor w = w0.contiguous();
    N_ = xs[0];
    C_ = xs[1];
    M_ = w.dim(0);
    G_ = p.group;
    if (G_ < 1 || C_ % G_ != 0 || M_ % G_ != 0 || w.dim(1) != C_ / G_) return invalid("int8 convolution: groups do not divide the channels");
    Cg_ = C_ / G_;
    Mg_ = M_ / G_;
    KH_ = w.dim(2);
    KW_ = w.dim(3);
    sy_ = p.strides[0];
    sx_ = p.strides[1];
    dy_ = p.dilations[0];
    dx_ = p.dilations[1];
    pt_ = p.pads[0];
    pl_ = p.pads[1];
    hp_ = xs[2] + p.pads[0] + p.pads[2];
    wp_ = xs[3] + p.pads[1] + p.pads[3];
    OH_ = os[2];
    OW_ = os[3];
    if (os[0] != N_ || os[1] != M_ || OH_ < 0 || OW_ < 0 || (OH_ > 0 && (OH_ - 1) * sy_ + (KH_ - 1) * dy_ >= hp_) ||
        (OW_ > 0 && (OW_ - 1) * sx_ + (KW_ - 1) * dx_ >= wp_)) {
      return invalid("int8 convolution: output shape does not match the input, kernel and padding");
    }
    const int64_t K = KH_ * KW_ * Cg_;
    if (K > int8::kMaxTaps) return unsupported("int8 convolution: more than 65793 taps per output (int32 sums could overflow)");
    zp_u8_ = x_zp + (xt == DType::i8 ? 128 : 0);
    if (zp_u8_ < 0 || zp_u8_ > 255) return invalid("int8 convolution: zero point out of range");
    depthwise_ = Cg_ == 1 && Mg_ == 1;
    const int8_t* wd = w.data<int8_t>();
    for (int64_t m = 0; m < M_; ++m) {  // zp_u8 * sum(w[m]): weights [M][K] contiguous
      int32_t sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += wd[m * K + k];
      compensation_.push_back(zp_u8_ * sum);
    }
    if (depthwise_) {
      const size_t L = int8::depthwise_channel_multiple();
      Cp_ = (static_cast<size_t>(C_) + L - 1) / L * L;
      const size_t taps = static_cast<size_t>(KH_ * KW_);
      wdw_ = hwy::AllocateAligned<int16_t>(taps * Cp_);
      std::fill_n(wdw_.get(), taps * Cp_, int16_t{0});
      dw_init_raw_ = hwy::AllocateAligned<int32_t>(Cp_);
      dw_init_ = hwy::AllocateAligned<int32_t>(Cp_);
      std::fill_n(dw_init_raw_.get(), Cp_, 0);
      std::fill_n(dw_init_.get(), Cp_, 0);
      for (int64_t c = 0; c < C_; ++c) {
        for (size_t t = 0; t < taps; ++t) wdw_[t * Cp_ + static_cast<size_t>(c)] = wd[static_cast<size_t>(c) * taps + t];
        dw_init_[static_cast<size_t>(c)] = -compensation_[static_cast<size_t>(c)];
      }
      for (int64_t ky = 0; ky < KH_; ++ky)
        for (int64_t kx = 0; kx < KW_; ++kx) tap_offset_.push_back((ky * dy_ * wp_ + kx * dx_) * C_);
      dw_lanes_ = L;
    } else {
      // [M][Cg][KH][KW] -> per output channel, taps in (ky, kx, c) order: the NHWC gather's.
      std::vector<int8_t> rows(static_cast<size_t>(M_ * K));
      for (int64_t m = 0; m < M_; ++m)
        for (int64_t c = 0; c < Cg_; ++c)
          for (int64_t ky = 0; ky < KH_; ++ky)
            for (int64_t kx = 0; kx < KW_; ++kx)
              rows[static_cast<size_t>(m * K + (ky * KW_ + kx) * Cg_ + c)] = wd[((m * Cg_ + c) * KH_ + ky) * KW_ + kx];
      weights_.init(std::move(rows), G_, Mg_, K);
    }
    // The padding holds the zero point; run() rewrites only the interior. The slack lets the
    // depthwise kernel read a whole vector at the last pixel.
    padded_.assign(static_cast<size_t>(N_ * hp_ * wp_ * C_) + 64, static_cast<uint8_t>(zp_u8_));
    return {};
  }

  uint8_t* padded_input() override { return padded_.data(); }
  Status run(const Tensor& x, Tensor& acc) override {
    fill_padded_nhwc(x, padded_.data(), hp_, wp_, pt_, pl_);
    return compute(acc, false);
  }
  Status run_raw(const Tensor& x, Tensor& acc, bool x_channels_last) override {
    fill_padded_nhwc(x, padded_.data(), hp_, wp_, pt_, pl_, x_channels_last);
    return compute(acc, true);
  }
  const std::vector<int32_t>& compensation() const override { return compensation_; }
  Status run_filled(Tensor& acc) override { return compute(acc, false); }
  Status run_filled_raw(Tensor& acc) override { return compute(acc, true); }
  std::string implementation() const override {
    if (!depthwise_ && int8::dotprod()) return "rkdeploy:int8_dotprod_gemm";
    return std::string("rkdeploy:int8_highway_") + (depthwise_ ? "depthwise" : "gemm") + "(" + highway_dispatched_target() + ")";
  }

 private:
  Status compute(Tensor& acc, bool raw) {
    if (acc.dtype() != DType::i32 || acc.numel() != N_ * OH_ * OW_ * M_) return invalid("int8 convolution: accumulator shape");
    int32_t* out = acc.data<int32_t>();
    const uint8_t* pad = padded_.data();
    if (depthwise_) {
      if (int8::depthwise_channel_multiple() != dw_lanes_) return invalid("int8 convolution: the SIMD target changed after init");
      const int32_t* init = raw ? dw_init_raw_.get() : dw_init_.get();
      math_parallel_for(N_ * OH_, OW_ * C_ * KH_ * KW_ * N_ * OH_, [&](int64_t i) {
        const int64_t n = i / OH_, oy = i % OH_;
        int8::depthwise_row(pad + ((n * hp_ + oy * sy_) * wp_) * C_, static_cast<size_t>(sx_ * C_), static_cast<size_t>(OW_), tap_offset_.data(),
                            tap_offset_.size(), wdw_.get(), init, static_cast<size_t>(C_), Cp_, out + i * OW_ * M_);
      });
      return {};
    }
    const Format f = current_format();
    weights_.ensure(f, zp_u8_, source_offset(f, true));
    const int64_t P = OH_ * OW_;
    const int64_t tiles = (P + static_cast<int64_t>(int8::kTileRows) - 1) / static_cast<int64_t>(int8::kTileRows);
    const int64_t K = KH_ * KW_ * Cg_;
    math_parallel_for(N_ * G_ * tiles, N_ * P * K * M_, [&](int64_t task) {
      const int64_t t = task % tiles, g = (task / tiles) % G_, n = task / (tiles * G_);
      const int64_t p0 = t * static_cast<int64_t>(int8::kTileRows);
      const size_t rows = static_cast<size_t>(std::min<int64_t>(int8::kTileRows, P - p0));
      Scratch& s = scratch();
      const size_t kp = weights_.kp();
      reserve_rows(f, s, kp);
      for (size_t r = 0; r < rows; ++r) {
        const int64_t p = p0 + static_cast<int64_t>(r), oy = p / OW_, ox = p % OW_;
        for (int64_t ky = 0; ky < KH_; ++ky) {
          for (int64_t kx = 0; kx < KW_; ++kx) {
            const uint8_t* src = pad + ((n * hp_ + oy * sy_ + ky * dy_) * wp_ + ox * sx_ + kx * dx_) * C_ + g * Cg_;
            put_row(f, s, r, kp, static_cast<size_t>((ky * KW_ + kx) * Cg_), src, static_cast<size_t>(Cg_), true);
          }
        }
        pad_row(f, s, r, kp, static_cast<size_t>(K));
      }
      tile_product(f, s, rows, weights_, g, raw, Mg_, out + (n * P + p0) * M_ + g * Mg_, M_);
    });
    return {};
  }

  PackedWeights weights_;
  std::vector<uint8_t> padded_;
  hwy::AlignedFreeUniquePtr<int16_t[]> wdw_;
  hwy::AlignedFreeUniquePtr<int32_t[]> dw_init_raw_, dw_init_;
  std::vector<int64_t> tap_offset_;
  std::vector<int32_t> compensation_;
  size_t Cp_ = 0, dw_lanes_ = 0;
  bool depthwise_ = false;
  int64_t N_ = 0, C_ = 0, M_ = 0, G_ = 1, Cg_ = 0, Mg_ = 0, KH_ = 0, KW_ = 0, sy_ = 1, sx_ = 1, dy_ = 1, dx_ = 1;
  int64_t pt_ = 0, pl_ = 0, hp_ = 0, wp_ = 0, OH_ = 0, OW_ = 0;
  int32_t zp_u8_ = 0;
};

class QMatMulHighway final : public QMatMulAccumulator {
 public:
  Status init(int64_t rows, DType at, int32_t a_zp, const Tensor& b0) {
    RKD_TRY(check_qmatmul_operands(at, b0));
    const Tensor b = b0.contiguous();
    rows_ = rows;
    k_ = b.dim(0);
    n_ = b.dim(1);
    if (k_ > int8::kMaxTaps) return unsupported("int8 matmul: K above 65793 (int32 sums could overflow)");
    signed_ = at == DType::i8;
    zp_ = a_zp;
    if (zp_ < (signed_ ? -128 : 0) || zp_ > (signed_ ? 127 : 255)) return invalid("int8 matmul: zero point out of range");
    std::vector<int8_t> cols(static_cast<size_t>(n_ * k_));
    for (int64_t kk = 0; kk < k_; ++kk)
      for (int64_t j = 0; j < n_; ++j) cols[static_cast<size_t>(j * k_ + kk)] = b.data<int8_t>()[kk * n_ + j];
    weights_.init(std::move(cols), 1, n_, k_);
    return {};
  }
  Status run(const Tensor& a0, Tensor& acc) override {
    const Tensor a = a0.contiguous();
    if (a.numel() != rows_ * k_ || acc.dtype() != DType::i32 || acc.numel() != rows_ * n_) return invalid("int8 matmul: operand shapes");
    const Format f = current_format();
    weights_.ensure(f, zp_, source_offset(f, !signed_));
    const int64_t tiles = (rows_ + static_cast<int64_t>(int8::kTileRows) - 1) / static_cast<int64_t>(int8::kTileRows);
    int32_t* out = acc.data<int32_t>();
    const auto* src = static_cast<const uint8_t*>(a.raw());
    math_parallel_for(tiles, rows_ * k_ * n_, [&](int64_t t) {
      const int64_t r0 = t * static_cast<int64_t>(int8::kTileRows);
      const size_t rows = static_cast<size_t>(std::min<int64_t>(int8::kTileRows, rows_ - r0));
      Scratch& s = scratch();
      const size_t kp = weights_.kp();
      reserve_rows(f, s, kp);
      for (size_t r = 0; r < rows; ++r) {
        put_row(f, s, r, kp, 0, src + (r0 + static_cast<int64_t>(r)) * k_, static_cast<size_t>(k_), !signed_);
        pad_row(f, s, r, kp, static_cast<size_t>(k_));
      }
      tile_product(f, s, rows, weights_, 0, false, n_, out + r0 * n_, n_);
    });
    return {};
  }

 private:
  PackedWeights weights_;
  int64_t rows_ = 0, k_ = 0, n_ = 0;
  int32_t zp_ = 0;
  bool signed_ = true;
};

}  // namespace

Result<std::unique_ptr<QConvAccumulator>> make_qconv_accumulator_highway(const Shape& x_shape, DType x_type, int32_t x_zero_point,
                                                                         const Tensor& weights, const ConvParams& p, const Shape& out_shape) {
  auto q = std::make_unique<QConvHighway>();
  RKD_TRY(q->init(x_shape, x_type, x_zero_point, weights, p, out_shape));
  return std::unique_ptr<QConvAccumulator>(std::move(q));
}

Result<std::unique_ptr<QMatMulAccumulator>> make_qmatmul_accumulator_highway(int64_t rows, DType a_type, int32_t a_zero_point, const Tensor& b) {
  auto q = std::make_unique<QMatMulHighway>();
  RKD_TRY(q->init(rows, a_type, a_zero_point, b));
  return std::unique_ptr<QMatMulAccumulator>(std::move(q));
}

}  // namespace rkd::ops
