// The TensorFlow.js importer on small graphs built here: TensorFlow's NHWC semantics
// (SAME padding split, depthwise channel order, Conv2DBackpropInput, bilinear resize with
// half-pixel centers) checked against double-precision references written in this file,
// weight encodings (float16, uint8 affine), and the errors for malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "common/tolerance.h"
#include "frontends/tfjs/tfjs_import.h"
#include "runtime/model.h"

namespace rkd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A model under construction: nodes, and weights appended to one shard.
struct Builder {
  json nodes = json::array();
  json weights = json::array();
  std::vector<uint8_t> bin;

  static std::string b64(const std::string& s) {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string o;
    uint32_t acc = 0;
    int bits = 0;
    for (unsigned char c : s) {
      acc = (acc << 8) | c;
      bits += 8;
      while (bits >= 6) o.push_back(k[(acc >> (bits -= 6)) & 63]);
    }
    if (bits) o.push_back(k[(acc << (6 - bits)) & 63]);
    while (o.size() % 4) o.push_back('=');
    return o;
  }
  static json s(const std::string& v) { return {{"s", b64(v)}}; }
  static json ints(std::vector<int64_t> v) {
    json l = json::array();
    for (int64_t x : v) l.push_back(std::to_string(x));
    return {{"list", {{"i", l}}}};
  }
  void node(const std::string& name, const std::string& op, std::vector<std::string> in, json attr = json::object()) {
    nodes.push_back({{"name", name}, {"op", op}, {"input", in}, {"attr", attr}});
  }
  void input(const std::string& name, std::vector<int64_t> shape) {
    json dims = json::array();
    for (int64_t d : shape) dims.push_back({{"size", std::to_string(d)}});
    node(name, "Placeholder", {}, {{"dtype", {{"type", "DT_FLOAT"}}}, {"shape", {{"shape", {{"dim", dims}}}}}});
  }
  // Float weights stored as float32, float16 (values must be representable) or uint8 affine.
  void constant(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v, const std::string& enc = "") {
    node(name, "Const", {});
    json w = {{"name", name}, {"shape", shape}, {"dtype", "float32"}};
    if (enc == "float16") {
      w["quantization"] = {{"dtype", "float16"}};
      for (float x : v) {
        const uint16_t h = f32_to_f16(x);
        bin.push_back(static_cast<uint8_t>(h & 0xff));
        bin.push_back(static_cast<uint8_t>(h >> 8));
      }
    } else if (enc == "uint8") {
      w["quantization"] = {{"dtype", "uint8"}, {"scale", 0.125}, {"min", -4.0}};
      for (float x : v) bin.push_back(static_cast<uint8_t>(std::lround((x + 4.0) / 0.125)));
    } else {
      for (float x : v) {
        uint8_t b[4];
        std::memcpy(b, &x, 4);
        bin.insert(bin.end(), b, b + 4);
      }
    }
    weights.push_back(w);
  }
  void int_constant(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    node(name, "Const", {});
    weights.push_back({{"name", name}, {"shape", shape}, {"dtype", "int32"}});
    for (int32_t x : v) {
      uint8_t b[4];
      std::memcpy(b, &x, 4);
      bin.insert(bin.end(), b, b + 4);
    }
  }
  std::string text(const std::vector<std::string>& outputs) const {
    json sig_out = json::object();
    for (const auto& o : outputs) sig_out[o + ":0"] = {{"name", o + ":0"}};
    json j = {{"format", "graph-model"},
              {"modelTopology", {{"node", nodes}}},
              {"signature", {{"outputs", sig_out}}},
              {"weightsManifest", json::array({{{"paths", {"w.bin"}}, {"weights", weights}}})}};
    return j.dump();
  }
  std::string write(const std::string& dir, const std::vector<std::string>& outputs) const {
    fs::create_directories(dir);
    std::ofstream(dir + "/model.json") << text(outputs);
    std::ofstream b(dir + "/w.bin", std::ios::binary);
    b.write(reinterpret_cast<const char*>(bin.data()), static_cast<std::streamsize>(bin.size()));
    return dir + "/model.json";
  }
};

std::vector<float> random_values(size_t n, uint32_t seed, bool grid = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(0, 63);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  // grid: multiples of 1/8 in [-4, 3.875], exact in float16 and in the uint8 encoding above.
  for (float& x : v) x = grid ? static_cast<float>(q(rng)) * 0.125f - 4.f : u(rng);
  return v;
}

std::string tmpdir(const std::string& name) { return (fs::temp_directory_path() / ("rkd_tfjs_" + name + "_" + std::to_string(::getpid()))).string(); }

