// Converter core: emitting IR nodes, import-time folding, NHWC/NCHW bookkeeping.
#include <algorithm>
#include <cmath>

#include "frontends/tf/tf_convert.h"
#include "ir/passes/shape_inference.h"

namespace rkd::tf {

std::optional<int64_t> json_int(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.empty() || s.size() > 20) return std::nullopt;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == s.size()) return std::nullopt;
    __extension__ typedef __int128 i128;
    i128 r = 0;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      r = r * 10 + (s[i] - '0');
      if (r > static_cast<i128>(INT64_MAX) + 1) return std::nullopt;
    }
    if (s[0] == '-') r = -r;
    if (r > INT64_MAX || r < INT64_MIN) return std::nullopt;
    return static_cast<int64_t>(r);
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_tf(const std::string& t) {
  if (t == "DT_FLOAT") return DType::f32;
  if (t == "DT_INT32") return DType::i32;
  if (t == "DT_INT64") return DType::i64;
  if (t == "DT_BOOL") return DType::b8;
  if (t == "DT_HALF") return DType::f16;
  if (t == "DT_INT8") return DType::i8;
  if (t == "DT_UINT8") return DType::u8;
  return std::nullopt;
}

std::optional<std::string> base64_decode(const std::string& in) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    if (ch == '=') break;
    const size_t k = kAlphabet.find(ch == '-' ? '+' : ch == '_' ? '/' : ch);
    if (k == std::string::npos) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(k);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

namespace {
const Json* attr_entry(const TfNode& n, const char* key) {
  if (!n.attr) return nullptr;
  auto it = n.attr->find(key);
  return it == n.attr->end() ? nullptr : &*it;
}

Error bad_attr(const TfNode& n, const char* key, const char* kind) {
  return invalid("node '" + n.name + "' (" + n.op + "): attribute '" + key + "' is not " + kind);
}

}  // namespace

Result<int64_t> attr_int(const TfNode& n, const char* key, int64_t fallback) {
  const Json* a = attr_entry(n, key);
  if (!a) return fallback;
  if (!a->is_object() || !a->contains("i")) return bad_attr(n, key, "an int");
  auto v = json_int((*a)["i"]);
  if (!v) return bad_attr(n, key, "an int");
  return *v;
}

Result<float> attr_float(const TfNode& n, const char* key, float fallback) {
  const Json* a = attr_entry(n, key);
  if (!a) return fallback;
  if (!a->is_object() || !a->contains("f")) return bad_attr(n, key, "a float");
  const Json& f = (*a)["f"];
  if (f.is_number()) return f.get<float>();
  if (f.is_string()) {
    const std::string& s = f.get_ref<const std::string&>();
    if (s == "NaN") return std::nanf("");
    if (s == "Infinity") return INFINITY;
    if (s == "-Infinity") return -INFINITY;
  }
  return bad_attr(n, key, "a float");
}

Result<bool> attr_bool(const TfNode& n, const char* key, bool fallback) {
  const Json* a = attr_entry(n, key);
  if (!a) return fallback;
  if (!a->is_object() || !a->contains("b") || !(*a)["b"].is_boolean()) return bad_attr(n, key, "a bool");
  return (*a)["b"].get<bool>();
}

Result<std::string> attr_string(const TfNode& n, const char* key, const std::string& fallback) {
  const Json* a = attr_entry(n, key);
  if (!a) return fallback;
  if (!a->is_object() || !a->contains("s") || !(*a)["s"].is_string()) return bad_attr(n, key, "a string");
  auto s = base64_decode((*a)["s"].get<std::string>());
  if (!s) return bad_attr(n, key, "base64");
  return *s;
}

Result<std::vector<int64_t>> attr_ints(const TfNode& n, const char* key) {
  std::vector<int64_t> out;
  const Json* a = attr_entry(n, key);
  if (!a) return out;
  if (!a->is_object() || !a->contains("list") || !(*a)["list"].is_object()) return bad_attr(n, key, "a list");
  const Json& l = (*a)["list"];
  if (!l.contains("i")) return out;
  if (!l["i"].is_array() || l["i"].size() > 64) return bad_attr(n, key, "a list of ints");
  for (const Json& e : l["i"]) {
    auto v = json_int(e);
    if (!v) return bad_attr(n, key, "a list of ints");
    out.push_back(*v);
  }
  return out;
}

