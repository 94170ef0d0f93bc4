// GridSample entry point: validation at the trust boundary, dtype widening, dispatch.
#include <string>

#include "kernels/grid_sample.h"

namespace rkd {

Result<GridSampleMode> parse_grid_sample_mode(const std::string& s) {
  if (s == "bilinear" || s == "linear") return GridSampleMode::bilinear;
  if (s == "nearest") return GridSampleMode::nearest;
  if (s == "bicubic" || s == "cubic") return GridSampleMode::bicubic;
  return invalid("mode: '" + s + "' is not one of bilinear (linear), nearest, bicubic (cubic)");
}

Result<GridSamplePadding> parse_grid_sample_padding(const std::string& s) {
  if (s == "zeros") return GridSamplePadding::zeros;
  if (s == "border") return GridSamplePadding::border;
  if (s == "reflection") return GridSamplePadding::reflection;
  return invalid("padding: '" + s + "' is not one of zeros, border, reflection");
}

Result<GridSampleConvention> parse_grid_sample_convention(const std::string& s) {
  if (s == "pytorch") return GridSampleConvention::pytorch;
  if (s == "onnx") return GridSampleConvention::onnx;
  return invalid("convention: '" + s + "' is not one of pytorch, onnx");
}

const char* to_string(GridSampleMode m) {
  switch (m) {
    case GridSampleMode::bilinear: return "bilinear";
    case GridSampleMode::nearest: return "nearest";
    case GridSampleMode::bicubic: return "bicubic";
  }
  return "?";
}
const char* to_string(GridSamplePadding p) {
  switch (p) {
    case GridSamplePadding::zeros: return "zeros";
    case GridSamplePadding::border: return "border";
    case GridSamplePadding::reflection: return "reflection";
  }
  return "?";
}
const char* to_string(GridSampleConvention c) { return c == GridSampleConvention::pytorch ? "pytorch" : "onnx"; }

Result<Shape> grid_sample_output_shape(const Shape& in, const Shape& grid, const GridSampleOptions& opt) {
  const auto r = static_cast<int>(in.size());
  if (r != 4 && r != 5) {
    return invalid("input: rank must be 4 (N, C, H, W) or 5 (N, C, D, H, W), got " + std::to_string(r) + " " + shape_to_string(in));
  }
  if (static_cast<int>(grid.size()) != r) {
    return invalid("grid: rank must equal the input's (" + std::to_string(r) + "), got " + std::to_string(grid.size()) + " " + shape_to_string(grid));
  }
  const int sr = r - 2;
  if (grid[static_cast<size_t>(r - 1)] != sr) {
    return invalid("grid: dimension " + std::to_string(r - 1) + " must be " + std::to_string(sr) + " for a " + std::to_string(r) + "-D input, got " +
                   std::to_string(grid[static_cast<size_t>(r - 1)]));
  }
  if (grid[0] != in[0]) {
    return invalid("grid: dimension 0 (batch) is " + std::to_string(grid[0]) + " but input's is " + std::to_string(in[0]));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] <= 0) return invalid("input: dimension " + std::to_string(i) + " is " + std::to_string(in[i]) + " (empty tensor)");
  }
  for (size_t i = 0; i + 1 < grid.size(); ++i) {
    if (grid[i] <= 0) return invalid("grid: dimension " + std::to_string(i) + " is " + std::to_string(grid[i]) + " (empty tensor)");
  }
  if (opt.mode == GridSampleMode::bicubic && sr != 2) {
    return unsupported("mode bicubic is defined for 4-D input only (as in PyTorch and ONNX Runtime)");
  }
  Shape out = {in[0], in[1]};
  for (int i = 1; i < r - 1; ++i) out.push_back(grid[static_cast<size_t>(i)]);
  RKD_TRY(checked_shape_bytes(out, DType::f32, "output"));
  return out;
}

Result<Tensor> grid_sample(const Tensor& input, const Tensor& grid, const GridSampleOptions& opt, KernelImpl impl, ThreadPool* pool) {
  if (!input.defined()) return invalid("input: tensor is missing");
  if (!grid.defined()) return invalid("grid: tensor is missing");
  if (!dtype_is_float(input.dtype())) {
    return unsupported(std::string("input: dtype ") + dtype_name(input.dtype()) + " (GridSample takes float32, float16 or bfloat16)");
  }
  if (!dtype_is_float(grid.dtype())) {
    return unsupported(std::string("grid: dtype ") + dtype_name(grid.dtype()) + " (GridSample takes float32, float16 or bfloat16)");
  }
  RKD_ASSIGN(Shape out_shape, grid_sample_output_shape(input.shape(), grid.shape(), opt));
  const int64_t max_index = (int64_t{1} << 31) - 1;
  for (int i = 2; i < input.rank(); ++i) {
    if (input.dim(i) > max_index) return unsupported("input: dimension " + std::to_string(i) + " exceeds 2^31-1");
  }
  RKD_ASSIGN(Tensor in32, input.to(DType::f32));
  RKD_ASSIGN(Tensor g32, grid.to(DType::f32));
  in32 = in32.contiguous();
  g32 = g32.contiguous();
  RKD_ASSIGN(Tensor out, Tensor::uninitialized(DType::f32, out_shape));

  GridSampleGeometry geo;
  geo.spatial_rank = input.rank() - 2;
  geo.n = input.dim(0);
  geo.c = input.dim(1);
  const int off = 3 - geo.spatial_rank;
  for (int i = 0; i < geo.spatial_rank; ++i) {
    geo.in[off + i] = input.dim(2 + i);
    geo.out[off + i] = grid.dim(1 + i);
  }
  if (impl == KernelImpl::reference) {
    grid_sample_reference_f32(in32.data<float>(), g32.data<float>(), out.data<float>(), geo, opt);
  } else {
    grid_sample_fast_f32(in32.data<float>(), g32.data<float>(), out.data<float>(), geo, opt, pool ? *pool : ThreadPool::global());
  }
  if (input.dtype() != DType::f32) return out.to(input.dtype());
  return out;
}

}  // namespace rkd
