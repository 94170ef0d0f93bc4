// MSDA entry points: parsing, value preparation and validation at the trust boundary.
#include <cmath>
#include <cstring>

#include "kernels/deform_attn.h"
#include "kernels/deform_attn_coords.h"

namespace rkd {

Result<MsdaMethod> parse_msda_method(const std::string& s) {
  if (s == "default" || s == "bilinear") return MsdaMethod::bilinear;
  if (s == "discrete") return MsdaMethod::discrete;
  if (s == "discrete_fixed") return MsdaMethod::discrete_fixed;
  return invalid("method: '" + s + "' is not one of default, discrete, discrete_fixed");
}

const char* to_string(MsdaMethod m) {
  switch (m) {
    case MsdaMethod::bilinear: return "default";
    case MsdaMethod::discrete: return "discrete";
    case MsdaMethod::discrete_fixed: return "discrete_fixed";
  }
  return "?";
}

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return parts;
}

Result<int64_t> parse_positive(const std::string& s, const std::string& what) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
    return invalid(what + ": '" + s + "' is not a positive integer");
  }
  const int64_t v = std::stoll(s);
  if (v <= 0) return invalid(what + ": '" + s + "' must be at least 1");
  return v;
}
}  // namespace

Result<std::vector<MsdaLevelShape>> parse_level_shapes(const std::string& s) {
  std::vector<MsdaLevelShape> out;
  for (const std::string& part : split(s, ',')) {
    const auto x = split(part, 'x');
    if (x.size() != 2) return invalid("shapes: '" + part + "' is not HxW (e.g. 80x80)");
    RKD_ASSIGN(int64_t h, parse_positive(x[0], "shapes: height"));
    RKD_ASSIGN(int64_t w, parse_positive(x[1], "shapes: width"));
    out.push_back({h, w});
  }
  return out;
}

Result<std::vector<int64_t>> parse_points(const std::string& s) {
  std::vector<int64_t> out;
  for (const std::string& part : split(s, ',')) {
    RKD_ASSIGN(int64_t v, parse_positive(part, "points"));
    out.push_back(v);
  }
  return out;
}

namespace {
// Sets the geometry of `v` and gives it storage: its existing storage when the size matches
// (a runtime preparing every frame reuses one buffer), else a new one - zero-filled only
// when asked (the token path writes every element itself).
Status shape_value(MsdaValue& v, int64_t batch, int64_t heads, int64_t hd, const std::vector<MsdaLevelShape>& levels, bool zeroed) {
  v.batch = batch;
  v.heads = heads;
  v.head_dim = hd;
  v.head_dim_padded = (hd + 7) / 8 * 8;
  v.levels = levels;
  v.level_start.clear();
  int64_t t = 0;
  for (const auto& l : levels) {
    v.level_start.push_back(t);
    t += l.h * l.w;
  }
  const Shape shape = {batch, heads, t + 1, v.head_dim_padded};
  if (v.data.defined() && v.data.shape() == shape && v.data.dtype() == DType::f32 && !zeroed) return {};
  RKD_ASSIGN(v.data, zeroed ? Tensor::zeros(DType::f32, shape) : Tensor::uninitialized(DType::f32, shape));
  return {};
}
}  // namespace

Status msda_prepare_from_tokens(const Tensor& value, const std::vector<MsdaLevelShape>& levels, MsdaValue* into, ThreadPool* pool) {
  if (!value.defined()) return invalid("value: tensor is missing");
  if (!dtype_is_float(value.dtype())) {
    return unsupported(std::string("value: dtype ") + dtype_name(value.dtype()) + " (float32, float16 or bfloat16)");
  }
  if (value.rank() != 4) {
    return invalid("value: rank must be 4 [B, sum(H*W), heads, head_dim], got " + shape_to_string(value.shape()));
  }
  if (levels.empty()) return invalid("shapes: at least one level is required");
  int64_t tokens = 0;
  for (const auto& l : levels) {
    if (l.h <= 0 || l.w <= 0) return invalid("shapes: every level needs H, W >= 1");
    tokens += l.h * l.w;
  }
  for (int i = 0; i < 4; ++i) {
    if (value.dim(i) <= 0) return invalid("value: dimension " + std::to_string(i) + " is empty");
  }
  if (value.dim(1) != tokens) {
    return invalid("value: dimension 1 has " + std::to_string(value.dim(1)) + " tokens but the level shapes sum to " + std::to_string(tokens));
  }
  RKD_ASSIGN(Tensor v32, value.to(DType::f32));
  v32 = v32.contiguous();
  const int64_t B = value.dim(0), nH = value.dim(2), hd = value.dim(3);
  MsdaValue& out = *into;
  RKD_TRY(shape_value(out, B, nH, hd, levels, false));
  const float* src = v32.data<float>();
  float* dst = out.data.data<float>();
  const int64_t hdp = out.head_dim_padded;
  // One task per (batch, head): the head's rows are written sequentially (pad lanes and the
  // trailing zero token included), the source is read with a stride of heads * hd.
  (pool ? *pool : ThreadPool::global()).parallel_for(B * nH, [&](int64_t bm) {
    const int64_t b = bm / nH, m = bm % nH;
    float* d = dst + bm * (tokens + 1) * hdp;
    const float* s0 = src + (b * tokens * nH + m) * hd;
    for (int64_t t = 0; t < tokens; ++t, d += hdp) {
      std::memcpy(d, s0 + t * nH * hd, static_cast<size_t>(hd) * sizeof(float));
      std::fill(d + hd, d + hdp, 0.0f);
    }
    std::fill(d, d + hdp, 0.0f);  // the zero token
  });
  return {};
}