Result<std::vector<std::string>> attr_strings(const TfNode& n, const char* key) {
  std::vector<std::string> out;
  const Json* a = attr_entry(n, key);
  if (!a) return out;
  if (!a->is_object() || !a->contains("list") || !(*a)["list"].is_object()) return bad_attr(n, key, "a list");
  const Json& l = (*a)["list"];
  if (!l.contains("s")) return out;
  if (!l["s"].is_array() || l["s"].size() > 64) return bad_attr(n, key, "a list of strings");
  for (const Json& e : l["s"]) {
    if (!e.is_string()) return bad_attr(n, key, "a list of strings");
    auto s = base64_decode(e.get<std::string>());
    if (!s) return bad_attr(n, key, "base64");
    out.push_back(*s);
  }
  return out;
}

Result<std::string> attr_type(const TfNode& n, const char* key, const std::string& fallback) {
  const Json* a = attr_entry(n, key);
  if (!a) return fallback;
  if (!a->is_object() || !a->contains("type") || !(*a)["type"].is_string()) return bad_attr(n, key, "a type");
  return (*a)["type"].get<std::string>();
}

namespace {
constexpr int64_t kMaxFoldElements = int64_t{16} << 20;
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};
const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};

std::string ref_name(const std::string& node, size_t k) { return k == 0 ? node : node + ":" + std::to_string(k); }
}  // namespace

std::string Converter::fresh(const std::string& base) {
  if (!g_.find(base)) return base;
  for (;;) {
    std::string s = base + "#" + std::to_string(++counter_);
    if (!g_.find(s)) return s;
  }
}

Result<std::vector<ir::Value*>> Converter::emit(const TfNode& src, const std::string& op, const std::vector<ir::Value*>& ins, Attrs attrs,
                                                size_t n_out, const std::string& out_name) {
  std::vector<std::string> names;
  for (size_t k = 0; k < n_out; ++k) {
    std::string base = src.name + "/" + op;
    if (k) {
      base += ':';
      base += std::to_string(k);
    }
    names.push_back(k == 0 && !out_name.empty() ? fresh(out_name) : fresh(base));
  }
  // add_node checks names against existing values only; keep the node's own outputs apart too.
  for (size_t k = 1; k < names.size(); ++k) {
    if (std::find(names.begin(), names.begin() + static_cast<long>(k), names[k]) != names.begin() + static_cast<long>(k)) {
      names[k] += "#o";
      names[k] += std::to_string(k);
    }
  }
  const std::string where = "node '" + src.name + "' (" + src.op + ")";
  // Node names are unique too (ONNX requires it when the graph is exported).
  std::string node_name = src.name + "/" + op;
  for (int k = 1; !node_names_.insert(node_name).second; ++k) node_name = src.name + "/" + op + "#" + std::to_string(k);
  auto added = g_.add_node(node_name, op, "", ins, names);
  if (!added.ok()) return added.error().with_context(where);
  ir::Node* node = added.value();
  node->attrs = std::move(attrs);
  Status s = ir::infer_node(*node, g_.opset);
  if (!s.ok()) return s.error().with_context(where);
  std::vector<ir::Value*> outs = node->outputs;
  bool foldable = static_cast<bool>(evaluate_);
  std::vector<const Tensor*> in;
  for (ir::Value* v : ins) {
    if (v && !v->constant) foldable = false;
    in.push_back(v && v->constant ? &*v->constant : nullptr);
  }
  for (ir::Value* o : outs) {
    auto numel = o->static_numel();
    if (!numel || *numel > kMaxFoldElements) foldable = false;
  }
  if (!foldable) return outs;
  auto r = evaluate_(*node, g_.opset, in);
  if (!r.ok()) {
    if (r.error().kind == ErrorKind::unsupported) return outs;  // left to the executor
    return r.error().with_context(where);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    outs[k]->constant = r.value()[k];
    outs[k]->producer = nullptr;
  }
  for (ir::Value*& o : node->outputs) o = nullptr;
  g_.remove_nodes([node](const ir::Node& x) { return &x == node; });
  return outs;
}

