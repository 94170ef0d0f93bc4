// Normalisation, reduction, index and layout kernels (tensor_ops.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>

#include "core/transpose.h"
#include "kernels/tensor_ops.h"
#include "kernels/tensor_ops_parallel.h"
#include "kernels/tensor_ops_simd.h"

namespace rkd::ops {

namespace {

// outer x axis x inner decomposition of a dense shape around `axis`.
struct Split3 {
  int64_t outer = 1, n = 1, inner = 1;
};
Split3 split3(const Shape& s, int axis) {
  Split3 r;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (i < axis) r.outer *= s[static_cast<size_t>(i)];
    else if (i == axis) r.n = s[static_cast<size_t>(i)];
    else r.inner *= s[static_cast<size_t>(i)];
  }
  return r;
}

void parallel_rows(int64_t rows, int64_t work_per_row, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t total = rows * work_per_row;
  if (omp_threads() <= 1 || total < (1 << 16) || rows < 2) {
    fn(0, rows);
    return;
  }
  const int64_t chunks = std::min<int64_t>(rows, 4 * omp_threads());
  omp_for(chunks, [&](int64_t c) { fn(rows * c / chunks, rows * (c + 1) / chunks); });
}

size_t esize(const Tensor& t) { return dtype_size(t.dtype()); }

}  // namespace

void softmax(const Tensor& x0, int axis, bool log, Tensor& out) {
  const Tensor x = x0.contiguous();
  const Split3 s = split3(x.shape(), axis);
  const float* px = x.data<float>();
  float* po = out.data<float>();
  if (s.inner == 1) {
    parallel_rows(s.outer, s.n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) simd_softmax_row(px + r * s.n, po + r * s.n, s.n, log);
    });
    return;
  }
  parallel_rows(s.outer * s.inner, s.n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / s.inner, i = r % s.inner;
      const float* xr = px + o * s.n * s.inner + i;
      float* yr = po + o * s.n * s.inner + i;
      float m = -INFINITY;
      for (int64_t k = 0; k < s.n; ++k) m = std::max(m, xr[k * s.inner]);
      float sum = 0.f;
      for (int64_t k = 0; k < s.n; ++k) {
        const float v = std::exp(xr[k * s.inner] - m);
        yr[k * s.inner] = v;
        sum += v;
      }
      if (log) {
        const float ls = std::log(sum);
        for (int64_t k = 0; k < s.n; ++k) yr[k * s.inner] = xr[k * s.inner] - m - ls;
      } else {
        for (int64_t k = 0; k < s.n; ++k) yr[k * s.inner] /= sum;
      }
    }
  });
}

void layer_norm(const Tensor& x0, const Tensor& scale0, const Tensor* bias0, int axis, float eps, Tensor& out, Tensor* mean, Tensor* inv_std) {
  const Tensor x = x0.contiguous();
  int64_t rows = 1, n = 1;
  for (int i = 0; i < x.rank(); ++i) (i < axis ? rows : n) *= x.shape()[static_cast<size_t>(i)];
  // scale/bias broadcast to the normalised dims (a copy only when they are not already
  // dense tensors of that shape).
  const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  auto expand = [&](const Tensor& t) {
    if (t.numel() == n && t.is_contiguous()) return t;
    Tensor e = Tensor::empty(DType::f32, norm_shape);
    copy_into(t, e);
    return e;
  };
  const Tensor sc = expand(scale0);
  const Tensor bi = bias0 ? expand(*bias0) : Tensor();
  const float* px = x.data<float>();
  const float* ps = sc.data<float>();
  const float* pb = bias0 ? bi.data<float>() : nullptr;
  float* po = out.data<float>();
  parallel_rows(rows, n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      simd_layer_norm_row(px + r * n, ps, pb, po + r * n, n, eps, mean ? mean->data<float>() + r : nullptr,
                          inv_std ? inv_std->data<float>() + r : nullptr);
    }
  });
}

