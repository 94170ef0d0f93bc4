#include "npu/lower/strategy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rkd::npu::lower {

namespace {

// Tasks with one OUT_CVT each, from each group's largest multiplier.
Result<std::vector<TaskPlan>> out_cvt_groups(const ConvSpec& s, const std::vector<std::vector<int64_t>>& groups) {
  std::vector<TaskPlan> plans;
  for (const auto& g : groups) {
    double m = 0;
    for (int64_t k : g) m = std::max(m, real_multiplier(s, k));
    TaskPlan p;
    p.channels = g;
    RKD_ASSIGN(p.cvt, encode_out_cvt(m));
    plans.push_back(std::move(p));
  }
  return plans;
}

// One task over `channels` with per-channel BS multipliers. opt: bs-multiplier-opt's joint
// choice; otherwise the vendor's MUL = round(2^14 M_k / M_max) with OUT_CVT from M_max.
Result<TaskPlan> bs_task(const ConvSpec& s, std::vector<int64_t> channels, bool opt) {
  double m_max = 0;
  for (int64_t k : channels) m_max = std::max(m_max, real_multiplier(s, k));
  TaskPlan p;
  p.channels = std::move(channels);
  p.use_mul = true;
  if (!opt) {
    p.bs_shift = 14;
    RKD_ASSIGN(p.cvt, encode_out_cvt(m_max));
    for (int64_t k : p.channels) p.mul.push_back(static_cast<int32_t>(std::lround(16384.0 * real_multiplier(s, k) / m_max)));
    return p;
  }
  p.bs_shift = 15;
  RKD_ASSIGN(p.cvt, encode_out_cvt(m_max * 32768.0 / 32767.0));
  // The multiplier that, with the OUT_CVT scale as encoded, gives M_k: MUL = M_k 2^(15 + SHIFT) / SCALE.
  for (int64_t k : p.channels) {
    const double ideal = real_multiplier(s, k) * std::ldexp(1.0, 15 + p.cvt.shift) / p.cvt.scale;
    p.mul.push_back(static_cast<int32_t>(std::clamp<double>(std::nearbyint(ideal), 1.0, 32767.0)));
  }
  return p;
}

// s_r / (s_y M_out) for an OUT_CVT multiplier M_out = SCALE / 2^SHIFT.
double residual_multiplier(const ConvSpec& s, const OutCvt& cvt) {
  return static_cast<double>(s.r_scale) / static_cast<double>(s.y_scale) * std::ldexp(1.0, cvt.shift) / cvt.scale;
}

}  // namespace

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::per_tensor: return "per-tensor";
    case Strategy::group16: return "group16";
    case Strategy::sorted_groups: return "sorted-groups";
    case Strategy::per_channel: return "per-channel";
    case Strategy::hybrid: return "hybrid";
    case Strategy::bs_multiplier: return "bs-multiplier";
    case Strategy::bs_multiplier_opt: return "bs-multiplier-opt";
    case Strategy::sorted_bs_multiplier: return "sorted-bs-multiplier";
  }
  return "?";
}

std::vector<Strategy> all_strategies() {
  return {Strategy::per_tensor, Strategy::group16,       Strategy::sorted_groups,     Strategy::per_channel,
          Strategy::hybrid,     Strategy::bs_multiplier, Strategy::bs_multiplier_opt, Strategy::sorted_bs_multiplier};
}

Result<Strategy> parse_strategy(const std::string& name) {
  std::string names;
  for (Strategy s : all_strategies()) {
    if (name == strategy_name(s)) return s;
    names += names.empty() ? "" : ", ";
    names += strategy_name(s);
  }
  return invalid("strategy '" + name + "': expected one of " + names);
}

Result<OutCvt> encode_out_cvt(double m) {
  RKD_ASSIGN(quant::Multiplier15 q, quant::quantize_multiplier_15(m));
  return OutCvt{q.scale, q.shift};
}

int64_t apply_out_cvt(int64_t v, const OutCvt& c) {
  const int64_t p = v * c.scale;
  if (c.shift == 0) return p;
  const int64_t q = p >> c.shift, rem = p & ((int64_t{1} << c.shift) - 1), half = int64_t{1} << (c.shift - 1);
  return rem > half || (rem == half && (q & 1)) ? q + 1 : q;
}

