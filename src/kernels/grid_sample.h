// GridSample: sampling a feature map at continuous coordinates.
//
// Shapes. 2-D: input (N, C, H, W), grid (N, Ho, Wo, 2) -> output (N, C, Ho, Wo).
//         3-D: input (N, C, D, H, W), grid (N, Do, Ho, Wo, 3) -> output (N, C, Do, Ho, Wo).
// The grid's last axis holds (x, y[, z]) in [-1, 1]: x indexes W, y indexes H, z indexes D.
// Storage may be float32, float16 or bfloat16 (input and grid independently); every value
// is widened to float32 and all arithmetic is float32; the output has the input's dtype
// and is rounded to it (nearest, ties to even). Any sizes >= 1 are accepted, including
// 1-pixel maps and outputs larger than the input. Empty tensors (a zero dimension) are
// refused as invalid.
//
// ---------------------------------------------------------------------------------------
// Semantics (one axis of size S shown; x, y and z are treated alike)
//
// 1. Unnormalise g in [-1, 1] to a pixel coordinate p, where pixel i covers [i-0.5, i+0.5]:
//      align_corners = 1:  p = (g + 1) * ((S - 1) / 2)      -1 -> centre of pixel 0,
//                                                             +1 -> centre of pixel S-1
//      align_corners = 0:  p = (g + 1) * (S / 2) - 0.5      -1 -> -0.5, the outer edge of
//                                                             pixel 0 (not its centre)
//    PyTorch convention: the align_corners=0 form is one fused multiply-add,
//    fma(g + 1, S/2, -0.5): Debian's PyTorch 1.13 CPU kernel rounds it once (measured:
//    100% agreement with the fused form, 97% with separate rounding).
//    3-D (PyTorch's scalar kernel): p = ((g + 1) * S - 1) / 2 and (g + 1) / 2 * (S - 1),
//    every operation rounded (measured: 100% agreement; the fused form agrees on 86%).
//    ONNX convention: p = ((g + 1) * S - 1) / 2, each operation rounded, as in the ONNX
//    reference implementation and ONNX Runtime's GsDenormalize.
//
// 2. Padding of the continuous coordinate (PyTorch applies it before interpolation):
//      zeros:      p unchanged; every neighbour that falls outside [0, S-1] reads 0.
//                  The bounds check is per neighbour, so a point at p = -0.25 still
//                  receives 0.75 of pixel 0.
//      border:     p = clip(p, 0, S-1). NaN becomes 0 (the clamp is max(p, 0) with the
//                  comparison false for NaN), +inf -> S-1, -inf -> 0.
//      reflection: p is reflected about the two bounds until it lies between them, then
//                  clipped to [0, S-1]. Bounds: [0, S-1] for align_corners = 1 and
//                  [-0.5, S-0.5] for align_corners = 0. Example (ONNX spec, S = 2,
//                  align_corners = 0): -3.5 reflects to 1.5 and then to 0.5.
//                  Arithmetic (2-D PyTorch): with L = low bound, span = high - low,
//                  a = |p - L|, k = trunc(a / (2 span)), e = fma(-k, 2 span, a) (one rounding),
//                  p' = min(e, 2 span - e) + L. For S = 1 with align_corners = 1 the span
//                  is 0 and p' = 0. NaN and +-inf give NaN here, which the final clip
//                  turns into 0.
//
// 3. Interpolation:
//      bilinear: x0 = floor(px), y0 = floor(py), wx = px - x0, wy = py - y0;
//                weights nw = (1-wy)(1-wx), ne = (1-wy) wx, sw = wy (1-wx), se = wy wx
//                (each a single rounded product of the two rounded factors);
//                out = nw*v(x0,y0) + ne*v(x0+1,y0) + sw*v(x0,y0+1) + se*v(x0+1,y0+1),
//                summed in that order. PyTorch convention: the sum is the chain
//                fma(se, v_se, fma(sw, v_sw, fma(ne, v_ne, nw * v_nw))) (measured on
//                Debian's PyTorch: 100% agreement). 3-D trilinear: weights
//                (x1-x)(y1-y)(z1-z) etc., corners in the order tnw, tne, tsw, tse, bnw,
//                bne, bsw, bse, each added as acc + v*w with separate roundings and skipped
//                when outside (PyTorch's scalar kernel). An out-of-range neighbour (zeros)
//                contributes 0 * weight - a term, not a skip - so NaN weights propagate.
//      nearest:  round p half to even (std::nearbyint), then read one pixel (0 when
//                outside for zeros). 3-D PyTorch rounds half away from zero (std::round),
//                unlike its own 2-D kernel; the ONNX convention is half to even always.
//      bicubic:  2-D only. x0 = floor(px), t = px - x0; taps x0-1 .. x0+2 with the cubic
//                convolution weights of A = -0.75:
//                  w0 = ((A(t+1) - 5A)(t+1) + 8A)(t+1) - 4A,  w1 = ((A+2)t - (A+3)) t t + 1,
//                  w2 = ((A+2)(1-t) - (A+3))(1-t)(1-t) + 1,  w3 = ((A(2-t) - 5A)(2-t) + 8A)(2-t) - 4A.
//                The coordinate is NOT padded before the taps; instead padding is applied
//                to each tap's integer coordinate (zeros: 0 outside; border: clip;
//                reflection: reflect then clip). Rows are interpolated along x first,
//                then the four row results along y.
//
// 4. Non-finite coordinates (PyTorch convention, 2-D, measured):
//      zeros + bilinear/bicubic: NaN or +-inf give NaN (the weights are NaN); far but
//      finite coordinates give 0. zeros + nearest: 0. border/reflection + bilinear or
//      nearest: NaN -> coordinate 0, +inf -> S-1 (border) or 0 (reflection), -inf -> 0.
//      bicubic with any padding: NaN and +-inf give NaN (the weights are NaN).
//    3-D (PyTorch's scalar kernel): after padding, a coordinate that is NaN, infinite or
//      outside the int32 range is replaced by -100 (so it reads as out of bounds);
//      border/reflection clip with std::min(S-1, std::max(p, 0)), which maps NaN to S-1.
//      So 3-D zeros + NaN gives 0, not NaN.
//
// 5. Where ONNX Runtime / the ONNX reference differ from PyTorch (convention = onnx):
//      - unnormalisation order (step 1) and no fused multiply-add anywhere;
//      - nearest: ORT rounds first, then applies padding to the rounded integer
//        coordinate (border: clamp; reflection: reflect the integer); PyTorch pads the
//        continuous coordinate, then rounds. Near the edges these select different
//        pixels, e.g. S = 4, align_corners = 0, reflection, p = 4.5: PyTorch reflects to
//        2.5 and rounds to pixel 2; ORT rounds to 4 and reflects to pixel 3 (tested);
//      - bilinear sums rows first: out = wy0 (wx0 v00 + wx1 v01) + wy1 (wx0 v10 + wx1 v11);
//      - border/reflection bilinear in ORT pad each integer neighbour instead of the
//        coordinate (same value except in rounding);
//      - bicubic identical in structure (taps padded individually).
// ---------------------------------------------------------------------------------------
#pragma once

