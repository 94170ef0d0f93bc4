// Tensor-level CPU kernels for the ONNX operators the executor runs (float32 graphs plus
// the integer/bool tensors that shape arithmetic, indices and masks need).
//
// Contract (all functions):
//  - Semantics are ONNX's (opset 11-22) for the operator of the same name; where ONNX
//    leaves freedom the choice is written next to the function.
//  - Inputs may be any view (strided, broadcast with stride 0); outputs are dense,
//    preallocated by the caller with exactly the shape and dtype the operator defines
//    (src/ir/passes/shape_inference.cc computes them). Kernels check what would make them read
//    or write out of bounds (index values, dtype support) and return an Error naming the
//    operand; shape agreement is the caller's job and only asserted.
//  - Arithmetic: float32 throughout, no fused multiply-add (the build uses
//    -ffp-contract=off); reductions accumulate in float32 in index order unless stated.
//    Convolution and matrix products run on oneDNN (its own summation order: results
//    agree with a double reference within the tolerance of tests/common/tolerance.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"

namespace rkd::ops {

// ---- copies and views ----
// dst (dense) = src, element by element; src may be strided or broadcast (stride 0).
void copy_into(const Tensor& src, Tensor& dst);
// A view of t broadcast (numpy rules) to `shape`: size-1 dims get stride 0.
Tensor broadcast_view(const Tensor& t, const Shape& shape);

// ---- elementwise ----
enum class Binary {
  add,
  sub,
  mul,
  div,
  pow,
  min,
  max,
  mod,
  fmod,
  prelu,
  equal,
  less,
  greater,
  less_equal,
  greater_equal,  // -> bool
  logical_and,
  logical_or,
  logical_xor,  // bool -> bool
};
// float32, int32 and int64 operands of one dtype (bool for the logical ops); integer
// div truncates toward zero and refuses a zero divisor (an Error naming `what`); integer
// mod follows the divisor's sign (ONNX fmod=0), fmod the dividend's.
Status binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out, const std::string& what);

enum class Unary {
  relu,
  leaky_relu,
  sigmoid,
  hard_sigmoid,
  hard_swish,
  tanh,
  erf,
  gelu_erf,
  gelu_tanh,
  sqrt,
  exp,
  log,
  abs,
  neg,
  reciprocal,
  clip,
  floor,
  ceil,
  round,
  sign,
  sin,
  cos,
  softplus,
  mish,  // x tanh(softplus(x))
  elu,
  selu,
  logical_not,
  identity,
};
struct UnaryParams {
  float alpha = 0.f, beta = 0.f, gamma = 0.f;  // LeakyRelu/Elu alpha; HardSigmoid alpha, beta; Selu alpha, gamma
  float lo = -INFINITY, hi = INFINITY;         // Clip bounds
};
// float32 for the math; abs/neg/clip/sign/identity also int32/int64; not: bool.
Status unary(Unary op, const Tensor& x, Tensor& out, const UnaryParams& p = {});

// IsNaN / IsInf of float32 x into a bool tensor of x's shape; IsInf counts -inf when
// `negative` and +inf when `positive` (ONNX's detect_negative / detect_positive).
Status is_nan(const Tensor& x, Tensor& out);
Status is_inf(const Tensor& x, bool negative, bool positive, Tensor& out);

Status where(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out);
// Any dtype to any dtype: float -> int truncates toward zero (out-of-range values are
// undefined in ONNX; here saturated), -> bool is x != 0, float -> f16/bf16 rounds to
// nearest even.
Status cast(const Tensor& x, Tensor& out);

