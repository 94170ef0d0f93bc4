// TensorFlow op -> ONNX-form IR op conversions (contract in tf_convert.h). Where the two
// definitions differ the conversion says how it keeps TensorFlow's semantics.
#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

#include "frontends/tf/tf_convert.h"

namespace rkd::tf {

namespace {

Error bad(const TfNode& n, const std::string& msg) { return invalid("node '" + n.name + "' (" + n.op + "): " + msg); }
Error unsup(const TfNode& n, const std::string& msg) { return unsupported("node '" + n.name + "' (" + n.op + "): " + msg); }

std::string out_name(const TfNode& n, size_t k, bool nchw) { return (k == 0 ? n.name : n.name + ":" + std::to_string(k)) + (nchw ? "#nchw" : ""); }

// NHWC axis -> NCHW axis of a 4-D tensor.
int64_t nchw_axis(int64_t a) {
  static const int64_t kMap[4] = {0, 2, 3, 1};
  return kMap[a];
}

Result<int64_t> norm_axis(const TfNode& n, int64_t a, int rank) {
  if (rank < 0) return unsup(n, "the input's rank is unknown");
  if (a < -rank || a >= rank) return bad(n, "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return a < 0 ? a + rank : a;
}

int64_t onnx_code(DType t) {
  switch (t) {
    case DType::f32: return 1;
    case DType::u8: return 2;
    case DType::i8: return 3;
    case DType::i16: return 5;
    case DType::i32: return 6;
    case DType::i64: return 7;
    case DType::b8: return 9;
    case DType::f16: return 10;
    case DType::bf16: return 16;
  }
  return 0;
}

// A constant of rank < 4 broadcast against NHWC operands, as the NCHW operand that
// broadcasts the same way (leading 1s added, then permuted).
Tensor const_to_nchw(const Tensor& t) {
  Shape s = t.shape();
  while (s.size() < 4) s.insert(s.begin(), 1);
  Tensor r = t.contiguous().reshape(s).value();
  return r.permute({0, 3, 1, 2}).value().contiguous();
}

const std::set<std::string> kConv = {"Conv2D", "_FusedConv2D", "DepthwiseConv2dNative", "FusedDepthwiseConv2dNative"};
const std::set<std::string> kPool = {"MaxPool", "AvgPool"};
const std::set<std::string> kResize = {"ResizeBilinear", "ResizeNearestNeighbor"};
const std::map<std::string, std::string> kUnary = {{"Relu", "Relu"},
                                                   {"Sigmoid", "Sigmoid"},
                                                   {"Tanh", "Tanh"},
                                                   {"Elu", "Elu"},
                                                   {"Selu", "Selu"},
                                                   {"Sqrt", "Sqrt"},
                                                   {"Exp", "Exp"},
                                                   {"Log", "Log"},
                                                   {"Abs", "Abs"},
                                                   {"Neg", "Neg"},
                                                   {"Floor", "Floor"},
                                                   {"Ceil", "Ceil"},
                                                   {"Round", "Round"},
                                                   {"Softplus", "Softplus"},
                                                   {"Reciprocal", "Reciprocal"},
                                                   {"Sin", "Sin"},
                                                   {"Cos", "Cos"},
                                                   {"Erf", "Erf"},
                                                   {"Sign", "Sign"},
                                                   {"LeakyRelu", "LeakyRelu"},
                                                   {"Relu6", "Clip"},
                                                   {"Rsqrt", "Sqrt"},
                                                   {"Square", "Mul"},
                                                   {"Cast", "Cast"},
                                                   {"LogicalNot", "Not"},
                                                   {"HardSwish", "HardSwish"}};
const std::set<std::string> kAlias = {"Identity", "StopGradient", "Snapshot"};
const std::map<std::string, std::string> kBinary = {{"Add", "Add"},
                                                    {"AddV2", "Add"},
                                                    {"BiasAdd", "Add"},
                                                    {"Sub", "Sub"},
                                                    {"Mul", "Mul"},
                                                    {"RealDiv", "Div"},
                                                    {"Div", "Div"},
                                                    {"Maximum", "Max"},
                                                    {"Minimum", "Min"},
                                                    {"Pow", "Pow"},
                                                    {"Equal", "Equal"},
                                                    {"Greater", "Greater"},
                                                    {"GreaterEqual", "GreaterOrEqual"},
                                                    {"Less", "Less"},
                                                    {"LessEqual", "LessOrEqual"},
                                                    {"LogicalAnd", "And"},
                                                    {"LogicalOr", "Or"},
                                                    {"SquaredDifference", "Sub"},
                                                    {"FloorDiv", "Div"},
                                                    {"FloorMod", "Mod"}};
const std::map<std::string, std::string> kReduce = {
    {"Mean", "ReduceMean"}, {"Sum", "ReduceSum"}, {"Max", "ReduceMax"}, {"Min", "ReduceMin"}, {"Prod", "ReduceProd"}};
const std::set<std::string> kShape = {"Reshape", "Transpose", "ExpandDims", "Squeeze", "Pack", "Unpack", "SplitV", "Split", "Tile", "Shape"};
const std::set<std::string> kIndex = {"GatherV2", "GatherNd", "TopKV2", "ArgMax", "ArgMin", "SparseToDense"};
const std::set<std::string> kMisc = {"Softmax", "MatMul", "BatchMatMulV2", "NoOp"};

}  // namespace

bool Converter::supports(const std::string& op) {
  return kConv.count(op) || op == "Conv2DBackpropInput" || kPool.count(op) || kResize.count(op) || kUnary.count(op) || kAlias.count(op) ||
         kBinary.count(op) || kReduce.count(op) || op == "ConcatV2" || op == "Pad" || op == "PadV2" || op == "MirrorPad" || op == "StridedSlice" ||
         op == "Slice" || kShape.count(op) || kIndex.count(op) || kMisc.count(op);
}

Status Converter::convert(const TfNode& n) {
  if (kConv.count(n.op)) return conv(n);
  if (n.op == "Conv2DBackpropInput") return conv_transpose(n);
  if (kPool.count(n.op)) return pool(n);
  if (kResize.count(n.op)) return resize(n);
  if (kAlias.count(n.op)) {
    RKD_ASSIGN(TfTensor * t, input(n, 0));
    tensors_[n.name] = *t;
    return {};
  }
  if (kUnary.count(n.op)) return unary(n);
  if (kBinary.count(n.op)) return binary(n);
  if (kReduce.count(n.op)) return reduce(n);
  if (n.op == "ConcatV2") return concat(n);
  if (n.op == "Pad" || n.op == "PadV2" || n.op == "MirrorPad") return pad(n);
  if (n.op == "StridedSlice" || n.op == "Slice") return strided_slice(n);
  if (kShape.count(n.op)) return shape_ops(n);
  if (kIndex.count(n.op)) return index_ops(n);
  if (kMisc.count(n.op)) return misc(n);
  return unsup(n, "no conversion");
}

// ---- layout-bound ops: NCHW in, NCHW out ----

namespace {
struct Window {
  std::vector<int64_t> strides, dilations;
  std::string padding;
  std::vector<int64_t> pads;  // EXPLICIT: ONNX order [top, left, bottom, right]
};

Result<Window> window_attrs(const TfNode& n) {
  Window w;
  RKD_ASSIGN(std::string fmt, attr_string(n, "data_format", "NHWC"));
  if (fmt != "NHWC") return unsup(n, "data_format " + fmt + " (TensorFlow.js graphs are NHWC)");
  RKD_ASSIGN(auto st, attr_ints(n, "strides"));
  RKD_ASSIGN(auto dl, attr_ints(n, "dilations"));
  if (st.empty()) st = {1, 1, 1, 1};
  if (dl.empty()) dl = {1, 1, 1, 1};
  if (st.size() != 4 || dl.size() != 4) return bad(n, "strides and dilations must have 4 entries");
  if (st[0] != 1 || st[3] != 1 || dl[0] != 1 || dl[3] != 1) return unsup(n, "strides or dilations over batch or channels");
  for (int64_t v : {st[1], st[2], dl[1], dl[2]}) {
    if (v < 1 || v > 4096) return bad(n, "strides and dilations must be in [1, 4096]");
  }
  w.strides = {st[1], st[2]};
  w.dilations = {dl[1], dl[2]};
  RKD_ASSIGN(w.padding, attr_string(n, "padding", "VALID"));
  if (w.padding == "EXPLICIT") {
    RKD_ASSIGN(auto ep, attr_ints(n, "explicit_paddings"));
    if (ep.size() != 8) return bad(n, "explicit_paddings must have 8 entries");
    if (ep[0] || ep[1] || ep[6] || ep[7]) return unsup(n, "explicit padding of batch or channels");
    w.pads = {ep[2], ep[4], ep[3], ep[5]};
    for (int64_t p : w.pads) {
      if (p < 0 || p > 4096) return bad(n, "explicit paddings must be in [0, 4096]");
    }
  } else if (w.padding != "SAME" && w.padding != "VALID") {
    return unsup(n, "padding '" + w.padding + "'");
  }
  return w;
}

void put_padding(const Window& w, std::map<std::string, ir::Attribute>& a) {
  if (w.padding == "EXPLICIT") a["pads"] = w.pads;
  else a["auto_pad"] = std::string(w.padding == "SAME" ? "SAME_UPPER" : "VALID");
}
}  // namespace

Result<ir::Value*> Converter::activation(const TfNode& n, const std::string& act, ir::Value* x, float leaky_alpha, const std::string& name) {
  if (act == "Relu") return emit1(n, "Relu", {x}, {}, name);
  if (act == "Relu6") {
    return emit1(n, "Clip", {x, float_scalar(n.name + "/zero", 0.f), float_scalar(n.name + "/six", 6.f)}, {}, name);
  }
  if (act == "LeakyRelu") return emit1(n, "LeakyRelu", {x}, {{"alpha", leaky_alpha}}, name);
  if (act == "Elu") return emit1(n, "Elu", {x}, {{"alpha", 1.0f}}, name);
  if (act == "Sigmoid") return emit1(n, "Sigmoid", {x}, {}, name);
  if (act == "Tanh") return emit1(n, "Tanh", {x}, {}, name);
  return unsup(n, "fused activation '" + act + "'");
}

Status Converter::conv(const TfNode& n) {
  const bool depthwise = n.op.find("Depthwise") != std::string::npos;
  const bool fused = n.op[0] == '_' || n.op.rfind("Fused", 0) == 0;
  RKD_ASSIGN(Window w, window_attrs(n));
  RKD_ASSIGN(Tensor f0, const_input(n, 1, "filter"));
  if (f0.rank() != 4 || f0.dtype() != DType::f32) return unsup(n, "the filter must be a 4-D float32 constant");
  const Tensor f = f0.contiguous();
  RKD_ASSIGN(ir::Value * x, in_nchw(n, 0));
  const int64_t kh = f.dim(0), kw = f.dim(1), fi = f.dim(2), fo = f.dim(3);
  const auto xs = x->shape;
  if (!xs || !(*xs)[1].is_static()) return unsup(n, "the input's channel count must be known");
  const int64_t cin = (*xs)[1].value;
  int64_t group = 1;
  Tensor wt;
  if (depthwise) {
    // [kh, kw, C, mult] -> [C*mult, 1, kh, kw], output channel c*mult + m.
    if (fi != cin) return bad(n, "the filter holds " + std::to_string(fi) + " input channels, the input " + std::to_string(cin));
    wt = Tensor::empty(DType::f32, {fi * fo, 1, kh, kw});
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t xx = 0; xx < kw; ++xx)
        for (int64_t c = 0; c < fi; ++c)
          for (int64_t m = 0; m < fo; ++m) wt.data<float>()[((c * fo + m) * kh + y) * kw + xx] = f.data<float>()[((y * kw + xx) * fi + c) * fo + m];
    group = fi;
  } else {
    // [kh, kw, Cin/group, Cout] -> [Cout, Cin/group, kh, kw].
    if (fi < 1 || cin % fi != 0) return bad(n, "input channels " + std::to_string(cin) + " are not a multiple of the filter's " + std::to_string(fi));
    group = cin / fi;
    wt = Tensor::empty(DType::f32, {fo, fi, kh, kw});
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t xx = 0; xx < kw; ++xx)
        for (int64_t c = 0; c < fi; ++c)
          for (int64_t o = 0; o < fo; ++o) wt.data<float>()[((o * fi + c) * kh + y) * kw + xx] = f.data<float>()[((y * kw + xx) * fi + c) * fo + o];
  }
  std::vector<std::string> fused_ops;
  if (fused) {
    RKD_ASSIGN(fused_ops, attr_strings(n, "fused_ops"));
  }
  std::vector<ir::Value*> ins = {x, g_.add_constant(n.name + "/weights_oihw", std::move(wt))};
  size_t arg = 2;
  size_t k = 0;
  const bool bias = !fused_ops.empty() && fused_ops[0] == "BiasAdd";
  if (bias) {
    RKD_ASSIGN(TfTensor * b, input(n, arg++));
    if (!b->nhwc || rank_of(b->nhwc) != 1) return unsup(n, "the bias must be a 1-D tensor");
    ins.push_back(b->nhwc);
    k = 1;
  }
  Attrs a = {{"kernel_shape", std::vector<int64_t>{kh, kw}}, {"strides", w.strides}, {"dilations", w.dilations}, {"group", group}};
  put_padding(w, a);
  const bool last = k == fused_ops.size();
  RKD_ASSIGN(ir::Value * y, emit1(n, "Conv", ins, a, last ? out_name(n, 0, true) : ""));
  if (k < fused_ops.size() && fused_ops[k] == "FusedBatchNorm") {
    // args: scale, offset, mean, variance (per channel), as BatchNormalization (folded later).
    std::vector<ir::Value*> bn = {y};
    for (int i = 0; i < 4; ++i) {
      RKD_ASSIGN(TfTensor * t, input(n, arg++));
      if (!t->nhwc) return bad(n, "batch-norm arguments must be 1-D tensors");
      bn.push_back(t->nhwc);
    }
    RKD_ASSIGN(float eps, attr_float(n, "epsilon", 1e-4f));
    ++k;
    RKD_ASSIGN(y, emit1(n, "BatchNormalization", bn, {{"epsilon", eps}}, k == fused_ops.size() ? out_name(n, 0, true) : ""));
  }
  if (k < fused_ops.size()) {
    if (k + 1 != fused_ops.size()) return unsup(n, "fused_ops after the activation");
    RKD_ASSIGN(float alpha, attr_float(n, "leakyrelu_alpha", 0.2f));
    RKD_ASSIGN(y, activation(n, fused_ops[k], y, alpha, out_name(n, 0, true)));
  }
  set_output(n, 0, y, true);
  return {};
}