void instance_norm(const Tensor& x0, const Tensor& scale, const Tensor& bias, float eps, Tensor& out) {
  const Tensor x = x0.contiguous();
  const Split3 s = split3(x.shape(), 1);
  const Tensor sc = scale.contiguous(), bi = bias.contiguous();
  const float* px = x.data<float>();
  float* po = out.data<float>();
  parallel_rows(s.outer * s.n, s.inner, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t c = p % s.n;
      const float* xr = px + p * s.inner;
      float* yr = po + p * s.inner;
      double sum = 0;
      for (int64_t i = 0; i < s.inner; ++i) sum += xr[i];
      const double m = sum / static_cast<double>(s.inner);
      double sq = 0;
      for (int64_t i = 0; i < s.inner; ++i) sq += (xr[i] - m) * (xr[i] - m);
      const double var = sq / static_cast<double>(s.inner);
      const float k = static_cast<float>(sc.data<float>()[c] / std::sqrt(var + static_cast<double>(eps)));
      const float mf = static_cast<float>(m), bf = bi.data<float>()[c];
      for (int64_t i = 0; i < s.inner; ++i) yr[i] = (xr[i] - mf) * k + bf;
    }
  });
}

void batch_norm(const Tensor& x0, const Tensor& scale, const Tensor& bias, const Tensor& mean, const Tensor& var, float eps, Tensor& out) {
  const Tensor x = x0.contiguous();
  const Split3 s = split3(x.shape(), 1);
  const Tensor sc = scale.contiguous(), bi = bias.contiguous(), mu = mean.contiguous(), va = var.contiguous();
  const float* px = x.data<float>();
  float* po = out.data<float>();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t c = 0; c < s.n; ++c) {
      const float k = sc.data<float>()[c] / std::sqrt(va.data<float>()[c] + eps);
      const float m = mu.data<float>()[c], b = bi.data<float>()[c];
      const float* xr = px + (o * s.n + c) * s.inner;
      float* yr = po + (o * s.n + c) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) yr[i] = (xr[i] - m) * k + b;
    }
  }
}

namespace {
template <typename T>
Status reduce_typed(Reduce op, const Tensor& x, const std::vector<bool>& red, Tensor& out) {
  // Permute reduced axes to the end so that every output element reduces a contiguous run.
  std::vector<int> keep, gone;
  for (int i = 0; i < x.rank(); ++i) (red[static_cast<size_t>(i)] ? gone : keep).push_back(i);
  std::vector<int> order = keep;
  order.insert(order.end(), gone.begin(), gone.end());
  RKD_ASSIGN(Tensor p, x.permute(order));
  const Tensor d = p.contiguous();
  int64_t n = 1;
  for (int g : gone) n *= x.shape()[static_cast<size_t>(g)];
  const int64_t rows = out.numel();
  const T* px = d.data<T>();
  T* po = out.data<T>();
  parallel_rows(rows, n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = px + r * n;
      T acc = 0;
      switch (op) {
        case Reduce::sum:
        case Reduce::mean:
          acc = 0;
          for (int64_t k = 0; k < n; ++k) acc += xr[k];
          if (op == Reduce::mean) acc = static_cast<T>(acc / static_cast<T>(n));
          break;
        case Reduce::sum_square:
        case Reduce::l2:
          acc = 0;
          for (int64_t k = 0; k < n; ++k) acc += xr[k] * xr[k];
          if (op == Reduce::l2) acc = static_cast<T>(std::sqrt(static_cast<double>(acc)));
          break;
        case Reduce::prod:
          acc = 1;
          for (int64_t k = 0; k < n; ++k) acc *= xr[k];
          break;
        case Reduce::max:
          acc = std::numeric_limits<T>::lowest();
          if constexpr (std::is_floating_point_v<T>) acc = -INFINITY;
          for (int64_t k = 0; k < n; ++k) acc = (xr[k] > acc || xr[k] != xr[k]) ? xr[k] : acc;
          break;
        case Reduce::min:
          acc = std::numeric_limits<T>::max();
          if constexpr (std::is_floating_point_v<T>) acc = INFINITY;
          for (int64_t k = 0; k < n; ++k) acc = (xr[k] < acc || xr[k] != xr[k]) ? xr[k] : acc;
          break;
      }
      po[r] = acc;
    }
  });
  return {};
}
}  // namespace

