// TensorFlow-op converter shared by the TensorFlow-family front ends (TensorFlow.js graph
// models, TFLite): TensorFlow NodeDefs (op name, data inputs, protobuf-JSON attributes) become
// ONNX-form IR ops (opset 17).
//
// Contract:
//  - TensorFlow is NHWC; rkdeploy's convolution, pooling and resize kernels are NCHW. Each
//    4-D tensor's layout is tracked: layout-bound ops consume and produce NCHW, layout-free
//    ops (elementwise with per-channel or scalar operands, keep-dims reductions, concat, pad)
//    follow their inputs, and a Transpose back to NHWC is inserted only where a
//    layout-sensitive reader (Reshape, StridedSlice, a graph output, ...) needs it.
//  - Value names: the TensorFlow tensor name ("node" for output 0, "node:1", ...), its NCHW
//    twin "name#nchw"; node names are unique.
//  - Every emitted node's outputs get shapes at once (ir::infer_node); nodes whose inputs
//    are all constant are evaluated by the given evaluator when there is one.
//  - Errors name the TensorFlow node.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "ir/pass.h"
#include "ir/ir.h"

namespace rkd::tf {

using Json = nlohmann::ordered_json;

// One TensorFlow tensor: its NHWC (TensorFlow's own) value, its NCHW twin, or both.
struct TfTensor {
  ir::Value* nhwc = nullptr;
  ir::Value* nchw = nullptr;
};

// A TensorFlow NodeDef as read from the JSON.
struct TfNode {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;  // data inputs ("node" / "node:k"); control inputs dropped
  const Json* attr = nullptr;       // the "attr" object, or nullptr
};

// protobuf-JSON int64 (a string, or a number); nullopt when it is neither.
std::optional<int64_t> json_int(const Json& v);
std::optional<std::string> base64_decode(const std::string& in);
// A TensorFlow DataType name ("DT_FLOAT") as a DType; nullopt for types rkdeploy does not hold.
std::optional<DType> dtype_from_tf(const std::string& t);

// Attribute readers (protobuf-JSON AttrValue); the default when absent, an Error naming the
// node when present with another kind.
Result<int64_t> attr_int(const TfNode& n, const char* key, int64_t fallback);
Result<float> attr_float(const TfNode& n, const char* key, float fallback);
Result<bool> attr_bool(const TfNode& n, const char* key, bool fallback);
Result<std::string> attr_string(const TfNode& n, const char* key, const std::string& fallback);  // base64-decoded
Result<std::vector<int64_t>> attr_ints(const TfNode& n, const char* key);
Result<std::vector<std::string>> attr_strings(const TfNode& n, const char* key);
Result<std::string> attr_type(const TfNode& n, const char* key, const std::string& fallback);  // "DT_FLOAT"

class Converter {
 public:
  Converter(ir::Graph& g, ir::NodeEvaluator evaluate) : g_(g), evaluate_(std::move(evaluate)) {}

  // Converts one node whose inputs are all converted already.
  Status convert(const TfNode& n);
  // Registers a constant (Const nodes) or a graph input (Placeholders).
  void define(const std::string& ref, ir::Value* v) { tensors_[ref].nhwc = v; }
  bool has(const std::string& ref) const { return tensors_.count(ref) > 0; }
  // The NHWC (TensorFlow-layout) value of a tensor reference, transposing back if needed.
  Result<ir::Value*> nhwc(const std::string& ref);
  // As nhwc(), for a graph output: the value carries the TensorFlow tensor's name.
  Result<ir::Value*> output(const std::string& ref);

  static bool supports(const std::string& op);

