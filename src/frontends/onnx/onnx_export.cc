// IR -> ONNX ModelProto (contract in onnx_export.h).
#include "frontends/onnx/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace rkd::onnx_frontend {

namespace {

int32_t onnx_type(DType t) {
  switch (t) {
    case DType::f32: return onnx::TensorProto::FLOAT;
    case DType::f16: return onnx::TensorProto::FLOAT16;
    case DType::bf16: return onnx::TensorProto::BFLOAT16;
    case DType::i8: return onnx::TensorProto::INT8;
    case DType::u8: return onnx::TensorProto::UINT8;
    case DType::i16: return onnx::TensorProto::INT16;
    case DType::i32: return onnx::TensorProto::INT32;
    case DType::i64: return onnx::TensorProto::INT64;
    case DType::b8: return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

void fill_tensor(const Tensor& t0, const std::string& name, onnx::TensorProto* p) {
  const Tensor t = t0.contiguous();
  p->set_name(name);
  p->set_data_type(onnx_type(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

void fill_value_info(const ir::Value& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name);
  auto* tt = p->mutable_type()->mutable_tensor_type();
  if (v.dtype) tt->set_elem_type(onnx_type(*v.dtype));
  if (v.shape) {
    auto* sh = tt->mutable_shape();
    for (const ir::Dim& d : *v.shape) {
      auto* dim = sh->add_dim();
      if (d.is_static()) dim->set_dim_value(d.value);
      else if (!d.symbol.empty()) dim->set_dim_param(d.symbol);
    }
  }
}

void fill_attribute(const std::string& key, const ir::Attribute& a, onnx::AttributeProto* p) {
  p->set_name(key);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          p->set_type(onnx::AttributeProto::INT);
          p->set_i(v);
        } else if constexpr (std::is_same_v<T, float>) {
          p->set_type(onnx::AttributeProto::FLOAT);
          p->set_f(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          p->set_type(onnx::AttributeProto::STRING);
          p->set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          p->set_type(onnx::AttributeProto::INTS);
          for (int64_t x : v) p->add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          p->set_type(onnx::AttributeProto::FLOATS);
          for (float x : v) p->add_floats(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          p->set_type(onnx::AttributeProto::STRINGS);
          for (const auto& x : v) p->add_strings(x);
        } else {
          p->set_type(onnx::AttributeProto::TENSOR);
          fill_tensor(v, "", p->mutable_t());
        }
      },
      a);
}

}  // namespace

Result<std::string> export_onnx_bytes(const ir::Graph& g) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("rkdeploy");
  m.set_producer_version("0.1.0");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(g.opset > 0 ? g.opset : 17);
  std::set<std::string> domains;
  auto* gp = m.mutable_graph();
  gp->set_name(g.name.empty() ? "rkdeploy" : g.name);
  std::set<const ir::Value*> io;
  for (const ir::Value* v : g.inputs) {
    fill_value_info(*v, gp->add_input());
    io.insert(v);
  }
  for (const ir::Value* v : g.outputs) {
    if (!v->dtype) return invalid("export: output '" + v->name + "' has no known dtype");
    fill_value_info(*v, gp->add_output());
    io.insert(v);
  }
  for (const auto& v : g.values()) {
    if (v->constant && !v->producer) {
      fill_tensor(*v->constant, v->name, gp->add_initializer());
    } else if (!io.count(v.get()) && v->dtype && v->producer) {
      fill_value_info(*v, gp->add_value_info());
    }
  }
  std::set<std::string> node_names;  // ONNX requires unique node names
  for (const auto& n : g.nodes()) {
    auto* np = gp->add_node();
    std::string nn = n->name;
    for (int k = 1; !node_names.insert(nn).second; ++k) nn = n->name + "#" + std::to_string(k);
    np->set_name(nn);
    np->set_op_type(n->op_type);
    if (!n->domain.empty()) {
      np->set_domain(n->domain);
      domains.insert(n->domain);
    }
    for (const ir::Value* v : n->inputs) np->add_input(v ? v->name : "");
    for (const ir::Value* v : n->outputs) np->add_output(v ? v->name : "");
    for (const auto& [k, a] : n->attrs) fill_attribute(k, a, np->add_attribute());
  }
  for (const std::string& d : domains) {
    auto* o = m.add_opset_import();
    o->set_domain(d);
    o->set_version(1);
  }
  std::string out;
  if (!m.SerializeToString(&out)) return invalid("export: the model cannot be serialized (over 2 GB?)");
  return out;
}

Status export_onnx_file(const ir::Graph& g, const std::string& path) {
  RKD_ASSIGN(std::string bytes, export_onnx_bytes(g));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return io_error(path + ": cannot write " + tmp);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::remove(tmp.c_str());
      return io_error(path + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return io_error(path + ": " + ec.message());
  }
  return {};
}

}  // namespace rkd::onnx_frontend
