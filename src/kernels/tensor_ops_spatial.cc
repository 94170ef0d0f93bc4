// Pooling, Resize and Einsum kernels (tensor_ops.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>
#include <map>

#include "kernels/tensor_ops.h"
#include "kernels/tensor_ops_parallel.h"

namespace rkd::ops {

namespace {

// Spatial dims padded to 3 (D, H, W) so that 1-D, 2-D and 3-D pooling share one loop.
struct Window3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
};
Window3 window3(const Shape& xs, const Shape& os, const PoolParams& p) {
  Window3 w{};
  const size_t sp = xs.size() - 2;
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - static_cast<int>(sp));
    if (j < 0) {
      w.in[i] = w.out[i] = w.k[i] = w.s[i] = w.d[i] = 1;
      w.pb[i] = w.pe[i] = 0;
      continue;
    }
    const size_t u = static_cast<size_t>(j);
    w.in[i] = xs[u + 2];
    w.out[i] = os[u + 2];
    w.k[i] = p.kernel[u];
    w.s[i] = p.strides[u];
    w.d[i] = p.dilations.empty() ? 1 : p.dilations[u];
    w.pb[i] = p.pads[u];
    w.pe[i] = p.pads[u + sp];
  }
  return w;
}

template <typename Body>
void pool_loop(const Tensor& x0, const PoolParams& p, Tensor& out, Body body) {
  const Tensor x = x0.contiguous();
  const Window3 w = window3(x.shape(), out.shape(), p);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
  const float* px = x.data<float>();
  float* po = out.data<float>();
  omp_for(planes, [&](int64_t pl) {
    const float* xp = px + pl * in_plane;
    float* op = po + pl * out_plane;
    for (int64_t od = 0; od < w.out[0]; ++od) {
      for (int64_t oh = 0; oh < w.out[1]; ++oh) {
        for (int64_t ow = 0; ow < w.out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          op[(od * w.out[1] + oh) * w.out[2] + ow] = body(xp, w, o);
        }
      }
    }
  });
}

}  // namespace

namespace {

// Separable 2-D max pooling without dilation: the max over a kh x kw window is the max over
// kh rows of the max over kw columns (max is exact, so the order does not matter). Padding
// cells are skipped; a float NaN wins.
template <typename T>
void max_pool_2d(const Tensor& x0, const PoolParams& p, Tensor& out) {
  const Tensor x = x0.contiguous();
  const int64_t planes = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const int64_t OH = out.shape()[2], OW = out.shape()[3];
  const int64_t kh = p.kernel[0], kw = p.kernel[1], sh = p.strides[0], sw = p.strides[1], ph = p.pads[0], pw = p.pads[1];
  const T* px = x.data<T>();
  T* po = out.data<T>();
  const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  auto better = [](T v, T m) {
    if constexpr (std::is_floating_point_v<T>) return v > m || std::isnan(v);
    else return v > m;
  };
  omp_for(planes, [&](int64_t pl) {
    std::vector<T> rowmax(static_cast<size_t>(H * OW));
    const T* xp = px + pl * H * W;
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int64_t x0i = std::max<int64_t>(ox * sw - pw, 0), x1i = std::min<int64_t>(ox * sw - pw + kw, W);
        T m = lowest;
        for (int64_t xx = x0i; xx < x1i; ++xx) {
          const T v = xp[y * W + xx];
          m = better(v, m) ? v : m;
        }
        rowmax[static_cast<size_t>(y * OW + ox)] = m;
      }
    }
    T* op = po + pl * OH * OW;
    for (int64_t oy = 0; oy < OH; ++oy) {
      const int64_t y0 = std::max<int64_t>(oy * sh - ph, 0), y1 = std::min<int64_t>(oy * sh - ph + kh, H);
      for (int64_t ox = 0; ox < OW; ++ox) {
        T m = lowest;
        for (int64_t yy = y0; yy < y1; ++yy) {
          const T v = rowmax[static_cast<size_t>(yy * OW + ox)];
          m = better(v, m) ? v : m;
        }
        op[oy * OW + ox] = m;
      }
    }
  });
}

}  // namespace