Tensor run1(const std::string& path, const std::string& input, const Tensor& x, const std::string& output) {
  runtime::LoadOptions lo;
  auto m = runtime::load_model(path, lo);
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  if (!m.ok()) return {};
  auto out = m->executor->run({{input, x}});
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  if (!out.ok()) return {};
  EXPECT_TRUE(out->count(output)) << output;
  return out->at(output);
}

// NHWC convolution, TensorFlow's definition: SAME pads floor(total/2) before, the rest after.
std::vector<double> conv_ref(const std::vector<float>& x, int64_t H, int64_t W, int64_t C, const std::vector<float>& f, int64_t K, int64_t O,
                             int64_t s, bool same, bool depthwise, int64_t mult, int64_t& OH, int64_t& OW) {
  OH = same ? (H + s - 1) / s : (H - K) / s + 1;
  OW = same ? (W + s - 1) / s : (W - K) / s + 1;
  const int64_t pt = same ? std::max<int64_t>((OH - 1) * s + K - H, 0) / 2 : 0;
  const int64_t pl = same ? std::max<int64_t>((OW - 1) * s + K - W, 0) / 2 : 0;
  const int64_t OC = depthwise ? C * mult : O;
  std::vector<double> out(static_cast<size_t>(OH * OW * OC), 0.0);
  for (int64_t oy = 0; oy < OH; ++oy)
    for (int64_t ox = 0; ox < OW; ++ox)
      for (int64_t oc = 0; oc < OC; ++oc) {
        double acc = 0;
        for (int64_t ky = 0; ky < K; ++ky)
          for (int64_t kx = 0; kx < K; ++kx) {
            const int64_t iy = oy * s + ky - pt, ix = ox * s + kx - pl;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            if (depthwise) {
              const int64_t c = oc / mult, m = oc % mult;
              acc += double(x[static_cast<size_t>((iy * W + ix) * C + c)]) * f[static_cast<size_t>(((ky * K + kx) * C + c) * mult + m)];
            } else {
              for (int64_t c = 0; c < C; ++c)
                acc += double(x[static_cast<size_t>((iy * W + ix) * C + c)]) * f[static_cast<size_t>(((ky * K + kx) * C + c) * O + oc)];
            }
          }
        out[static_cast<size_t>((oy * OW + ox) * OC + oc)] = acc;
      }
  return out;
}

void expect_close(const Tensor& got, const std::vector<double>& want, int depth) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  double mag = 0;
  for (double w : want) mag = std::max(mag, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(test::float_agree(got.get_as_double(static_cast<int64_t>(i)), want[i], mag, depth))
        << "[" << i << "] got " << got.get_as_double(static_cast<int64_t>(i)) << " want " << want[i];
  }
}

TEST(TfjsImport, FusedConvSameStride2WithBiasRelu6AndUint8Weights) {
  // 7x6 input: SAME with stride 2 pads one row/col more after than before (TensorFlow).
  const int64_t H = 7, W = 6, C = 3, K = 3, O = 4;
  Builder b;
  b.input("x", {1, H, W, C});
  const auto f = random_values(static_cast<size_t>(K * K * C * O), 1, true);
  const auto bias = random_values(static_cast<size_t>(O), 2, true);
  b.constant("f", {K, K, C, O}, f, "uint8");
  b.constant("b", {O}, bias, "float16");
  b.node("conv", "_FusedConv2D", {"x", "f", "b"},
         {{"strides", Builder::ints({1, 2, 2, 1})},
          {"padding", Builder::s("SAME")},
          {"data_format", Builder::s("NHWC")},
          {"fused_ops", {{"list", {{"s", {Builder::b64("BiasAdd"), Builder::b64("Relu6")}}}}}},
          {"num_args", {{"i", "1"}}}});
  const std::string path = b.write(tmpdir("conv"), {"conv"});
  const auto xv = random_values(static_cast<size_t>(H * W * C), 3);
  Tensor x = Tensor::from_floats({1, H, W, C}, xv);
  Tensor y = run1(path, "x", x, "conv");
  int64_t OH, OW;
  auto want = conv_ref(xv, H, W, C, f, K, O, 2, true, false, 1, OH, OW);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::clamp(want[i] + bias[i % O], 0.0, 6.0);
  EXPECT_EQ(y.shape(), (Shape{1, OH, OW, O}));
  expect_close(y, want, static_cast<int>(K * K * C + 1));
}

