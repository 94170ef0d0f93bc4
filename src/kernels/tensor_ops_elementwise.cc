// Elementwise, cast and copy kernels (tensor_ops.h).
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <cstring>

#include "kernels/tensor_ops.h"
#include "kernels/tensor_ops_parallel.h"
#include "kernels/tensor_ops_simd.h"

namespace rkd::ops {

namespace {

// min(max(v, lo), hi) with IEEE NaN kept (std::min and std::max return their first operand
// when the second is NaN), as ONNX Clip, HardSigmoid and PyTorch's clamp do.
inline float clamp_keeping_nan(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Iterates over a dense output of `shape` in C order, calling fn(out_offset, in_offsets,
// inner_count, inner_strides) for every run of the innermost dimension. Strides are in
// elements per input. Outputs of at least kParallelElements are split into row ranges run
// on the OpenMP threads (each range starts from offsets computed by division).
constexpr int64_t kParallelElements = int64_t{1} << 16;

template <size_t K, typename Fn>
void for_each_row(const Shape& shape, const std::array<const Shape*, K>& strides, Fn&& fn) {
  const size_t r = shape.size();
  if (r == 0) {
    std::array<int64_t, K> off{};
    std::array<int64_t, K> inner{};
    fn(int64_t{0}, off, int64_t{1}, inner);
    return;
  }
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return;
  const int64_t inner_n = shape[r - 1];
  const int64_t rows = total / inner_n;
  std::array<int64_t, K> inner{};
  for (size_t k = 0; k < K; ++k) inner[k] = (*strides[k])[r - 1];
  auto run_rows = [&](int64_t row_begin, int64_t row_end) {
    std::vector<int64_t> idx(r, 0);
    std::array<int64_t, K> off{};
    int64_t rem = row_begin;
    for (size_t d = r - 1; d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < K; ++k) off[k] += idx[d] * (*strides[k])[d];
    }
    for (int64_t row = row_begin; row < row_end; ++row) {
      fn(row * inner_n, off, inner_n, inner);
      for (size_t d = r - 1; d-- > 0;) {
        ++idx[d];
        for (size_t k = 0; k < K; ++k) off[k] += (*strides[k])[d];
        if (idx[d] < shape[d]) break;
        for (size_t k = 0; k < K; ++k) off[k] -= (*strides[k])[d] * shape[d];
        idx[d] = 0;
      }
    }
  };
  if (total >= kParallelElements && rows >= 2 && omp_threads() > 1) {
    const int64_t chunks = std::min<int64_t>(rows, 8 * omp_threads());
    omp_for(chunks, [&](int64_t c) { run_rows(rows * c / chunks, rows * (c + 1) / chunks); });
    return;
  }
  run_rows(0, rows);
}

template <typename T>
T int_pow(T base, T e) {
  if (e < 0) return base == 1 ? 1 : 0;
  T r = 1;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

template <typename T, typename R>
Status binary_typed(Binary op, const Tensor& a0, const Tensor& b0, Tensor& out, const std::string& what) {
  const Tensor a = broadcast_view(a0, out.shape()), b = broadcast_view(b0, out.shape());
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.data<R>();
  std::atomic<bool> div_zero{false};
  // A small operand repeated along a contiguous full-size one ([1, H, W, 3] - [1, 1, 1, 3]):
  // row by row that is rows of 3; instead one flat loop against the tile laid out a few
  // hundred elements long. Returns the tile's length k, or 0.
  auto trailing_tile = [&](const Tensor& t0) -> int64_t {
    const Shape& ts = t0.shape();
    const Shape& os = out.shape();
    size_t lead = 0;
    while (lead < ts.size() && ts[lead] == 1) ++lead;
    const size_t m = ts.size() - lead;
    if (!t0.is_contiguous() || m == 0 || m > os.size()) return 0;
    for (size_t i = 0; i < m; ++i) {
      if (ts[lead + i] != os[os.size() - m + i]) return 0;
    }
    return t0.numel();
  };
  const int64_t total = out.numel();
  const bool a_full = a0.shape() == out.shape() && a0.is_contiguous(), b_full = b0.shape() == out.shape() && b0.is_contiguous();
  const int64_t tile_b = a_full && !b_full ? trailing_tile(b0) : 0, tile_a = b_full && !a_full ? trailing_tile(a0) : 0;
  auto kernel = [&](auto f) {
    if ((tile_b > 1 && tile_b < 64) || (tile_a > 1 && tile_a < 64)) {
      const bool b_tiled = tile_b > 1;
      const int64_t k = b_tiled ? tile_b : tile_a, len = k * std::max<int64_t>(1, 512 / k);
      const T* src = b_tiled ? b0.data<T>() : a0.data<T>();
      const T* full = b_tiled ? a0.data<T>() : b0.data<T>();
      std::vector<T> tile(static_cast<size_t>(len));
      for (int64_t j = 0; j < len; ++j) tile[static_cast<size_t>(j)] = src[j % k];
      for (int64_t i0 = 0; i0 < total; i0 += len) {
        const int64_t n = std::min(len, total - i0);
        const T* x = full + i0;
        R* z = po + i0;
        if (b_tiled) {
          for (int64_t j = 0; j < n; ++j) z[j] = f(x[j], tile[static_cast<size_t>(j)]);
        } else {
          for (int64_t j = 0; j < n; ++j) z[j] = f(tile[static_cast<size_t>(j)], x[j]);
        }
      }
      return;
    }
    for_each_row<2>(out.shape(), {&a.strides(), &b.strides()}, [&](int64_t o, const auto& off, int64_t n, const auto& st) {
      const T* x = pa + off[0];
      const T* y = pb + off[1];
      R* z = po + o;
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
      } else if (st[0] == 1 && st[1] == 0) {
        const T yy = y[0];
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], yy);
      } else if (st[0] == 0 && st[1] == 1) {
        const T xx = x[0];
        for (int64_t i = 0; i < n; ++i) z[i] = f(xx, y[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i * st[0]], y[i * st[1]]);
      }
    });
  };
  constexpr bool is_float = std::is_same_v<T, float>;
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case Binary::equal: kernel([](T x, T y) -> R { return x == y; }); break;
      case Binary::logical_and: kernel([](T x, T y) -> R { return x && y; }); break;
      case Binary::logical_or: kernel([](T x, T y) -> R { return x || y; }); break;
      case Binary::logical_xor: kernel([](T x, T y) -> R { return x != y; }); break;
      default: return unsupported(what + ": arithmetic on bool");
    }
    return {};
  } else {
    switch (op) {
      case Binary::add: kernel([](T x, T y) -> R { return static_cast<R>(x + y); }); break;
      case Binary::sub: kernel([](T x, T y) -> R { return static_cast<R>(x - y); }); break;
      case Binary::mul: kernel([](T x, T y) -> R { return static_cast<R>(x * y); }); break;
      case Binary::div:
        if constexpr (is_float) {
          kernel([](T x, T y) -> R { return x / y; });
        } else {
          // x / 0 is an error; x / -1 is the two's-complement negation (INT_MIN / -1 wraps to
          // INT_MIN, as NumPy's; C++'s quotient would trap).
          kernel([&](T x, T y) -> R {
            if (y == 0) {
              div_zero = true;
              return 0;
            }
            if constexpr (std::is_signed_v<T>) {
              if (y == -1) return static_cast<R>(static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(x)));
            }
            return static_cast<R>(x / y);
          });
        }
        break;
      case Binary::pow:
        if constexpr (is_float) {
          kernel([](T x, T y) -> R { return y == 2.f ? x * x : std::pow(x, y); });
        } else {
          kernel([](T x, T y) -> R { return static_cast<R>(int_pow<T>(x, y)); });
        }
        break;
      case Binary::min:
        if constexpr (is_float) kernel([](T x, T y) -> R { return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); });
        else kernel([](T x, T y) -> R { return std::min(x, y); });
        break;
      case Binary::max:
        if constexpr (is_float) kernel([](T x, T y) -> R { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); });
        else kernel([](T x, T y) -> R { return std::max(x, y); });
        break;
      case Binary::fmod:
        if constexpr (is_float) {
          kernel([](T x, T y) -> R { return std::fmod(x, y); });
        } else {
          kernel([&](T x, T y) -> R {
            if (y == 0) {
              div_zero = true;
              return 0;
            }
            if constexpr (std::is_signed_v<T>) {
              if (y == -1) return 0;  // INT_MIN % -1 would trap
            }
            return static_cast<R>(x % y);
          });
        }
        break;
      case Binary::mod:
        if constexpr (is_float) {
          kernel([](T x, T y) -> R {
            T m = std::fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return m;
          });
        } else {
          kernel([&](T x, T y) -> R {
            if (y == 0) {
              div_zero = true;
              return 0;
            }
            if constexpr (std::is_signed_v<T>) {
              if (y == -1) return 0;  // INT_MIN % -1 would trap
            }
            T m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return static_cast<R>(m);
          });
        }
        break;
      case Binary::prelu: kernel([](T x, T y) -> R { return static_cast<R>(x < 0 ? x * y : x); }); break;
      case Binary::equal: kernel([](T x, T y) -> R { return x == y; }); break;
      case Binary::less: kernel([](T x, T y) -> R { return x < y; }); break;
      case Binary::greater: kernel([](T x, T y) -> R { return x > y; }); break;
      case Binary::less_equal: kernel([](T x, T y) -> R { return x <= y; }); break;
      case Binary::greater_equal: kernel([](T x, T y) -> R { return x >= y; }); break;
      case Binary::logical_and: kernel([](T x, T y) -> R { return (x != 0) && (y != 0); }); break;
      case Binary::logical_or: kernel([](T x, T y) -> R { return (x != 0) || (y != 0); }); break;
      case Binary::logical_xor: kernel([](T x, T y) -> R { return (x != 0) != (y != 0); }); break;
    }
  }
  if (div_zero) return invalid(what + ": integer division by zero");
  return {};
}

