// Multi-scale deformable attention core (MSDA): the sampling step of the decoders of
// Deformable-DETR, RT-DETR, D-FINE, DEIM and DEIMv2, as one fused operation.
//
// Inputs (batch B, queries Lq, heads nH, head dim hd, L levels of H_l x W_l with P_l
// points each, P = sum P_l):
//   value      per level [B*nH, hd, H_l, W_l] (DEIM/D-FINE layout), or one tensor
//              [B, sum(H_l W_l), nH, hd] (Deformable-DETR layout; token = y * W_l + x,
//              levels concatenated in order; head m owns channels m*hd .. (m+1)*hd-1);
//   locations  [B, Lq, nH, P, 2], (x, y) in [0, 1] relative to the level's map; points
//              are ordered level by level (P_0 points of level 0, then level 1, ...);
//   weights    [B, Lq, nH, P], the attention weights (already soft-maxed by the caller).
// Output [B, Lq, nH*hd]: out[b, q, m*hd + c] = sum_k weights[b,q,m,k] * sample_k(c).
//
// The value is shared by every decoder layer, so it is prepared once (msda_prepare_*)
// into a channels-last-per-head layout [B, nH, sum(H_l W_l), hd padded to 8] and reused.
//
// ---------------------------------------------------------------------------------------
// The three methods
//
// default        sample_k = GridSample(value_l, grid = 2*loc - 1, bilinear, zeros,
//                align_corners = 0) - exactly what the PyTorch decoder computes with one
//                F.grid_sample call per level. With align_corners = 0 the pixel coordinate
//                is x = loc*W - 0.5 (Deformable-DETR's im2col coordinate); the arithmetic
//                follows grid_sample.h's PyTorch convention step by step: g = 2*loc - 1
//                (rounded), x = fma(g + 1, W/2, -0.5), then the bilinear fma chain. A point
//                outside the map fades to zero over one pixel.
//
// discrete       The historical integer path kept for NPUs without GridSample (D-FINE /
//                DEIM `method='discrete'`): ix = int64(loc_x * W + 0.5), iy = int64(loc_y
//                * H + 0.5) (float32 multiply, float32 add, truncation toward zero), then
//                BOTH clamped to [0, H-1] - the height bound is used for x too (the source
//                carries a "FIX ME? for rectangle input" comment) - and value_l[.., iy, ix]
//                is read. Reproduced bit for bit so that models trained with it keep their
//                accuracy. On a map wider than tall, x can never reach columns >= H; on a
//                map taller than wide, PyTorch raises IndexError when ix > W-1, and so do
//                we (an invalid-input error naming level, query, head and point).
//                Truncation of NaN, +-inf or values beyond int64 follows x86 (the result is
//                INT64_MIN, so the clamp yields 0), on every architecture.
//
// discrete_fixed As discrete but x is clamped to [0, W-1] and y to [0, H-1].
//
// Why discrete is a different model, not an approximation: it reads one pixel instead
// of blending four, it is offset by half a pixel from grid_sample `nearest` (loc*W + 0.5
// truncated is the pixel whose left edge is nearest, not the pixel containing loc*W - 0.5
// rounded), and points outside the map take border values instead of fading to zero.
// A checkpoint trained with one method must be evaluated with that method.
//
// Summation: products weights * sample are rounded, then accumulated in point order
// starting from zero. (PyTorch's sum(-1) uses a vectorised reduction whose order differs,
// so PyTorch agrees within float tolerance, not bit for bit; see tests.)
// ---------------------------------------------------------------------------------------
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/grid_sample.h"

namespace rkd {

enum class MsdaMethod { bilinear, discrete, discrete_fixed };

// "default" (or "bilinear"), "discrete", "discrete_fixed".
Result<MsdaMethod> parse_msda_method(const std::string& s);
const char* to_string(MsdaMethod m);

struct MsdaLevelShape {
  int64_t h = 0, w = 0;
};

// "80x80,40x40,20x20" (HxW) -> levels; "3,6,3" -> points.
Result<std::vector<MsdaLevelShape>> parse_level_shapes(const std::string& s);
Result<std::vector<int64_t>> parse_points(const std::string& s);

// The value in the layout the kernels read: float32 [B, nH, T + 1, hd_pad] with
// T = sum H_l W_l, hd_pad = hd rounded up to a multiple of 8 (pad lanes are zero), and one
// extra all-zero token per head at index T, which out-of-map corners read.
struct MsdaValue {
  int64_t batch = 0, heads = 0, head_dim = 0, head_dim_padded = 0;
  std::vector<MsdaLevelShape> levels;
  std::vector<int64_t> level_start;  // token offset of each level
  Tensor data;
  int64_t tokens() const { return level_start.empty() ? 0 : level_start.back() + levels.back().h * levels.back().w; }
  int64_t head_stride() const { return (tokens() + 1) * head_dim_padded; }  // floats per head
};

// value [B, sum(HW), nH, hd] (float32/16, bfloat16) with the level shapes.
Result<MsdaValue> msda_prepare_from_tokens(const Tensor& value, const std::vector<MsdaLevelShape>& levels);
// The same into an existing MsdaValue, reusing its storage when the geometry is unchanged
// (a runtime preparing every frame allocates once); threaded over (batch, head).
Status msda_prepare_from_tokens(const Tensor& value, const std::vector<MsdaLevelShape>& levels, MsdaValue* into, ThreadPool* pool = nullptr);
// per-level values [B*nH, hd, H_l, W_l]; `heads` splits the first dimension.
Result<MsdaValue> msda_prepare_from_levels(const std::vector<Tensor>& levels, int64_t heads);

struct MsdaOptions {
  MsdaMethod method = MsdaMethod::bilinear;
  KernelImpl impl = KernelImpl::fast;
  // Refuse non-finite attention weights (an invalid-input error naming the position).
  bool require_finite_weights = false;
};

// Validates the shapes of locations and weights against the value and points (errors
// name the tensor and dimension), then samples. Output float32 [B, Lq, nH*hd].
Result<Tensor> msda(const MsdaValue& value, const Tensor& locations, const Tensor& weights, const std::vector<int64_t>& points,
                    const MsdaOptions& opt, ThreadPool* pool = nullptr);

// Raw kernels: dense float32 locations/weights, shapes validated by msda().
struct MsdaProblem {
  const MsdaValue* value = nullptr;
  const float* locations = nullptr;  // [B, Lq, nH, P, 2]
  const float* weights = nullptr;    // [B, Lq, nH, P]
  float* out = nullptr;              // [B, Lq, nH*hd]
  int64_t queries = 0;
  std::vector<int64_t> point_level;  // level of each of the P points
  int64_t total_points = 0;
};
void msda_reference_f32(const MsdaProblem& p, MsdaMethod method);
void msda_fast_f32(const MsdaProblem& p, MsdaMethod method, ThreadPool& pool);

}  // namespace rkd