Result<int64_t> relux_bound(const OutCvt& c, int64_t limit) {
  if (limit < 0) return unsupported("npu lowering: an activation upper bound below the zero point");
  int64_t lo = 0, hi = INT32_MAX;
  if (apply_out_cvt(hi, c) <= limit) return hi;
  while (lo < hi) {  // binary search for the last v with apply_out_cvt(v) <= limit (non-decreasing in v)
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (apply_out_cvt(mid, c) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

double real_multiplier(const ConvSpec& s, int64_t k) {
  return static_cast<double>(s.x_scale) * static_cast<double>(s.w_scales.size() == 1 ? s.w_scales[0] : s.w_scales[static_cast<size_t>(k)]) /
         static_cast<double>(s.y_scale);
}

Result<std::vector<TaskPlan>> plan_tasks(const ConvSpec& s, Strategy st, const LowerOptions& opt) {
  std::vector<int64_t> all(static_cast<size_t>(s.OC));
  std::iota(all.begin(), all.end(), 0);
  auto chunks = [](const std::vector<int64_t>& v, size_t n) {
    std::vector<std::vector<int64_t>> g;
    for (size_t i = 0; i < v.size(); i += n)
      g.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(i), v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), i + n)));
    return g;
  };
  std::vector<int64_t> sorted = all;
  std::stable_sort(sorted.begin(), sorted.end(), [&](int64_t a, int64_t b) { return real_multiplier(s, a) < real_multiplier(s, b); });
  switch (st) {
    case Strategy::per_tensor: return out_cvt_groups(s, {all});
    case Strategy::group16: return out_cvt_groups(s, chunks(all, 16));
    case Strategy::sorted_groups: return out_cvt_groups(s, chunks(sorted, 16));
    case Strategy::per_channel: return out_cvt_groups(s, chunks(all, 1));
    case Strategy::hybrid: {
      std::vector<std::vector<int64_t>> groups;
      for (const auto& g : chunks(all, 16)) {
        double lo = 1e300, hi = 0;
        for (int64_t k : g) {
          lo = std::min(lo, real_multiplier(s, k));
          hi = std::max(hi, real_multiplier(s, k));
        }
        if (hi / lo > opt.hybrid_ratio) {
          for (int64_t k : g) groups.push_back({k});
        } else {
          groups.push_back(g);
        }
      }
      return out_cvt_groups(s, groups);
    }
    case Strategy::bs_multiplier:
    case Strategy::bs_multiplier_opt: {
      RKD_ASSIGN(TaskPlan p, bs_task(s, all, st == Strategy::bs_multiplier_opt));
      return std::vector<TaskPlan>{p};
    }
    case Strategy::sorted_bs_multiplier: {
      // Sorted to form the groups; within a task its channels in their own order, so that a
      // convolution that needs one task writes its output in order (no compaction pass).
      std::vector<TaskPlan> plans;
      const double spread = std::ldexp(1.0, opt.sorted_bs_spread_log2);
      std::vector<int64_t> cur;
      auto close = [&]() -> Status {
        std::sort(cur.begin(), cur.end());
        RKD_ASSIGN(TaskPlan p, bs_task(s, cur, true));
        plans.push_back(std::move(p));
        cur.clear();
        return {};
      };
      for (int64_t k : sorted) {
        if (!cur.empty() && real_multiplier(s, k) > real_multiplier(s, cur.front()) * spread) RKD_TRY(close());
        cur.push_back(k);
      }
      RKD_TRY(close());
      return plans;
    }
  }
  return invalid("unknown strategy");
}

Result<int> residual_truncation(const ConvSpec& s, OutCvt& cvt) {
  const double m0 = residual_multiplier(s, cvt);
  int truncate = 0;
  while (std::ldexp(m0, -truncate) >= 32767.0 && truncate < 31) ++truncate;
  if (truncate > cvt.shift) return unsupported("npu lowering: residual multiplier " + std::to_string(m0) + " outside the EW converter's range");
  cvt.shift -= truncate;
  return truncate;
}

Result<quant::Multiplier15> residual_converter(const ConvSpec& s, const OutCvt& cvt) {
  const double m = residual_multiplier(s, cvt);
  auto e = quant::quantize_multiplier_15(m);
  if (!e.ok()) return unsupported("npu lowering: residual multiplier " + std::to_string(m) + " outside the EW converter's range");
  return *e;
}

}  // namespace rkd::npu::lower
