// Post-training calibration: activation statistics over a calibration set, and the int8
// quantization parameters chosen from them.
//
// Contract:
//  - TensorStats sees every calibration sample of one float tensor twice: pass 1
//    (observe_minmax) records min and max; pass 2 (observe_histogram) fills a histogram of
//    kBins equal bins over [min, max] of pass 1 (values are clamped into it). minmax needs
//    pass 1 only.
//  - choose_range() returns the clipping range [lo, hi] a method picks:
//      minmax      [min, max];
//      percentile  the (100 - p)-th and p-th percentiles (bin edges; p = 99.99 by default);
//      kl          TensorRT's entropy calibration on the histogram of |x| (128 quantized
//                  levels): the threshold T minimising KL(P || Q) over the bins kept;
//                  the range is [max(min, -T), min(max, T)];
//      mse         the range [f * min, f * max], f in {1, 0.99, ..., 0.01}, whose
//                  quantize-dequantize round trip has the least squared error over the
//                  histogram (bin centres weighted by counts), with the tensor's own
//                  asymmetric (or symmetric) int8 parameters.
//  - params_for_range(): int8 parameters. The range is first widened to contain 0 (zero
//    must be exact: padding and ReLU produce it). Asymmetric: scale = (hi - lo) / 255,
//    zero_point = round(-128 - lo / scale) clamped to [-128, 127]; symmetric:
//    scale = max(|lo|, |hi|) / 127, zero_point = 0. A range of width 0 gets scale 1.
//  - Weights are symmetric int8 with zero point 0 (per output channel or per tensor):
//    scale = max|w| / 127 (1 for an all-zero channel); see qdq.h for the bias adjustment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"

namespace rkd::quant {

enum class CalibMethod { minmax, percentile, kl, mse };
Result<CalibMethod> calib_method_from_name(const std::string& name);
const char* calib_method_name(CalibMethod m);

struct Range {
  float lo = 0, hi = 0;
};

struct QParams {
  float scale = 1;
  int32_t zero_point = 0;
};

class TensorStats {
 public:
  static constexpr int kBins = 2048;

  void observe_minmax(const Tensor& t);
  void observe_histogram(const Tensor& t);
  bool seen() const { return seen_; }
  float min() const { return min_; }
  float max() const { return max_; }
  Range choose_range(CalibMethod m, double percentile, bool symmetric) const;

 private:
  Range percentile_range(double p) const;
  Range kl_range() const;
  Range mse_range(bool symmetric) const;
  double bin_centre(int b) const;

  bool seen_ = false;
  float min_ = 0, max_ = 0;
  std::vector<double> hist_;  // kBins over [min_, max_] once pass 2 started
};

QParams params_for_range(Range r, bool symmetric);
// int8 round trip of x with p (round half to even, saturate), as float.
float fake_quant(float x, QParams p);

}  // namespace rkd::quant