Status Converter::conv_transpose(const TfNode& n) {
  // Conv2DBackpropInput(input_sizes, filter [kh, kw, out_c, in_c], out_backprop): the gradient of
  // a forward convolution whose input has `input_sizes`. ONNX ConvTranspose with the forward
  // convolution's pads and the output_padding that reaches input_sizes exactly.
  RKD_ASSIGN(Window w, window_attrs(n));
  RKD_ASSIGN(auto sizes, const_ints(n, 0, "input_sizes"));
  RKD_ASSIGN(Tensor f0, const_input(n, 1, "filter"));
  if (sizes.size() != 4 || f0.rank() != 4 || f0.dtype() != DType::f32) return unsup(n, "needs 4-D sizes and a 4-D float32 filter");
  const Tensor f = f0.contiguous();
  RKD_ASSIGN(ir::Value * x, in_nchw(n, 2));
  const int64_t kh = f.dim(0), kw = f.dim(1), oc = f.dim(2), ic = f.dim(3);
  if (sizes[3] != oc) return bad(n, "input_sizes has " + std::to_string(sizes[3]) + " channels, the filter " + std::to_string(oc));
  Tensor wt = Tensor::empty(DType::f32, {ic, oc, kh, kw});
  for (int64_t y = 0; y < kh; ++y)
    for (int64_t xx = 0; xx < kw; ++xx)
      for (int64_t o = 0; o < oc; ++o)
        for (int64_t i = 0; i < ic; ++i) wt.data<float>()[((i * oc + o) * kh + y) * kw + xx] = f.data<float>()[((y * kw + xx) * oc + o) * ic + i];
  std::vector<int64_t> pads(4, 0), out_pad(2, 0);
  for (int d = 0; d < 2; ++d) {
    const int64_t out = sizes[static_cast<size_t>(1 + d)], s = w.strides[static_cast<size_t>(d)];
    const int64_t keff = ((d ? kw : kh) - 1) * w.dilations[static_cast<size_t>(d)] + 1;
    int64_t in = 0, total = 0, before = 0;
    if (w.padding == "SAME") {
      in = (out + s - 1) / s;
      total = std::max<int64_t>((in - 1) * s + keff - out, 0);
      before = total / 2;
    } else if (w.padding == "VALID") {
      if (out < keff) return bad(n, "input_sizes smaller than the filter");
      in = (out - keff) / s + 1;
    } else {
      before = w.pads[static_cast<size_t>(d)];
      total = before + w.pads[static_cast<size_t>(d + 2)];
      if (out + total < keff) return bad(n, "input_sizes smaller than the filter");
      in = (out + total - keff) / s + 1;
    }
    const auto& xd = (*x->shape)[static_cast<size_t>(2 + d)];
    if (xd.is_static() && xd.value != in) {
      return bad(n, "out_backprop has " + std::to_string(xd.value) + " rows/cols where input_sizes implies " + std::to_string(in));
    }
    pads[static_cast<size_t>(d)] = before;
    pads[static_cast<size_t>(d + 2)] = total - before;
    out_pad[static_cast<size_t>(d)] = out - ((in - 1) * s + keff - total);
  }
  Attrs a = {{"kernel_shape", std::vector<int64_t>{kh, kw}},
             {"strides", w.strides},
             {"dilations", w.dilations},
             {"pads", pads},
             {"output_padding", out_pad}};
  RKD_ASSIGN(ir::Value * y, emit1(n, "ConvTranspose", {x, g_.add_constant(n.name + "/weights_iohw", std::move(wt))}, a, out_name(n, 0, true)));
  set_output(n, 0, y, true);
  return {};
}