Status reduce(Reduce op, const Tensor& x, const std::vector<bool>& red, Tensor& out) {
  if (x.dtype() == DType::f32) return reduce_typed<float>(op, x, red, out);
  if (x.dtype() == DType::i64 && op != Reduce::mean && op != Reduce::l2) return reduce_typed<int64_t>(op, x, red, out);
  if (x.dtype() == DType::i32 && op != Reduce::mean && op != Reduce::l2) return reduce_typed<int32_t>(op, x, red, out);
  return unsupported(std::string("reduction over ") + dtype_name(x.dtype()));
}

void arg_reduce(const Tensor& x0, int axis, bool max, bool select_last, Tensor& out) {
  const Tensor x = x0.contiguous();
  const Split3 s = split3(x.shape(), axis);
  const float* px = x.data<float>();
  int64_t* po = out.data<int64_t>();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const float* xr = px + o * s.n * s.inner + i;
      int64_t best = 0;
      float bv = xr[0];
      for (int64_t k = 1; k < s.n; ++k) {
        const float v = xr[k * s.inner];
        if (std::isnan(bv)) break;
        const bool better = std::isnan(v) || (max ? (select_last ? v >= bv : v > bv) : (select_last ? v <= bv : v < bv));
        if (better) {
          best = k;
          bv = v;
        }
      }
      po[o * s.inner + i] = best;
    }
  }
}

void topk(const Tensor& x0, int64_t k, int axis, bool largest, Tensor& values, Tensor& indices) {
  const Tensor x = x0.contiguous();
  const Split3 s = split3(x.shape(), axis);
  const float* px = x.data<float>();
  float* pv = values.data<float>();
  int64_t* pi = indices.data<int64_t>();
  std::vector<int64_t> idx(static_cast<size_t>(s.n));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const float* xr = px + o * s.n * s.inner + i;
      std::iota(idx.begin(), idx.end(), 0);
      // NaN ranks above every number for largest (below for smallest), as ONNX Runtime.
      auto before = [&](int64_t a, int64_t b) {
        const float va = xr[a * s.inner], vb = xr[b * s.inner];
        const bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) {
          if (na && nb) return a < b;
          return largest ? na : nb;
        }
        if (va != vb) return largest ? va > vb : va < vb;
        return a < b;
      };
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t src = idx[static_cast<size_t>(j)];
        pv[(o * k + j) * s.inner + i] = xr[src * s.inner];
        pi[(o * k + j) * s.inner + i] = src;
      }
    }
  }
}

Status cumsum(const Tensor& x0, int axis, bool exclusive, bool reverse, Tensor& out) {
  const Tensor x = x0.contiguous();
  const Split3 s = split3(x.shape(), axis);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        T acc = 0;
        for (int64_t j = 0; j < s.n; ++j) {
          const int64_t k = reverse ? s.n - 1 - j : j;
          const int64_t at = (o * s.n + k) * s.inner + i;
          if (exclusive) {
            po[at] = acc;
            acc += px[at];
          } else {
            acc += px[at];
            po[at] = acc;
          }
        }
      }
    }
  };
  switch (x.dtype()) {
    case DType::f32: run(float{}); return {};
    case DType::i64: run(int64_t{}); return {};
    case DType::i32: run(int32_t{}); return {};
    default: return unsupported(std::string("CumSum over ") + dtype_name(x.dtype()));
  }
}

void concat(const std::vector<const Tensor*>& inputs, int axis, Tensor& out) {
  const Split3 so = split3(out.shape(), axis);
  const size_t es = esize(out);
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  int64_t at = 0;
  for (const Tensor* t0 : inputs) {
    const Tensor t = t0->contiguous();
    const int64_t n = t.shape()[static_cast<size_t>(axis)];
    const size_t row = static_cast<size_t>(n * so.inner) * es;
    const uint8_t* pt = static_cast<const uint8_t*>(t.raw());
    for (int64_t o = 0; o < so.outer; ++o) {
      std::memcpy(po + static_cast<size_t>((o * so.n + at) * so.inner) * es, pt + static_cast<size_t>(o) * row, row);
    }
    at += n;
  }
}

