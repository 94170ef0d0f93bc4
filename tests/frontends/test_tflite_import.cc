// The TFLite importer on files built here with the flatbuffers builder (the generated API of
// rkdeploy's schema subset): float CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / MEAN /
// SOFTMAX against double-precision references written in this file (TFLite's NHWC and OHWI
// layouts, SAME padding), an int8 model with per-axis weights against its QDQ meaning, and
// the errors for malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/tolerance.h"
#include "frontends/tflite/tflite_import.h"
#include "quant/int8.h"
#include "runtime/model.h"
#include "tflite_subset_generated.h"

namespace rkd {
namespace {

namespace fb = rkd::tflite_fb;
namespace fs = std::filesystem;

struct QuantSpec {
  std::vector<float> scales;
  std::vector<int64_t> zero_points;
  int axis = 0;
};

// A one-subgraph model under construction.
struct Builder {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  std::vector<flatbuffers::Offset<fb::OperatorCode>> codes;
  std::vector<flatbuffers::Offset<fb::Operator>> ops;
  std::map<int32_t, uint32_t> code_index;

  Builder() { buffers.push_back(fb::CreateBuffer(b)); }  // buffer 0: the empty sentinel

  int32_t tensor(const std::string& name, fb::TensorType type, std::vector<int32_t> shape, const void* data = nullptr, size_t bytes = 0,
                 const QuantSpec* q = nullptr) {
    uint32_t buf = 0;
    if (data) {
      b.ForceVectorAlignment(bytes, 1, 16);
      auto v = b.CreateVector(static_cast<const uint8_t*>(data), bytes);
      buffers.push_back(fb::CreateBuffer(b, v));
      buf = static_cast<uint32_t>(buffers.size() - 1);
    }
    flatbuffers::Offset<fb::QuantizationParameters> qp = 0;
    if (q) qp = fb::CreateQuantizationParametersDirect(b, nullptr, nullptr, &q->scales, &q->zero_points, fb::QuantizationDetails_NONE, 0, q->axis);
    tensors.push_back(fb::CreateTensorDirect(b, &shape, type, buf, name.c_str(), qp));
    return static_cast<int32_t>(tensors.size() - 1);
  }
  int32_t floats(const std::string& name, std::vector<int32_t> shape, const std::vector<float>& v) {
    return tensor(name, fb::TensorType_FLOAT32, std::move(shape), v.data(), v.size() * 4);
  }
  int32_t ints(const std::string& name, std::vector<int32_t> shape, const std::vector<int32_t>& v) {
    return tensor(name, fb::TensorType_INT32, std::move(shape), v.data(), v.size() * 4);
  }
  void op(int32_t code, std::vector<int32_t> in, std::vector<int32_t> out, fb::BuiltinOptions type = fb::BuiltinOptions_NONE,
          flatbuffers::Offset<void> options = 0) {
    if (!code_index.count(code)) {
      code_index[code] = static_cast<uint32_t>(codes.size());
      codes.push_back(fb::CreateOperatorCode(b, static_cast<int8_t>(code < 127 ? code : 127), 0, 1, code));
    }
    ops.push_back(fb::CreateOperatorDirect(b, code_index[code], &in, &out, type, options));
  }
  std::vector<uint8_t> finish(std::vector<int32_t> inputs, std::vector<int32_t> outputs) {
    auto sg = fb::CreateSubGraphDirect(b, &tensors, &inputs, &outputs, &ops, "main");
    std::vector<flatbuffers::Offset<fb::SubGraph>> sgs{sg};
    auto model = fb::CreateModelDirect(b, 3, &codes, &sgs, "rkdeploy test", &buffers);
    fb::FinishModelBuffer(b, model);
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
};

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = (fs::temp_directory_path() / ("rkd_tflite_" + name + "_" + std::to_string(::getpid()) + ".tflite")).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::map<std::string, Tensor> run(const std::string& path, const std::string& input, const Tensor& x) {
  runtime::LoadOptions lo;
  auto m = runtime::load_model(path, lo);
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  if (!m.ok()) return {};
  auto out = m->executor->run({{input, x}});
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  return out.ok() ? *out : std::map<std::string, Tensor>{};
}

// NHWC convolution with an OHWI filter (TFLite's layouts); SAME pads floor(total/2) first.
std::vector<double> conv_ohwi(const std::vector<double>& x, int64_t H, int64_t W, int64_t C, const std::vector<double>& f, int64_t O, int64_t K,
                              int64_t S, bool same, int64_t& OH, int64_t& OW) {
  OH = same ? (H + S - 1) / S : (H - K) / S + 1;
  OW = same ? (W + S - 1) / S : (W - K) / S + 1;
  const int64_t pt = same ? std::max<int64_t>((OH - 1) * S + K - H, 0) / 2 : 0;
  const int64_t pl = same ? std::max<int64_t>((OW - 1) * S + K - W, 0) / 2 : 0;
  std::vector<double> out(static_cast<size_t>(OH * OW * O), 0.0);
  for (int64_t oy = 0; oy < OH; ++oy)
    for (int64_t ox = 0; ox < OW; ++ox)
      for (int64_t o = 0; o < O; ++o) {
        double acc = 0;
        for (int64_t ky = 0; ky < K; ++ky)
          for (int64_t kx = 0; kx < K; ++kx) {
            const int64_t iy = oy * S + ky - pt, ix = ox * S + kx - pl;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            for (int64_t c = 0; c < C; ++c)
              acc += x[static_cast<size_t>((iy * W + ix) * C + c)] * f[static_cast<size_t>(((o * K + ky) * K + kx) * C + c)];
          }
        out[static_cast<size_t>((oy * OW + ox) * O + o)] = acc;
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

TEST(TfliteImport, FloatConvDepthwiseMeanFullyConnectedSoftmax) {
  const int64_t H = 7, W = 6, C = 3, O = 4, K = 3, M = 2, F = 5;
  Builder bd;
  const auto xv = random_values(static_cast<size_t>(H * W * C), 1);
  const auto fv = random_values(static_cast<size_t>(O * K * K * C), 2);
  const auto bv = random_values(static_cast<size_t>(O), 3);
  const auto dv = random_values(static_cast<size_t>(K * K * O * M), 4);
  const auto wv = random_values(static_cast<size_t>(F * O * M), 5);
  const auto fbias = random_values(static_cast<size_t>(F), 6);
  const int32_t x = bd.tensor("x", fb::TensorType_FLOAT32, {1, int32_t(H), int32_t(W), int32_t(C)});
  const int32_t f = bd.floats("conv/filter", {int32_t(O), int32_t(K), int32_t(K), int32_t(C)}, fv);
  const int32_t b = bd.floats("conv/bias", {int32_t(O)}, bv);
  const int32_t c1 = bd.tensor("conv", fb::TensorType_FLOAT32, {1, 4, 3, int32_t(O)});
  bd.op(3, {x, f, b}, {c1}, fb::BuiltinOptions_Conv2DOptions, fb::CreateConv2DOptions(bd.b, fb::Padding_SAME, 2, 2, fb::Activation_RELU6).Union());
  const int32_t d = bd.floats("dw/filter", {1, int32_t(K), int32_t(K), int32_t(O * M)}, dv);
  const int32_t c2 = bd.tensor("dw", fb::TensorType_FLOAT32, {1, 2, 1, int32_t(O * M)});
  bd.op(4, {c1, d, -1}, {c2}, fb::BuiltinOptions_DepthwiseConv2DOptions,
        fb::CreateDepthwiseConv2DOptions(bd.b, fb::Padding_VALID, 1, 1, int32_t(M)).Union());
  const int32_t axes = bd.ints("axes", {2}, {1, 2});
  const int32_t mean = bd.tensor("mean", fb::TensorType_FLOAT32, {1, int32_t(O * M)});
  bd.op(40, {c2, axes}, {mean}, fb::BuiltinOptions_ReducerOptions, fb::CreateReducerOptions(bd.b, false).Union());
  const int32_t w = bd.floats("fc/weights", {int32_t(F), int32_t(O * M)}, wv);
  const int32_t fbv = bd.floats("fc/bias", {int32_t(F)}, fbias);
  const int32_t fc = bd.tensor("fc", fb::TensorType_FLOAT32, {1, int32_t(F)});
  bd.op(9, {mean, w, fbv}, {fc}, fb::BuiltinOptions_FullyConnectedOptions, fb::CreateFullyConnectedOptions(bd.b).Union());
  const int32_t sm = bd.tensor("probs", fb::TensorType_FLOAT32, {1, int32_t(F)});
  bd.op(25, {fc}, {sm}, fb::BuiltinOptions_SoftmaxOptions, fb::CreateSoftmaxOptions(bd.b, 1.f).Union());
  const std::string path = write("float", bd.finish({x}, {c1, sm}));
  auto out = run(path, "x", Tensor::from_floats({1, H, W, C}, xv));
  ASSERT_TRUE(out.count("conv") && out.count("probs"));

  std::vector<double> xd(xv.begin(), xv.end()), fd(fv.begin(), fv.end());
  int64_t OH, OW;
  auto conv = conv_ohwi(xd, H, W, C, fd, O, K, 2, true, OH, OW);
  for (size_t i = 0; i < conv.size(); ++i) conv[i] = std::clamp(conv[i] + bv[i % O], 0.0, 6.0);
  EXPECT_EQ(out["conv"].shape(), (Shape{1, OH, OW, O}));
  expect_close(out["conv"], conv, int(K * K * C + 1));
  // Depthwise VALID (output channel c*M+m reads input channel c), mean over H, W, FC, softmax.
  const int64_t DH = OH - K + 1, DW = OW - K + 1;
  std::vector<double> mean_v(static_cast<size_t>(O * M), 0.0);
  for (int64_t y = 0; y < DH; ++y)
    for (int64_t xx = 0; xx < DW; ++xx)
      for (int64_t oc = 0; oc < O * M; ++oc) {
        double acc = 0;
        for (int64_t ky = 0; ky < K; ++ky)
          for (int64_t kx = 0; kx < K; ++kx)
            acc += conv[static_cast<size_t>(((y + ky) * OW + xx + kx) * O + oc / M)] * dv[static_cast<size_t>((ky * K + kx) * O * M + oc)];
        mean_v[static_cast<size_t>(oc)] += acc / double(DH * DW);
      }
  std::vector<double> logits(static_cast<size_t>(F)), probs(static_cast<size_t>(F));
  double mx = -1e300, sum = 0;
  for (int64_t o = 0; o < F; ++o) {
    double acc = fbias[static_cast<size_t>(o)];
    for (int64_t i = 0; i < O * M; ++i) acc += mean_v[static_cast<size_t>(i)] * wv[static_cast<size_t>(o * O * M + i)];
    logits[static_cast<size_t>(o)] = acc;
    mx = std::max(mx, acc);
  }
  for (int64_t o = 0; o < F; ++o) sum += std::exp(logits[static_cast<size_t>(o)] - mx);
  for (int64_t o = 0; o < F; ++o) probs[static_cast<size_t>(o)] = std::exp(logits[static_cast<size_t>(o)] - mx) / sum;
  EXPECT_EQ(out["probs"].shape(), (Shape{1, F}));
  expect_close(out["probs"], probs, 200);
}

TEST(TfliteImport, Int8ConvWithPerAxisWeightsIsItsQdqMeaning) {
  const int64_t H = 5, W = 5, C = 2, O = 3, K = 3;
  Builder bd;
  const QuantSpec xq{{0.05f}, {-3}, 0}, yq{{0.1f}, {2}, 0};
  QuantSpec wq{{0.01f, 0.002f, 0.03f}, {0, 0, 0}, 0};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> q8(-127, 127), b32(-500, 500), x8(-128, 127);
  std::vector<int8_t> wv(static_cast<size_t>(O * K * K * C)), xv(static_cast<size_t>(H * W * C));
  std::vector<int32_t> bv(static_cast<size_t>(O));
  for (auto& v : wv) v = static_cast<int8_t>(q8(rng));
  for (auto& v : xv) v = static_cast<int8_t>(x8(rng));
  for (auto& v : bv) v = b32(rng);
  QuantSpec bq{{}, {0, 0, 0}, 0};
  for (float s : wq.scales) bq.scales.push_back(xq.scales[0] * s);
  const int32_t x = bd.tensor("x", fb::TensorType_INT8, {1, int32_t(H), int32_t(W), int32_t(C)}, nullptr, 0, &xq);
  const int32_t f = bd.tensor("w", fb::TensorType_INT8, {int32_t(O), int32_t(K), int32_t(K), int32_t(C)}, wv.data(), wv.size(), &wq);
  const int32_t b = bd.tensor("b", fb::TensorType_INT32, {int32_t(O)}, bv.data(), bv.size() * 4, &bq);
  const int32_t y = bd.tensor("y", fb::TensorType_INT8, {1, int32_t(H), int32_t(W), int32_t(O)}, nullptr, 0, &yq);
  bd.op(3, {x, f, b}, {y}, fb::BuiltinOptions_Conv2DOptions, fb::CreateConv2DOptions(bd.b, fb::Padding_SAME, 1, 1).Union());
  const std::string path = write("int8", bd.finish({x}, {y}));
  Tensor xt = Tensor::empty(DType::i8, {1, H, W, C});
  std::copy(xv.begin(), xv.end(), xt.data<int8_t>());
  auto out = run(path, "x", xt);
  ASSERT_TRUE(out.count("y"));
  const Tensor& got = out["y"];
  ASSERT_EQ(got.dtype(), DType::i8);
  // QDQ meaning: dequantize input and weights, convolve, add the bias, quantize (half to even).
  std::vector<double> xd(xv.size()), fd(wv.size());
  for (size_t i = 0; i < xv.size(); ++i) xd[i] = (xv[i] - xq.zero_points[0]) * double(xq.scales[0]);
  for (size_t i = 0; i < wv.size(); ++i) fd[i] = wv[i] * double(wq.scales[i / (K * K * C)]);
  int64_t OH, OW;
  auto conv = conv_ohwi(xd, H, W, C, fd, O, K, 1, true, OH, OW);
  int exact = 0;
  for (size_t i = 0; i < conv.size(); ++i) {
    const double v = conv[i] + bv[i % O] * double(bq.scales[i % O]);
    const double want = std::clamp(std::nearbyint(v / yq.scales[0]) + yq.zero_points[0], -128.0, 127.0);
    const double g = got.get_as_double(static_cast<int64_t>(i));
    // The float32 sums differ from the double ones by rounding: at most one step, only next to a tie.
    ASSERT_LE(std::fabs(g - want), 1.0) << i;
    exact += g == want;
  }
  EXPECT_GE(exact, static_cast<int>(conv.size()) - 2);
}

// The int8 model on the integer kernels: QLinearConv with TFLite's double-rounding
// requantization (the fused Relu6 as the output range), equal to quant::qlinear_conv run here
// on the file's own integers - and, on the larger case, different from ONNX Runtime's
// float requantization of the same accumulators, so the test tells the conventions apart.
void check_int8_conv(int64_t H, int64_t W, int64_t C, int64_t O, fb::Activation act, QuantSpec yq, uint32_t seed, bool conventions_must_differ) {
  const int64_t K = 3;
  Builder bd;
  const QuantSpec xq{{0.04f}, {5}, 0};
  QuantSpec wq;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> sd(0.0005f, 0.03f);
  for (int64_t o = 0; o < O; ++o) {
    wq.scales.push_back(sd(rng));
    wq.zero_points.push_back(0);
  }
  std::uniform_int_distribution<int> q8(-127, 127), b32(-3000, 3000), x8(-128, 127);
  std::vector<int8_t> wv(static_cast<size_t>(O * K * K * C)), xv(static_cast<size_t>(H * W * C));
  std::vector<int32_t> bv(static_cast<size_t>(O));
  for (auto& v : wv) v = static_cast<int8_t>(q8(rng));
  for (auto& v : xv) v = static_cast<int8_t>(x8(rng));
  for (auto& v : bv) v = b32(rng);
  QuantSpec bq;
  for (float sc : wq.scales) {
    bq.scales.push_back(xq.scales[0] * sc);
    bq.zero_points.push_back(0);
  }
  const int64_t OH = (H + 1) / 2, OW = (W + 1) / 2;
  const int32_t x = bd.tensor("x", fb::TensorType_INT8, {1, int32_t(H), int32_t(W), int32_t(C)}, nullptr, 0, &xq);
  const int32_t f = bd.tensor("w", fb::TensorType_INT8, {int32_t(O), int32_t(K), int32_t(K), int32_t(C)}, wv.data(), wv.size(), &wq);
  const int32_t b = bd.tensor("b", fb::TensorType_INT32, {int32_t(O)}, bv.data(), bv.size() * 4, &bq);
  const int32_t y = bd.tensor("y", fb::TensorType_INT8, {1, int32_t(OH), int32_t(OW), int32_t(O)}, nullptr, 0, &yq);
  bd.op(3, {x, f, b}, {y}, fb::BuiltinOptions_Conv2DOptions, fb::CreateConv2DOptions(bd.b, fb::Padding_SAME, 2, 2, act).Union());
  const std::string path = write("int8_backend", bd.finish({x}, {y}));
  runtime::LoadOptions lo;
  lo.compile.int8 = true;
  auto m = runtime::load_model(path, lo);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  int qconv = 0, fconv = 0;
  for (const auto& n : m->graph->nodes()) {
    qconv += n->op_type == "QLinearConv";
    fconv += n->op_type == "Conv";
  }
  EXPECT_EQ(qconv, 1);
  EXPECT_EQ(fconv, 0);
  Tensor xt = Tensor::empty(DType::i8, {1, H, W, C});
  std::copy(xv.begin(), xv.end(), xt.data<int8_t>());
  auto out = m->executor->run({{"x", xt}});
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  // The reference: NCHW input, OIHW weights, TFLite's SAME padding (floor(total / 2) before).
  Tensor xn = Tensor::empty(DType::i8, {1, C, H, W});
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < H * W; ++i) xn.data<int8_t>()[c * H * W + i] = xv[static_cast<size_t>(i * C + c)];
  Tensor wn = Tensor::empty(DType::i8, {O, C, K, K});
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < K * K; ++k) wn.data<int8_t>()[(o * C + c) * K * K + k] = wv[static_cast<size_t>((o * K * K + k) * C + c)];
  Tensor bt = Tensor::empty(DType::i32, {O});
  std::copy(bv.begin(), bv.end(), bt.data<int32_t>());
  const int64_t th = std::max<int64_t>((OH - 1) * 2 + K - H, 0), tw = std::max<int64_t>((OW - 1) * 2 + K - W, 0);
  const quant::QConvParams qp{{2, 2}, {1, 1}, {th / 2, tw / 2, th - th / 2, tw - tw / 2}, 1};
  auto reference = [&](quant::Requant convention) {
    auto rq = quant::Requantizer::make(convention, xq.scales[0], wq.scales, yq.scales[0], static_cast<int32_t>(yq.zero_points[0]), -128, 127);
    EXPECT_TRUE(rq.ok());
    Tensor want = Tensor::empty(DType::i8, {1, O, OH, OW});
    EXPECT_TRUE(quant::qlinear_conv(xn, 5, wn, std::vector<int32_t>(static_cast<size_t>(O), 0), bt, qp, *rq, want).ok());
    return want;
  };
  const Tensor want = reference(quant::Requant::tflite_double_rounding);
  const Tensor onnx = reference(quant::Requant::onnx_float);
  const Tensor& got = out->at("y");
  ASSERT_EQ(got.shape(), (Shape{1, OH, OW, O}));
  int differ = 0;
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < OH * OW; ++i) {
      ASSERT_EQ(got.data<int8_t>()[i * O + o], want.data<int8_t>()[o * OH * OW + i]) << "channel " << o << " pixel " << i;
      differ += want.data<int8_t>()[o * OH * OW + i] != onnx.data<int8_t>()[o * OH * OW + i];
    }
  if (conventions_must_differ) {
    EXPECT_GT(differ, 0) << "the data does not tell TFLite's rounding from ONNX Runtime's";
  }
}

TEST(TfliteImport, Int8ConvRunsOnTheIntegerKernelsWithTfliteRounding) {
  check_int8_conv(6, 5, 3, 4, fb::Activation_RELU6, QuantSpec{{6.f / 255.f}, {-128}, 0}, 11, false);
  check_int8_conv(32, 29, 16, 24, fb::Activation_NONE, QuantSpec{{0.02f}, {3}, 0}, 12, true);
}

TEST(TfliteImport, ErrorsNameTheProblem) {
  Builder bd;
  const int32_t x = bd.tensor("x", fb::TensorType_FLOAT32, {1, 4, 4, 4});
  const int32_t y = bd.tensor("y", fb::TensorType_FLOAT32, {1, 2, 2, 16});
  bd.op(26, {x}, {y});  // SPACE_TO_DEPTH
  bd.op(26, {x}, {y});
  auto bytes = bd.finish({x}, {y});
  auto r = tflite_frontend::import_tflite(bytes, "m.tflite");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::unsupported);
  EXPECT_NE(r.error().message.find("builtin 26 (2)"), std::string::npos) << r.error().message;

  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2));
  r = tflite_frontend::import_tflite(cut, "m.tflite");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("m.tflite: not a valid TFLite flatbuffer"), std::string::npos) << r.error().message;

  Builder bb;
  const int32_t a = bb.tensor("a", fb::TensorType_FLOAT32, {2});
  const std::vector<float> three = {1, 2, 3};
  const int32_t k = bb.floats("k", {2}, three);  // 3 values for 2 elements
  const int32_t s = bb.tensor("s", fb::TensorType_FLOAT32, {2});
  bb.op(0, {a, k}, {s}, fb::BuiltinOptions_AddOptions, fb::CreateAddOptions(bb.b).Union());
  r = tflite_frontend::import_tflite(bb.finish({a}, {s}), "m.tflite");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tensor 'k': buffer holds 12 bytes, its shape needs 8"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace rkd