TEST(TfjsImport, DepthwiseWithMultiplierValidPadding) {
  const int64_t H = 6, W = 5, C = 3, K = 3, M = 2;
  Builder b;
  b.input("x", {1, H, W, C});
  const auto f = random_values(static_cast<size_t>(K * K * C * M), 4);
  b.constant("f", {K, K, C, M}, f);
  b.node("dw", "DepthwiseConv2dNative", {"x", "f"},
         {{"strides", Builder::ints({1, 1, 1, 1})}, {"padding", Builder::s("VALID")}, {"data_format", Builder::s("NHWC")}});
  const std::string path = b.write(tmpdir("dw"), {"dw"});
  const auto xv = random_values(static_cast<size_t>(H * W * C), 5);
  Tensor y = run1(path, "x", Tensor::from_floats({1, H, W, C}, xv), "dw");
  int64_t OH, OW;
  auto want = conv_ref(xv, H, W, C, f, K, 0, 1, false, true, M, OH, OW);
  EXPECT_EQ(y.shape(), (Shape{1, OH, OW, C * M}));
  expect_close(y, want, static_cast<int>(K * K));
}

TEST(TfjsImport, Conv2DBackpropInputSameStride2) {
  // Forward conv: 7x7 input, k3 s2 SAME -> 4x4. Its backprop-input maps 4x4 back to 7x7.
  const int64_t IH = 4, IW = 4, IC = 2, OHt = 7, OWt = 7, OC = 3, K = 3, S = 2;
  Builder b;
  b.input("x", {1, IH, IW, IC});
  const auto f = random_values(static_cast<size_t>(K * K * OC * IC), 6);
  b.int_constant("sizes", {4}, {1, static_cast<int32_t>(OHt), static_cast<int32_t>(OWt), static_cast<int32_t>(OC)});
  b.constant("f", {K, K, OC, IC}, f);
  b.node("up", "Conv2DBackpropInput", {"sizes", "f", "x"},
         {{"strides", Builder::ints({1, S, S, 1})}, {"padding", Builder::s("SAME")}, {"data_format", Builder::s("NHWC")}});
  const std::string path = b.write(tmpdir("deconv"), {"up"});
  const auto xv = random_values(static_cast<size_t>(IH * IW * IC), 7);
  Tensor y = run1(path, "x", Tensor::from_floats({1, IH, IW, IC}, xv), "up");
  const int64_t total = std::max<int64_t>((IH - 1) * S + K - OHt, 0), pt = total / 2;
  std::vector<double> want(static_cast<size_t>(OHt * OWt * OC), 0.0);
  for (int64_t iy = 0; iy < IH; ++iy)
    for (int64_t ix = 0; ix < IW; ++ix)
      for (int64_t ky = 0; ky < K; ++ky)
        for (int64_t kx = 0; kx < K; ++kx) {
          const int64_t oy = iy * S + ky - pt, ox = ix * S + kx - pt;
          if (oy < 0 || oy >= OHt || ox < 0 || ox >= OWt) continue;
          for (int64_t o = 0; o < OC; ++o)
            for (int64_t i = 0; i < IC; ++i)
              want[static_cast<size_t>((oy * OWt + ox) * OC + o)] +=
                  double(xv[static_cast<size_t>((iy * IW + ix) * IC + i)]) * f[static_cast<size_t>(((ky * K + kx) * OC + o) * IC + i)];
        }
  EXPECT_EQ(y.shape(), (Shape{1, OHt, OWt, OC}));
  expect_close(y, want, static_cast<int>(K * K * IC));
}