Status Converter::pool(const TfNode& n) {
  RKD_ASSIGN(Window w, window_attrs(n));
  RKD_ASSIGN(auto ks, attr_ints(n, "ksize"));
  if (ks.size() != 4 || ks[0] != 1 || ks[3] != 1 || ks[1] < 1 || ks[2] < 1) return unsup(n, "ksize must be [1, kh, kw, 1]");
  RKD_ASSIGN(ir::Value * x, in_nchw(n, 0));
  Attrs a = {{"kernel_shape", std::vector<int64_t>{ks[1], ks[2]}}, {"strides", w.strides}};
  put_padding(w, a);
  // TensorFlow's SAME average pooling divides by the taps inside the image: count_include_pad 0.
  RKD_ASSIGN(ir::Value * y, emit1(n, n.op == "MaxPool" ? "MaxPool" : "AveragePool", {x}, a, out_name(n, 0, true)));
  set_output(n, 0, y, true);
  return {};
}

Status Converter::resize(const TfNode& n) {
  RKD_ASSIGN(auto size, const_ints(n, 1, "size"));
  if (size.size() != 2 || size[0] < 1 || size[1] < 1) return bad(n, "size must be two positive values");
  RKD_ASSIGN(bool align, attr_bool(n, "align_corners", false));
  RKD_ASSIGN(bool half, attr_bool(n, "half_pixel_centers", false));
  if (align && half) return bad(n, "align_corners and half_pixel_centers are exclusive");
  RKD_ASSIGN(ir::Value * x, in_nchw(n, 0));
  if (!x->shape || !(*x->shape)[0].is_static() || !(*x->shape)[1].is_static()) return unsup(n, "batch and channels must be known");
  Attrs a;
  if (n.op == "ResizeBilinear") {
    // TensorFlow: src = (dst + 0.5) * in/out - 0.5 (half_pixel_centers), dst * (in-1)/(out-1)
    // (align_corners), dst * in/out (neither) = ONNX half_pixel / align_corners / asymmetric.
    a = {{"mode", std::string("linear")},
         {"coordinate_transformation_mode", std::string(align  ? "align_corners"
                                                        : half ? "half_pixel"
                                                               : "asymmetric")}};
  } else {
    // Nearest: floor((dst + 0.5) * scale) (half_pixel_centers), round(dst * scale) (align_corners,
    // half away from zero: non-negative here, so round_prefer_ceil), floor(dst * scale).
    a = {{"mode", std::string("nearest")},
         {"coordinate_transformation_mode", std::string(align  ? "align_corners"
                                                        : half ? "tf_half_pixel_for_nn"
                                                               : "asymmetric")},
         {"nearest_mode", std::string(align ? "round_prefer_ceil" : "floor")}};
  }
  ir::Value* sizes = int64_constant(n.name + "/sizes", {(*x->shape)[0].value, (*x->shape)[1].value, size[0], size[1]});
  RKD_ASSIGN(ir::Value * y, emit1(n, "Resize", {x, nullptr, nullptr, sizes}, a, out_name(n, 0, true)));
  set_output(n, 0, y, true);
  return {};
}

