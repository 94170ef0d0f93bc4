// Calibration statistics and range selection (contract in calibrate.h).
#include "quant/calibrate.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rkd::quant {

Result<CalibMethod> calib_method_from_name(const std::string& name) {
  if (name == "minmax") return CalibMethod::minmax;
  if (name == "percentile") return CalibMethod::percentile;
  if (name == "kl") return CalibMethod::kl;
  if (name == "mse") return CalibMethod::mse;
  return invalid("calibration method '" + name + "': expected minmax, percentile, kl or mse");
}

const char* calib_method_name(CalibMethod m) {
  switch (m) {
    case CalibMethod::minmax: return "minmax";
    case CalibMethod::percentile: return "percentile";
    case CalibMethod::kl: return "kl";
    case CalibMethod::mse: return "mse";
  }
  return "?";
}

void TensorStats::observe_minmax(const Tensor& t0) {
  const Tensor t = t0.contiguous();
  const float* p = t.data<float>();
  const int64_t n = t.numel();
  // Non-finite values are skipped (|v| <= FLT_MAX is false for NaN and infinities); the loop
  // has no branch so that it vectorizes.
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int64_t i = 0; i < n; ++i) {
    const float v = p[i];
    const bool finite = std::fabs(v) <= std::numeric_limits<float>::max();
    lo = finite && v < lo ? v : lo;
    hi = finite && v > hi ? v : hi;
  }
  if (lo > hi) return;  // nothing finite
  if (!seen_) {
    min_ = lo;
    max_ = hi;
    seen_ = true;
  }
  min_ = std::min(min_, lo);
  max_ = std::max(max_, hi);
}

void TensorStats::observe_histogram(const Tensor& t0) {
  if (hist_.empty()) hist_.assign(kBins, 0.0);
  const Tensor t = t0.contiguous();
  const float* p = t.data<float>();
  const int64_t n = t.numel();
  const double width = (static_cast<double>(max_) - min_) / kBins;
  const double inv = width > 0 ? 1.0 / width : 0.0;
  std::vector<uint32_t> counts(kBins, 0);
  for (int64_t i = 0; i < n; ++i) {
    const float v = p[i];
    if (!(std::fabs(v) <= std::numeric_limits<float>::max())) continue;
    // Values outside [min, max] (a tensor seen in pass 1 with a smaller range) are clamped.
    const double x = std::clamp((static_cast<double>(v) - min_) * inv, 0.0, static_cast<double>(kBins - 1));
    ++counts[static_cast<size_t>(x)];
    if (counts[static_cast<size_t>(x)] == std::numeric_limits<uint32_t>::max()) {
      hist_[static_cast<size_t>(x)] += counts[static_cast<size_t>(x)];
      counts[static_cast<size_t>(x)] = 0;
    }
  }
  for (int b = 0; b < kBins; ++b) hist_[static_cast<size_t>(b)] += counts[static_cast<size_t>(b)];
}

double TensorStats::bin_centre(int b) const { return min_ + (b + 0.5) * ((static_cast<double>(max_) - min_) / kBins); }

Range TensorStats::percentile_range(double p) const {
  double total = 0;
  for (double h : hist_) total += h;
  if (total <= 0) return {min_, max_};
  const double width = (static_cast<double>(max_) - min_) / kBins;
  const double lo_count = total * (100.0 - p) / 100.0, hi_count = total * p / 100.0;
  double acc = 0;
  int lo_bin = 0, hi_bin = kBins - 1;
  for (int b = 0; b < kBins; ++b) {
    acc += hist_[static_cast<size_t>(b)];
    if (acc > lo_count) {
      lo_bin = b;
      break;
    }
  }
  acc = 0;
  for (int b = 0; b < kBins; ++b) {
    acc += hist_[static_cast<size_t>(b)];
    if (acc >= hi_count) {
      hi_bin = b;
      break;
    }
  }
  return {static_cast<float>(min_ + lo_bin * width), static_cast<float>(min_ + (hi_bin + 1) * width)};
}