void max_pool(const Tensor& x0, const PoolParams& p, Tensor& out) {
  const bool dense_2d = x0.rank() == 4 && (p.dilations.empty() || (p.dilations[0] == 1 && p.dilations[1] == 1));
  if (dense_2d) {
    if (x0.dtype() == DType::i8) max_pool_2d<int8_t>(x0, p, out);
    else if (x0.dtype() == DType::u8) max_pool_2d<uint8_t>(x0, p, out);
    else max_pool_2d<float>(x0, p, out);
    return;
  }
  const Tensor& x = x0;
  pool_loop(x, p, out, [](const float* xp, const Window3& w, const int64_t* o) {
    float m = -INFINITY;
    for (int64_t a = 0; a < w.k[0]; ++a) {
      const int64_t id = o[0] * w.s[0] - w.pb[0] + a * w.d[0];
      if (id < 0 || id >= w.in[0]) continue;
      for (int64_t b = 0; b < w.k[1]; ++b) {
        const int64_t ih = o[1] * w.s[1] - w.pb[1] + b * w.d[1];
        if (ih < 0 || ih >= w.in[1]) continue;
        const float* row = xp + (id * w.in[1] + ih) * w.in[2];
        for (int64_t c = 0; c < w.k[2]; ++c) {
          const int64_t iw = o[2] * w.s[2] - w.pb[2] + c * w.d[2];
          if (iw < 0 || iw >= w.in[2]) continue;
          const float v = row[iw];
          m = (v > m || std::isnan(v)) ? v : m;
        }
      }
    }
    return m;
  });
}

void average_pool(const Tensor& x, const PoolParams& p, Tensor& out) {
  const bool include = p.count_include_pad;
  pool_loop(x, p, out, [include](const float* xp, const Window3& w, const int64_t* o) {
    float sum = 0.f;
    int64_t inside = 0, padded = 0;
    for (int64_t a = 0; a < w.k[0]; ++a) {
      const int64_t id = o[0] * w.s[0] - w.pb[0] + a * w.d[0];
      if (id >= w.in[0] + w.pe[0]) continue;  // past the padded end (ceil_mode windows)
      for (int64_t b = 0; b < w.k[1]; ++b) {
        const int64_t ih = o[1] * w.s[1] - w.pb[1] + b * w.d[1];
        if (ih >= w.in[1] + w.pe[1]) continue;
        for (int64_t c = 0; c < w.k[2]; ++c) {
          const int64_t iw = o[2] * w.s[2] - w.pb[2] + c * w.d[2];
          if (iw >= w.in[2] + w.pe[2]) continue;
          ++padded;
          if (id < 0 || ih < 0 || iw < 0 || id >= w.in[0] || ih >= w.in[1] || iw >= w.in[2]) continue;
          sum += xp[(id * w.in[1] + ih) * w.in[2] + iw];
          ++inside;
        }
      }
    }
    const int64_t n = include ? padded : inside;
    return n > 0 ? sum / static_cast<float>(n) : 0.f;
  });
}

void global_pool(const Tensor& x0, bool max, Tensor& out) {
  const Tensor x = x0.contiguous();
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t n = x.numel() / std::max<int64_t>(planes, 1);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x.data<float>() + pl * n;
    float acc = max ? -INFINITY : 0.f;
    for (int64_t i = 0; i < n; ++i) acc = max ? ((xp[i] > acc || std::isnan(xp[i])) ? xp[i] : acc) : acc + xp[i];
    out.data<float>()[pl] = max ? acc : acc / static_cast<float>(n);
  }
}

namespace {

struct Taps {
  // For each output coordinate: `count` (index, weight) pairs; index -1 = extrapolation value.
  int count = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;
};

float source_coordinate(const ResizeParams& p, size_t axis, int64_t x, int64_t in_len, int64_t out_len, float scale) {
  // ONNX: length_resized is in_len * scale (not the rounded output size) where it appears.
  const std::string& ct = p.coordinate_transformation;
  const float xf = static_cast<float>(x);
  const float len_resized = static_cast<float>(in_len) * scale;
  if (ct == "half_pixel") return (xf + 0.5f) / scale - 0.5f;
  if (ct == "tf_half_pixel_for_nn") return (xf + 0.5f) / scale;
  if (ct == "pytorch_half_pixel") return len_resized > 1.f ? (xf + 0.5f) / scale - 0.5f : 0.f;
  if (ct == "align_corners") {
    return len_resized == 1.f ? 0.f : xf * static_cast<float>(in_len - 1) / (len_resized - 1.f);
  }
  if (ct == "asymmetric") return xf / scale;
  if (ct == "half_pixel_symmetric") {
    const float out_f = scale * static_cast<float>(in_len);
    const float adjustment = static_cast<float>(out_len) / out_f;
    const float center = static_cast<float>(in_len) / 2.f;
    const float offset = center * (1.f - adjustment);
    return offset + (xf + 0.5f) / scale - 0.5f;
  }
  // tf_crop_and_resize
  const size_t r = p.roi.size() / 2;
  const float start = p.roi[axis], end = p.roi[axis + r];
  if (len_resized > 1.f) {
    return start * static_cast<float>(in_len - 1) + xf * (end - start) * static_cast<float>(in_len - 1) / (len_resized - 1.f);
  }
  return 0.5f * (start + end) * static_cast<float>(in_len - 1);
}

int64_t nearest_index(const std::string& mode, float x) {
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  const float fl = std::floor(x);
  if (x - fl == 0.5f) return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1.f : fl);
  return static_cast<int64_t>(std::round(x));
}