namespace {
Result<std::vector<int64_t>> read_indices(const Tensor& t0, int64_t bound, const char* what) {
  const Tensor t = t0.contiguous();
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t k;
    if (t.dtype() == DType::i64) k = t.data<int64_t>()[i];
    else if (t.dtype() == DType::i32) k = t.data<int32_t>()[i];
    else return invalid(std::string(what) + ": indices must be int32 or int64");
    if (k < -bound || k >= bound) {
      return invalid(std::string(what) + ": index " + std::to_string(k) + " is out of range for a dimension of size " + std::to_string(bound));
    }
    v[i] = k < 0 ? k + bound : k;
  }
  return v;
}
}  // namespace

namespace {
// GatherElements/ScatterElements: indices of the data's rank, no larger than the data
// outside the axis (otherwise the element addressing would leave the data).
Status check_element_indices_shape(const Tensor& data, const Tensor& indices, int axis, const char* what) {
  if (indices.rank() != data.rank()) return invalid(std::string(what) + ": indices and data must have the same rank");
  for (int d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.shape()[static_cast<size_t>(d)] > data.shape()[static_cast<size_t>(d)]) {
      return invalid(std::string(what) + ": indices dimension " + std::to_string(d) + " (" + std::to_string(indices.shape()[static_cast<size_t>(d)]) +
                     ") exceeds the data's (" + std::to_string(data.shape()[static_cast<size_t>(d)]) + ")");
    }
  }
  return {};
}
}  // namespace

Status gather(const Tensor& data0, const Tensor& indices, int axis, Tensor& out) {
  const Tensor data = data0.contiguous();
  const Split3 s = split3(data.shape(), axis);
  RKD_ASSIGN(auto idx, read_indices(indices, s.n, "Gather"));
  const size_t es = esize(data);
  const size_t row = static_cast<size_t>(s.inner) * es;
  const uint8_t* pd = static_cast<const uint8_t*>(data.raw());
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  const int64_t m = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t j = 0; j < m; ++j) {
      std::memcpy(po + static_cast<size_t>(o * m + j) * row, pd + static_cast<size_t>(o * s.n + idx[static_cast<size_t>(j)]) * row, row);
    }
  }
  return {};
}

// GatherND: out[b..., i...] = data[b..., indices[b..., i..., 0..q-1], rest...] with b the
// batch_dims leading dimensions shared by data and indices.
Status gather_nd(const Tensor& data0, const Tensor& indices0, int batch_dims, Tensor& out) {
  const Tensor data = data0.contiguous(), indices = indices0.contiguous();
  const size_t b = static_cast<size_t>(batch_dims);
  if (indices.rank() < 1 || b >= static_cast<size_t>(indices.rank()) || b >= static_cast<size_t>(data.rank())) {
    return invalid("GatherND: batch_dims must be less than the ranks of data and indices");
  }
  const int64_t q = indices.shape().back();
  if (q < 1 || static_cast<size_t>(q) + b > static_cast<size_t>(data.rank())) {
    return invalid("GatherND: the last dimension of indices (" + std::to_string(q) + ") plus batch_dims exceeds the data rank");
  }
  int64_t batches = 1;
  for (size_t d = 0; d < b; ++d) {
    if (data.shape()[d] != indices.shape()[d]) return invalid("GatherND: data and indices differ in batch dimension " + std::to_string(d));
    batches *= data.shape()[d];
  }
  int64_t slice = 1;
  for (size_t d = b + static_cast<size_t>(q); d < data.shape().size(); ++d) slice *= data.shape()[d];
  int64_t block = slice;  // elements of data per batch item
  for (size_t d = b; d < b + static_cast<size_t>(q); ++d) block *= data.shape()[d];
  const int64_t per_batch = batches > 0 ? indices.numel() / q / batches : 0;
  const size_t es = esize(data);
  const uint8_t* pd = static_cast<const uint8_t*>(data.raw());
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t k = 0; k < per_batch; ++k) {
      int64_t off = 0;
      for (int64_t j = 0; j < q; ++j) {
        const int64_t at = (bi * per_batch + k) * q + j;
        const int64_t dim = data.shape()[b + static_cast<size_t>(j)];
        int64_t v = indices.dtype() == DType::i64   ? indices.data<int64_t>()[at]
                    : indices.dtype() == DType::i32 ? indices.data<int32_t>()[at]
                                                    : INT64_MIN;
        if (v == INT64_MIN) return invalid("GatherND: indices must be int32 or int64");
        if (v < -dim || v >= dim) {
          return invalid("GatherND: index " + std::to_string(v) + " is out of range for dimension " + std::to_string(b + static_cast<size_t>(j)) +
                         " of size " + std::to_string(dim));
        }
        off = off * dim + (v < 0 ? v + dim : v);
      }
      std::memcpy(po + static_cast<size_t>((bi * per_batch + k) * slice) * es, pd + static_cast<size_t>(bi * block + off * slice) * es,
                  static_cast<size_t>(slice) * es);
    }
  }
  return {};
}