// ---- normalisation and activations over an axis ----
// Softmax / LogSoftmax over one axis (opset >= 13): max-subtracted, sum in float32.
void softmax(const Tensor& x, int axis, bool log, Tensor& out);
// LayerNormalization over axes [axis, rank): mean and variance in float32 (two passes);
// mean/inv_std outputs optional (nullptr).
void layer_norm(const Tensor& x, const Tensor& scale, const Tensor* bias, int axis, float eps, Tensor& out, Tensor* mean, Tensor* inv_std);
// InstanceNormalization of x [N, C, D1, ...]: per (n, c), y = scale[c] (x - mean) / sqrt(var +
// eps) + bias[c] with the plane's mean and (biased) variance, both summed in double, the
// per-element step in float32. A plane of one element normalises to bias[c].
void instance_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, float eps, Tensor& out);
// Inference BatchNormalization: y = (x - mean) / sqrt(var + eps) * scale + bias, channel axis 1.
void batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean, const Tensor& var, float eps, Tensor& out);

// ---- reductions ----
enum class Reduce { sum, mean, max, min, prod, l2, sum_square };
// reduce_axis[i]: whether axis i is reduced; out has the keepdims or squeezed shape (same
// element order). float32, and int64 for sum/max/min/prod.
Status reduce(Reduce op, const Tensor& x, const std::vector<bool>& reduce_axis, Tensor& out);
// ArgMax/ArgMin: first occurrence unless select_last; NaN counts as the largest (as numpy).
void arg_reduce(const Tensor& x, int axis, bool max, bool select_last, Tensor& out);
// TopK: ties ordered by lower index first (ONNX); sorted output always (sorted=0 allows any order).
void topk(const Tensor& x, int64_t k, int axis, bool largest, Tensor& values, Tensor& indices);
Status cumsum(const Tensor& x, int axis, bool exclusive, bool reverse, Tensor& out);

// ---- layout ----
void concat(const std::vector<const Tensor*>& inputs, int axis, Tensor& out);
// Gather along axis; negative indices count from the end; an index out of [-d, d) is an Error.
Status gather(const Tensor& data, const Tensor& indices, int axis, Tensor& out);
Status gather_elements(const Tensor& data, const Tensor& indices, int axis, Tensor& out);
// GatherND (ONNX, with batch_dims); indices int32 or int64, negative ones count from the end.
Status gather_nd(const Tensor& data, const Tensor& indices, int batch_dims, Tensor& out);
// ScatterND / ScatterElements with reduction none|add|mul|max|min.
Status scatter_nd(const Tensor& data, const Tensor& indices, const Tensor& updates, const std::string& reduction, Tensor& out);
Status scatter_elements(const Tensor& data, const Tensor& indices, const Tensor& updates, int axis, const std::string& reduction, Tensor& out);
void tile(const Tensor& x, Tensor& out);
enum class PadMode { constant, reflect, edge, wrap };
// pads: begin values for every axis then end values (negative = crop).
Status pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value, Tensor& out);
// Slice with per-axis (start, step) already clamped; out's shape gives the counts.
void slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& step, Tensor& out);
void transpose(const Tensor& x, const std::vector<int64_t>& perm, Tensor& out);
void range(double start, double delta, Tensor& out);
void fill(Tensor& out, const Tensor& scalar);  // ConstantOfShape

// ---- spatial ----
struct PoolParams {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  bool count_include_pad = false;
};
// float32; int8 and uint8 too for 4-D input without dilation (the caller checks).
void max_pool(const Tensor& x, const PoolParams& p, Tensor& out);
void average_pool(const Tensor& x, const PoolParams& p, Tensor& out);
void global_pool(const Tensor& x, bool max, Tensor& out);

struct ResizeParams {
  enum class Mode { nearest, linear, cubic } mode = Mode::nearest;
  // half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize
  std::string coordinate_transformation = "half_pixel";
  // round_prefer_floor, round_prefer_ceil, floor, ceil
  std::string nearest_mode = "round_prefer_floor";
  float cubic_coeff_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation_value = 0.f;
  std::vector<float> scales;  // per axis (output/input when given by sizes)
  std::vector<float> roi;     // tf_crop_and_resize: starts then ends, per axis
};
// Nearest over any rank and of any element type (a copy); linear and cubic of float32 over any
// set of axes (separable).
Status resize(const Tensor& x, const ResizeParams& p, Tensor& out);
// The input index that each of out_len output indices copies along `axis` in mode nearest
// (p.scales set; -1 where tf_crop_and_resize extrapolates): resize()'s own taps.
std::vector<int64_t> resize_nearest_sources(const ResizeParams& p, size_t axis, int64_t in_len, int64_t out_len);