#include <string>

#include "core/result.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace rkd {

enum class GridSampleMode { bilinear, nearest, bicubic };
enum class GridSamplePadding { zeros, border, reflection };
enum class GridSampleConvention { pytorch, onnx };

struct GridSampleOptions {
  GridSampleMode mode = GridSampleMode::bilinear;
  GridSamplePadding padding = GridSamplePadding::zeros;
  bool align_corners = false;
  GridSampleConvention convention = GridSampleConvention::pytorch;
};

// Names used on the command line and in ONNX: "bilinear"/"linear", "nearest",
// "bicubic"/"cubic"; "zeros", "border", "reflection"; "pytorch", "onnx".
Result<GridSampleMode> parse_grid_sample_mode(const std::string& s);
Result<GridSamplePadding> parse_grid_sample_padding(const std::string& s);
Result<GridSampleConvention> parse_grid_sample_convention(const std::string& s);
const char* to_string(GridSampleMode m);
const char* to_string(GridSamplePadding p);
const char* to_string(GridSampleConvention c);

enum class KernelImpl { reference, fast };

// Validates shapes, dtypes and options (errors name "input" or "grid" and the
// dimension), then samples. `pool` defaults to the global pool (fast only).
Result<Tensor> grid_sample(const Tensor& input, const Tensor& grid, const GridSampleOptions& opt, KernelImpl impl = KernelImpl::fast,
                           ThreadPool* pool = nullptr);

// Shape checks alone; returns the output shape.
Result<Shape> grid_sample_output_shape(const Shape& input, const Shape& grid, const GridSampleOptions& opt);

// Raw kernels on dense float32 data, shapes already validated.
// dims = {N, C, [D,] H, W}, out_dims = {[Do,] Ho, Wo}; spatial_rank = 2 or 3.
struct GridSampleGeometry {
  int spatial_rank = 2;
  int64_t n = 0, c = 0;
  int64_t in[3] = {1, 1, 1};   // D, H, W (D = 1 in 2-D)
  int64_t out[3] = {1, 1, 1};  // Do, Ho, Wo
  int64_t out_points() const { return out[0] * out[1] * out[2]; }
  int64_t in_points() const { return in[0] * in[1] * in[2]; }
};
void grid_sample_reference_f32(const float* input, const float* grid, float* output, const GridSampleGeometry& g, const GridSampleOptions& opt);
void grid_sample_fast_f32(const float* input, const float* grid, float* output, const GridSampleGeometry& g, const GridSampleOptions& opt,
                          ThreadPool& pool);

}  // namespace rkd