Status gather_elements(const Tensor& data0, const Tensor& indices, int axis, Tensor& out) {
  const Tensor data = data0.contiguous();
  const int64_t dn = data.shape()[static_cast<size_t>(axis)];
  RKD_TRY(check_element_indices_shape(data, indices, axis, "GatherElements"));
  RKD_ASSIGN(auto idx, read_indices(indices, dn, "GatherElements"));
  const size_t es = esize(data);
  const Shape& is = indices.shape();
  const Shape ds = contiguous_strides(data.shape());
  std::vector<int64_t> pos(is.size(), 0);
  const uint8_t* pd = static_cast<const uint8_t*>(data.raw());
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < is.size(); ++d) off += (static_cast<int>(d) == axis ? idx[i] : pos[d]) * ds[d];
    std::memcpy(po + i * es, pd + static_cast<size_t>(off) * es, es);
    for (size_t d = is.size(); d-- > 0;) {
      if (++pos[d] < is[d]) break;
      pos[d] = 0;
    }
  }
  return {};
}

namespace {
template <typename T>
void apply_reduction(T* dst, const T* src, const std::string& r) {
  if (r == "add") *dst += *src;
  else if (r == "mul") *dst *= *src;
  else if (r == "max") *dst = std::max(*dst, *src);
  else if (r == "min") *dst = std::min(*dst, *src);
  else *dst = *src;
}
template <typename F>
Status with_scatter_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return {};
    case DType::i64: f(int64_t{}); return {};
    case DType::i32: f(int32_t{}); return {};
    default: return unsupported(std::string("scatter on ") + dtype_name(t));
  }
}
}  // namespace

Status scatter_nd(const Tensor& data, const Tensor& indices0, const Tensor& updates0, const std::string& reduction, Tensor& out) {
  copy_into(data, out);
  const Tensor indices = indices0.contiguous(), updates = updates0.contiguous();
  const int64_t q = indices.shape().back();
  if (q > data.rank()) return invalid("ScatterND: indices' last dimension exceeds the data rank");
  int64_t slice = 1;
  for (int i = static_cast<int>(q); i < data.rank(); ++i) slice *= data.shape()[static_cast<size_t>(i)];
  const Shape ds = contiguous_strides(data.shape());
  const int64_t n = indices.numel() / std::max<int64_t>(q, 1);
  if (indices.dtype() != DType::i64) return invalid("ScatterND: indices must be int64");
  const int64_t* pi = indices.data<int64_t>();
  // Validate every index (negative ones count from the end) before writing anything.
  std::vector<int64_t> offsets(static_cast<size_t>(n), 0);
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < q; ++j) {
      int64_t v = pi[k * q + j];
      const int64_t dim = data.shape()[static_cast<size_t>(j)];
      if (v < -dim || v >= dim) {
        return invalid("ScatterND: index " + std::to_string(v) + " is out of range for dimension " + std::to_string(j) + " of size " +
                       std::to_string(dim));
      }
      if (v < 0) v += dim;
      offsets[static_cast<size_t>(k)] += v * ds[static_cast<size_t>(j)];
    }
  }
  return with_scatter_type(out.dtype(), [&](auto zero) -> void {
    using T = decltype(zero);
    T* po = out.data<T>();
    const T* pu = updates.data<T>();
    for (int64_t k = 0; k < n; ++k) {
      const int64_t off = offsets[static_cast<size_t>(k)];
      for (int64_t e = 0; e < slice; ++e) apply_reduction(po + off + e, pu + k * slice + e, reduction);
    }
  });
}

