#include "frontends/onnx/onnx_import.h"

#include <algorithm>

#include "ir/passes/rknn_custom_op.h"
#include "kernels/rknn_custom_op_contract.h"

#include <limits>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "core/npy.h"

namespace rkd::onnx_frontend {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMinOpset = 11, kMaxOpset = 22;

Result<DType> dtype_from_onnx(int32_t t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    case onnx::TensorProto::INT8: return DType::i8;
    case onnx::TensorProto::UINT8: return DType::u8;
    case onnx::TensorProto::INT16: return DType::i16;
    case onnx::TensorProto::INT32: return DType::i32;
    case onnx::TensorProto::INT64: return DType::i64;
    case onnx::TensorProto::BOOL: return DType::b8;
    default: break;
  }
  const char* name = onnx::TensorProto_DataType_IsValid(t) ? onnx::TensorProto_DataType_Name(t).c_str() : "unknown";
  return unsupported(what + ": element type " + std::to_string(t) + " (" + name + ")");
}

// The first value <= 0 of an attribute that ONNX defines as positive and its shape inference
// divides by (strides, dilations, kernel_shape, blocksize, group), if any.
std::optional<int64_t> non_positive(const onnx::AttributeProto& a) {
  static const std::set<std::string> kPositive = {"strides", "dilations", "kernel_shape", "blocksize", "group"};
  if (!kPositive.count(a.name())) return std::nullopt;
  if (a.type() == onnx::AttributeProto::INT && a.i() <= 0) return a.i();
  if (a.type() == onnx::AttributeProto::INTS) {
    for (int64_t v : a.ints()) {
      if (v <= 0) return v;
    }
  }
  return std::nullopt;
}

// Reads external data for a tensor: location relative to base_dir, offset, length.
Result<std::string> read_external(const onnx::TensorProto& t, const std::string& base_dir, uint64_t nbytes, const std::string& what) {
  std::string location;
  uint64_t offset = 0, length = nbytes;
  bool have_length = false;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset") offset = std::stoull(kv.value());
      if (kv.key() == "length") length = std::stoull(kv.value()), have_length = true;
    } catch (const std::exception&) {
      return invalid(what + ": external_data field '" + kv.key() + "' is not a number: '" + kv.value() + "'");
    }
  }
  if (location.empty()) return invalid(what + ": external data without a location");
  if (base_dir.empty()) return unsupported(what + ": external data needs the model's folder (load from a file)");
  if (have_length && length != nbytes) {
    return invalid(what + ": external data length " + std::to_string(length) + " but the shape needs " + std::to_string(nbytes) + " bytes");
  }
  RKD_ASSIGN(const std::string full, path_inside_folder(base_dir, location, what + ": external data location"));
  auto bytes = read_file_range(full, offset, nbytes);
  if (!bytes) return bytes.error().with_context(what + ": external data");
  return bytes;
}

