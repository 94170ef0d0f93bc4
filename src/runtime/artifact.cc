// The .rkd artifact's writer and its checked reader (artifact.h; schema artifact.fbs).
#include "runtime/artifact.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "artifact_generated.h"
#include "core/npy.h"
#include "ir/passes/shape_inference.h"

namespace rkd::runtime {

namespace fb = rkd::artifact_fb;

namespace {

constexpr size_t kMaxTensorBytes = size_t{1} << 31;
// The device memory an artifact may claim (its zero runs are not stored, so a small file can
// claim much): 1 GiB, far above any detector's (tens of MB).
constexpr uint64_t kMaxDeviceBytes = uint64_t{1} << 30;

flatbuffers::Offset<fb::Tensor> tensor_of(flatbuffers::FlatBufferBuilder& b, const Tensor& t0) {
  const Tensor t = t0.contiguous();
  const auto dtype = b.CreateString(dtype_name(t.dtype()));
  const auto shape = b.CreateVector(std::vector<int64_t>(t.shape().begin(), t.shape().end()));
  const auto data = b.CreateVector(static_cast<const uint8_t*>(t.raw()), t.nbytes());
  return fb::CreateTensor(b, dtype, shape, data);
}

flatbuffers::Offset<fb::Attr> attr_of(flatbuffers::FlatBufferBuilder& b, const std::string& name, const ir::Attribute& a) {
  // The payload first: a table is built after its strings and vectors.
  const auto n = b.CreateString(name);
  if (const auto* v = std::get_if<int64_t>(&a)) return fb::CreateAttr(b, n, fb::AttrKind_Int, *v);
  if (const auto* v = std::get_if<float>(&a)) return fb::CreateAttr(b, n, fb::AttrKind_Float, 0, *v);
  if (const auto* v = std::get_if<std::string>(&a)) return fb::CreateAttr(b, n, fb::AttrKind_String, 0, 0, b.CreateString(*v));
  if (const auto* v = std::get_if<std::vector<int64_t>>(&a)) return fb::CreateAttr(b, n, fb::AttrKind_Ints, 0, 0, 0, b.CreateVector(*v));
  if (const auto* v = std::get_if<std::vector<float>>(&a)) return fb::CreateAttr(b, n, fb::AttrKind_Floats, 0, 0, 0, 0, b.CreateVector(*v));
  if (const auto* v = std::get_if<std::vector<std::string>>(&a))
    return fb::CreateAttr(b, n, fb::AttrKind_Strings, 0, 0, 0, 0, 0, b.CreateVectorOfStrings(*v));
  return fb::CreateAttr(b, n, fb::AttrKind_Tensor, 0, 0, 0, 0, 0, 0, tensor_of(b, std::get<Tensor>(a)));
}

Status check_sizes(const ir::Graph& g) {
  for (const auto& v : g.values()) {
    if (v->name.empty()) return invalid("artifact: a value without a name");
    if (v->constant && v->constant->nbytes() >= kMaxTensorBytes) return invalid("artifact: constant '" + v->name + "' is 2 GiB or more");
  }
  return {};
}

}  // namespace

namespace {

constexpr size_t kDigestBytes = 32;

// Where the digest's 32 bytes sit in a verified buffer, or nullopt when it has none of that size.
std::optional<size_t> digest_offset(std::span<const uint8_t> bytes) {
  const fb::Artifact* fa = fb::GetArtifact(bytes.data());
  if (!fa->digest() || fa->digest()->size() != kDigestBytes) return std::nullopt;
  return static_cast<size_t>(fa->digest()->data() - bytes.data());
}

// SHA-256 of `bytes` with the kDigestBytes at `at` read as zeros.
Result<std::array<uint8_t, kDigestBytes>> digest_of(std::span<const uint8_t> bytes, size_t at) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const std::array<uint8_t, kDigestBytes> zeros{};
  std::array<uint8_t, kDigestBytes> out{};
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 || EVP_DigestUpdate(ctx.get(), bytes.data(), at) != 1 ||
      EVP_DigestUpdate(ctx.get(), zeros.data(), zeros.size()) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data() + at + kDigestBytes, bytes.size() - at - kDigestBytes) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out.data(), &len) != 1 || len != kDigestBytes) {
    return Error{ErrorKind::internal, "SHA-256 (OpenSSL's libcrypto) failed"};
  }
  return out;
}