// ---- products (oneDNN) ----
struct ConvParams {
  std::vector<int64_t> strides, dilations, pads;  // pads: begins then ends; dilations as ONNX (1 = dense)
  int64_t group = 1;
  std::vector<int64_t> output_padding;  // ConvTranspose
};
// A prepared convolution: the primitive and the weights in oneDNN's preferred layout
// are made once (weights are constant in detectors) and reused by every run().
class ConvPrimitive {
 public:
  virtual ~ConvPrimitive() = default;
  // x: [N, C, spatial...] float32 dense; out preallocated.
  virtual Status run(const Tensor& x, Tensor& out) = 0;
  virtual std::string implementation() const = 0;  // oneDNN's implementation name
};
// bias may be nullptr. transposed: ConvTranspose (weights [C, M/group, k...]).
// fused_activation: "" or "relu" or "silu" (x * sigmoid(x), applied after the bias).
// Engines: oneDNN, or XNNPACK (2-D, not transposed) where oneDNN has only its reference
// kernels for the shape on this CPU (arm64 without SVE: the boards' Cortex-A76/A55);
// automatic picks that way, the others force one (tests).
enum class ConvEngine { automatic, onednn, xnnpack };
Result<std::unique_ptr<ConvPrimitive>> make_conv(const Shape& x_shape, const Tensor& weights, const Tensor* bias, const ConvParams& p,
                                                 bool transposed, const Shape& out_shape, const std::string& fused_activation = "",
                                                 ConvEngine engine = ConvEngine::automatic);