Result<Tensor> tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir, const std::string& what) {
  if (t.has_segment()) return unsupported(what + ": segmented tensor");
  RKD_ASSIGN(DType dt, dtype_from_onnx(t.data_type(), what));
  Shape shape(t.dims().begin(), t.dims().end());
  RKD_ASSIGN(uint64_t nbytes, checked_shape_bytes(shape, dt, what));
  const uint64_t numel = dtype_size(dt) ? nbytes / dtype_size(dt) : 0;
  std::string external;
  const std::string* raw = nullptr;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    RKD_ASSIGN(external, read_external(t, base_dir, nbytes, what));
    raw = &external;
  } else if (t.has_raw_data()) {
    raw = &t.raw_data();
  }
  if (raw) {
    if (raw->size() != nbytes) {
      return invalid(what + ": raw data has " + std::to_string(raw->size()) + " bytes but shape " + shape_to_string(shape) + " of " + dtype_name(dt) +
                     " needs " + std::to_string(nbytes));
    }
    RKD_ASSIGN(Tensor out, Tensor::uninitialized(dt, shape));
    if (nbytes) std::memcpy(out.raw(), raw->data(), static_cast<size_t>(nbytes));
    return out;
  }
  auto count_mismatch = [&](int64_t have) {
    return invalid(what + ": holds " + std::to_string(have) + " values but shape " + shape_to_string(shape) + " needs " + std::to_string(numel));
  };
  switch (dt) {
    case DType::f32: {
      if (static_cast<uint64_t>(t.float_data_size()) != numel) return count_mismatch(t.float_data_size());
      RKD_ASSIGN(Tensor out, Tensor::uninitialized(dt, shape));
      std::copy(t.float_data().begin(), t.float_data().end(), out.data<float>());
      return out;
    }
    case DType::i64: {
      if (static_cast<uint64_t>(t.int64_data_size()) != numel) return count_mismatch(t.int64_data_size());
      RKD_ASSIGN(Tensor out, Tensor::uninitialized(dt, shape));
      std::copy(t.int64_data().begin(), t.int64_data().end(), out.data<int64_t>());
      return out;
    }
    default: {
      // int32_data carries int32, int16, int8, uint8, bool and the bit patterns of
      // float16/bfloat16, one value per element.
      if (static_cast<uint64_t>(t.int32_data_size()) != numel) return count_mismatch(t.int32_data_size());
      RKD_ASSIGN(Tensor out, Tensor::uninitialized(dt, shape));
      for (int64_t i = 0; i < static_cast<int64_t>(numel); ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        switch (dt) {
          case DType::i32: out.data<int32_t>()[i] = v; break;
          case DType::i16: out.data<int16_t>()[i] = static_cast<int16_t>(v); break;
          case DType::i8: out.data<int8_t>()[i] = static_cast<int8_t>(v); break;
          case DType::u8: out.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
          case DType::b8: out.data<uint8_t>()[i] = v != 0; break;
          case DType::f16:
          case DType::bf16: out.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
          default: return unsupported(what + ": typed data field for " + dtype_name(dt));
        }
      }
      return out;
    }
  }
}

void apply_type(ir::Value* v, const onnx::TypeProto& type, const std::string& what, std::vector<std::string>* problems) {
  if (!type.has_tensor_type()) {
    problems->push_back(what + ": not a tensor type (sequences, maps and optionals are not supported)");
    return;
  }
  const auto& tt = type.tensor_type();
  if (tt.elem_type() != 0) {
    auto dt = dtype_from_onnx(tt.elem_type(), what);
    if (dt.ok()) {
      v->dtype = *dt;
    } else {
      problems->push_back(dt.error().message);
    }
  }
  if (tt.has_shape()) {
    ir::Dims dims;
    for (const auto& d : tt.shape().dim()) {
      ir::Dim x;
      if (d.has_dim_value() && d.dim_value() >= 0) {
        x.value = d.dim_value();
      } else if (d.has_dim_param()) {
        x.symbol = d.dim_param();
      }
      dims.push_back(x);
    }
    v->shape = dims;
  }
}

Result<ir::Attribute> attribute_from_proto(const onnx::AttributeProto& a, const std::string& base_dir, const std::string& what) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return ir::Attribute(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::FLOAT: return ir::Attribute(a.f());
    case onnx::AttributeProto::STRING: return ir::Attribute(a.s());
    case onnx::AttributeProto::INTS: return ir::Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS: return ir::Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::STRINGS: return ir::Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case onnx::AttributeProto::TENSOR: {
      RKD_ASSIGN(Tensor t, tensor_from_proto(a.t(), base_dir, what));
      return ir::Attribute(std::move(t));
    }
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS: return unsupported(what + ": subgraph attribute (If/Loop/Scan bodies)");
    default: break;
  }
  return unsupported(what + ": attribute kind " + std::to_string(a.type()));
}

std::string join_problems(const std::vector<std::string>& p) {
  std::string s = std::to_string(p.size()) + (p.size() == 1 ? " problem" : " problems") + ":";
  for (const auto& x : p) s += "\n  - " + x;
  return s;
}

}  // namespace