bool is_comparison(Binary op) {
  return op == Binary::equal || op == Binary::less || op == Binary::greater || op == Binary::less_equal || op == Binary::greater_equal ||
         op == Binary::logical_and || op == Binary::logical_or || op == Binary::logical_xor;
}

float erf_gelu(float x) { return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f)); }
float tanh_gelu(float x) { return 0.5f * x * (1.f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))); }

// Calls run(begin, end) over [0, n) in chunks on the OpenMP threads when n is large.
template <typename Run>
void for_chunks(int64_t n, int64_t chunk, const Run& run) {
  if (n >= 4 * chunk && omp_threads() > 1) {
    omp_for((n + chunk - 1) / chunk, [&](int64_t c) { run(c * chunk, std::min(n, (c + 1) * chunk)); });
    return;
  }
  run(int64_t{0}, n);
}

template <typename T, typename F>
void map_unary(const Tensor& x0, Tensor& out, F f) {
  const Tensor x = x0.contiguous();
  const T* p = x.data<T>();
  T* o = out.data<T>();
  for_chunks(x.numel(), int64_t{1} << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = f(p[i]);
  });
}

// Runs a SIMD array loop over x (made dense), threaded for large tensors.
void map_simd(const Tensor& x0, Tensor& out, void (*fn)(const float*, float*, int64_t)) {
  const Tensor x = x0.contiguous();
  const float* p = x.data<float>();
  float* o = out.data<float>();
  for_chunks(x.numel(), int64_t{1} << 14, [&](int64_t b, int64_t e) { fn(p + b, o + b, e - b); });
}

