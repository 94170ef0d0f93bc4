// The reference models (scripts/models/make_models.py --scale tiny, generated into
// RKD_MODELS_DIR by the ctest fixture `models_tiny`) run on the CPU executor and match
// PyTorch's outputs (tolerance.h: model_agree; labels exactly wherever the scores around
// them are separated by more than the tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/tolerance.h"
#include "core/npy.h"
#include "frontends/onnx/onnx_import.h"
#include "runtime/model.h"

namespace rkd {
namespace {

namespace fs = std::filesystem;

std::map<std::string, Tensor> read_prefixed(const std::string& stem, const std::string& kind) {
  std::map<std::string, Tensor> m;
  const fs::path dir = fs::path(stem).parent_path();
  const std::string base = fs::path(stem).filename().string() + "." + kind + "_";
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(base, 0) == 0 && e.path().extension() == ".npy") {
      auto t = read_npy(e.path().string());
      EXPECT_TRUE(t.ok()) << f;
      if (t.ok()) m[f.substr(base.size(), f.size() - base.size() - 4)] = *t;
    }
  }
  return m;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get_as_double(i)));
  return m;
}

void expect_outputs_match(const std::string& model, const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want) {
  ASSERT_EQ(got.size(), want.size()) << model;
  const Tensor* scores = want.count("scores") ? &want.at("scores") : nullptr;
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << model << ": no output " << name;
    const Tensor& g = got.at(name);
    ASSERT_EQ(g.shape(), w.shape()) << model << " " << name;
    ASSERT_EQ(g.dtype(), w.dtype()) << model << " " << name;
    const double m = max_abs(w);
    int checked = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double a = g.get_as_double(i), e = w.get_as_double(i);
      if (dtype_is_float(w.dtype())) {
        ASSERT_TRUE(test::model_agree(a, e, m)) << model << " " << name << "[" << i << "]: got " << a << " want " << e;
        ++checked;
      } else if (scores && scores->numel() == w.numel()) {
        // Labels: exact where the neighbouring scores are separated (TopK order is stable then).
        const double s = scores->get_as_double(i);
        const double prev = i > 0 ? scores->get_as_double(i - 1) : INFINITY;
        const double next = i + 1 < w.numel() ? scores->get_as_double(i + 1) : -INFINITY;
        if (prev - s > 1e-5 && s - next > 1e-5) {
          EXPECT_EQ(a, e) << model << " " << name << "[" << i << "]";
          ++checked;
        }
      } else {
        EXPECT_EQ(a, e) << model << " " << name << "[" << i << "]";
        ++checked;
      }
    }
    EXPECT_GT(checked, w.numel() / 2) << model << " " << name << ": too few separated elements to check";
  }
}

class ModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelTest, MatchesPyTorch) {
  const std::string stem = std::string(RKD_MODELS_DIR) + "/" + GetParam();
  ASSERT_TRUE(fs::exists(stem + ".onnx")) << stem << ".onnx missing: the models_tiny fixture generates it";
  auto inputs = read_prefixed(stem, "input");
  auto want = read_prefixed(stem, "output");
  ASSERT_FALSE(inputs.empty());
  for (bool fuse : {true, false}) {
    runtime::LoadOptions lo;
    lo.compile.fuse = fuse;
    auto m = runtime::load_model(stem + ".onnx", lo);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    auto got = m->executor->run(inputs);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_outputs_match(std::string(GetParam()) + (fuse ? " (fused)" : " (unfused)"), *got, want);
    // The arena reuses memory, and a second run over the same buffers gives the same bits.
    const auto& plan = m->executor->memory_plan();
    EXPECT_LT(plan.arena_bytes, plan.intermediate_bytes / 2);
    auto again = m->executor->run(inputs);
    ASSERT_TRUE(again.ok());
    for (const auto& [name, t] : *got) {
      ASSERT_EQ(std::memcmp(t.raw(), again->at(name).raw(), t.nbytes()), 0) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, ModelTest, ::testing::Values("deimv2_s_arch_tiny", "deimv2_s_arch_discrete_tiny", "yolov8n_arch_tiny"));

TEST(Models, FusionFindsEveryDecoderLayerAndReportsNearMisses) {
  for (const char* name : {"deimv2_s_arch_tiny", "deimv2_s_arch_discrete_tiny"}) {
    const std::string path = std::string(RKD_MODELS_DIR) + "/" + name + ".onnx";
    runtime::LoadOptions lo;
    auto m = runtime::load_model(path, lo);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    EXPECT_EQ(m->fusion.fused_sites, 2) << name;  // the tiny variant has 2 decoder layers
    EXPECT_TRUE(m->fusion.not_fused.empty()) << name;
    int prepares = 0, fused = 0, gridsamples = 0;
    for (const auto& n : m->graph->nodes()) {
      prepares += n->op_type == "MSDAPrepare";
      fused += n->op_type == "MSDeformAttn";
      gridsamples += n->op_type == "GridSample";
    }
    EXPECT_EQ(prepares, 1) << name << ": the value is prepared once for all layers";
    EXPECT_EQ(fused, 2) << name;
    EXPECT_EQ(gridsamples, 0) << name;
  }
  // One GridSample with align_corners=1 is not the decoder's sampling: that site stays, with the reason.
  onnx_frontend::ImportOptions io;
  io.batch = 1;
  auto imp = onnx_frontend::import_onnx_file(std::string(RKD_MODELS_DIR) + "/deimv2_s_arch_tiny.onnx", io);
  ASSERT_TRUE(imp.ok());
  for (const auto& n : imp->graph.nodes()) {
    if (n->op_type == "GridSample") {
      n->attrs["align_corners"] = int64_t{1};
      break;
    }
  }
  runtime::FusionReport rep;
  ASSERT_TRUE(runtime::optimize(imp->graph, {}, &rep).ok());
  EXPECT_EQ(rep.fused_sites, 1);
  ASSERT_EQ(rep.not_fused.size(), 1u);
  EXPECT_NE(rep.not_fused[0].find("align_corners"), std::string::npos) << rep.not_fused[0];
}

TEST(Models, BatchTwoEqualsTwoBatchOnes) {
  const std::string stem = std::string(RKD_MODELS_DIR) + "/deimv2_s_arch_tiny";
  auto inputs = read_prefixed(stem, "input");
  auto want = read_prefixed(stem, "output");
  const Tensor& img = inputs.at("images");
  Shape s2 = img.shape();
  s2[0] = 2;
  Tensor img2 = Tensor::empty(DType::f32, s2);
  std::memcpy(img2.raw(), img.raw(), img.nbytes());
  std::memcpy(static_cast<uint8_t*>(img2.raw()) + img.nbytes(), img.raw(), img.nbytes());
  Tensor sizes2 = Tensor::empty(DType::i64, {2, 2});
  for (int i = 0; i < 4; ++i) sizes2.data<int64_t>()[i] = inputs.at("orig_target_sizes").data<int64_t>()[i % 2];
  runtime::LoadOptions lo;
  lo.batch = 2;
  auto m = runtime::load_model(stem + ".onnx", lo);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  auto got = m->executor->run({{"images", img2}, {"orig_target_sizes", sizes2}});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  for (const auto& [name, w] : want) {
    const Tensor& g = got->at(name);
    ASSERT_EQ(g.dim(0), 2);
    const double m_abs = max_abs(w);
    for (int b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < w.numel(); ++i) {
        if (dtype_is_float(w.dtype())) {
          ASSERT_TRUE(test::model_agree(g.get_as_double(b * w.numel() + i), w.get_as_double(i), m_abs)) << name;
        }
      }
    }
  }
  // A wrong batch size is refused with the input's name.
  auto bad = m->executor->run(inputs);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("images"), std::string::npos) << bad.error().message;
}

TEST(Models, OrigTargetSizesAreValidated) {
  auto sizes = [](std::vector<int64_t> v, Shape s) {
    Tensor t = Tensor::empty(DType::i64, s);
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    return t;
  };
  EXPECT_TRUE(runtime::check_detector_inputs({{"orig_target_sizes", sizes({640, 480}, {1, 2})}}).ok());
  auto zero = runtime::check_detector_inputs({{"orig_target_sizes", sizes({0, 0}, {1, 2})}});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("scaled to zero"), std::string::npos) << zero.error().message;
  EXPECT_FALSE(runtime::check_detector_inputs({{"orig_target_sizes", sizes({-5, 10}, {1, 2})}}).ok());
  EXPECT_FALSE(runtime::check_detector_inputs({{"orig_target_sizes", sizes({640, 480, 1}, {1, 3})}}).ok());
  EXPECT_FALSE(runtime::check_detector_inputs({{"orig_target_sizes", sizes({640, 1 << 20}, {1, 2})}}).ok());
  EXPECT_FALSE(runtime::check_detector_inputs({{"orig_target_sizes", Tensor::from_floats({1, 2}, std::vector<float>{640, 480})}}).ok());
}

}  // namespace
}  // namespace rkd