// ---- layout-free ops: follow the inputs ----

Result<bool> Converter::elementwise(const TfNode& n, const std::string& op, const std::vector<size_t>& operands, Attrs attrs, ir::Value** out) {
  std::vector<TfTensor*> ts;
  bool want = false;
  for (size_t i : operands) {
    RKD_ASSIGN(TfTensor * t, input(n, i));
    ts.push_back(t);
    want = want || only_nchw(*t);
  }
  std::vector<ir::Value*> ins;
  if (want) {
    for (size_t j = 0; j < ts.size() && want; ++j) {
      TfTensor* t = ts[j];
      if (t->nchw) {
        ins.push_back(t->nchw);
        continue;
      }
      const int r = rank_of(t->nhwc);
      if (r == 4) {
        RKD_ASSIGN(ir::Value * v, in_nchw(n, operands[j]));
        ins.push_back(v);
      } else if (r == 0) {
        ins.push_back(t->nhwc);
      } else if (r > 0 && r < 4 && t->nhwc->constant) {
        t->nchw = g_.add_constant(t->nhwc->name + "#nchw", const_to_nchw(*t->nhwc->constant));
        ins.push_back(t->nchw);
      } else {
        want = false;
      }
    }
  }
  if (!want) {
    ins.clear();
    for (size_t i : operands) {
      RKD_ASSIGN(ir::Value * v, in_nhwc(n, i));
      ins.push_back(v);
    }
  }
  RKD_ASSIGN(*out, emit1(n, op, ins, std::move(attrs), out_name(n, 0, want)));
  return want;
}

Status Converter::unary(const TfNode& n) {
  const std::string& op = kUnary.at(n.op);
  RKD_ASSIGN(TfTensor * t, input(n, 0));
  const bool nchw = only_nchw(*t);
  ir::Value* x = nchw ? t->nchw : t->nhwc;
  const std::string name = out_name(n, 0, nchw);
  ir::Value* y = nullptr;
  if (n.op == "Relu6") {
    RKD_ASSIGN(y, activation(n, "Relu6", x, 0, name));
  } else if (n.op == "LeakyRelu") {
    RKD_ASSIGN(float alpha, attr_float(n, "alpha", 0.2f));
    RKD_ASSIGN(y, emit1(n, "LeakyRelu", {x}, {{"alpha", alpha}}, name));
  } else if (n.op == "Rsqrt") {
    RKD_ASSIGN(ir::Value * s, emit1(n, "Sqrt", {x}));
    RKD_ASSIGN(y, emit1(n, "Reciprocal", {s}, {}, name));
  } else if (n.op == "Square") {
    RKD_ASSIGN(y, emit1(n, "Mul", {x, x}, {}, name));
  } else if (n.op == "Cast") {
    RKD_ASSIGN(std::string to, attr_type(n, "DstT", "DT_FLOAT"));
    auto dt = dtype_from_tf(to);
    if (!dt) return unsup(n, "cast to " + to);
    RKD_ASSIGN(y, emit1(n, "Cast", {x}, {{"to", onnx_code(*dt)}}, name));
  } else if (n.op == "Elu") {
    RKD_ASSIGN(y, emit1(n, "Elu", {x}, {{"alpha", 1.0f}}, name));
  } else {
    RKD_ASSIGN(y, emit1(n, op, {x}, {}, name));
  }
  set_output(n, 0, y, nchw);
  return {};
}