template <typename T>
Status unary_int(Unary op, const Tensor& x, Tensor& out, const UnaryParams& p) {
  switch (op) {
    case Unary::abs: map_unary<T>(x, out, [](T v) { return v < 0 ? static_cast<T>(-v) : v; }); return {};
    case Unary::neg: map_unary<T>(x, out, [](T v) { return static_cast<T>(-v); }); return {};
    case Unary::sign: map_unary<T>(x, out, [](T v) { return static_cast<T>((v > 0) - (v < 0)); }); return {};
    case Unary::identity: map_unary<T>(x, out, [](T v) { return v; }); return {};
    case Unary::relu: map_unary<T>(x, out, [](T v) { return v < 0 ? T{0} : v; }); return {};
    case Unary::clip: {
      const T lo = std::isinf(p.lo) ? std::numeric_limits<T>::lowest() : static_cast<T>(p.lo);
      const T hi = std::isinf(p.hi) ? std::numeric_limits<T>::max() : static_cast<T>(p.hi);
      map_unary<T>(x, out, [=](T v) { return std::min(std::max(v, lo), hi); });
      return {};
    }
    default: return unsupported(std::string("unary op on ") + dtype_name(x.dtype()));
  }
}

template <typename From, typename To>
void cast_loop(const From* s, To* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, bool>) {
      d[i] = s[i] != From{};
    } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
      const From v = s[i];
      if (std::isnan(v)) d[i] = 0;
      else if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) d[i] = std::numeric_limits<To>::lowest();
      else if (v >= static_cast<From>(std::numeric_limits<To>::max())) d[i] = std::numeric_limits<To>::max();
      else d[i] = static_cast<To>(v);
    } else {
      d[i] = static_cast<To>(s[i]);
    }
  }
}