void cubic_coeffs(float r, float a, float c[4]) {
  const float t0 = r + 1.f, t1 = r, t2 = 1.f - r, t3 = 2.f - r;
  c[0] = ((a * t0 - 5.f * a) * t0 + 8.f * a) * t0 - 4.f * a;
  c[1] = ((a + 2.f) * t1 - (a + 3.f)) * t1 * t1 + 1.f;
  c[2] = ((a + 2.f) * t2 - (a + 3.f)) * t2 * t2 + 1.f;
  c[3] = ((a * t3 - 5.f * a) * t3 + 8.f * a) * t3 - 4.f * a;
}

Taps make_taps(const ResizeParams& p, size_t axis, int64_t in_len, int64_t out_len) {
  Taps t;
  const float scale = p.scales[axis];
  const bool identity = in_len == out_len && scale == 1.f && p.coordinate_transformation != "tf_crop_and_resize";
  if (identity) {
    t.count = 1;
    for (int64_t x = 0; x < out_len; ++x) {
      t.index.push_back(x);
      t.weight.push_back(1.f);
    }
    return t;
  }
  const bool crop = p.coordinate_transformation == "tf_crop_and_resize";
  t.count = p.mode == ResizeParams::Mode::nearest ? 1 : (p.mode == ResizeParams::Mode::linear ? 2 : 4);
  for (int64_t x = 0; x < out_len; ++x) {
    float s = source_coordinate(p, axis, x, in_len, out_len, scale);
    const bool outside = crop && (s < 0.f || s > static_cast<float>(in_len - 1));
    if (outside) {
      for (int k = 0; k < t.count; ++k) {
        t.index.push_back(-1);
        t.weight.push_back(k == 0 ? 1.f : 0.f);
      }
      continue;
    }
    if (p.mode == ResizeParams::Mode::nearest) {
      t.index.push_back(std::clamp<int64_t>(nearest_index(p.nearest_mode, s), 0, in_len - 1));
      t.weight.push_back(1.f);
    } else if (p.mode == ResizeParams::Mode::linear) {
      // PyTorch's taps (upsample_linear: the source index clamped at 0, the weight not
      // clamped at the far edge, where both taps read the last element), which is also
      // ONNX's reference (edge padding): (1 - r) x + r x there, so inf stays inf.
      s = std::max(s, 0.f);
      const int64_t i0 = std::min(static_cast<int64_t>(std::floor(s)), in_len - 1);
      const int64_t i1 = std::min(i0 + 1, in_len - 1);
      const float r = s - static_cast<float>(i0);
      t.index.push_back(i0);
      t.weight.push_back(1.f - r);
      t.index.push_back(i1);
      t.weight.push_back(r);
    } else {
      const float fl = std::floor(s);
      const int64_t i0 = static_cast<int64_t>(fl);
      float c[4];
      cubic_coeffs(s - fl, p.cubic_coeff_a, c);
      float sum = 0.f;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = i0 - 1 + k;
        if (p.exclude_outside && (i < 0 || i >= in_len)) c[k] = 0.f;
        sum += c[k];
      }
      for (int k = 0; k < 4; ++k) {
        t.index.push_back(std::clamp<int64_t>(i0 - 1 + k, 0, in_len - 1));
        t.weight.push_back(p.exclude_outside ? c[k] / sum : c[k]);
      }
    }
  }
  return t;
}

}  // namespace

std::vector<int64_t> resize_nearest_sources(const ResizeParams& p0, size_t axis, int64_t in_len, int64_t out_len) {
  ResizeParams p = p0;
  p.mode = ResizeParams::Mode::nearest;
  return make_taps(p, axis, in_len, out_len).index;
}