// Names reach terminals and file names (inspect, run, the C example's --dump): no control
// characters (an escape sequence would act on the terminal).
Status printable(const std::string& s, const std::string& at) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return invalid(at + ": holds the control character " + std::to_string(c) + "; names must be printable");
  }
  return {};
}

// What the reader checks with printable(), checked before anything is written: a graph whose
// names the reader would refuse is not written.
Status check_names(const ir::Graph& g) {
  size_t i = 0;
  for (const auto& v : g.values()) RKD_TRY(printable(v->name, "value " + std::to_string(i++) + ": name"));
  i = 0;
  for (const auto& n : g.nodes()) {
    const std::string at = "node " + std::to_string(i++);
    RKD_TRY(printable(n->name, at + ": name"));
    RKD_TRY(printable(n->op_type, at + ": op type"));
    RKD_TRY(printable(n->domain, at + ": domain"));
    for (const auto& [k, v] : n->attrs) RKD_TRY(printable(k, at + ": attribute name"));
  }
  return {};
}

// The identifier, then the FlatBuffers verifier (bounds, nesting).
bool verified(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8 || !fb::ArtifactBufferHasIdentifier(bytes.data())) return false;
  flatbuffers::Verifier v(bytes.data(), bytes.size(), 64, 10000000);
  return fb::VerifyArtifactBuffer(v);
}

}  // namespace

Status stamp_artifact_digest(std::vector<uint8_t>& bytes) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0 || !verified(bytes)) return invalid("not a verifiable artifact buffer");
  const auto at = digest_offset(bytes);
  if (!at) return invalid("the artifact has no 32-byte digest field");
  RKD_ASSIGN(const auto d, digest_of(bytes, *at));
  std::memcpy(bytes.data() + *at, d.data(), d.size());
  return {};
}

Result<std::vector<uint8_t>> serialize_artifact(const Artifact& a, const ir::Graph& g) {
  RKD_TRY(check_sizes(g));
  RKD_TRY(check_names(g));
  flatbuffers::FlatBufferBuilder b(1 << 20);
  std::map<const ir::Value*, int32_t> index;
  std::vector<flatbuffers::Offset<fb::Value>> values;
  for (const auto& v : g.values()) {
    index[v.get()] = static_cast<int32_t>(values.size());
    const auto name = b.CreateString(v->name);
    const auto dtype = b.CreateString(v->dtype ? dtype_name(*v->dtype) : "");
    std::vector<flatbuffers::Offset<fb::Dim>> dims;
    if (v->shape)
      for (const ir::Dim& d : *v->shape) dims.push_back(fb::CreateDim(b, d.is_static() ? d.value : -1, b.CreateString(d.symbol)));
    const auto dv = b.CreateVector(dims);
    const auto c = v->constant ? tensor_of(b, *v->constant) : flatbuffers::Offset<fb::Tensor>();
    values.push_back(fb::CreateValue(b, name, dtype, v->shape.has_value(), dv, c));
  }
  auto indices = [&](const std::vector<ir::Value*>& vs) {
    std::vector<int32_t> out;
    for (const ir::Value* v : vs) out.push_back(v ? index.at(v) : -1);
    return b.CreateVector(out);
  };
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  for (const auto& n : g.nodes()) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const auto& [k, v] : n->attrs) attrs.push_back(attr_of(b, k, v));
    const auto av = b.CreateVector(attrs);
    const auto ins = indices(n->inputs), outs = indices(n->outputs);
    nodes.push_back(fb::CreateNode(b, b.CreateString(n->name), b.CreateString(n->op_type), b.CreateString(n->domain), ins, outs, av));
  }
  std::vector<flatbuffers::Offset<fb::KeyValue>> meta;
  for (const auto& [k, v] : g.metadata) meta.push_back(fb::CreateKeyValue(b, b.CreateString(k), b.CreateString(v)));
  const auto vv = b.CreateVector(values);
  const auto nv = b.CreateVector(nodes);
  const auto gi = indices(g.inputs), go = indices(g.outputs);
  const auto mv = b.CreateVector(meta);
  const auto graph = fb::CreateGraph(b, vv, nv, gi, go, g.opset, b.CreateString(g.producer), b.CreateString(g.name), mv);
  std::vector<flatbuffers::Offset<fb::Chunk>> chunks;
  for (const Artifact::Chunk& c : a.device_chunks) chunks.push_back(fb::CreateChunk(b, c.offset, b.CreateVector(c.bytes)));
  const auto cv = b.CreateVector(chunks);
  const auto digest = b.CreateVector(std::vector<uint8_t>(kDigestBytes, 0));
  const auto root =
      fb::CreateArtifact(b, a.format_version, b.CreateString(a.written_by), b.CreateString(a.source_model), b.CreateString(a.target),
                         b.CreateString(a.strategy), a.mainline, graph, a.device_base, a.device_size, cv, b.CreateString(a.preprocess), digest);
  fb::FinishArtifactBuffer(b, root);
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  RKD_TRY(stamp_artifact_digest(bytes));
  return bytes;
}

