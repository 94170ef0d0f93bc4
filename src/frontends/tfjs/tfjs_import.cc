// model.json reading, weight decoding and the import driver (contract in tfjs_import.h).
#include "frontends/tfjs/tfjs_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/npy.h"
#include "frontends/tf/tf_convert.h"
#include "ir/passes/shape_inference.h"

namespace rkd::tfjs_frontend {

using tf::attr_type;
using tf::Converter;
using tf::Json;
using tf::json_int;
using tf::TfNode;

namespace {
constexpr int64_t kMaxRank = 8;
}  // namespace

namespace {

// Reads every entry of the weightsManifest into name -> tensor.
Result<std::map<std::string, Tensor>> decode_weights(const Json& manifest, std::span<const uint8_t> bytes, const std::string& what) {
  std::map<std::string, Tensor> out;
  if (!manifest.is_array()) return invalid(what + ": weightsManifest is not a list");
  size_t at = 0;
  for (const Json& group : manifest) {
    if (!group.is_object() || !group.contains("weights") || !group["weights"].is_array()) {
      return invalid(what + ": a weightsManifest group has no 'weights' list");
    }
    for (const Json& w : group["weights"]) {
      if (!w.is_object() || !w.contains("name") || !w["name"].is_string() || !w.contains("dtype") || !w["dtype"].is_string() ||
          !w.contains("shape") || !w["shape"].is_array()) {
        return invalid(what + ": a weight entry lacks name, dtype or shape");
      }
      const std::string name = w["name"].get<std::string>();
      const std::string dt = w["dtype"].get<std::string>();
      const std::string where = what + ": weight '" + name + "'";
      if (w["shape"].size() > kMaxRank) return unsupported(where + ": rank above " + std::to_string(kMaxRank));
      Shape shape;
      int64_t numel = 1;
      for (const Json& d : w["shape"]) {
        auto v = json_int(d);
        if (!v || *v < 0 || *v > (int64_t{1} << 40)) return invalid(where + ": bad dimension in its shape");
        shape.push_back(*v);
        numel = *v == 0 ? 0 : (numel > (int64_t{1} << 40) / *v ? (int64_t{1} << 40) : numel * *v);
      }
      std::string qdt;
      double scale = 1, minv = 0;
      if (w.contains("quantization") && !w["quantization"].is_null()) {
        const Json& q = w["quantization"];
        if (!q.is_object() || !q.contains("dtype") || !q["dtype"].is_string()) return invalid(where + ": bad quantization entry");
        qdt = q["dtype"].get<std::string>();
        if (qdt == "uint8" || qdt == "uint16") {
          if (!q.contains("scale") || !q["scale"].is_number() || !q.contains("min") || !q["min"].is_number()) {
            return invalid(where + ": " + qdt + " quantization needs numeric scale and min");
          }
          scale = q["scale"].get<double>();
          minv = q["min"].get<double>();
        } else if (qdt != "float16") {
          return unsupported(where + ": quantization dtype '" + qdt + "'");
        }
      }
      DType target;
      if (dt == "float32") target = DType::f32;
      else if (dt == "int32") target = DType::i32;
      else if (dt == "bool") target = DType::b8;
      else return unsupported(where + ": dtype '" + dt + "'");
      if (!qdt.empty() && target == DType::b8) return invalid(where + ": a quantized bool");
      if (qdt == "float16" && target != DType::f32) return invalid(where + ": float16 storage of a non-float weight");
      const size_t stored = qdt.empty() ? dtype_size(target) : (qdt == "uint8" ? 1 : 2);
      const size_t nbytes = static_cast<size_t>(numel) * stored;
      if (at > bytes.size() || bytes.size() - at < nbytes) {
        return invalid(where + ": needs " + std::to_string(nbytes) + " bytes at offset " + std::to_string(at) + " but the weight files hold " +
                       std::to_string(bytes.size()));
      }
      RKD_ASSIGN(Tensor t, Tensor::zeros(target, shape));
      const uint8_t* src = bytes.data() + at;
      if (qdt.empty()) {
        std::memcpy(t.raw(), src, nbytes);
        if (target == DType::b8) {
          for (int64_t i = 0; i < numel; ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
        }
      } else {
        for (int64_t i = 0; i < numel; ++i) {
          if (qdt == "float16") {
            uint16_t h;
            std::memcpy(&h, src + 2 * i, 2);
            t.data<float>()[i] = f16_to_f32(h);
            continue;
          }
          uint16_t qv = 0;
          if (qdt == "uint8") qv = src[i];
          else std::memcpy(&qv, src + 2 * i, 2);
          const double v = qv * scale + minv;
          if (target == DType::f32) t.data<float>()[i] = static_cast<float>(v);
          else t.data<int32_t>()[i] = static_cast<int32_t>(std::clamp(std::round(v), -2147483648.0, 2147483647.0));
        }
      }
      at += nbytes;
      out[name] = std::move(t);
    }
  }
  if (at != bytes.size()) {
    return invalid(what + ": the manifest describes " + std::to_string(at) + " bytes of weights but the files hold " + std::to_string(bytes.size()));
  }
  return out;
}

// Normalises an input reference: "^ctrl" -> "" (dropped), "x:0" -> "x".
std::string normalise_ref(const std::string& s) {
  if (!s.empty() && s[0] == '^') return "";
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ":0") == 0) return s.substr(0, s.size() - 2);
  return s;
}

std::string node_of(const std::string& ref) {
  const size_t c = ref.rfind(':');
  return c == std::string::npos ? ref : ref.substr(0, c);
}

Result<std::vector<TfNode>> read_nodes(const Json& topology, const std::string& what) {
  if (!topology.is_object() || !topology.contains("node") || !topology["node"].is_array()) {
    return invalid(what + ": modelTopology has no 'node' list");
  }
  if (topology.contains("library") && topology["library"].is_object() && topology["library"].contains("function") &&
      topology["library"]["function"].is_array() && !topology["library"]["function"].empty()) {
    return unsupported(what + ": graph functions (control flow) in modelTopology.library");
  }
  std::vector<TfNode> nodes;
  std::set<std::string> names;
  for (const Json& j : topology["node"]) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("op") || !j["op"].is_string()) {
      return invalid(what + ": a node lacks 'name' or 'op'");
    }
    TfNode n;
    n.name = j["name"].get<std::string>();
    n.op = j["op"].get<std::string>();
    if (n.name.empty() || n.name.find('#') != std::string::npos || n.name.find(':') != std::string::npos) {
      return invalid(what + ": node name '" + n.name + "' is empty or holds '#' or ':'");
    }
    if (!names.insert(n.name).second) return invalid(what + ": two nodes are named '" + n.name + "'");
    if (j.contains("input")) {
      if (!j["input"].is_array()) return invalid(what + ": node '" + n.name + "': 'input' is not a list");
      for (const Json& i : j["input"]) {
        if (!i.is_string()) return invalid(what + ": node '" + n.name + "': an input is not a string");
        std::string r = normalise_ref(i.get<std::string>());
        if (!r.empty()) n.inputs.push_back(std::move(r));
      }
    }
    if (j.contains("attr")) {
      if (!j["attr"].is_object()) return invalid(what + ": node '" + n.name + "': 'attr' is not an object");
      n.attr = &j["attr"];
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// Topological order (inputs first), failing on cycles and on references to missing nodes.
Result<std::vector<size_t>> order_nodes(const std::vector<TfNode>& nodes, const std::string& what) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i].name] = i;
  std::vector<int> state(nodes.size(), 0);  // 0 new, 1 on stack, 2 done
  std::vector<size_t> order;
  for (size_t root = 0; root < nodes.size(); ++root) {
    if (state[root]) continue;
    std::vector<std::pair<size_t, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      if (next < nodes[v].inputs.size()) {
        const std::string& ref = nodes[v].inputs[next++];
        auto it = index.find(node_of(ref));
        if (it == index.end()) {
          return invalid(what + ": node '" + nodes[v].name + "' reads '" + ref + "', which no node produces");
        }
        if (state[it->second] == 1) return invalid(what + ": node '" + nodes[v].name + "' is on a cycle");
        if (state[it->second] == 0) {
          state[it->second] = 1;
          stack.push_back({it->second, 0});
        }
        continue;
      }
      state[v] = 2;
      order.push_back(v);
      stack.pop_back();
    }
  }
  return order;
}