Range TensorStats::kl_range() const {
  // |x| histogram with kBins bins over [0, amax].
  const double amax = std::max(std::fabs(static_cast<double>(min_)), std::fabs(static_cast<double>(max_)));
  if (amax <= 0) return {min_, max_};
  std::vector<double> h(kBins, 0.0);
  for (int b = 0; b < kBins; ++b) {
    const int a = std::min(kBins - 1, static_cast<int>(std::fabs(bin_centre(b)) / amax * kBins));
    h[static_cast<size_t>(a)] += hist_[static_cast<size_t>(b)];
  }
  const int levels = 128;
  double best = std::numeric_limits<double>::infinity();
  int best_i = kBins;
  for (int i = levels; i <= kBins; ++i) {
    std::vector<double> p(h.begin(), h.begin() + i);
    double outliers = 0;
    for (int k = i; k < kBins; ++k) outliers += h[static_cast<size_t>(k)];
    p[static_cast<size_t>(i - 1)] += outliers;
    // Q: p merged into `levels` groups, each group's mass spread over its non-empty bins.
    std::vector<double> q(static_cast<size_t>(i), 0.0);
    for (int g = 0; g < levels; ++g) {
      const int start = g * i / levels, stop = (g + 1) * i / levels;
      double mass = 0;
      int nonzero = 0;
      for (int k = start; k < stop; ++k) {
        mass += h[static_cast<size_t>(k)];
        nonzero += h[static_cast<size_t>(k)] > 0;
      }
      for (int k = start; k < stop; ++k) {
        if (h[static_cast<size_t>(k)] > 0) q[static_cast<size_t>(k)] = mass / nonzero;
      }
    }
    double ps = 0, qs = 0;
    for (int k = 0; k < i; ++k) {
      ps += p[static_cast<size_t>(k)];
      qs += q[static_cast<size_t>(k)];
    }
    if (ps <= 0 || qs <= 0) continue;
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      const double pk = p[static_cast<size_t>(k)] / ps;
      if (pk <= 0) continue;
      const double qk = q[static_cast<size_t>(k)] / qs;
      kl += qk > 0 ? pk * std::log(pk / qk) : pk * std::log(pk / 1e-12);
    }
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  const double t = (best_i + 0.5) * amax / kBins;
  return {static_cast<float>(std::max<double>(min_, -t)), static_cast<float>(std::min<double>(max_, t))};
}

Range TensorStats::mse_range(bool symmetric) const {
  double best = std::numeric_limits<double>::infinity();
  Range best_r{min_, max_};
  for (int step = 100; step >= 1; --step) {
    const double f = step / 100.0;
    const Range r{static_cast<float>(min_ * f), static_cast<float>(max_ * f)};
    const QParams qp = params_for_range(r, symmetric);
    double err = 0;
    for (int b = 0; b < kBins; ++b) {
      const double c = hist_[static_cast<size_t>(b)];
      if (c <= 0) continue;
      const double x = bin_centre(b);
      const double d = x - fake_quant(static_cast<float>(x), qp);
      err += c * d * d;
    }
    if (err < best) {
      best = err;
      best_r = r;
    }
  }
  return best_r;
}

Range TensorStats::choose_range(CalibMethod m, double percentile, bool symmetric) const {
  if (!seen_) return {0, 0};
  if (m == CalibMethod::minmax || hist_.empty() || max_ <= min_) return {min_, max_};
  if (m == CalibMethod::percentile) return percentile_range(percentile);
  if (m == CalibMethod::kl) return kl_range();
  return mse_range(symmetric);
}

QParams params_for_range(Range r, bool symmetric) {
  const double lo = std::min(0.0, static_cast<double>(r.lo)), hi = std::max(0.0, static_cast<double>(r.hi));
  QParams p;
  if (symmetric) {
    const double a = std::max(-lo, hi);
    p.scale = a > 0 ? static_cast<float>(a / 127.0) : 1.f;
    p.zero_point = 0;
    return p;
  }
  if (hi - lo <= 0) return p;
  p.scale = static_cast<float>((hi - lo) / 255.0);
  p.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-128.0 - lo / static_cast<double>(p.scale)), -128.0, 127.0));
  return p;
}

float fake_quant(float x, QParams p) {
  const float q = std::clamp(std::nearbyint(x / p.scale) + static_cast<float>(p.zero_point), -128.f, 127.f);
  return (q - static_cast<float>(p.zero_point)) * p.scale;
}

}  // namespace rkd::quant