namespace {

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// The verifier checks a vector's length prefix (4-byte aligned), not that its 8-byte elements
// are 8-byte aligned: read them bytewise.
std::vector<int64_t> longs(const flatbuffers::Vector<int64_t>* v) {
  std::vector<int64_t> out(v ? v->size() : 0);
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(int64_t));
  return out;
}

Result<Tensor> tensor_from(const fb::Tensor* t, const std::string& what) {
  if (!t) return invalid(what + ": no tensor");
  const auto dt = dtype_from_name(str(t->dtype()));
  if (!dt) return invalid(what + ": unknown dtype '" + str(t->dtype()) + "'");
  const Shape shape = longs(t->shape());
  for (int64_t d : shape)
    if (d < 0) return invalid(what + ": negative dimension in " + shape_to_string(shape));
  RKD_ASSIGN(const uint64_t numel, checked_numel(shape, what));
  const size_t have = t->data() ? t->data()->size() : 0;
  if (numel > kMaxTensorBytes || numel * dtype_size(*dt) != have) {
    return invalid(what + ": " + std::to_string(have) + " data bytes for " + std::string(dtype_name(*dt)) + " " + shape_to_string(shape));
  }
  Tensor out = Tensor::empty(*dt, shape);
  if (have) std::memcpy(out.raw(), t->data()->data(), have);
  return out;
}

Result<ir::Attribute> attr_from(const fb::Attr& a, const std::string& what) {
  switch (a.kind()) {
    case fb::AttrKind_Int: return ir::Attribute(a.i());
    case fb::AttrKind_Float: return ir::Attribute(a.f());
    case fb::AttrKind_String: return ir::Attribute(str(a.s()));
    case fb::AttrKind_Ints: return ir::Attribute(longs(a.ints()));
    case fb::AttrKind_Floats: return ir::Attribute(a.floats() ? std::vector<float>(a.floats()->begin(), a.floats()->end()) : std::vector<float>{});
    case fb::AttrKind_Strings: {
      std::vector<std::string> v;
      if (a.strings())
        for (const flatbuffers::String* s : *a.strings()) v.push_back(str(s));
      return ir::Attribute(std::move(v));
    }
    case fb::AttrKind_Tensor: {
      RKD_ASSIGN(Tensor t, tensor_from(a.t(), what));
      return ir::Attribute(std::move(t));
    }
  }
  return invalid(what + ": unknown attribute kind " + std::to_string(static_cast<int>(a.kind())));
}