template <typename F>
bool visit_plain(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return true;
    case DType::i8: f(int8_t{}); return true;
    case DType::u8: f(uint8_t{}); return true;
    case DType::i16: f(int16_t{}); return true;
    case DType::i32: f(int32_t{}); return true;
    case DType::i64: f(int64_t{}); return true;
    case DType::b8: f(bool{}); return true;
    default: return false;
  }
}

}  // namespace

Tensor broadcast_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const size_t r = shape.size();
  const size_t tr = t.shape().size();
  Shape strides(r, 0);
  for (size_t i = 0; i < tr; ++i) {
    const size_t o = r - tr + i;
    strides[o] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return t.with_layout(shape, strides);
}

void copy_into(const Tensor& src, Tensor& dst) {
  if (src.is_contiguous() && src.shape() == dst.shape()) {
    if (src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), dst.nbytes());
    return;
  }
  const Tensor s = broadcast_view(src, dst.shape());
  const size_t es = dtype_size(dst.dtype());
  const uint8_t* ps = static_cast<const uint8_t*>(s.raw());
  uint8_t* pd = static_cast<uint8_t*>(dst.raw());
  for_each_row<1>(dst.shape(), {&s.strides()}, [&](int64_t o, const auto& off, int64_t n, const auto& st) {
    const uint8_t* a = ps + off[0] * static_cast<int64_t>(es);
    uint8_t* z = pd + o * static_cast<int64_t>(es);
    if (st[0] == 1) {
      std::memcpy(z, a, static_cast<size_t>(n) * es);
      return;
    }
    switch (es) {
      case 4:
        for (int64_t i = 0; i < n; ++i) std::memcpy(z + i * 4, a + i * st[0] * 4, 4);
        break;
      case 8:
        for (int64_t i = 0; i < n; ++i) std::memcpy(z + i * 8, a + i * st[0] * 8, 8);
        break;
      default:
        for (int64_t i = 0; i < n; ++i) std::memcpy(z + i * static_cast<int64_t>(es), a + i * st[0] * static_cast<int64_t>(es), es);
    }
  });
}

Status binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out, const std::string& what) {
  if (a.dtype() != b.dtype()) {
    return invalid(what + ": operands have different dtypes (" + dtype_name(a.dtype()) + ", " + dtype_name(b.dtype()) + ")");
  }
  const bool cmp = is_comparison(op);
  switch (a.dtype()) {
    case DType::f32: return cmp ? binary_typed<float, bool>(op, a, b, out, what) : binary_typed<float, float>(op, a, b, out, what);
    case DType::i64: return cmp ? binary_typed<int64_t, bool>(op, a, b, out, what) : binary_typed<int64_t, int64_t>(op, a, b, out, what);
    case DType::i32: return cmp ? binary_typed<int32_t, bool>(op, a, b, out, what) : binary_typed<int32_t, int32_t>(op, a, b, out, what);
    case DType::b8:
      if (cmp) return binary_typed<bool, bool>(op, a, b, out, what);
      break;
    default: break;
  }
  return unsupported(what + ": elementwise op on " + dtype_name(a.dtype()));
}