Status resize(const Tensor& x0, const ResizeParams& p, Tensor& out) {
  const Tensor x = x0.contiguous();
  const size_t r = static_cast<size_t>(x.rank());
  if (p.scales.size() != r) return invalid("Resize: one scale per axis is needed");
  if (p.coordinate_transformation == "tf_crop_and_resize" && p.roi.size() != 2 * r) {
    return invalid("Resize: tf_crop_and_resize needs roi with 2 x rank values");
  }
  if (out.dtype() != x.dtype()) return invalid("Resize: the output's type differs from the input's");
  std::vector<Taps> taps;
  for (size_t a = 0; a < r; ++a) taps.push_back(make_taps(p, a, x.shape()[a], out.shape()[a]));
  const Shape xs = contiguous_strides(x.shape());
  // The innermost two axes are handled directly; outer axes by index (they are usually
  // unchanged N and C).
  const int64_t rows = out.numel() / std::max<int64_t>(out.shape()[r - 1], 1);
  const int64_t ow = out.shape()[r - 1];
  bool single_tap = true;
  for (const Taps& t : taps) single_tap = single_tap && t.count == 1;
  if (single_tap && p.coordinate_transformation != "tf_crop_and_resize") {
    // Nearest (or unchanged axes): every output element copies one input element, of any type.
    auto copy_rows = [&]<typename T>(const T* px, T* po) {
      omp_for(std::max<int64_t>(1, std::min<int64_t>(rows, 64)), [&](int64_t chunk) {
        const int64_t nch = std::max<int64_t>(1, std::min<int64_t>(rows, 64));
        const int64_t b = rows * chunk / nch, e = rows * (chunk + 1) / nch;
        const int64_t* iw = taps[r - 1].index.data();
        for (int64_t row = b; row < e; ++row) {
          int64_t rem = row, off = 0;
          for (size_t a = r - 1; a-- > 0;) {
            off += taps[a].index[static_cast<size_t>(rem % out.shape()[a])] * xs[a];
            rem /= out.shape()[a];
          }
          const T* src = px + off;
          T* dst = po + row * ow;
          for (int64_t xw = 0; xw < ow; ++xw) dst[xw] = src[iw[xw]];
        }
      });
    };
    switch (dtype_size(x.dtype())) {
      case 1: copy_rows(static_cast<const uint8_t*>(x.raw()), static_cast<uint8_t*>(out.raw())); break;
      case 2: copy_rows(static_cast<const uint16_t*>(x.raw()), static_cast<uint16_t*>(out.raw())); break;
      case 4: copy_rows(static_cast<const uint32_t*>(x.raw()), static_cast<uint32_t*>(out.raw())); break;
      case 8: copy_rows(static_cast<const uint64_t*>(x.raw()), static_cast<uint64_t*>(out.raw())); break;
      default: return unsupported(std::string("Resize: elements of type ") + dtype_name(x.dtype()));
    }
    return {};
  }
  if (x.dtype() != DType::f32) {
    return unsupported(std::string("Resize: input of type ") + dtype_name(x.dtype()) +
                       " (float32 only, but for a Resize that copies elements: mode nearest, not tf_crop_and_resize)");
  }
  const float* px = x.data<float>();
  float* po = out.data<float>();
  if (r >= 2 && p.coordinate_transformation != "tf_crop_and_resize") {
    // Only the last two axes have several taps (the usual 2-D resize): the same sum as the
    // general loop below, in the same order (tap pairs (a, b) with b fastest, weight
    // 1 * ... * wy[a] * wx[b]), without its per-element index arithmetic.
    bool outer_identity = true;
    for (size_t a = 0; a + 2 < r; ++a) outer_identity = outer_identity && taps[a].count == 1;
    if (outer_identity) {
      const Taps& ty = taps[r - 2];
      const Taps& tx = taps[r - 1];
      const int64_t oh = out.shape()[r - 2], iw = x.shape()[r - 1];
      const int64_t planes = rows / std::max<int64_t>(oh, 1);
      const int cy = ty.count, cx = tx.count;
      omp_for(planes, [&](int64_t plane) {
        int64_t rem = plane, off = 0;
        for (size_t a = r - 2; a-- > 0;) {
          const size_t at = static_cast<size_t>(rem % out.shape()[a]);
          off += taps[a].index[at] * xs[a];
          rem /= out.shape()[a];
        }
        const float* src = px + off;
        float* dst = po + plane * oh * ow;
        for (int64_t y = 0; y < oh; ++y) {
          for (int64_t xw = 0; xw < ow; ++xw) {
            float acc = 0.f;
            for (int a = 0; a < cy; ++a) {
              const size_t ay = static_cast<size_t>(y * cy + a);
              const float* line = src + ty.index[ay] * iw;
              for (int b = 0; b < cx; ++b) {
                const size_t bx = static_cast<size_t>(xw * cx + b);
                const float wgt = ty.weight[ay] * tx.weight[bx];
                acc += wgt * line[tx.index[bx]];
              }
            }
            dst[y * ow + xw] = acc;
          }
        }
      });
      return {};
    }
  }
  omp_for(std::max<int64_t>(1, std::min<int64_t>(rows, 64)), [&](int64_t chunk) {
    const int64_t nch = std::max<int64_t>(1, std::min<int64_t>(rows, 64));
    const int64_t b = rows * chunk / nch, e = rows * (chunk + 1) / nch;
    std::vector<int64_t> pos(r, 0);
    for (int64_t row = b; row < e; ++row) {
      int64_t rem = row;
      for (size_t a = r - 1; a-- > 0;) {
        pos[a] = rem % out.shape()[a];
        rem /= out.shape()[a];
      }
      for (int64_t xw = 0; xw < ow; ++xw) {
        pos[r - 1] = xw;
        // Sum over the tap combinations of every axis (product of weights).
        float acc = 0.f;
        bool extrapolate = false;
        std::vector<int> k(r, 0);
        while (true) {
          float wgt = 1.f;
          int64_t off = 0;
          for (size_t a = 0; a < r; ++a) {
            const Taps& t = taps[a];
            const size_t at = static_cast<size_t>(pos[a] * t.count + k[a]);
            const int64_t i = t.index[at];
            if (i < 0) extrapolate = true;
            wgt *= t.weight[at];
            off += std::max<int64_t>(i, 0) * xs[a];
          }
          if (extrapolate) break;
          // Taps of weight 0 count too: 0 x NaN or 0 x inf is NaN, as in PyTorch's kernels
          // (for finite values they add +-0).
          acc += wgt * px[off];
          size_t a = r;
          while (a-- > 0) {
            if (++k[a] < taps[a].count) break;
            k[a] = 0;
          }
          if (a == static_cast<size_t>(-1)) break;
        }
        po[row * ow + xw] = extrapolate ? p.extrapolation_value : acc;
      }
    }
  });
  return {};
}