Result<std::unique_ptr<ir::Graph>> graph_from(const fb::Graph* fg, const std::string& what) {
  if (!fg) return invalid(what + ": no graph");
  auto g = std::make_unique<ir::Graph>();
  g->opset = fg->opset();
  g->producer = str(fg->producer());
  g->name = str(fg->name());
  if (fg->metadata())
    for (const fb::KeyValue* kv : *fg->metadata()) g->metadata[str(kv->key())] = str(kv->value());
  std::vector<ir::Value*> values;
  if (fg->values()) {
    for (flatbuffers::uoffset_t i = 0; i < fg->values()->size(); ++i) {
      const fb::Value* fv = fg->values()->Get(i);
      const std::string at = what + ": value " + std::to_string(i);
      if (!fv->name() || fv->name()->size() == 0) return invalid(at + ": no name");
      RKD_TRY(printable(fv->name()->str(), at + ": name"));
      auto v = g->add_value(fv->name()->str());
      if (!v.ok()) return invalid(at + " '" + fv->name()->str() + "': the name is taken");
      ir::Value* val = v.value();
      const std::string named = at + " '" + val->name + "'";
      if (fv->dtype() && fv->dtype()->size()) {
        const auto dt = dtype_from_name(fv->dtype()->str());
        if (!dt) return invalid(named + ": unknown dtype '" + fv->dtype()->str() + "'");
        val->dtype = *dt;
      }
      if (fv->has_shape()) {
        ir::Dims dims;
        if (fv->dims())
          for (const fb::Dim* d : *fv->dims())
            dims.push_back(ir::Dim{d->value() >= 0 ? d->value() : -1, d->value() >= 0 ? std::string() : str(d->symbol())});
        val->shape = std::move(dims);
      }
      if (fv->constant()) {
        RKD_ASSIGN(Tensor t, tensor_from(fv->constant(), named));
        if (val->dtype && *val->dtype != t.dtype()) return invalid(named + ": constant of another dtype than the value's");
        val->constant = std::move(t);
      }
      values.push_back(val);
    }
  }
  auto value_at = [&](int32_t i, const std::string& at) -> Result<ir::Value*> {
    if (i == -1) return static_cast<ir::Value*>(nullptr);
    if (i < 0 || static_cast<size_t>(i) >= values.size()) {
      return invalid(at + ": value index " + std::to_string(i) + " of " + std::to_string(values.size()) + " values");
    }
    return values[static_cast<size_t>(i)];
  };
  std::vector<bool> produced(values.size(), false);
  if (fg->nodes()) {
    for (flatbuffers::uoffset_t k = 0; k < fg->nodes()->size(); ++k) {
      const fb::Node* fn = fg->nodes()->Get(k);
      const std::string at = what + ": node " + std::to_string(k) + " '" + str(fn->name()) + "'";
      if (!fn->op_type() || fn->op_type()->size() == 0) return invalid(at + ": no op type");
      RKD_TRY(printable(str(fn->name()), what + ": node " + std::to_string(k) + ": name"));
      RKD_TRY(printable(fn->op_type()->str(), at + ": op type"));
      RKD_TRY(printable(str(fn->domain()), at + ": domain"));
      std::vector<ir::Value*> ins;
      if (fn->inputs())
        for (flatbuffers::uoffset_t i = 0; i < fn->inputs()->size(); ++i) {
          RKD_ASSIGN(ir::Value * v, value_at(fn->inputs()->Get(i), at + ": input " + std::to_string(i)));
          ins.push_back(v);
        }
      // Graph::add_node creates its outputs; the artifact's are values already: add the node
      // with placeholder outputs, then move each to its value.
      std::vector<ir::Value*> outs;
      if (fn->outputs())
        for (flatbuffers::uoffset_t i = 0; i < fn->outputs()->size(); ++i) {
          const int32_t oi = fn->outputs()->Get(i);
          RKD_ASSIGN(ir::Value * v, value_at(oi, at + ": output " + std::to_string(i)));
          if (v && (produced[static_cast<size_t>(oi)] || v->constant))
            return invalid(at + ": output " + std::to_string(i) + " '" + v->name + "' has another producer or is a constant");
          if (v) produced[static_cast<size_t>(oi)] = true;
          outs.push_back(v);
        }
      RKD_ASSIGN(ir::Node * n, g->add_node(str(fn->name()), fn->op_type()->str(), str(fn->domain()), ins, {}));
      n->outputs = outs;
      for (ir::Value* o : outs)
        if (o) o->producer = n;
      if (fn->attrs())
        for (const fb::Attr* a : *fn->attrs()) {
          const std::string an = str(a->name());
          if (an.empty()) return invalid(at + ": an attribute without a name");
          RKD_TRY(printable(an, at + ": attribute name"));
          RKD_ASSIGN(ir::Attribute v, attr_from(*a, at + ": attribute '" + an + "'"));
          if (!n->attrs.emplace(an, std::move(v)).second) return invalid(at + ": attribute '" + an + "' twice");
        }
    }
  }
  auto list = [&](const flatbuffers::Vector<int32_t>* ix, const std::string& at, std::vector<ir::Value*>& out) -> Status {
    if (!ix) return {};
    for (flatbuffers::uoffset_t i = 0; i < ix->size(); ++i) {
      RKD_ASSIGN(ir::Value * v, value_at(ix->Get(i), at + " " + std::to_string(i)));
      if (!v) return invalid(at + " " + std::to_string(i) + ": omitted");
      out.push_back(v);
    }
    return {};
  };
  RKD_TRY(list(fg->inputs(), what + ": graph input", g->inputs));
  RKD_TRY(list(fg->outputs(), what + ": graph output", g->outputs));
  Status st = g->validate();
  if (!st.ok()) return invalid(what + ": " + st.error().message);
  return g;
}

}  // namespace