Result<TfTensor*> Converter::input(const TfNode& n, size_t i) {
  if (i >= n.inputs.size()) {
    return invalid("node '" + n.name + "' (" + n.op + "): has " + std::to_string(n.inputs.size()) + " inputs, needs more than " + std::to_string(i));
  }
  auto it = tensors_.find(n.inputs[i]);
  if (it == tensors_.end()) {
    return invalid("node '" + n.name + "' (" + n.op + "): input '" + n.inputs[i] + "' is not an output of its node");
  }
  return &it->second;
}

Result<ir::Value*> Converter::nhwc(const std::string& ref) {
  TfTensor& t = tensors_.at(ref);
  if (t.nhwc) return t.nhwc;
  TfNode src{ref, "layout", {}, nullptr};
  RKD_ASSIGN(ir::Value * v, emit1(src, "Transpose", {t.nchw}, {{"perm", kToNhwc}}, ref));
  t.nhwc = v;
  return v;
}

Result<ir::Value*> Converter::in_nhwc(const TfNode& n, size_t i) {
  auto t = input(n, i);
  if (!t.ok()) return t.error();
  return nhwc(n.inputs[i]);
}

Result<ir::Value*> Converter::in_nchw(const TfNode& n, size_t i) {
  RKD_ASSIGN(TfTensor * t, input(n, i));
  if (t->nchw) return t->nchw;
  if (rank_of(t->nhwc) != 4) {
    return invalid("node '" + n.name + "' (" + n.op + "): input '" + n.inputs[i] + "' must be a 4-D NHWC tensor, its shape is " +
                   (t->nhwc->shape ? ir::dims_to_string(*t->nhwc->shape) : std::string("unknown")));
  }
  TfNode src{n.inputs[i], "layout", {}, nullptr};
  RKD_ASSIGN(ir::Value * v, emit1(src, "Transpose", {t->nhwc}, {{"perm", kToNchw}}, n.inputs[i] + "#nchw"));
  t->nchw = v;
  return v;
}

Result<Tensor> Converter::const_input(const TfNode& n, size_t i, const char* what) {
  RKD_ASSIGN(TfTensor * t, input(n, i));
  ir::Value* v = t->nhwc ? t->nhwc : t->nchw;
  if (!v->constant || (!t->nhwc && rank_of(v) == 4)) {
    return unsupported("node '" + n.name + "' (" + n.op + "): the " + what + " ('" + n.inputs[i] +
                       "') must be a constant (computed inputs are not supported here)");
  }
  return *v->constant;
}

Result<std::vector<int64_t>> Converter::const_ints(const TfNode& n, size_t i, const char* what) {
  RKD_ASSIGN(Tensor t, const_input(n, i, what));
  if (t.dtype() != DType::i32 && t.dtype() != DType::i64) {
    return invalid("node '" + n.name + "' (" + n.op + "): the " + what + " must be int32 or int64, got " + dtype_name(t.dtype()));
  }
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<int64_t>(t.get_as_double(static_cast<int64_t>(k)));
  return v;
}

ir::Value* Converter::int64_constant(const std::string& base, const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty(DType::i64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return g_.add_constant(base, std::move(t));
}

ir::Value* Converter::float_scalar(const std::string& base, float v) {
  Tensor t = Tensor::empty(DType::f32, {});
  t.data<float>()[0] = v;
  return g_.add_constant(base, std::move(t));
}

void Converter::set_output(const TfNode& n, size_t k, ir::Value* v, bool nchw) {
  TfTensor& t = tensors_[ref_name(n.name, k)];
  t = TfTensor{};
  (nchw ? t.nchw : t.nhwc) = v;
}

Result<ir::Value*> Converter::output(const std::string& ref) {
  RKD_ASSIGN(ir::Value * v, nhwc(ref));
  if (v->name == ref) return v;
  // An alias (Identity) or a constant: give the output its TensorFlow name.
  TfNode src{ref, "output", {}, nullptr};
  return emit1(src, "Identity", {v}, {}, ref);
}

}  // namespace rkd::tf
