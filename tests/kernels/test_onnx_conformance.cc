// ONNX conformance: the GridSample node tests of Debian's libonnx-testdata
// (/usr/share/libonnx-testdata/data/node/test_gridsample*), read with libonnx's protobuf
// classes. Each case is run under both conventions: the ONNX convention must agree with
// the expected outputs everywhere; the PyTorch convention must agree too except where
// the documented differences apply (none of these cases hits one).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "common/tolerance.h"
#include "kernels/grid_sample.h"

namespace rkd {
namespace {

namespace fs = std::filesystem;

template <typename Proto>
Proto load(const fs::path& p) {
  Proto m;
  std::ifstream f(p, std::ios::binary);
  EXPECT_TRUE(f.good()) << p;
  EXPECT_TRUE(m.ParseFromIstream(&f)) << p;
  return m;
}

Tensor to_tensor(const onnx::TensorProto& t) {
  Shape s(t.dims().begin(), t.dims().end());
  EXPECT_EQ(t.data_type(), onnx::TensorProto::FLOAT) << t.name();
  Tensor out = Tensor::empty(DType::f32, s);
  if (t.has_raw_data()) {
    EXPECT_EQ(t.raw_data().size(), out.nbytes());
    std::memcpy(out.raw(), t.raw_data().data(), out.nbytes());
  } else {
    EXPECT_EQ(static_cast<int64_t>(t.float_data_size()), out.numel());
    std::copy(t.float_data().begin(), t.float_data().end(), out.data<float>());
  }
  return out;
}

TEST(OnnxConformance, GridSampleNodeTests) {
  const fs::path root = RKD_ONNX_TESTDATA;
  ASSERT_TRUE(fs::exists(root)) << root << " missing: install libonnx-testdata (scripts/setup.sh)";
  int cases = 0;
  for (const auto& dir : fs::directory_iterator(root)) {
    const std::string name = dir.path().filename().string();
    if (name.rfind("test_gridsample", 0) != 0) continue;
    const auto model = load<onnx::ModelProto>(dir.path() / "model.onnx");
    ASSERT_EQ(model.graph().node_size(), 1);
    const auto& node = model.graph().node(0);
    ASSERT_EQ(node.op_type(), "GridSample");
    GridSampleOptions opt;
    for (const auto& a : node.attribute()) {
      if (a.name() == "mode") opt.mode = *parse_grid_sample_mode(a.s());
      if (a.name() == "padding_mode") opt.padding = *parse_grid_sample_padding(a.s());
      if (a.name() == "align_corners") opt.align_corners = a.i() != 0;
    }
    const fs::path data = dir.path() / "test_data_set_0";
    const Tensor x = to_tensor(load<onnx::TensorProto>(data / "input_0.pb"));
    const Tensor g = to_tensor(load<onnx::TensorProto>(data / "input_1.pb"));
    const Tensor want = to_tensor(load<onnx::TensorProto>(data / "output_0.pb"));
    double max_in = 0;
    for (int64_t i = 0; i < x.numel(); ++i) max_in = std::max(max_in, std::fabs(x.get_as_double(i)));
    for (auto conv : {GridSampleConvention::onnx, GridSampleConvention::pytorch}) {
      for (auto impl : {KernelImpl::reference, KernelImpl::fast}) {
        opt.convention = conv;
        auto got = grid_sample(x, g, opt, impl);
        ASSERT_TRUE(got.ok()) << name << ": " << got.error().to_string();
        ASSERT_EQ(got->shape(), want.shape()) << name;
        for (int64_t i = 0; i < want.numel(); ++i) {
          // The expected data is printed to ~8 significant digits by its generator.
          ASSERT_TRUE(test::float_agree(got->data<float>()[i], want.data<float>()[i], 1.6 * max_in, 16))
              << name << " convention=" << to_string(conv) << " index " << i << ": got " << got->data<float>()[i] << " want "
              << want.data<float>()[i];
        }
      }
    }
    ++cases;
  }
  EXPECT_EQ(cases, 8);
}

}  // namespace
}  // namespace rkd