Status einsum(const std::vector<std::string>& terms, const std::string& rhs, const std::vector<const Tensor*>& inputs, Tensor& out) {
  if (terms.size() != inputs.size()) return invalid("Einsum: operand count does not match the equation");
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (size_t k = 0; k < terms[i].size(); ++k) {
      const int64_t d = inputs[i]->shape()[k];
      auto [it, fresh] = size.emplace(terms[i][k], d);
      if (!fresh && it->second == 1) it->second = d;
    }
  }
  std::string labels = rhs;
  for (const auto& [l, s] : size) {
    if (rhs.find(l) == std::string::npos) labels += l;
  }
  std::vector<Tensor> dense;
  for (const Tensor* t : inputs) dense.push_back(t->contiguous());
  std::vector<std::vector<int64_t>> stride_of(inputs.size(), std::vector<int64_t>(labels.size(), 0));
  for (size_t i = 0; i < terms.size(); ++i) {
    const Shape st = contiguous_strides(dense[i].shape());
    for (size_t k = 0; k < terms[i].size(); ++k) {
      const size_t li = labels.find(terms[i][k]);
      if (dense[i].shape()[k] != 1) stride_of[i][li] += st[k];
    }
  }
  std::vector<int64_t> dims;
  for (char l : labels) dims.push_back(size[l]);
  const size_t no = rhs.size();
  int64_t inner = 1;
  for (size_t k = no; k < labels.size(); ++k) inner *= dims[k];
  std::vector<int64_t> idx(labels.size(), 0);
  const int64_t total_out = out.numel();
  for (int64_t o = 0; o < total_out; ++o) {
    int64_t rem = o;
    for (size_t k = no; k-- > 0;) {
      idx[k] = rem % dims[k];
      rem /= dims[k];
    }
    double acc = 0.0;
    for (int64_t c = 0; c < inner; ++c) {
      int64_t rc = c;
      for (size_t k = labels.size(); k-- > no;) {
        idx[k] = rc % dims[k];
        rc /= dims[k];
      }
      double prod = 1.0;
      for (size_t i = 0; i < dense.size(); ++i) {
        int64_t off = 0;
        for (size_t k = 0; k < labels.size(); ++k) off += idx[k] * stride_of[i][k];
        prod *= dense[i].data<float>()[off];
      }
      acc += prod;
    }
    out.data<float>()[o] = static_cast<float>(acc);
  }
  return {};
}

}  // namespace rkd::ops