Status Converter::binary(const TfNode& n) {
  if (n.op == "BiasAdd") {
    RKD_ASSIGN(std::string fmt, attr_string(n, "data_format", "NHWC"));
    if (fmt != "NHWC") return unsup(n, "data_format " + fmt);
  }
  ir::Value* y = nullptr;
  if (n.op == "SquaredDifference") {
    RKD_ASSIGN(bool nchw, elementwise(n, "Sub", {0, 1}, {}, &y));
    RKD_ASSIGN(ir::Value * sq, emit1(n, "Mul", {y, y}, {}, out_name(n, 0, nchw)));
    set_output(n, 0, sq, nchw);
    return {};
  }
  if (n.op == "FloorDiv" || n.op == "FloorMod") {
    // TensorFlow floors (Python semantics). Integers: FloorMod = ONNX Mod(fmod=0) (sign of the
    // divisor), FloorDiv = (a - FloorMod(a, b)) / b, an exact division. Floats: floor(a / b) and
    // a - floor(a / b) * b.
    RKD_ASSIGN(ir::Value * a, in_nhwc(n, 0));
    RKD_ASSIGN(ir::Value * b, in_nhwc(n, 1));
    const bool is_int = a->dtype && !dtype_is_float(*a->dtype);
    ir::Value* r = nullptr;
    if (is_int) {
      RKD_ASSIGN(ir::Value * m, emit1(n, "Mod", {a, b}, {{"fmod", int64_t{0}}}, n.op == "FloorMod" ? n.name : ""));
      if (n.op == "FloorMod") {
        r = m;
      } else {
        RKD_ASSIGN(ir::Value * d, emit1(n, "Sub", {a, m}));
        RKD_ASSIGN(r, emit1(n, "Div", {d, b}, {}, n.name));
      }
    } else {
      RKD_ASSIGN(ir::Value * q, emit1(n, "Div", {a, b}));
      RKD_ASSIGN(ir::Value * fl, emit1(n, "Floor", {q}, {}, n.op == "FloorDiv" ? n.name : ""));
      r = fl;
      if (n.op == "FloorMod") {
        RKD_ASSIGN(ir::Value * p, emit1(n, "Mul", {fl, b}));
        RKD_ASSIGN(r, emit1(n, "Sub", {a, p}, {}, n.name));
      }
    }
    set_output(n, 0, r, false);
    return {};
  }
  RKD_ASSIGN(bool nchw, elementwise(n, kBinary.at(n.op), {0, 1}, {}, &y));
  set_output(n, 0, y, nchw);
  return {};
}