  // For front ends that add their own nodes around converted ones (TFLite's quantization):
  // makes `to` another name for tensor `from`; the tensor's only form and its layout (a
  // tensor present in both layouts yields its NHWC form); replaces a tensor by one form.
  void alias(const std::string& to, const std::string& from) { tensors_[to] = tensors_.at(from); }
  // The NCHW form of a 4-D tensor, transposing if needed.
  Result<ir::Value*> nchw(const std::string& ref) {
    TfNode src{ref, "layout", {ref}, nullptr};
    return in_nchw(src, 0);
  }
  std::pair<ir::Value*, bool> form(const std::string& ref) const {
    const TfTensor& t = tensors_.at(ref);
    return t.nhwc ? std::pair<ir::Value*, bool>{t.nhwc, false} : std::pair<ir::Value*, bool>{t.nchw, true};
  }
  void set_form(const std::string& ref, ir::Value* v, bool nchw) {
    TfTensor& t = tensors_[ref];
    t = TfTensor{};
    (nchw ? t.nchw : t.nhwc) = v;
  }

 private:
  using Attrs = std::map<std::string, ir::Attribute>;
  struct Emitted {
    std::vector<ir::Value*> outputs;
  };

  // Adds one IR node (outputs named from `base`), infers its shapes and folds it when all
  // its inputs are constant.
  Result<std::vector<ir::Value*>> emit(const TfNode& src, const std::string& op, const std::vector<ir::Value*>& ins, Attrs attrs, size_t n_out = 1,
                                       const std::string& out_name = "");
  Result<ir::Value*> emit1(const TfNode& src, const std::string& op, const std::vector<ir::Value*>& ins, Attrs attrs = {},
                           const std::string& out_name = "") {
    RKD_ASSIGN(auto v, emit(src, op, ins, std::move(attrs), 1, out_name));
    return v[0];
  }
  std::string fresh(const std::string& base);

  Result<TfTensor*> input(const TfNode& n, size_t i);
  Result<ir::Value*> in_nhwc(const TfNode& n, size_t i);
  Result<ir::Value*> in_nchw(const TfNode& n, size_t i);
  // A constant input's tensor, or an Error naming the node and what must be constant.
  Result<Tensor> const_input(const TfNode& n, size_t i, const char* what);
  Result<std::vector<int64_t>> const_ints(const TfNode& n, size_t i, const char* what);
  ir::Value* int64_constant(const std::string& base, const std::vector<int64_t>& v);
  ir::Value* float_scalar(const std::string& base, float v);
  // Output k of node n in the given layout.
  void set_output(const TfNode& n, size_t k, ir::Value* v, bool nchw);
  bool only_nchw(const TfTensor& t) const { return t.nchw != nullptr && t.nhwc == nullptr; }
  static int rank_of(const ir::Value* v) { return v && v->shape ? static_cast<int>(v->shape->size()) : -1; }

  // Op families (tf_ops.cc).
  Status conv(const TfNode& n);
  Status conv_transpose(const TfNode& n);
  Status pool(const TfNode& n);
  Status resize(const TfNode& n);
  Status unary(const TfNode& n);
  Status binary(const TfNode& n);
  Status reduce(const TfNode& n);
  Status concat(const TfNode& n);
  Status pad(const TfNode& n);
  Status strided_slice(const TfNode& n);
  Status shape_ops(const TfNode& n);
  Status index_ops(const TfNode& n);
  Status misc(const TfNode& n);
  // Fused activation (Relu, Relu6, LeakyRelu, Elu, Sigmoid, Tanh) after x, same layout.
  Result<ir::Value*> activation(const TfNode& n, const std::string& act, ir::Value* x, float leaky_alpha, const std::string& name = "");
  // Elementwise op applied in NCHW if the operands allow it; returns the layout used.
  Result<bool> elementwise(const TfNode& n, const std::string& op, const std::vector<size_t>& operands, Attrs attrs, ir::Value** out);

  ir::Graph& g_;
  ir::NodeEvaluator evaluate_;
  std::map<std::string, TfTensor> tensors_;
  std::set<std::string> node_names_;
  int counter_ = 0;
};

}  // namespace rkd::tf
