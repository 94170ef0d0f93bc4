// ONNX conformance of the int8 reference kernels with the ONNX convention (requant.h:
// onnx_float; quantize: half to even): the QuantizeLinear, DequantizeLinear (per tensor and
// _axis), QLinearConv and QLinearMatMul node tests of Debian's libonnx-testdata, read with
// libonnx's protobuf classes, compared exactly (integer outputs bit for bit; dequantized
// floats bit for bit).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "core/npy.h"
#include "frontends/onnx/onnx_import.h"
#include "quant/int8.h"

namespace rkd::quant {
namespace {

namespace fs = std::filesystem;
const fs::path kRoot = RKD_ONNX_TESTDATA;

onnx::NodeProto load_node(const std::string& test) {
  onnx::ModelProto m;
  std::ifstream f(kRoot / test / "model.onnx", std::ios::binary);
  EXPECT_TRUE(m.ParseFromIstream(&f)) << test;
  EXPECT_EQ(m.graph().node_size(), 1) << test;
  return m.graph().node(0);
}

Tensor load(const std::string& test, const std::string& file) {
  auto bytes = read_file_bytes((kRoot / test / "test_data_set_0" / file).string());
  EXPECT_TRUE(bytes.ok()) << test << "/" << file;
  auto t = onnx_frontend::import_onnx_tensor(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), file);
  EXPECT_TRUE(t.ok()) << test << "/" << file << ": " << (t.ok() ? "" : t.error().to_string());
  return t.ok() ? *t : Tensor();
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.i();
  }
  return fallback;
}
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name, std::vector<int64_t> fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  }
  return fallback;
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.get_as_double(i)));
  return v;
}
std::vector<int32_t> ints(const Tensor& t) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<int32_t>(t.get_as_double(i)));
  return v;
}

void expect_bitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_EQ(got.get_as_double(i), want.get_as_double(i)) << what << " element " << i;
  }
}

TEST(QuantConformance, QuantizeLinear) {
  for (const char* test : {"test_quantizelinear", "test_quantizelinear_axis"}) {
    const auto node = load_node(test);
    const Tensor x = load(test, "input_0.pb"), s = load(test, "input_1.pb"), z = load(test, "input_2.pb");
    const Tensor want = load(test, "output_0.pb");
    QuantParams p{floats(s), ints(z), static_cast<int>(attr_int(node, "axis", 1))};
    Tensor got = Tensor::empty(want.dtype(), want.shape());
    ASSERT_TRUE(quantize(x, p, QuantizeRounding::half_to_even, got).ok()) << test;
    expect_bitwise(got, want, test);
  }
}

TEST(QuantConformance, DequantizeLinear) {
  for (const char* test : {"test_dequantizelinear", "test_dequantizelinear_axis"}) {
    const auto node = load_node(test);
    const Tensor x = load(test, "input_0.pb"), s = load(test, "input_1.pb");
    const Tensor z = fs::exists(kRoot / test / "test_data_set_0" / "input_2.pb") ? load(test, "input_2.pb") : Tensor();
    const Tensor want = load(test, "output_0.pb");
    std::vector<int32_t> zps = z.defined() ? ints(z) : std::vector<int32_t>(static_cast<size_t>(s.numel()), 0);
    QuantParams p{floats(s), zps, static_cast<int>(attr_int(node, "axis", 1))};
    Tensor got = Tensor::empty(DType::f32, want.shape());
    ASSERT_TRUE(dequantize(x, p, got).ok()) << test;
    expect_bitwise(got, want, test);
  }
}

TEST(QuantConformance, QLinearConv) {
  const std::string test = "test_qlinearconv";
  const auto node = load_node(test);
  const Tensor x = load(test, "input_0.pb"), xs = load(test, "input_1.pb"), xz = load(test, "input_2.pb");
  const Tensor w = load(test, "input_3.pb"), ws = load(test, "input_4.pb"), wz = load(test, "input_5.pb");
  const Tensor ys = load(test, "input_6.pb"), yz = load(test, "input_7.pb");
  const Tensor bias = fs::exists(kRoot / test / "test_data_set_0" / "input_8.pb") ? load(test, "input_8.pb") : Tensor();
  const Tensor want = load(test, "output_0.pb");
  QConvParams p;
  p.strides = attr_ints(node, "strides", {1, 1});
  p.dilations = attr_ints(node, "dilations", {1, 1});
  p.pads = attr_ints(node, "pads", {0, 0, 0, 0});
  p.group = attr_int(node, "group", 1);
  auto range = quantized_range(want.dtype());
  ASSERT_TRUE(range.ok());
  auto rq = Requantizer::make(Requant::onnx_float, floats(xs)[0], floats(ws), floats(ys)[0], ints(yz)[0], range->first, range->second);
  ASSERT_TRUE(rq.ok()) << rq.error().to_string();
  Tensor got = Tensor::empty(want.dtype(), want.shape());
  auto s = qlinear_conv(x, ints(xz)[0], w, ints(wz), bias, p, *rq, got);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  expect_bitwise(got, want, test);
}

TEST(QuantConformance, QLinearMatMul) {
  for (const char* test : {"test_qlinearmatmul_2D", "test_qlinearmatmul_3D"}) {
    const Tensor a = load(test, "input_0.pb"), as = load(test, "input_1.pb"), az = load(test, "input_2.pb");
    const Tensor b = load(test, "input_3.pb"), bs = load(test, "input_4.pb"), bz = load(test, "input_5.pb");
    const Tensor ys = load(test, "input_6.pb"), yz = load(test, "input_7.pb");
    const Tensor want = load(test, "output_0.pb");
    auto range = quantized_range(want.dtype());
    auto rq = Requantizer::make(Requant::onnx_float, floats(as)[0], floats(bs), floats(ys)[0], ints(yz)[0], range->first, range->second);
    ASSERT_TRUE(rq.ok());
    Tensor got = Tensor::empty(want.dtype(), want.shape());
    auto s = qlinear_matmul(a, ints(az)[0], b, ints(bz), *rq, got);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    expect_bitwise(got, want, test);
  }
}

}  // namespace
}  // namespace rkd::quant