const Json* signature_of(const Json& j) {
  if (j.contains("signature") && j["signature"].is_object()) return &j["signature"];
  if (j.contains("userDefinedMetadata") && j["userDefinedMetadata"].is_object() && j["userDefinedMetadata"].contains("signature") &&
      j["userDefinedMetadata"]["signature"].is_object()) {
    return &j["userDefinedMetadata"]["signature"];
  }
  return nullptr;
}

// The dims of a TensorShapeProto in JSON ({"dim": [{"size": "-1"}, ...]}), or nullopt.
std::optional<std::vector<int64_t>> shape_proto(const Json& s) {
  if (!s.is_object() || (s.contains("unknownRank") && s["unknownRank"] == true)) return std::nullopt;
  std::vector<int64_t> dims;
  if (!s.contains("dim")) return dims;
  if (!s["dim"].is_array() || s["dim"].size() > kMaxRank) return std::nullopt;
  for (const Json& d : s["dim"]) {
    if (!d.is_object()) return std::nullopt;
    auto v = d.contains("size") ? json_int(d["size"]) : std::optional<int64_t>(-1);
    if (!v || *v < -1 || *v > (int64_t{1} << 31)) return std::nullopt;
    dims.push_back(*v);
  }
  return dims;
}

Status make_input(ir::Graph& g, Converter& c, const TfNode& n, const Json* sig, const ImportOptions& opt, const std::string& what) {
  RKD_ASSIGN(std::string t, attr_type(n, "dtype", "DT_FLOAT"));
  auto dt = tf::dtype_from_tf(t);
  if (!dt) return unsupported(what + ": input '" + n.name + "' has dtype " + t);
  std::optional<std::vector<int64_t>> dims;
  if (n.attr && n.attr->contains("shape")) {
    const Json& a = (*n.attr)["shape"];
    if (a.is_object() && a.contains("shape")) dims = shape_proto(a["shape"]);
  }
  if (sig && sig->contains("inputs") && (*sig)["inputs"].is_object()) {
    for (const auto& [key, e] : (*sig)["inputs"].items()) {
      if (normalise_ref(key) == n.name && e.is_object() && e.contains("tensorShape")) {
        if (auto sd = shape_proto(e["tensorShape"])) dims = sd;
      }
    }
  }
  RKD_ASSIGN(ir::Value * v, g.add_value(n.name));
  v->dtype = *dt;
  if (dims) {
    ir::Dims d;
    for (size_t i = 0; i < dims->size(); ++i) {
      const int64_t s = (*dims)[i];
      if (s >= 0) d.push_back(ir::Dim{s, ""});
      else if (i == 0) d.push_back(ir::Dim{std::max<int64_t>(opt.batch, 1), ""});
      else d.push_back(ir::Dim{-1, n.name + "_dim" + std::to_string(i)});
    }
    v->shape = d;
  }
  g.inputs.push_back(v);
  c.define(n.name, v);
  return {};
}

}  // namespace