Status Converter::reduce(const TfNode& n) {
  RKD_ASSIGN(auto axes, const_ints(n, 1, "reduction axes"));
  RKD_ASSIGN(bool keep, attr_bool(n, "keep_dims", false));
  RKD_ASSIGN(TfTensor * t, input(n, 0));
  const bool nchw = keep && only_nchw(*t);
  ir::Value* x = t->nchw;
  if (!nchw) {
    RKD_ASSIGN(x, in_nhwc(n, 0));
  }
  const int r = rank_of(x);
  for (int64_t& a : axes) {
    RKD_ASSIGN(a, norm_axis(n, a, r));
    if (nchw) a = nchw_axis(a);
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const std::string op = kReduce.at(n.op);
  ir::Value* y = nullptr;
  if (op == "ReduceSum") {  // opset 13+: axes is an input
    RKD_ASSIGN(y, emit1(n, op, {x, int64_constant(n.name + "/axes", axes)}, {{"keepdims", int64_t{keep}}}, out_name(n, 0, nchw)));
  } else {
    RKD_ASSIGN(y, emit1(n, op, {x}, {{"axes", axes}, {"keepdims", int64_t{keep}}}, out_name(n, 0, nchw)));
  }
  set_output(n, 0, y, nchw);
  return {};
}

Status Converter::concat(const TfNode& n) {
  if (n.inputs.size() < 2) return bad(n, "needs values and an axis");
  const size_t k = n.inputs.size() - 1;
  RKD_ASSIGN(auto axv, const_ints(n, k, "axis"));
  if (axv.size() != 1) return bad(n, "axis must be a scalar");
  bool nchw = false, all4 = true;
  for (size_t i = 0; i < k; ++i) {
    RKD_ASSIGN(TfTensor * t, input(n, i));
    nchw = nchw || only_nchw(*t);
    all4 = all4 && (t->nchw || rank_of(t->nhwc) == 4);
  }
  nchw = nchw && all4;
  std::vector<ir::Value*> ins;
  int rank = -1;
  for (size_t i = 0; i < k; ++i) {
    RKD_ASSIGN(ir::Value * v, nchw ? in_nchw(n, i) : in_nhwc(n, i));
    ins.push_back(v);
    rank = std::max(rank, rank_of(v));
  }
  RKD_ASSIGN(int64_t axis, norm_axis(n, axv[0], rank));
  if (nchw) axis = nchw_axis(axis);
  RKD_ASSIGN(ir::Value * y, emit1(n, "Concat", ins, {{"axis", axis}}, out_name(n, 0, nchw)));
  set_output(n, 0, y, nchw);
  return {};
}

Status Converter::pad(const TfNode& n) {
  RKD_ASSIGN(auto p, const_ints(n, 1, "paddings"));
  RKD_ASSIGN(TfTensor * t, input(n, 0));
  const bool nchw = only_nchw(*t);
  ir::Value* x = nchw ? t->nchw : t->nhwc;
  const int r = rank_of(x);
  if (r < 0 || p.size() != static_cast<size_t>(2 * r)) return bad(n, "paddings must be [rank, 2]");
  std::vector<int64_t> pads(p.size());
  for (int d = 0; d < r; ++d) {
    const int to = nchw ? static_cast<int>(nchw_axis(d)) : d;
    pads[static_cast<size_t>(to)] = p[static_cast<size_t>(2 * d)];
    pads[static_cast<size_t>(to + r)] = p[static_cast<size_t>(2 * d + 1)];
  }
  std::vector<ir::Value*> ins = {x, int64_constant(n.name + "/pads", pads)};
  Attrs a;
  if (n.op == "PadV2") {
    RKD_ASSIGN(ir::Value * cv, in_nhwc(n, 2));
    ins.push_back(cv);
  } else if (n.op == "MirrorPad") {
    RKD_ASSIGN(std::string mode, attr_string(n, "mode", "REFLECT"));
    if (mode != "REFLECT") return unsup(n, "MirrorPad mode " + mode + " (REFLECT only)");
    a["mode"] = std::string("reflect");
  }
  RKD_ASSIGN(ir::Value * y, emit1(n, "Pad", ins, a, out_name(n, 0, nchw)));
  set_output(n, 0, y, nchw);
  return {};
}

Status Converter::strided_slice(const TfNode& n) {
  RKD_ASSIGN(ir::Value * x, in_nhwc(n, 0));
  const int r = rank_of(x);
  if (r < 0) return unsup(n, "the input's rank is unknown");
  RKD_ASSIGN(auto begin, const_ints(n, 1, "begin"));
  std::vector<int64_t> starts, ends, axes, steps, squeeze;
  if (n.op == "Slice") {
    RKD_ASSIGN(auto size, const_ints(n, 2, "size"));
    if (begin.size() != size.size() || begin.size() > static_cast<size_t>(r)) return bad(n, "begin and size must match the rank");
    for (size_t i = 0; i < begin.size(); ++i) {
      starts.push_back(begin[i]);
      ends.push_back(size[i] < 0 ? INT64_MAX : begin[i] + size[i]);
      axes.push_back(static_cast<int64_t>(i));
      steps.push_back(1);
    }
  } else {
    RKD_ASSIGN(auto end, const_ints(n, 2, "end"));
    RKD_ASSIGN(auto stride, const_ints(n, 3, "strides"));
    RKD_ASSIGN(int64_t bm, attr_int(n, "begin_mask", 0));
    RKD_ASSIGN(int64_t em, attr_int(n, "end_mask", 0));
    RKD_ASSIGN(int64_t sm, attr_int(n, "shrink_axis_mask", 0));
    RKD_ASSIGN(int64_t nm, attr_int(n, "new_axis_mask", 0));
    RKD_ASSIGN(int64_t elm, attr_int(n, "ellipsis_mask", 0));
    if (nm || elm) return unsup(n, "new_axis_mask and ellipsis_mask");
    if (begin.size() != end.size() || begin.size() != stride.size() || begin.size() > static_cast<size_t>(r)) {
      return bad(n, "begin, end and strides must have one entry per sliced axis");
    }
    for (size_t i = 0; i < begin.size(); ++i) {
      const int64_t s = stride[i];
      if (s == 0) return bad(n, "stride 0");
      int64_t b = (bm >> i) & 1 ? (s > 0 ? 0 : INT64_MAX) : begin[i];
      int64_t e = (em >> i) & 1 ? (s > 0 ? INT64_MAX : INT64_MIN) : end[i];
      if ((sm >> i) & 1) {
        b = begin[i];
        e = b == -1 ? INT64_MAX : b + 1;
        squeeze.push_back(static_cast<int64_t>(i));
        if (s != 1) return bad(n, "a shrunk axis with stride != 1");
      }
      starts.push_back(b);
      ends.push_back(e);
      axes.push_back(static_cast<int64_t>(i));
      steps.push_back(s);
    }
  }
  RKD_ASSIGN(ir::Value * y, emit1(n, "Slice",
                                  {x, int64_constant(n.name + "/starts", starts), int64_constant(n.name + "/ends", ends),
                                   int64_constant(n.name + "/axes", axes), int64_constant(n.name + "/steps", steps)},
                                  {}, squeeze.empty() ? n.name : ""));
  if (!squeeze.empty()) {
    RKD_ASSIGN(y, emit1(n, "Squeeze", {y, int64_constant(n.name + "/squeeze", squeeze)}, {}, n.name));
  }
  set_output(n, 0, y, false);
  return {};
}

Status Converter::shape_ops(const TfNode& n) {
  if (n.op == "Transpose") {
    RKD_ASSIGN(auto perm, const_ints(n, 1, "permutation"));
    RKD_ASSIGN(TfTensor * t, input(n, 0));
    const std::vector<int64_t> to_nhwc = {0, 2, 3, 1}, to_nchw = {0, 3, 1, 2};
    // Transposes that only change the layout (what ONNX-to-TensorFlow converters insert
    // around every convolution) become aliases of the tensor's other form.
    if (t->nhwc && perm == to_nhwc && rank_of(t->nhwc) == 4) {
      set_output(n, 0, t->nhwc, true);
      return {};
    }
    if (only_nchw(*t) && perm == to_nchw) {
      set_output(n, 0, t->nchw, false);
      return {};
    }
    RKD_ASSIGN(ir::Value * x, in_nhwc(n, 0));
    if (perm.size() != static_cast<size_t>(std::max(rank_of(x), 0))) return bad(n, "the permutation must list every axis once");
    RKD_ASSIGN(ir::Value * y, emit1(n, "Transpose", {x}, {{"perm", perm}}, n.name));
    set_output(n, 0, y, false);
    return {};
  }
  if (n.op == "Shape") {
    RKD_ASSIGN(ir::Value * x, in_nhwc(n, 0));
    RKD_ASSIGN(std::string ot, attr_type(n, "out_type", "DT_INT32"));
    if (ot != "DT_INT32" && ot != "DT_INT64") return unsup(n, "out_type " + ot);
    RKD_ASSIGN(ir::Value * s, emit1(n, "Shape", {x}, {}, ot == "DT_INT64" ? n.name : ""));
    if (ot == "DT_INT32") {
      RKD_ASSIGN(s, emit1(n, "Cast", {s}, {{"to", int64_t{6}}}, n.name));
    }
    set_output(n, 0, s, false);
    return {};
  }
  RKD_ASSIGN(ir::Value * x, in_nhwc(n, 0));
  const int r = rank_of(x);
  ir::Value* y = nullptr;
  if (n.op == "Reshape") {
    RKD_ASSIGN(TfTensor * st, input(n, 1));
    ir::Value* shape = st->nhwc;
    if (!shape) return bad(n, "the shape must be 1-D");
    if (shape->dtype != DType::i64) {
      RKD_ASSIGN(shape, emit1(n, "Cast", {shape}, {{"to", int64_t{7}}}));
    }
    // TensorFlow's 0 is an empty dimension (ONNX allowzero=1), not "copy the input's".
    RKD_ASSIGN(y, emit1(n, "Reshape", {x, shape}, {{"allowzero", int64_t{1}}}, n.name));
  } else if (n.op == "ExpandDims") {
    RKD_ASSIGN(auto ax, const_ints(n, 1, "axis"));
    if (ax.size() != 1) return bad(n, "axis must be a scalar");
    RKD_ASSIGN(y, emit1(n, "Unsqueeze", {x, int64_constant(n.name + "/axes", ax)}, {}, n.name));
  } else if (n.op == "Squeeze") {
    RKD_ASSIGN(auto ax, attr_ints(n, "squeeze_dims"));
    std::vector<ir::Value*> ins = {x};
    if (!ax.empty()) ins.push_back(int64_constant(n.name + "/axes", ax));
    RKD_ASSIGN(y, emit1(n, "Squeeze", ins, {}, n.name));
  } else if (n.op == "Tile") {
    RKD_ASSIGN(auto m, const_ints(n, 1, "multiples"));
    RKD_ASSIGN(y, emit1(n, "Tile", {x, int64_constant(n.name + "/repeats", m)}, {}, n.name));
  } else if (n.op == "Pack") {
    RKD_ASSIGN(int64_t axis, attr_int(n, "axis", 0));
    RKD_ASSIGN(axis, norm_axis(n, axis, r + 1));
    std::vector<ir::Value*> parts;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      RKD_ASSIGN(ir::Value * v, in_nhwc(n, i));
      RKD_ASSIGN(ir::Value * u, emit1(n, "Unsqueeze", {v, int64_constant(n.name + "/axes", {axis})}));
      parts.push_back(u);
    }
    RKD_ASSIGN(y, emit1(n, "Concat", parts, {{"axis", axis}}, n.name));
  } else {
    // Unpack, SplitV, Split: ONNX Split with explicit sizes.
    int64_t axis = 0;
    std::vector<int64_t> sizes;
    bool squeeze = false;
    if (n.op == "Unpack") {
      RKD_ASSIGN(axis, attr_int(n, "axis", 0));
      RKD_ASSIGN(int64_t num, attr_int(n, "num", 0));
      if (num < 1 || num > 4096) return bad(n, "num must be in [1, 4096]");
      sizes.assign(static_cast<size_t>(num), 1);
      squeeze = true;
    } else {
      const size_t ai = n.op == "SplitV" ? 2 : 0;
      RKD_ASSIGN(auto av, const_ints(n, ai, "axis"));
      if (av.size() != 1) return bad(n, "axis must be a scalar");
      axis = av[0];
      if (n.op == "Split") {
        RKD_ASSIGN(x, in_nhwc(n, 1));
      }
    }
    const int xr = rank_of(x);
    RKD_ASSIGN(axis, norm_axis(n, axis, xr));
    const ir::Dim d = (*x->shape)[static_cast<size_t>(axis)];
    if (n.op == "SplitV") {
      RKD_ASSIGN(sizes, const_ints(n, 1, "size_splits"));
      int64_t known = 0, unknown = -1;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] == -1 && unknown < 0) unknown = static_cast<int64_t>(i);
        else if (sizes[i] < 0) return bad(n, "size_splits may hold one -1 and otherwise sizes >= 0");
        else known += sizes[i];
      }
      if (unknown >= 0) {
        if (!d.is_static() || d.value < known) return unsup(n, "a -1 split size needs the axis size");
        sizes[static_cast<size_t>(unknown)] = d.value - known;
      }
    } else if (n.op == "Split") {
      RKD_ASSIGN(int64_t num, attr_int(n, "num_split", 1));
      if (num < 1 || !d.is_static() || d.value % num != 0) return bad(n, "the axis size must be known and divisible by num_split");
      sizes.assign(static_cast<size_t>(num), d.value / num);
    }
    if (sizes.empty() || sizes.size() > 4096) return bad(n, "no outputs");
    RKD_ASSIGN(auto parts, emit(n, "Split", {x, int64_constant(n.name + "/split", sizes)}, {{"axis", axis}}, sizes.size()));
    for (size_t k = 0; k < parts.size(); ++k) {
      ir::Value* p = parts[k];
      if (squeeze) {
        RKD_ASSIGN(p, emit1(n, "Squeeze", {p, int64_constant(n.name + "/axes", {axis})}, {}, out_name(n, k, false)));
      }
      set_output(n, k, p, false);
    }
    return {};
  }
  set_output(n, 0, y, false);
  return {};
}

