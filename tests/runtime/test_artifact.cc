// The .rkd artifact's format (runtime/artifact.h): a graph with every attribute kind, symbolic
// and unknown dims, omitted inputs and constants of every type comes back the same (dump()
// text, device memory, fields); every truncation and single-byte change of a serialized
// artifact is refused by its digest; with the digest stamped again, every change is either
// refused with an invalid error naming the file or parses into a graph that validates; a newer
// format is refused by name; a model's declared types and shapes must be its operators' own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

#include "runtime/artifact.h"

namespace rkd {
namespace {

std::unique_ptr<ir::Graph> sample_graph() {
  auto g = std::make_unique<ir::Graph>();
  g->opset = 17;
  g->producer = "test";
  g->name = "sample";
  g->metadata["rkdeploy.requant"] = "onnx_float";
  ir::Value* x = *g->add_value("x");
  x->dtype = DType::u8;
  x->shape = ir::Dims{ir::Dim{-1, "N"}, ir::Dim{3, ""}, ir::Dim{-1, ""}};
  g->inputs.push_back(x);
  ir::Value* u = *g->add_value("unknown_rank");
  u->dtype = DType::f32;
  g->inputs.push_back(u);
  int k = 0;
  std::vector<ir::Value*> consts;
  for (DType t : kAllDTypes) {
    Tensor c = Tensor::empty(t, {2, 3});
    for (size_t i = 0; i < c.nbytes(); ++i) static_cast<uint8_t*>(c.raw())[i] = static_cast<uint8_t>(i * 37 + k);
    consts.push_back(g->add_constant(std::string("c") + dtype_name(t), c));
    ++k;
  }
  Tensor scalar = Tensor::empty(DType::f32, {});
  scalar.data<float>()[0] = 0.5f;
  consts.push_back(g->add_constant("scalar", scalar));
  ir::Node* a = *g->add_node("a", "Add", "", {x, consts[3]}, {"y"});
  a->attrs["i"] = int64_t{-7};
  a->attrs["f"] = 1.25f;
  a->attrs["s"] = std::string("text");
  a->attrs["ints"] = std::vector<int64_t>{1, -2, 3};
  a->attrs["floats"] = std::vector<float>{0.5f, -1.f};
  a->attrs["strings"] = std::vector<std::string>{"p", "", "q"};
  a->attrs["tensor"] = consts[0]->constant.value();
  a->attrs["empty_ints"] = std::vector<int64_t>{};
  ir::Node* b = *g->add_node("b", "QLinearConv", "", {a->outputs[0], nullptr, consts.back()}, {"z", "z2"});
  b->outputs[0]->dtype = DType::i8;
  b->outputs[0]->shape = ir::Dims{};  // rank 0 known
  ir::Node* c = *g->add_node("c", "NpuConv", "rkdeploy", {b->outputs[0], u}, {"w"});
  (void)c;
  g->outputs = {b->outputs[0], c->outputs[0]};
  EXPECT_TRUE(g->validate().ok());
  return g;
}

runtime::Artifact sample_info() {
  runtime::Artifact a;
  a.written_by = "rkdeploy test";
  a.source_model = "m.onnx";
  a.target = "rk3588";
  a.strategy = "per-channel";
  a.mainline = true;
  a.device_base = 0x10000000u;
  std::vector<uint8_t> image(5000, 0);
  for (size_t i : {size_t{0}, size_t{1}, size_t{100}, size_t{163}, size_t{164}, size_t{4999}}) image[i] = static_cast<uint8_t>(i | 1);
  a.device_size = image.size();
  a.device_chunks = runtime::device_chunks_of(image);
  a.preprocess = "{\"input\": \"rgb\"}";
  return a;
}

TEST(Artifact, RoundTripKeepsTheGraphAndEveryField) {
  auto g = sample_graph();
  const runtime::Artifact info = sample_info();
  auto bytes = runtime::serialize_artifact(info, *g);
  ASSERT_TRUE(bytes.ok()) << bytes.error().to_string();
  auto back = runtime::parse_artifact(bytes.value(), "t.rkd", /*verify_shapes=*/false);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back.value().graph->dump(), g->dump());
  EXPECT_EQ(back.value().graph->metadata, g->metadata);
  EXPECT_EQ(back.value().graph->producer, "test");
  const runtime::Artifact& a = back.value().info;
  EXPECT_EQ(a.device_size, info.device_size);
  ASSERT_EQ(a.device_chunks.size(), info.device_chunks.size());
  for (size_t i = 0; i < a.device_chunks.size(); ++i) {
    EXPECT_EQ(a.device_chunks[i].offset, info.device_chunks[i].offset);
    EXPECT_EQ(a.device_chunks[i].bytes, info.device_chunks[i].bytes);
  }
  EXPECT_EQ(a.device_base, info.device_base);
  EXPECT_TRUE(a.mainline);
  EXPECT_EQ(a.written_by, info.written_by);
  EXPECT_EQ(a.source_model, info.source_model);
  EXPECT_EQ(a.strategy, info.strategy);
  EXPECT_EQ(a.preprocess, info.preprocess);
  // Attribute payloads and constant bytes, beyond what dump() prints.
  const ir::Node& n = *back.value().graph->nodes()[0];
  EXPECT_EQ(std::get<std::vector<std::string>>(n.attrs.at("strings")), (std::vector<std::string>{"p", "", "q"}));
  EXPECT_EQ(std::get<float>(n.attrs.at("f")), 1.25f);
  for (const auto& v : g->values()) {
    if (!v->constant) continue;
    const ir::Value* w = back.value().graph->find(v->name);
    ASSERT_TRUE(w && w->constant);
    ASSERT_EQ(w->constant->nbytes(), v->constant->nbytes());
    EXPECT_EQ(std::memcmp(w->constant->raw(), v->constant->raw(), v->constant->nbytes()), 0) << v->name;
  }
  // The same graph serializes to the same bytes.
  EXPECT_EQ(runtime::serialize_artifact(info, *back.value().graph).value(), bytes.value());
}

// The chunks hold every non-zero byte; the comparison finds the first byte that differs.
TEST(Artifact, DeviceChunksCompareByteForByte) {
  std::vector<uint8_t> image(5000, 0);
  for (size_t i : {size_t{0}, size_t{1}, size_t{100}, size_t{163}, size_t{164}, size_t{4999}}) image[i] = static_cast<uint8_t>(i | 1);
  runtime::Artifact a;
  a.device_size = image.size();
  a.device_chunks = runtime::device_chunks_of(image);
  EXPECT_EQ(a.device_chunks.size(), 3u);  // {0, 1}, {100 .. 164}, {4999}: gaps of 64 zeros or more split
  EXPECT_FALSE(runtime::device_memory_difference(a, image).has_value());
  for (size_t at : {size_t{0}, size_t{50}, size_t{164}, size_t{2000}, size_t{4999}}) {
    std::vector<uint8_t> m = image;
    m[at] ^= 0x40;
    EXPECT_EQ(runtime::device_memory_difference(a, m), std::optional<uint64_t>(at)) << at;
  }
  std::vector<uint8_t> longer = image;
  longer.push_back(0);
  EXPECT_EQ(runtime::device_memory_difference(a, longer), std::optional<uint64_t>(5000));
  EXPECT_EQ(runtime::device_memory_difference(a, std::span<const uint8_t>(image).first(4000)), std::optional<uint64_t>(4000));
}

TEST(Artifact, AnotherFormatVersionIsRefusedByName) {
  auto g = sample_graph();
  runtime::Artifact info = sample_info();
  info.format_version = runtime::kArtifactFormatVersion + 1;
  auto bytes = runtime::serialize_artifact(info, *g);
  ASSERT_TRUE(bytes.ok());
  auto back = runtime::parse_artifact(bytes.value(), "new.rkd");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.error().message.find("new.rkd: artifact format " + std::to_string(runtime::kArtifactFormatVersion + 1)), std::string::npos)
      << back.error().message;
}