Result<LoadedArtifact> parse_artifact(std::span<const uint8_t> bytes0, const std::string& what, bool verify_shapes) {
  // Tables' 8-byte fields are aligned relative to the buffer's start: an unaligned start is
  // copied to aligned storage first.
  std::vector<uint64_t> aligned;
  std::span<const uint8_t> bytes = bytes0;
  if (reinterpret_cast<uintptr_t>(bytes0.data()) % alignof(uint64_t) != 0) {
    aligned.resize((bytes0.size() + 7) / 8);
    std::memcpy(aligned.data(), bytes0.data(), bytes0.size());
    bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(aligned.data()), bytes0.size());
  }
  if (bytes.size() < 8 || !fb::ArtifactBufferHasIdentifier(bytes.data()))
    return invalid(what + ": not an rkdeploy artifact (no \"RKD1\" identifier)");
  if (!verified(bytes)) return invalid(what + ": damaged artifact (rejected by the schema verifier)");
  const fb::Artifact* fa = fb::GetArtifact(bytes.data());
  if (fa->format_version() != kArtifactFormatVersion) {
    return invalid(what + ": artifact format " + std::to_string(fa->format_version()) + "; this rkdeploy reads format " +
                   std::to_string(kArtifactFormatVersion) + " (compile the model again)");
  }
  // Every byte is covered: a part no check below can judge (a CPU node's scale, a table, the
  // detector config) changes results silently when edited.
  const auto at = digest_offset(bytes);
  if (!at) return invalid(what + ": the artifact holds no SHA-256 digest (field 'digest' must be 32 bytes)");
  RKD_ASSIGN(const auto digest, digest_of(bytes, *at));
  if (std::memcmp(digest.data(), bytes.data() + *at, kDigestBytes) != 0) {
    return invalid(what + ": damaged or edited artifact: its SHA-256 digest does not match its contents (compile the model again)");
  }
  LoadedArtifact la;
  Artifact& a = la.info;
  a.format_version = fa->format_version();
  a.written_by = str(fa->written_by());
  a.source_model = str(fa->source_model());
  a.target = str(fa->target());
  a.strategy = str(fa->strategy());
  a.mainline = fa->mainline();
  a.device_base = fa->device_base();
  if (fa->device_size() > kMaxDeviceBytes) return invalid(what + ": device_size " + std::to_string(fa->device_size()) + " is over 1 GiB");
  a.device_size = fa->device_size();
  if (fa->device_chunks()) {
    uint64_t next = 0;  // chunks in address order, not overlapping
    for (flatbuffers::uoffset_t i = 0; i < fa->device_chunks()->size(); ++i) {
      const fb::Chunk* c = fa->device_chunks()->Get(i);
      const uint64_t n = c->data() ? c->data()->size() : 0;
      if (c->offset() < next || c->offset() > a.device_size || n > a.device_size - c->offset()) {
        return invalid(what + ": device chunk " + std::to_string(i) + " (" + std::to_string(n) + " bytes at offset " + std::to_string(c->offset()) +
                       ") overlaps the one before or ends past device_size " + std::to_string(a.device_size));
      }
      a.device_chunks.push_back(
          Artifact::Chunk{c->offset(), c->data() ? std::vector<uint8_t>(c->data()->begin(), c->data()->end()) : std::vector<uint8_t>{}});
      next = c->offset() + n;
    }
  }
  a.preprocess = str(fa->preprocess());
  RKD_ASSIGN(la.graph, graph_from(fa->graph(), what));
  // The executor sizes every buffer from the declared types and shapes: they must be the ones
  // the operators compute (an imported model's pass the same shape functions).
  if (verify_shapes) {
    if (Status st = ir::verify_declared_shapes(*la.graph); !st.ok()) return invalid(what + ": " + st.error().message);
  }
  return la;
}