Status Converter::index_ops(const TfNode& n) {
  if (n.op == "SparseToDense") {
    // (sparse_indices, output_shape, sparse_values, default_value), all constant: evaluated here.
    RKD_ASSIGN(Tensor idx, const_input(n, 0, "sparse_indices"));
    RKD_ASSIGN(auto shape, const_ints(n, 1, "output_shape"));
    RKD_ASSIGN(Tensor vals, const_input(n, 2, "sparse_values"));
    RKD_ASSIGN(Tensor def, const_input(n, 3, "default_value"));
    if (shape.size() > 8 || def.numel() != 1 || vals.dtype() != def.dtype()) return bad(n, "bad output_shape or default_value");
    Shape s(shape.begin(), shape.end());
    RKD_ASSIGN(Tensor out, Tensor::zeros(DType::f32, s));
    const int64_t rank = static_cast<int64_t>(s.size());
    const int64_t count = idx.rank() == 0 ? 1 : idx.dim(0);
    const int64_t per = idx.rank() < 2 ? 1 : idx.dim(1);
    if (per != std::max<int64_t>(rank, 1) || (vals.numel() != 1 && vals.numel() != count)) return bad(n, "indices or values do not match");
    std::vector<double> dense(static_cast<size_t>(out.numel()), def.get_as_double(0));
    for (int64_t i = 0; i < count; ++i) {
      int64_t off = 0;
      for (int64_t j = 0; j < per; ++j) {
        const int64_t v = static_cast<int64_t>(idx.get_as_double(i * per + j));
        const int64_t dim = rank ? s[static_cast<size_t>(j)] : 1;
        if (v < 0 || v >= dim) return bad(n, "index out of range");
        off = off * dim + v;
      }
      dense[static_cast<size_t>(off)] = vals.get_as_double(vals.numel() == 1 ? 0 : i);
    }
    RKD_ASSIGN(Tensor typed, Tensor::zeros(vals.dtype(), s));
    for (size_t i = 0; i < dense.size(); ++i) {
      switch (vals.dtype()) {
        case DType::f32: typed.data<float>()[i] = static_cast<float>(dense[i]); break;
        case DType::i32: typed.data<int32_t>()[i] = static_cast<int32_t>(dense[i]); break;
        case DType::i64: typed.data<int64_t>()[i] = static_cast<int64_t>(dense[i]); break;
        default: return unsup(n, std::string("values of type ") + dtype_name(vals.dtype()));
      }
    }
    set_output(n, 0, g_.add_constant(n.name, std::move(typed)), false);
    return {};
  }
  RKD_ASSIGN(ir::Value * x, in_nhwc(n, 0));
  ir::Value* y = nullptr;
  if (n.op == "GatherV2") {
    RKD_ASSIGN(ir::Value * idx, in_nhwc(n, 1));
    RKD_ASSIGN(auto ax, const_ints(n, 2, "axis"));
    RKD_ASSIGN(int64_t bd, attr_int(n, "batch_dims", 0));
    if (ax.size() != 1 || bd != 0) return unsup(n, "batch_dims other than 0");
    RKD_ASSIGN(y, emit1(n, "Gather", {x, idx}, {{"axis", ax[0]}}, n.name));
  } else if (n.op == "GatherNd") {
    RKD_ASSIGN(ir::Value * idx, in_nhwc(n, 1));
    if (idx->dtype != DType::i64) {  // ONNX GatherND takes int64 indices only
      RKD_ASSIGN(idx, emit1(n, "Cast", {idx}, {{"to", int64_t{7}}}));
    }
    RKD_ASSIGN(y, emit1(n, "GatherND", {x, idx}, {}, n.name));
  } else if (n.op == "TopKV2") {
    RKD_ASSIGN(auto k, const_ints(n, 1, "k"));
    RKD_ASSIGN(bool sorted, attr_bool(n, "sorted", true));
    if (k.size() != 1) return bad(n, "k must be a scalar");
    // ONNX TopK orders ties by lower index first, as TensorFlow does; indices come out int64.
    RKD_ASSIGN(auto outs, emit(n, "TopK", {x, int64_constant(n.name + "/k", k)},
                               {{"axis", int64_t{-1}}, {"largest", int64_t{1}}, {"sorted", int64_t{sorted}}}, 2, n.name));
    RKD_ASSIGN(ir::Value * i32, emit1(n, "Cast", {outs[1]}, {{"to", int64_t{6}}}, n.name + ":1"));
    set_output(n, 0, outs[0], false);
    set_output(n, 1, i32, false);
    return {};
  } else {  // ArgMax, ArgMin
    RKD_ASSIGN(auto ax, const_ints(n, 1, "dimension"));
    if (ax.size() != 1) return bad(n, "dimension must be a scalar");
    RKD_ASSIGN(std::string ot, attr_type(n, "output_type", "DT_INT64"));
    RKD_ASSIGN(y, emit1(n, n.op, {x}, {{"axis", ax[0]}, {"keepdims", int64_t{0}}}, ot == "DT_INT64" ? n.name : ""));
    if (ot == "DT_INT32") {
      RKD_ASSIGN(y, emit1(n, "Cast", {y}, {{"to", int64_t{6}}}, n.name));
    } else if (ot != "DT_INT64") {
      return unsup(n, "output_type " + ot);
    }
  }
  set_output(n, 0, y, false);
  return {};
}