// Every prefix, and single bytes changed at random (seeded): refused by the digest (an invalid
// error naming the file; a changed digest byte likewise). With the digest stamped again, never a
// crash: an invalid error that names the file, or a graph that validates.
TEST(Artifact, DamagedBytesAreRefusedOrValidate) {
  auto g = sample_graph();
  const std::vector<uint8_t> bytes = runtime::serialize_artifact(sample_info(), *g).value();
  ASSERT_TRUE(runtime::parse_artifact(bytes, "good.rkd", false).ok());
  {
    const unsigned seed = 20261207;
    std::mt19937 rng(seed);
    for (int t = 0; t < 300; ++t) {
      std::vector<uint8_t> b = bytes;
      const size_t at = rng() % b.size();
      b[at] ^= static_cast<uint8_t>(1 + rng() % 255);
      auto r = runtime::parse_artifact(b, "edited.rkd", false);
      ASSERT_FALSE(r.ok()) << "seed " << seed << " trial " << t << " byte " << at << " accepted";
      EXPECT_EQ(r.error().message.rfind("edited.rkd: ", 0), 0u) << r.error().message;
    }
  }
  auto check = [](std::vector<uint8_t> b, const std::string& what) {
    (void)runtime::stamp_artifact_digest(b);
    auto r = runtime::parse_artifact(b, "bad.rkd", false);
    if (r.ok()) {
      EXPECT_TRUE(r.value().graph->validate().ok()) << what;
    } else {
      EXPECT_EQ(r.error().kind, ErrorKind::invalid) << what;
      EXPECT_EQ(r.error().message.rfind("bad.rkd: ", 0), 0u) << what << ": " << r.error().message;
    }
  };
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 64) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(n));
    auto r = runtime::parse_artifact(prefix, "cut.rkd", false);
    ASSERT_FALSE(r.ok()) << "a prefix of " << n << " bytes was accepted";
    EXPECT_EQ(r.error().message.rfind("cut.rkd: ", 0), 0u) << r.error().message;
  }
  const unsigned seed = 20261206;
  std::mt19937 rng(seed);
  for (int t = 0; t < 3000; ++t) {
    std::vector<uint8_t> b = bytes;
    const size_t at = rng() % b.size();
    b[at] = static_cast<uint8_t>(rng());
    check(b, "seed " + std::to_string(seed) + " trial " + std::to_string(t) + " byte " + std::to_string(at));
  }
}