Status scatter_elements(const Tensor& data, const Tensor& indices, const Tensor& updates0, int axis, const std::string& reduction, Tensor& out) {
  RKD_TRY(check_element_indices_shape(data, indices, axis, "ScatterElements"));
  if (updates0.shape() != indices.shape()) return invalid("ScatterElements: updates and indices must have the same shape");
  copy_into(data, out);
  const Tensor updates = updates0.contiguous();
  RKD_ASSIGN(auto idx, read_indices(indices, data.shape()[static_cast<size_t>(axis)], "ScatterElements"));
  const Shape& is = indices.shape();
  const Shape ds = contiguous_strides(data.shape());
  return with_scatter_type(out.dtype(), [&](auto zero) -> void {
    using T = decltype(zero);
    T* po = out.data<T>();
    const T* pu = updates.data<T>();
    std::vector<int64_t> pos(is.size(), 0);
    for (size_t i = 0; i < idx.size(); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < is.size(); ++d) off += (static_cast<int>(d) == axis ? idx[i] : pos[d]) * ds[d];
      apply_reduction(po + off, pu + i, reduction);
      for (size_t d = is.size(); d-- > 0;) {
        if (++pos[d] < is[d]) break;
        pos[d] = 0;
      }
    }
  });
}

void tile(const Tensor& x, Tensor& out) {
  // out[i] = x[i mod shape]: a view with the input repeated along every axis.
  const Shape& os = out.shape();
  const size_t r = os.size();
  Shape vshape, vstride;
  const Tensor d = x.contiguous();
  const Shape xs = contiguous_strides(d.shape());
  for (size_t i = 0; i < r; ++i) {
    const int64_t rep = os[i] / std::max<int64_t>(d.shape()[i], 1);
    vshape.push_back(rep);
    vstride.push_back(0);
    vshape.push_back(d.shape()[i]);
    vstride.push_back(xs[i]);
  }
  Tensor view = d.with_layout(vshape, vstride);
  Tensor flat = out.with_layout(vshape, contiguous_strides(vshape));
  copy_into(view, flat);
}