TEST(TfjsImport, ResizeBilinearHalfPixelCentersThenLayoutFreeOps) {
  // Resize runs in NCHW; the Add of a per-channel constant and the Mean over H, W with
  // keep_dims follow it there; the output comes back as NHWC.
  const int64_t H = 3, W = 4, C = 2, OH = 5, OW = 7;
  Builder b;
  b.input("x", {1, H, W, C});
  b.int_constant("size", {2}, {static_cast<int32_t>(OH), static_cast<int32_t>(OW)});
  b.constant("c", {C}, {0.5f, -2.f});
  b.int_constant("axes", {2}, {1, 2});
  b.node("rs", "ResizeBilinear", {"x", "size"}, {{"half_pixel_centers", {{"b", true}}}, {"align_corners", {{"b", false}}}});
  b.node("add", "AddV2", {"rs", "c"});
  b.node("mean", "Mean", {"add", "axes"}, {{"keep_dims", {{"b", true}}}});
  const std::string path = b.write(tmpdir("resize"), {"add", "mean"});
  const auto xv = random_values(static_cast<size_t>(H * W * C), 8);
  runtime::LoadOptions lo;
  auto m = runtime::load_model(path, lo);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  auto out = m->executor->run({{"x", Tensor::from_floats({1, H, W, C}, xv)}});
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  // TensorFlow: src = (dst + 0.5) * in/out - 0.5, lower index clamped at 0, upper at in-1.
  auto axis = [](int64_t d, int64_t in, int64_t outn, int64_t& lo_i, int64_t& hi_i, double& t) {
    const double src = (d + 0.5) * double(in) / double(outn) - 0.5;
    const double fl = std::floor(src);
    lo_i = std::max<int64_t>(static_cast<int64_t>(fl), 0);
    hi_i = std::min<int64_t>(static_cast<int64_t>(std::ceil(src)), in - 1);
    t = src - fl;
  };
  std::vector<double> want(static_cast<size_t>(OH * OW * C)), mean(static_cast<size_t>(C), 0.0);
  const double cst[2] = {0.5, -2.0};
  for (int64_t y = 0; y < OH; ++y)
    for (int64_t x = 0; x < OW; ++x)
      for (int64_t c = 0; c < C; ++c) {
        int64_t y0, y1, x0, x1;
        double ty, tx;
        axis(y, H, OH, y0, y1, ty);
        axis(x, W, OW, x0, x1, tx);
        auto at = [&](int64_t yy, int64_t xx) { return double(xv[static_cast<size_t>((yy * W + xx) * C + c)]); };
        const double top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * tx;
        const double bot = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * tx;
        const double v = top + (bot - top) * ty + cst[c];
        want[static_cast<size_t>((y * OW + x) * C + c)] = v;
        mean[static_cast<size_t>(c)] += v / double(OH * OW);
      }
  ASSERT_EQ(out->at("add").shape(), (Shape{1, OH, OW, C}));
  expect_close(out->at("add"), want, 8);
  ASSERT_EQ(out->at("mean").shape(), (Shape{1, 1, 1, C}));
  expect_close(out->at("mean"), mean, static_cast<int>(OH * OW));
  int transposes = 0;
  for (const auto& n : m->graph->nodes()) transposes += n->op_type == "Transpose";
  EXPECT_EQ(transposes, 3) << "one into NCHW for the resize, one back for each output";
}

TEST(TfjsImport, ErrorsNameTheProblem) {
  Builder b;
  b.input("x", {1, 4});
  b.node("a", "Erfinv", {"x"});
  b.node("c", "Erfinv", {"a"});
  b.node("d", "Cumprod", {"c"});
  auto r = tfjs_frontend::import_tfjs(b.text({"d"}), {}, "m.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::unsupported);
  EXPECT_NE(r.error().message.find("Cumprod (1 nodes)"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("Erfinv (2 nodes)"), std::string::npos) << r.error().message;

  Builder w;
  w.input("x", {1, 4});
  w.constant("k", {4}, {1, 2, 3, 4});
  w.node("y", "Mul", {"x", "k"});
  std::vector<uint8_t> short_bin(w.bin.begin(), w.bin.end() - 1);
  r = tfjs_frontend::import_tfjs(w.text({"y"}), short_bin, "m.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("weight 'k': needs 16 bytes"), std::string::npos) << r.error().message;

  Builder cyc;
  cyc.node("p", "Relu", {"q"});
  cyc.node("q", "Relu", {"p"});
  r = tfjs_frontend::import_tfjs(cyc.text({"q"}), {}, "m.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cycle"), std::string::npos) << r.error().message;

  Builder miss;
  miss.node("p", "Relu", {"nowhere:1"});
  r = tfjs_frontend::import_tfjs(miss.text({"p"}), {}, "m.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("reads 'nowhere:1', which no node produces"), std::string::npos) << r.error().message;

  // Shard paths may not leave the model's folder.
  const std::string dir = tmpdir("escape");
  fs::create_directories(dir);
  json j = json::parse(w.text({"y"}));
  j["weightsManifest"][0]["paths"][0] = "../w.bin";
  std::ofstream(dir + "/model.json") << j.dump();
  auto f = tfjs_frontend::import_tfjs_file(dir + "/model.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("leaves the model's folder"), std::string::npos) << f.error().message;
  // ... nor through a symbolic link inside it.
  std::ofstream(dir + "_outside.bin") << "0123";
  fs::create_symlink(dir + "_outside.bin", dir + "/w.bin");
  j["weightsManifest"][0]["paths"][0] = "w.bin";
  std::ofstream(dir + "/model.json") << j.dump();
  f = tfjs_frontend::import_tfjs_file(dir + "/model.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("through a symbolic link"), std::string::npos) << f.error().message;
  fs::remove(dir + "_outside.bin");

  r = tfjs_frontend::import_tfjs("{\"format\": \"layers-model\", \"modelTopology\": {}}", {}, "m.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::unsupported);
}

}  // namespace
}  // namespace rkd