Result<LoadedArtifact> read_artifact(const std::string& path) {
  RKD_ASSIGN(const std::string bytes, read_file_bytes(path));
  return parse_artifact(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), path);
}

std::vector<Artifact::Chunk> device_chunks_of(std::span<const uint8_t> img) {
  constexpr size_t kZeroGap = 64;
  std::vector<Artifact::Chunk> chunks;
  for (size_t i = 0; i < img.size();) {
    if (img[i] == 0) {
      ++i;
      continue;
    }
    size_t end = i, zeros = 0;
    while (end < img.size() && zeros < kZeroGap) {
      zeros = img[end] == 0 ? zeros + 1 : 0;
      ++end;
    }
    end -= zeros;
    chunks.push_back(
        Artifact::Chunk{i, std::vector<uint8_t>(img.begin() + static_cast<std::ptrdiff_t>(i), img.begin() + static_cast<std::ptrdiff_t>(end))});
    i = end;
  }
  return chunks;
}

std::optional<uint64_t> device_memory_difference(const Artifact& a, std::span<const uint8_t> memory) {
  uint64_t at = 0;  // bytes before it are equal
  auto zeros_until = [&](uint64_t end) -> bool {
    for (; at < end; ++at)
      if (memory[at] != 0) return false;
    return true;
  };
  const uint64_t common = std::min<uint64_t>(a.device_size, memory.size());
  for (const Artifact::Chunk& c : a.device_chunks) {
    if (!zeros_until(std::min(c.offset, common))) return at;
    for (size_t k = 0; k < c.bytes.size(); ++k, ++at) {
      if (at >= common || memory[at] != c.bytes[k]) return at;
    }
  }
  if (!zeros_until(common)) return at;
  if (a.device_size != memory.size()) return common;
  return std::nullopt;
}

bool is_artifact_path(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".rkd") == 0; }

}  // namespace rkd::runtime