bool is_tfjs_path(const std::string& path) { return path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0; }

Result<Imported> import_tfjs(std::string_view text, std::span<const uint8_t> weight_bytes, const std::string& what, const ImportOptions& opt) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid(what + ": not a JSON object");
  if (j.contains("format") && j["format"] != "graph-model") {
    return unsupported(what + ": format " + j["format"].dump() + " (only TensorFlow.js graph models are read)");
  }
  if (!j.contains("modelTopology")) return invalid(what + ": no modelTopology");
  RKD_ASSIGN(auto nodes, read_nodes(j["modelTopology"], what));
  std::map<std::string, Tensor> weights;
  if (j.contains("weightsManifest")) {
    RKD_ASSIGN(weights, decode_weights(j["weightsManifest"], weight_bytes, what));
  }
  // Everything unsupported, at once.
  std::map<std::string, int> missing;
  for (const TfNode& n : nodes) {
    if (n.op != "Const" && n.op != "Placeholder" && !Converter::supports(n.op)) missing[n.op]++;
  }
  if (!missing.empty()) {
    std::string msg = what + ": TensorFlow ops rkdeploy does not import:";
    for (const auto& [op, k] : missing) msg += " " + op + " (" + std::to_string(k) + " nodes)";
    return unsupported(msg);
  }
  RKD_ASSIGN(auto order, order_nodes(nodes, what));

  Imported out;
  ir::Graph& g = out.graph;
  g.opset = 17;
  g.name = what;
  g.producer = "TensorFlow.js";
  if (j.contains("convertedBy") && j["convertedBy"].is_string()) g.producer += " (converted by " + j["convertedBy"].get<std::string>() + ")";
  const Json* sig = signature_of(j);
  Converter c(g, opt.evaluate);
  std::set<std::string> read;
  for (const TfNode& n : nodes) {
    for (const std::string& r : n.inputs) read.insert(node_of(r));
  }
  for (size_t idx : order) {
    const TfNode& n = nodes[idx];
    if (n.op == "Const") {
      auto it = weights.find(n.name);
      if (it == weights.end()) return invalid(what + ": Const node '" + n.name + "' has no entry in the weightsManifest");
      RKD_ASSIGN(ir::Value * v, g.add_value(n.name));
      v->dtype = it->second.dtype();
      ir::Dims d;
      for (int64_t s : it->second.shape()) d.push_back(ir::Dim{s, ""});
      v->shape = d;
      v->constant = it->second;
      c.define(n.name, v);
      continue;
    }
    if (n.op == "Placeholder") {
      RKD_TRY(make_input(g, c, n, sig, opt, what));
      continue;
    }
    Status s = c.convert(n);
    if (!s.ok()) return s.error().with_context(what);
  }
  std::vector<std::string> outs;
  if (sig && sig->contains("outputs") && (*sig)["outputs"].is_object()) {
    for (const auto& [key, e] : (*sig)["outputs"].items()) {
      std::string name = key;
      if (e.is_object() && e.contains("name") && e["name"].is_string()) name = e["name"].get<std::string>();
      outs.push_back(normalise_ref(name));
    }
  } else {
    for (const TfNode& n : nodes) {
      if (!read.count(n.name) && n.op != "Const" && n.op != "Placeholder" && n.op != "NoOp") outs.push_back(n.name);
    }
  }
  if (outs.empty()) return invalid(what + ": the model has no outputs");
  for (const std::string& o : outs) {
    if (!c.has(o)) return invalid(what + ": signature output '" + o + "' is not a tensor of the graph");
    auto v = c.output(o);
    if (!v.ok()) return v.error().with_context(what);
    if (std::find(g.outputs.begin(), g.outputs.end(), v.value()) == g.outputs.end()) g.outputs.push_back(v.value());
  }
  RKD_TRY(g.validate());
  return out;
}

Result<Imported> import_tfjs_file(const std::string& json_path, const ImportOptions& opt) {
  namespace fs = std::filesystem;
  RKD_ASSIGN(const std::string text, read_file_bytes(json_path));
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid(json_path + ": not a JSON object");
  std::vector<uint8_t> bytes;
  if (j.contains("weightsManifest") && j["weightsManifest"].is_array()) {
    const fs::path dir = fs::path(json_path).parent_path();
    for (const Json& group : j["weightsManifest"]) {
      if (!group.is_object() || !group.contains("paths") || !group["paths"].is_array()) {
        return invalid(json_path + ": a weightsManifest group has no 'paths' list");
      }
      for (const Json& p : group["paths"]) {
        if (!p.is_string()) return invalid(json_path + ": a weight path is not a string");
        RKD_ASSIGN(const std::string shard_path, path_inside_folder(dir.string(), p.get<std::string>(), json_path + ": weight path"));
        Result<std::string> shard = read_file_bytes(shard_path);
        if (!shard.ok()) return shard.error().with_context(json_path + ": weight file");
        bytes.insert(bytes.end(), shard->begin(), shard->end());
      }
    }
  }
  return import_tfjs(text, bytes, json_path, opt);
}

}  // namespace rkd::tfjs_frontend