// A small model whose declared types and shapes are its operators' own: a float Conv, a
// Transpose and an NPU convolution (a QLinearConv's shape function).
std::unique_ptr<ir::Graph> model_graph() {
  auto g = std::make_unique<ir::Graph>();
  g->opset = 17;
  ir::Value* x = *g->add_value("x");
  x->dtype = DType::f32;
  x->shape = ir::to_dims({1, 3, 8, 8});
  g->inputs.push_back(x);
  auto scalar = [&](const std::string& name, DType t, double v) {
    Tensor s = Tensor::empty(t, {});
    if (t == DType::f32) s.data<float>()[0] = static_cast<float>(v);
    else static_cast<int8_t*>(s.raw())[0] = static_cast<int8_t>(v);
    return g->add_constant(name, s);
  };
  Tensor w = Tensor::empty(DType::f32, {4, 3, 3, 3});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 0.01f * static_cast<float>(i % 7);
  ir::Node* conv = *g->add_node("conv", "Conv", "", {x, g->add_constant("w", w)}, {"y"});
  conv->attrs["strides"] = std::vector<int64_t>{1, 1};
  conv->outputs[0]->dtype = DType::f32;
  conv->outputs[0]->shape = ir::to_dims({1, 4, 6, 6});
  ir::Node* q = *g->add_node("q", "QuantizeLinear", "", {conv->outputs[0], scalar("qs", DType::f32, 0.05), scalar("qz", DType::i8, 0)}, {"yq"});
  q->outputs[0]->dtype = DType::i8;
  q->outputs[0]->shape = ir::to_dims({1, 4, 6, 6});
  Tensor wq = Tensor::empty(DType::i8, {2, 4, 3, 3});
  for (int64_t i = 0; i < wq.numel(); ++i) static_cast<int8_t*>(wq.raw())[i] = static_cast<int8_t>(i % 5 - 2);
  ir::Node* npu = *g->add_node("npu", "NpuConv", "rkdeploy",
                               {q->outputs[0], g->find("qs"), g->find("qz"), g->add_constant("wq", wq), scalar("ws", DType::f32, 0.02),
                                scalar("wz", DType::i8, 0), scalar("ys", DType::f32, 0.1), scalar("yz", DType::i8, 0)},
                               {"z"});
  npu->attrs["strides"] = std::vector<int64_t>{2, 2};
  npu->outputs[0]->dtype = DType::i8;
  npu->outputs[0]->shape = ir::to_dims({1, 2, 2, 2});
  ir::Node* t = *g->add_node("t", "Transpose", "", {npu->outputs[0]}, {"zt"});
  t->attrs["perm"] = std::vector<int64_t>{0, 2, 3, 1};
  t->outputs[0]->dtype = DType::i8;
  t->outputs[0]->shape = ir::to_dims({1, 2, 2, 2});
  g->outputs = {t->outputs[0]};
  EXPECT_TRUE(g->validate().ok());
  return g;
}