Result<MsdaValue> msda_prepare_from_tokens(const Tensor& value, const std::vector<MsdaLevelShape>& levels) {
  MsdaValue out;
  RKD_TRY(msda_prepare_from_tokens(value, levels, &out));
  return out;
}

Result<MsdaValue> msda_prepare_from_levels(const std::vector<Tensor>& levels, int64_t heads) {
  if (levels.empty()) return invalid("value: at least one level is required");
  if (heads <= 0) return invalid("heads: must be at least 1");
  std::vector<MsdaLevelShape> shapes;
  int64_t bnh = -1, hd = -1;
  for (size_t l = 0; l < levels.size(); ++l) {
    const Tensor& t = levels[l];
    const std::string name = "value[" + std::to_string(l) + "]";
    if (!t.defined() || t.rank() != 4) return invalid(name + ": rank must be 4 [B*heads, head_dim, H, W]");
    if (!dtype_is_float(t.dtype())) return unsupported(name + ": dtype " + dtype_name(t.dtype()));
    for (int i = 0; i < 4; ++i) {
      if (t.dim(i) <= 0) return invalid(name + ": dimension " + std::to_string(i) + " is empty");
    }
    if (bnh < 0) {
      bnh = t.dim(0);
      hd = t.dim(1);
    } else if (t.dim(0) != bnh || t.dim(1) != hd) {
      return invalid(name + ": dimensions 0-1 " + shape_to_string({t.dim(0), t.dim(1)}) + " differ from level 0's " + shape_to_string({bnh, hd}));
    }
    shapes.push_back({t.dim(2), t.dim(3)});
  }
  if (bnh % heads != 0) {
    return invalid("value[0]: dimension 0 (" + std::to_string(bnh) + ") is not a multiple of heads (" + std::to_string(heads) + ")");
  }
  const int64_t B = bnh / heads;
  MsdaValue out;
  RKD_TRY(shape_value(out, B, heads, hd, shapes, true));
  float* dst = out.data.data<float>();
  const int64_t hdp = out.head_dim_padded, T = out.tokens();
  for (size_t l = 0; l < levels.size(); ++l) {
    RKD_ASSIGN(Tensor v32, levels[l].to(DType::f32));
    v32 = v32.contiguous();
    const float* src = v32.data<float>();
    const int64_t HW = shapes[l].h * shapes[l].w;
    for (int64_t bm = 0; bm < bnh; ++bm) {
      for (int64_t c = 0; c < hd; ++c) {
        const float* plane = src + (bm * hd + c) * HW;
        float* d = dst + (bm * (T + 1) + out.level_start[l]) * hdp + c;
        for (int64_t t = 0; t < HW; ++t) d[t * hdp] = plane[t];
      }
    }
  }
  return out;
}