// int8 convolution accumulators: acc[n][m][oy][ox] = sum over the window of
// (x - x_zero_point) * w, padding contributing 0 (it holds the zero point), for int8 or uint8 x
// and symmetric int8 weights (zero point 0) [M, C/group, KH, KW]; 2-D, any groups, strides,
// dilations and padding. Exact (the int32 sums of the definition) on every CPU, from one of two
// engines (Int8Engine):
//  - onednn: oneDNN's u8 x s8 -> s32 convolution on the input offset to uint8 and padded with
//    its zero point, zp * sum(w[m]) subtracted. Offered only where oneDNN runs VNNI instructions
//    (avx512_core_vnni, avx2_vnni or newer; onednn_int8_exact()): without them its u8 x s8
//    products go through a saturating 16-bit sum (vpmaddubsw), which changes results.
//  - highway: rkdeploy's kernels (kernels/tensor_ops_int8.cc): operands widened to int16, pairs
//    of products summed into int32 (vpmaddwd on x86, vmlal on arm64), on every Highway target.
// automatic picks onednn where it is exact and highway elsewhere.
enum class Int8Engine { automatic, onednn, highway };
class QConvAccumulator {
 public:
  virtual ~QConvAccumulator() = default;
  // x: [N, C, H, W] int8/uint8 dense; acc: int32 [N, OH, OW, M] (channels last).
  virtual Status run(const Tensor& x, Tensor& acc) = 0;
  // For callers that lay out the input themselves: the padded channels-last buffer the
  // primitive reads, uint8 [N, H + pad_top + pad_bottom, W + pad_left + pad_right, C] (int8
  // inputs stored + 128), whose padding already holds the zero point; write the interior at
  // row offset pad_top and column offset pad_left, then run_filled() gives what run() gives.
  virtual uint8_t* padded_input() = 0;
  virtual Status run_filled(Tensor& acc) = 0;
  // run_filled() without the zero-point compensation: acc = sum over taps of the padded
  // buffer's uint8 bytes times the weights, i.e. run_filled()'s value + zp_u8 * sum(w) per
  // kernel (zp_u8 = x_zero_point, + 128 for int8 inputs). Saves a pass over acc for callers
  // that fold the compensation into their own epilogue.
  virtual Status run_filled_raw(Tensor& acc) = 0;
  // run() without the compensation: fills the buffer from x, then run_filled_raw(); callers
  // subtract compensation()[m] = zp_u8 * sum(w[m]) themselves (e.g. folded into the bias).
  // x_channels_last: x is [N, H, W, C] (the int8-channels-last pass's layout) instead of
  // [N, C, H, W]; the geometry stays the one the accumulator was made for.
  virtual Status run_raw(const Tensor& x, Tensor& acc, bool x_channels_last = false) = 0;
  virtual const std::vector<int32_t>& compensation() const = 0;
  virtual std::string implementation() const = 0;
};
// Whether oneDNN's int8 products are exact on this CPU under the ISA ceiling (VNNI).
bool onednn_int8_exact();
// What each run-time dispatcher chose under the ISA ceiling (core/isa.h), in this order:
// isa_ceiling (RKD_MAX_ISA), highway_target (Highway's target name, e.g. AVX3, AVX2, SSE4, NEON),
// onednn_isa (oneDNN's effective ISA, e.g. avx512_core_vnni, avx2), int8_products (onednn_vnni,
// or highway_<target>: the engine Int8Engine::automatic picks) and vectorised_loops
// (the RKD_ISA_CLONES level: x86-64-v4, x86-64-v3, baseline).
std::vector<std::pair<std::string, std::string>> dispatch_report();
// The same for a matrix product with constant symmetric int8 B [K, N]: acc [rows, N] =
// sum_k (a[r][k] - a_zero_point) * b[k][n], a int8 or uint8 [rows, K] (leading dims folded).
class QMatMulAccumulator {
 public:
  virtual ~QMatMulAccumulator() = default;
  virtual Status run(const Tensor& a, Tensor& acc) = 0;
};
// Errors: unsupported for the onednn engine where it is not exact, for shapes outside the
// contract and for more than 65793 taps per sum (int32 could overflow).
Result<std::unique_ptr<QMatMulAccumulator>> make_qmatmul_accumulator(int64_t rows, DType a_type, int32_t a_zero_point, const Tensor& b,
                                                                     Int8Engine engine = Int8Engine::automatic);
Result<std::unique_ptr<QConvAccumulator>> make_qconv_accumulator(const Shape& x_shape, DType x_type, int32_t x_zero_point, const Tensor& weights,
                                                                 const ConvParams& p, const Shape& out_shape,
                                                                 Int8Engine engine = Int8Engine::automatic);
// numpy matmul (broadcast batch dims, 1-D operands promoted); float32.
Status matmul(const Tensor& a, const Tensor& b, Tensor& out);
// Gemm: out = alpha * op(A) op(B) + beta * C (C broadcast to [M, N], may be nullptr).
Status gemm(const Tensor& a, const Tensor& b, const Tensor* c, bool trans_a, bool trans_b, float alpha, float beta, Tensor& out);
// Einsum, the equation already parsed (ir::parse_einsum): one label string per operand and
// the output's ("ij", "jk" -> "ik"); contraction in double.
Status einsum(const std::vector<std::string>& operand_labels, const std::string& output_labels, const std::vector<const Tensor*>& inputs,
              Tensor& out);

// Sets the thread count of the oneDNN/OpenMP side (the kernels' own pool is core's global pool).
void set_math_threads(int threads);
// fn(i) for every i in [0, n) on those OpenMP threads: for loops that run between oneDNN
// calls, which on core's pool would compete with OpenMP's spinning workers for the same
// cores (tensor_ops_parallel.h). Serial when n < 2, one thread is set, or `work` (bytes or
// values the loop touches) is below what pays for waking the other threads: an OpenMP
// fork/join costs microseconds, and a model's hundreds of small loops paid it at two
// threads until they ran slower than at one.
void math_parallel_for(int64_t n, int64_t work, const std::function<void(int64_t)>& fn);

}  // namespace rkd::ops