Status pad(const Tensor& x0, const std::vector<int64_t>& pads, PadMode mode, double value, Tensor& out) {
  const Tensor x = x0.contiguous();
  const int r = x.rank();
  const Shape& is = x.shape();
  const Shape& os = out.shape();
  const size_t es = esize(x);
  if (mode == PadMode::reflect) {
    for (int i = 0; i < r; ++i) {
      if ((pads[static_cast<size_t>(i)] > 0 || pads[static_cast<size_t>(i + r)] > 0) &&
          (pads[static_cast<size_t>(i)] >= is[static_cast<size_t>(i)] || pads[static_cast<size_t>(i + r)] >= is[static_cast<size_t>(i)])) {
        return invalid("Pad: reflect padding must be smaller than the dimension");
      }
    }
  }
  if (mode != PadMode::constant) {
    for (int i = 0; i < r; ++i) {
      if (is[static_cast<size_t>(i)] == 0 && os[static_cast<size_t>(i)] > 0) return invalid("Pad: cannot pad an empty axis in this mode");
    }
  }
  // Fill value as bytes of the element type.
  std::vector<uint8_t> fillv(es, 0);
  {
    Tensor one = Tensor::empty(x.dtype(), {});
    Tensor src = Tensor::from_floats({}, std::vector<float>{static_cast<float>(value)});
    if (x.dtype() == DType::i64) {
      const int64_t v = static_cast<int64_t>(value);
      std::memcpy(fillv.data(), &v, 8);
    } else if (cast(src, one).ok()) {
      std::memcpy(fillv.data(), one.raw(), es);
    }
  }
  const Shape xs = contiguous_strides(is);
  std::vector<int64_t> pos(static_cast<size_t>(r), 0);
  const uint8_t* px = static_cast<const uint8_t*>(x.raw());
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  const int64_t n = out.numel();
  const bool grow_only = std::all_of(pads.begin(), pads.begin() + 2 * r, [](int64_t v) { return v >= 0; });
  if (mode == PadMode::constant && grow_only && r > 0) {
    // Constant padding that only grows: the fill everywhere, then every input line (the
    // last axis) copied to its place.
    if (std::all_of(fillv.begin(), fillv.end(), [&](uint8_t b) { return b == fillv[0]; })) {
      std::memset(po, fillv[0], static_cast<size_t>(n) * es);
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(po + static_cast<size_t>(i) * es, fillv.data(), es);
    }
    const int64_t line = is[static_cast<size_t>(r - 1)];
    const int64_t lines = line == 0 ? 0 : x.numel() / line;
    const Shape ostr = contiguous_strides(os);
    for (int64_t l = 0; l < lines; ++l) {
      int64_t rem = l, off = pads[static_cast<size_t>(r - 1)];
      for (int d = r - 1; d-- > 0;) {
        const int64_t len = is[static_cast<size_t>(d)];
        off += (rem % len + pads[static_cast<size_t>(d)]) * ostr[static_cast<size_t>(d)];
        rem /= len;
      }
      std::memcpy(po + static_cast<size_t>(off) * es, px + static_cast<size_t>(l * line) * es, static_cast<size_t>(line) * es);
    }
    return {};
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    bool inside = true;
    for (int d = 0; d < r; ++d) {
      int64_t k = pos[static_cast<size_t>(d)] - pads[static_cast<size_t>(d)];
      const int64_t len = is[static_cast<size_t>(d)];
      if (k < 0 || k >= len) {
        switch (mode) {
          case PadMode::constant: inside = false; break;
          case PadMode::edge: k = std::clamp<int64_t>(k, 0, len - 1); break;
          case PadMode::wrap: k = ((k % len) + len) % len; break;
          case PadMode::reflect: {
            const int64_t period = 2 * (len - 1);
            if (period == 0) k = 0;
            else {
              k = ((k % period) + period) % period;
              if (k >= len) k = period - k;
            }
            break;
          }
        }
      }
      if (!inside) break;
      off += k * xs[static_cast<size_t>(d)];
    }
    std::memcpy(po + static_cast<size_t>(i) * es, inside ? px + static_cast<size_t>(off) * es : fillv.data(), es);
    for (int d = r; d-- > 0;) {
      if (++pos[static_cast<size_t>(d)] < os[static_cast<size_t>(d)]) break;
      pos[static_cast<size_t>(d)] = 0;
    }
  }
  return {};
}

void slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& step, Tensor& out) {
  Shape strides(x.shape().size());
  int64_t offset = 0;
  for (size_t i = 0; i < strides.size(); ++i) {
    strides[i] = x.strides()[i] * step[i];
    offset += start[i] * x.strides()[i];
  }
  if (out.numel() == 0) return;
  copy_into(x.with_layout(out.shape(), strides, offset), out);
}

namespace {

// out[b][c][r] = in[b][r][c] for a contiguous [batches, rows, cols] of T, in 32 x 32 tiles
// (each tile's rows and columns stay in L1 whatever the strides).
template <typename T>
void transpose_tiles(const T* in, T* out, int64_t batches, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t b = 0; b < batches; ++b) {
    const T* src = in + b * rows * cols;
    T* dst = out + b * rows * cols;
    for (int64_t r0 = 0; r0 < rows; r0 += kTile)
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
      }
  }
}