Status unary(Unary op, const Tensor& x, Tensor& out, const UnaryParams& p) {
  if (x.dtype() == DType::b8 && (op == Unary::logical_not || op == Unary::identity)) {
    map_unary<bool>(x, out, [op](bool v) { return op == Unary::logical_not ? !v : v; });
    return {};
  }
  if (x.dtype() == DType::i64) return unary_int<int64_t>(op, x, out, p);
  if (x.dtype() == DType::i32) return unary_int<int32_t>(op, x, out, p);
  if (x.dtype() != DType::f32) {
    if (op == Unary::identity) {
      copy_into(x, out);
      return {};
    }
    return unsupported(std::string("unary op on ") + dtype_name(x.dtype()));
  }
  switch (op) {
    case Unary::relu: map_unary<float>(x, out, [](float v) { return v < 0.f ? 0.f : v; }); break;
    case Unary::leaky_relu: map_unary<float>(x, out, [a = p.alpha](float v) { return v < 0.f ? v * a : v; }); break;
    case Unary::sigmoid: map_simd(x, out, simd_sigmoid); break;
    case Unary::hard_sigmoid: map_unary<float>(x, out, [a = p.alpha, b = p.beta](float v) { return clamp_keeping_nan(a * v + b, 0.f, 1.f); }); break;
    case Unary::hard_swish: map_unary<float>(x, out, [](float v) { return v * clamp_keeping_nan(v / 6.f + 0.5f, 0.f, 1.f); }); break;
    case Unary::tanh: map_unary<float>(x, out, [](float v) { return std::tanh(v); }); break;
    case Unary::erf: map_simd(x, out, simd_erf); break;
    case Unary::gelu_erf: map_unary<float>(x, out, erf_gelu); break;
    case Unary::gelu_tanh: map_unary<float>(x, out, tanh_gelu); break;
    case Unary::sqrt: map_unary<float>(x, out, [](float v) { return std::sqrt(v); }); break;
    case Unary::exp: map_simd(x, out, simd_exp); break;
    case Unary::log: map_unary<float>(x, out, [](float v) { return std::log(v); }); break;
    case Unary::abs: map_unary<float>(x, out, [](float v) { return std::fabs(v); }); break;
    case Unary::neg: map_unary<float>(x, out, [](float v) { return -v; }); break;
    case Unary::reciprocal: map_unary<float>(x, out, [](float v) { return 1.f / v; }); break;
    case Unary::clip: map_unary<float>(x, out, [lo = p.lo, hi = p.hi](float v) { return clamp_keeping_nan(v, lo, hi); }); break;
    case Unary::floor: map_unary<float>(x, out, [](float v) { return std::floor(v); }); break;
    case Unary::ceil: map_unary<float>(x, out, [](float v) { return std::ceil(v); }); break;
    case Unary::round: map_unary<float>(x, out, [](float v) { return std::nearbyint(v); }); break;  // half to even
    case Unary::sign: map_unary<float>(x, out, [](float v) { return v > 0.f ? 1.f : (v < 0.f ? -1.f : v); }); break;
    case Unary::sin: map_unary<float>(x, out, [](float v) { return std::sin(v); }); break;
    case Unary::cos: map_unary<float>(x, out, [](float v) { return std::cos(v); }); break;
    case Unary::softplus: map_unary<float>(x, out, [](float v) { return std::log1p(std::exp(-std::fabs(v))) + std::max(v, 0.f); }); break;
    case Unary::mish: map_unary<float>(x, out, [](float v) { return v * std::tanh(std::log1p(std::exp(-std::fabs(v))) + std::max(v, 0.f)); }); break;
    case Unary::elu: map_unary<float>(x, out, [a = p.alpha](float v) { return v < 0.f ? a * (std::exp(v) - 1.f) : v; }); break;
    case Unary::selu: map_unary<float>(x, out, [a = p.alpha, g = p.gamma](float v) { return v <= 0.f ? g * (a * std::exp(v) - a) : g * v; }); break;
    case Unary::identity: map_unary<float>(x, out, [](float v) { return v; }); break;
    case Unary::logical_not: return unsupported("Not on float32");
  }
  return {};
}