// What a structurally valid artifact may not declare: every case the executor would have sized
// wrongly (a hostile round crashed on each), refused by name before anything is allocated.
TEST(Artifact, DeclaredShapesMustBeTheOperatorsOwn) {
  {
    auto g = model_graph();
    auto r = runtime::parse_artifact(runtime::serialize_artifact(sample_info(), *g).value(), "m.rkd");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
  struct Case {
    std::string name, expect;
    std::function<void(ir::Graph&)> edit;
  };
  const std::vector<Case> cases = {
      {"an output declared int8", "node 't' (Transpose): output 'zt' is declared uint8", [](ir::Graph& g) { g.find("zt")->dtype = DType::u8; }},
      {"a larger declared output", "output 'zt' is declared int8 [1, 2, 2, 3]",
       [](ir::Graph& g) {
         g.find("zt")->shape = ir::to_dims({1, 2, 2, 3});
       }},
      {"zero strides on the NPU convolution", "node 'npu' (NpuConv): kernel_shape, strides and dilations must be positive",
       [](ir::Graph& g) {
         g.nodes()[2]->attrs["strides"] = std::vector<int64_t>{0, 0};
       }},
      {"an impossible perm", "node 't' (Transpose)",
       [](ir::Graph& g) {
         g.nodes()[3]->attrs["perm"] = std::vector<int64_t>{0, 5, 3, 1};
       }},
      {"a node whose inputs were emptied", "node 't' (Transpose)", [](ir::Graph& g) { g.set_input(g.nodes()[3].get(), 0, nullptr); }},
      {"a symbolic input", "graph input 'x': needs a type and a static shape",
       [](ir::Graph& g) {
         (*g.find("x")->shape)[0] = ir::Dim{-1, "N"};
       }},
      {"an unknown operator", "node 't' (Frobnicate): no shape rule", [](ir::Graph& g) { g.nodes()[3]->op_type = "Frobnicate"; }},
  };
  for (const Case& c : cases) {
    auto g = model_graph();
    c.edit(*g);
    auto bytes = runtime::serialize_artifact(sample_info(), *g);
    ASSERT_TRUE(bytes.ok()) << c.name;
    auto r = runtime::parse_artifact(bytes.value(), "m.rkd");
    ASSERT_FALSE(r.ok()) << c.name << ": accepted";
    EXPECT_EQ(r.error().kind, ErrorKind::invalid) << c.name;
    EXPECT_EQ(r.error().message.rfind("m.rkd: ", 0), 0u) << c.name << ": " << r.error().message;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << c.name << ": " << r.error().message;
  }
}

// The stamped digest covers every byte: a changed scale of a CPU node, which no other check can
// judge, is refused.
// Names reach terminals and file names: a control character (an escape sequence) in one is
// refused by the writer (compile writes nothing) and, in a file made another way, by the reader.
TEST(Artifact, ControlCharactersInNamesAreRefusedOnBothSides) {
  auto g = sample_graph();
  const std::vector<uint8_t> bytes = runtime::serialize_artifact(sample_info(), *g).value();
  std::vector<uint8_t> b = bytes;
  const std::string name = "unknown_rank";
  auto at = std::search(b.begin(), b.end(), name.begin(), name.end());
  ASSERT_NE(at, b.end());
  at[7] = 0x1b;  // "unknown\x1brank": same length, the buffer's layout unchanged
  ASSERT_TRUE(runtime::stamp_artifact_digest(b).ok());
  auto r = runtime::parse_artifact(b, "escape.rkd", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::invalid);
  EXPECT_EQ(r.error().message.rfind("escape.rkd: ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("holds the control character 27; names must be printable"), std::string::npos) << r.error().message;

  ir::Node* n = g->nodes().front().get();
  n->name = "a\x07";
  auto w = runtime::serialize_artifact(sample_info(), *g);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message, "node 0: name: holds the control character 7; names must be printable");
}

TEST(Artifact, AnEditedConstantIsRefusedByTheDigest) {
  auto g = model_graph();
  const std::vector<uint8_t> bytes = runtime::serialize_artifact(sample_info(), *g).value();
  const float want = 0.05f;
  std::vector<uint8_t> b = bytes;
  size_t found = 0;
  for (size_t i = 0; i + 4 <= b.size(); ++i) {
    if (std::memcmp(&b[i], &want, 4) == 0) {
      const float other = 0.07f;
      std::memcpy(&b[i], &other, 4);
      ++found;
    }
  }
  ASSERT_GE(found, 1u);
  auto r = runtime::parse_artifact(b, "scale.rkd");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("scale.rkd: damaged or edited artifact: its SHA-256 digest does not match"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace rkd