Result<Tensor> import_onnx_tensor(std::span<const uint8_t> bytes, const std::string& what) {
  onnx::TensorProto t;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) || !t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return invalid(what + ": not a serialized ONNX TensorProto");
  }
  return tensor_from_proto(t, "", what);
}

Result<Imported> import_onnx_bytes(std::span<const uint8_t> bytes, const std::string& what, const std::string& base_dir, const ImportOptions& opt) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return unsupported(what + ": model files over 2 GiB must keep their weights in external data");
  }
  onnx::ModelProto model;
  {
    google::protobuf::io::ArrayInputStream ais(bytes.data(), static_cast<int>(bytes.size()));
    google::protobuf::io::CodedInputStream cis(&ais);
    cis.SetTotalBytesLimit(INT_MAX);
    cis.SetRecursionLimit(64);
    if (!model.ParseFromCodedStream(&cis) || !cis.ConsumedEntireMessage()) {
      return invalid(what + ": not an ONNX model (protobuf parse failed)");
    }
  }
  if (!model.has_graph()) return invalid(what + ": the model has no graph");
  int64_t opset = -1;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (opset < 0) {
    if (model.opset_import_size() > 0) {
      return unsupported(what + ": the model uses only operator domain '" + model.opset_import(0).domain() +
                         "' (rkdeploy reads the default ONNX domain)");
    }
    return invalid(what + ": no opset_import for the default domain");
  }
  if (opset < kMinOpset || opset > kMaxOpset) {
    return unsupported(what + ": opset " + std::to_string(opset) + " (rkdeploy reads opsets " + std::to_string(kMinOpset) + "-" +
                       std::to_string(kMaxOpset) + ")");
  }
  onnx::GraphProto& gp = *model.mutable_graph();

  Imported out;
  out.ir_version = model.ir_version();
  ir::Graph& g = out.graph;
  g.opset = opset;
  g.name = gp.name();
  g.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  std::vector<std::string> problems;    // unsupported findings, reported together
  std::vector<std::string> structural;  // invalid findings

  // Initializers first: they may also be listed as graph inputs (older exporters).
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const auto& t = gp.initializer(i);
    const std::string tw = what + ": initializer '" + t.name() + "'";
    auto v = g.add_value(t.name());
    if (!v.ok()) {
      structural.push_back(tw + ": " + v.error().message);
      continue;
    }
    auto tensor = tensor_from_proto(t, base_dir, tw);
    if (!tensor.ok()) {
      (tensor.error().kind == ErrorKind::unsupported ? problems : structural).push_back(tensor.error().message);
      continue;
    }
    (*v)->dtype = tensor->dtype();
    ir::Dims dims;
    for (int64_t d : tensor->shape()) dims.push_back(ir::Dim{d, ""});
    (*v)->shape = dims;
    (*v)->constant = std::move(tensor).value();
  }
  if (gp.sparse_initializer_size() > 0) problems.push_back(what + ": sparse initializers");
  if (!structural.empty()) return invalid(join_problems(structural));

  // Bind the batch before shape inference so that it propagates.
  for (auto& in : *gp.mutable_input()) {
    if (g.find(in.name())) continue;
    if (opt.batch > 0 && in.type().has_tensor_type() && in.type().tensor_type().has_shape() && in.type().tensor_type().shape().dim_size() > 0) {
      auto* d0 = in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
      if (!d0->has_dim_value()) d0->set_dim_value(opt.batch);
    }
  }
  for (const auto& in : gp.input()) {
    if (g.find(in.name())) {
      if (g.find(in.name())->is_constant()) continue;  // initializer listed as input
      structural.push_back(what + ": graph input '" + in.name() + "' is defined twice");
      continue;
    }
    auto v = g.add_value(in.name());
    if (!v.ok()) {
      structural.push_back(what + ": graph input: " + v.error().message);
      continue;
    }
    apply_type(*v, in.type(), what + ": graph input '" + in.name() + "'", &problems);
    g.inputs.push_back(*v);
  }

  // Nodes, in file order, which ONNX requires to be topological.
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    const std::string nname = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
    const std::string nw = what + ": node '" + nname + "' (" + np.op_type() + ")";
    std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    if (!domain.empty()) problems.push_back(nw + ": operator domain '" + domain + "' is not supported");
    std::vector<ir::Value*> ins;
    bool ok = true;
    for (const auto& name : np.input()) {
      if (name.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      ir::Value* v = g.find(name);
      if (!v) {
        structural.push_back(nw + ": input '" + name +
                             "' is not produced by a graph input, an initializer or an "
                             "earlier node");
        ok = false;
        break;
      }
      ins.push_back(v);
    }
    if (!ok) continue;
    auto n = g.add_node(nname, np.op_type(), domain, ins, {np.output().begin(), np.output().end()});
    if (!n.ok()) {
      structural.push_back(what + ": " + n.error().message);
      continue;
    }
    for (const auto& a : np.attribute()) {
      // ONNX's own shape inference divides by these (SIGFPE on 0): refused before it runs.
      if (const auto zero = non_positive(a)) {
        structural.push_back(nw + ": attribute '" + a.name() + "' must be positive, got " + std::to_string(*zero));
        continue;
      }
      auto attr = attribute_from_proto(a, base_dir, nw + ": attribute '" + a.name() + "'");
      if (!attr.ok()) {
        (attr.error().kind == ErrorKind::unsupported ? problems : structural).push_back(attr.error().message);
        continue;
      }
      (*n)->attrs[a.name()] = std::move(attr).value();
    }
  }
  for (const auto& o : gp.output()) {
    ir::Value* v = g.find(o.name());
    if (!v) {
      structural.push_back(what + ": graph output '" + o.name() + "' is never produced");
      continue;
    }
    apply_type(v, o.type(), what + ": graph output '" + o.name() + "'", &problems);
    g.outputs.push_back(v);
  }
  if (!structural.empty()) return invalid(join_problems(structural));
  if (!problems.empty()) return unsupported(join_problems(problems));
  RKD_TRY(g.validate());

  if (opt.infer_shapes) {
    try {
      onnx::shape_inference::InferShapes(model);
      for (const auto& vi : model.graph().value_info()) {
        if (ir::Value* v = g.find(vi.name())) {
          std::vector<std::string> ignored;
          apply_type(v, vi.type(), vi.name(), &ignored);
        }
      }
      for (const auto& vi : model.graph().output()) {
        if (ir::Value* v = g.find(vi.name())) {
          std::vector<std::string> ignored;
          apply_type(v, vi.type(), vi.name(), &ignored);
        }
      }
    } catch (const std::exception& e) {
      out.notes.push_back(std::string("ONNX shape inference failed: ") + e.what());
    }
  }
  // The vendor runtime's custom nodes rkdeploy export --rknn-custom-op writes, expanded back into
  // the operations they stand for (ir/passes/rknn_custom_op.h).
  const bool custom = std::any_of(g.nodes().begin(), g.nodes().end(), [](const auto& n) {
    return n->domain.empty() && (n->op_type == rknn_contract::kMsdaType || n->op_type == rknn_contract::kGridSampleType);
  });
  if (custom) {
    const Status s = ir::from_rknn_custom_ops_pass().run(g);
    if (!s.ok()) return s.error().with_context(what);
    out.notes.push_back("the vendor runtime's custom nodes (cstMSDeformAttn, cstGridSample) expanded back into rkdeploy's operations");
  }
  return out;
}

Result<Imported> import_onnx_file(const std::string& path, const ImportOptions& opt) {
  RKD_ASSIGN(std::string bytes, read_file_bytes(path));
  const std::string dir = fs::path(path).parent_path().string();
  return import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), path, dir.empty() ? "." : dir, opt);
}

}  // namespace rkd::onnx_frontend