namespace {
template <typename Pred>
Status classify(const char* what, const Tensor& x0, Tensor& out, Pred pred) {
  if (x0.dtype() != DType::f32) return unsupported(std::string(what) + ": float32 input only");
  if (out.dtype() != DType::b8 || out.numel() != x0.numel()) return invalid(std::string(what) + ": output must be bool of the input's shape");
  const Tensor x = x0.contiguous();
  const float* px = x.data<float>();
  uint8_t* po = out.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = pred(px[i]) ? 1 : 0;
  return {};
}
}  // namespace

Status is_nan(const Tensor& x, Tensor& out) {
  return classify("IsNaN", x, out, [](float v) { return std::isnan(v); });
}

Status is_inf(const Tensor& x, bool negative, bool positive, Tensor& out) {
  return classify("IsInf", x, out, [negative, positive](float v) { return std::isinf(v) && (v < 0 ? negative : positive); });
}

Status where(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out) {
  if (cond.dtype() != DType::b8) return invalid("Where: condition must be bool");
  if (x.dtype() != y.dtype()) return invalid("Where: X and Y have different dtypes");
  const Tensor c = broadcast_view(cond, out.shape()), a = broadcast_view(x, out.shape()), b = broadcast_view(y, out.shape());
  const size_t es = dtype_size(out.dtype());
  const uint8_t* pc = c.data<uint8_t>();
  const uint8_t* pa = static_cast<const uint8_t*>(a.raw());
  const uint8_t* pb = static_cast<const uint8_t*>(b.raw());
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  for_each_row<3>(out.shape(), {&c.strides(), &a.strides(), &b.strides()}, [&](int64_t o, const auto& off, int64_t n, const auto& st) {
    for (int64_t i = 0; i < n; ++i) {
      const bool t = pc[off[0] + i * st[0]] != 0;
      const uint8_t* src = t ? pa + (off[1] + i * st[1]) * static_cast<int64_t>(es) : pb + (off[2] + i * st[2]) * static_cast<int64_t>(es);
      std::memcpy(po + (o + i) * static_cast<int64_t>(es), src, es);
    }
  });
  return {};
}

Status cast(const Tensor& x0, Tensor& out) {
  const Tensor x = x0.contiguous();
  if (x.dtype() == out.dtype()) {
    copy_into(x, out);
    return {};
  }
  const int64_t n = x.numel();
  const bool half_in = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
  const bool half_out = out.dtype() == DType::f16 || out.dtype() == DType::bf16;
  if (half_in || half_out) {
    // Through float32: exact for f16/bf16 -> f32, rounds to nearest even the other way.
    Tensor f = x;
    if (half_in) {
      RKD_ASSIGN(f, x.to(DType::f32));
    } else if (x.dtype() != DType::f32) {
      f = Tensor::empty(DType::f32, x.shape());
      RKD_TRY(cast(x, f));
    }
    if (!half_out) return cast(f, out);
    RKD_ASSIGN(Tensor h, f.to(out.dtype()));
    std::memcpy(out.raw(), h.raw(), out.nbytes());
    return {};
  }
  bool ok = false;
  visit_plain(x.dtype(), [&](auto from) {
    using From = decltype(from);
    ok = visit_plain(out.dtype(), [&](auto to) {
      using To = decltype(to);
      cast_loop<From, To>(x.data<From>(), out.data<To>(), n);
    });
  });
  if (!ok) return unsupported(std::string("Cast from ") + dtype_name(x.dtype()) + " to " + dtype_name(out.dtype()));
  return {};
}

}  // namespace rkd::ops