// The permutation as [batches, rows, cols] -> [batches, cols, rows] of contiguous x: size-1
// axes dropped, axes that stay neighbours merged. False when it is not of that form.
bool as_batched_2d(const Shape& shape, const std::vector<int64_t>& perm, int64_t& batches, int64_t& rows, int64_t& cols) {
  std::vector<int64_t> p;  // the permutation over the axes of size > 1
  std::vector<int64_t> keep(shape.size(), -1);
  int64_t n = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) keep[i] = n++;
  }
  for (int64_t a : perm) {
    if (keep[static_cast<size_t>(a)] >= 0) p.push_back(keep[static_cast<size_t>(a)]);
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) dims.push_back(shape[i]);
  }
  // Runs of consecutive input axes in output order: [batch run] then two runs swapped.
  std::vector<std::pair<int64_t, int64_t>> runs;  // (first input axis, last input axis)
  for (int64_t a : p) {
    if (!runs.empty() && runs.back().second + 1 == a) runs.back().second = a;
    else runs.emplace_back(a, a);
  }
  auto size = [&](const std::pair<int64_t, int64_t>& r) {
    int64_t v = 1;
    for (int64_t a = r.first; a <= r.second; ++a) v *= dims[static_cast<size_t>(a)];
    return v;
  };
  if (runs.size() == 2 && runs[0].first > runs[1].first) {
    batches = 1;
    rows = size(runs[1]);
    cols = size(runs[0]);
    return true;
  }
  if (runs.size() == 3 && runs[0].first == 0 && runs[1].first > runs[2].first) {
    batches = size(runs[0]);
    rows = size(runs[2]);
    cols = size(runs[1]);
    return true;
  }
  return false;
}

}  // namespace

void transpose(const Tensor& x, const std::vector<int64_t>& perm, Tensor& out) {
  int64_t batches = 0, rows = 0, cols = 0;
  const size_t es = dtype_size(x.dtype());
  if (x.is_contiguous() && out.is_contiguous() && (es == 1 || es == 4 || es == 8) && as_batched_2d(x.shape(), perm, batches, rows, cols)) {
    switch (es) {
      case 1: {  // the SIMD byte transposes (core/transpose.h)
        const auto* src = static_cast<const uint8_t*>(x.raw());
        auto* dst = static_cast<uint8_t*>(out.raw());
        for (int64_t b = 0; b < batches; ++b) transpose_bytes(src + b * rows * cols, rows, cols, cols, dst + b * rows * cols, rows);
        return;
      }
      case 4: transpose_tiles(static_cast<const uint32_t*>(x.raw()), static_cast<uint32_t*>(out.raw()), batches, rows, cols); return;
      default: transpose_tiles(static_cast<const uint64_t*>(x.raw()), static_cast<uint64_t*>(out.raw()), batches, rows, cols); return;
    }
  }
  std::vector<int> order(perm.begin(), perm.end());
  auto p = x.permute(order);
  copy_into(*p, out);
}

void range(double start, double delta, Tensor& out) {
  const int64_t n = out.numel();
  switch (out.dtype()) {
    case DType::f32: {
      const float s = static_cast<float>(start), d = static_cast<float>(delta);
      for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = s + static_cast<float>(i) * d;
      break;
    }
    case DType::i64:
      for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = static_cast<int64_t>(start) + i * static_cast<int64_t>(delta);
      break;
    case DType::i32:
      for (int64_t i = 0; i < n; ++i) out.data<int32_t>()[i] = static_cast<int32_t>(static_cast<int64_t>(start) + i * static_cast<int64_t>(delta));
      break;
    default: break;
  }
}

void fill(Tensor& out, const Tensor& scalar) { copy_into(scalar.with_layout(out.shape(), Shape(out.shape().size(), 0)), out); }

}  // namespace rkd::ops