Status Converter::misc(const TfNode& n) {
  if (n.op == "NoOp") return {};
  RKD_ASSIGN(ir::Value * x, in_nhwc(n, 0));
  ir::Value* y = nullptr;
  if (n.op == "Softmax") {
    RKD_ASSIGN(y, emit1(n, "Softmax", {x}, {{"axis", int64_t{-1}}}, n.name));
  } else {  // MatMul, BatchMatMulV2
    RKD_ASSIGN(ir::Value * b, in_nhwc(n, 1));
    RKD_ASSIGN(bool ta, attr_bool(n, n.op == "MatMul" ? "transpose_a" : "adj_x", false));
    RKD_ASSIGN(bool tb, attr_bool(n, n.op == "MatMul" ? "transpose_b" : "adj_y", false));
    auto swap_last = [&](ir::Value* v) -> Result<ir::Value*> {
      const int r = rank_of(v);
      if (r < 2) return bad(n, "operands must have rank >= 2");
      std::vector<int64_t> perm(static_cast<size_t>(r));
      for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
      std::swap(perm[static_cast<size_t>(r - 1)], perm[static_cast<size_t>(r - 2)]);
      return emit1(n, "Transpose", {v}, {{"perm", perm}});
    };
    if (ta) {
      RKD_ASSIGN(x, swap_last(x));
    }
    if (tb) {
      RKD_ASSIGN(b, swap_last(b));
    }
    RKD_ASSIGN(y, emit1(n, "MatMul", {x, b}, {}, n.name));
  }
  set_output(n, 0, y, false);
  return {};
}

}  // namespace rkd::tf