Result<Tensor> msda(const MsdaValue& value, const Tensor& locations, const Tensor& weights, const std::vector<int64_t>& points,
                    const MsdaOptions& opt, ThreadPool* pool) {
  const int64_t B = value.batch, nH = value.heads;
  if (points.size() != value.levels.size()) {
    return invalid("points: " + std::to_string(points.size()) + " values given for " + std::to_string(value.levels.size()) + " levels");
  }
  int64_t P = 0;
  std::vector<int64_t> point_level;
  for (size_t l = 0; l < points.size(); ++l) {
    if (points[l] <= 0) return invalid("points: level " + std::to_string(l) + " has no points");
    P += points[l];
    point_level.insert(point_level.end(), static_cast<size_t>(points[l]), static_cast<int64_t>(l));
  }
  if (!locations.defined() || locations.rank() != 5) {
    return invalid("locations: rank must be 5 [B, Lq, heads, points, 2], got " +
                   (locations.defined() ? shape_to_string(locations.shape()) : std::string("nothing")));
  }
  if (!weights.defined() || weights.rank() != 4) {
    return invalid("weights: rank must be 4 [B, Lq, heads, points], got " +
                   (weights.defined() ? shape_to_string(weights.shape()) : std::string("nothing")));
  }
  if (!dtype_is_float(locations.dtype())) return unsupported(std::string("locations: dtype ") + dtype_name(locations.dtype()));
  if (!dtype_is_float(weights.dtype())) return unsupported(std::string("weights: dtype ") + dtype_name(weights.dtype()));
  const int64_t Lq = locations.dim(1);
  auto expect = [](const Tensor& t, const char* name, int dim, int64_t want, const std::string& why) -> Status {
    if (t.dim(dim) != want) {
      return invalid(std::string(name) + ": dimension " + std::to_string(dim) + " is " + std::to_string(t.dim(dim)) + " but " + why + " is " +
                     std::to_string(want));
    }
    return {};
  };
  if (Lq <= 0) return invalid("locations: dimension 1 (queries) is empty");
  RKD_TRY(expect(locations, "locations", 0, B, "the value's batch"));
  RKD_TRY(expect(locations, "locations", 2, nH, "the value's head count"));
  RKD_TRY(expect(locations, "locations", 3, P, "the sum of points per level"));
  RKD_TRY(expect(locations, "locations", 4, 2, "(x, y)"));
  RKD_TRY(expect(weights, "weights", 0, B, "the value's batch"));
  RKD_TRY(expect(weights, "weights", 1, Lq, "the locations' query count"));
  RKD_TRY(expect(weights, "weights", 2, nH, "the value's head count"));
  RKD_TRY(expect(weights, "weights", 3, P, "the sum of points per level"));

  RKD_ASSIGN(Tensor loc32, locations.to(DType::f32));
  RKD_ASSIGN(Tensor w32, weights.to(DType::f32));
  loc32 = loc32.contiguous();
  w32 = w32.contiguous();
  const float* loc = loc32.data<float>();
  const float* wt = w32.data<float>();
  const int64_t rows = B * Lq * nH;

  if (opt.require_finite_weights) {
    for (int64_t i = 0; i < rows * P; ++i) {
      if (!std::isfinite(wt[i])) {
        const int64_t k = i % P, m = (i / P) % nH, q = (i / P / nH) % Lq, b = i / P / nH / Lq;
        return invalid("weights: non-finite value " + std::to_string(wt[i]) + " at [" + std::to_string(b) + ", " + std::to_string(q) + ", " +
                       std::to_string(m) + ", " + std::to_string(k) + "]");
      }
    }
  }
  if (opt.method == MsdaMethod::discrete) {
    // The historical clamp uses H-1 for x: on a map taller than wide that can index past
    // the last column, where PyTorch raises IndexError. Refuse instead of reading out of
    // bounds.
    for (int64_t i = 0; i < rows * P; ++i) {
      const int64_t k = i % P;
      const auto& lv = value.levels[static_cast<size_t>(point_level[static_cast<size_t>(k)])];
      if (lv.h <= lv.w) continue;
      const int64_t ix = msda_detail::clamp_i64(msda_detail::discrete_raw_index(loc[2 * i], lv.w), 0, lv.h - 1);
      if (ix > lv.w - 1) {
        const int64_t m = (i / P) % nH, q = (i / P / nH) % Lq, b = i / P / nH / Lq;
        return invalid("locations: method discrete reads column " + std::to_string(ix) + " of level " +
                       std::to_string(point_level[static_cast<size_t>(k)]) + " (" + std::to_string(lv.h) + "x" + std::to_string(lv.w) + ") at [" +
                       std::to_string(b) + ", " + std::to_string(q) + ", " + std::to_string(m) + ", " + std::to_string(k) +
                       "]: x is clamped to H-1 (the historical bug), past the last column; PyTorch raises "
                       "IndexError here. Use discrete_fixed.");
      }
    }
  }
  RKD_ASSIGN(Tensor out, Tensor::uninitialized(DType::f32, {B, Lq, nH * value.head_dim}));
  MsdaProblem prob;
  prob.value = &value;
  prob.locations = loc;
  prob.weights = wt;
  prob.out = out.data<float>();
  prob.queries = Lq;
  prob.point_level = std::move(point_level);
  prob.total_points = P;
  if (opt.impl == KernelImpl::reference) {
    msda_reference_f32(prob, opt.method);
  } else {
    msda_fast_f32(prob, opt.method, pool ? *pool : ThreadPool::global());
  }
  return out;
}

}  // namespace rkd
