// Golden cases from PyTorch 1.13 (Debian python3-torch), written by scripts/gen_golden.py
// and committed; PyTorch is not needed at test time.
//
// Expectations: 2-D and 3-D bilinear and nearest GridSample equal PyTorch bit for bit (our
// PyTorch convention reproduces its rounding, fused multiply-adds included, NaN and
// infinite coordinates included). 2-D bicubic agrees within the float tolerance policy
// (tests/common/tolerance.h): how PyTorch's compiled kernel fuses the cubic polynomials
// could not be pinned down (60% of values agree bit for bit). The deformable-attention core agrees within the tolerance
// (PyTorch's sum(-1) reduces in a different order); discrete methods read the same pixels.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <set>

#include "common/tolerance.h"
#include "core/npy.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"

namespace rkd {
namespace {

const std::string kGolden = std::string(RKD_TEST_DATA_DIR) + "/golden/";

std::string text(const Tensor& t) { return std::string(t.data<char>(), static_cast<size_t>(t.numel())); }

std::map<std::string, std::map<std::string, Tensor>> group(const TensorMap& m) {
  std::map<std::string, std::map<std::string, Tensor>> out;
  for (const auto& [k, v] : m) {
    const auto dot = k.find('.');
    out[k.substr(0, dot)][k.substr(dot + 1)] = v;
  }
  return out;
}

TEST(GoldenTorch, GridSample) {
  auto file = read_npz(kGolden + "grid_sample_torch.npz");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  int exact_cases = 0, tolerance_cases = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> bitwise;  // category -> (equal, total)
  for (auto& [name, c] : group(*file)) {
    GridSampleOptions opt;
    opt.mode = *parse_grid_sample_mode(text(c["mode"]));
    opt.padding = *parse_grid_sample_padding(text(c["pad"]));
    opt.align_corners = c["ac"].get_as_double(0) != 0;
    const Tensor& x = c["x"];
    const Tensor& want = c["y"];
    auto got = grid_sample(x, c["grid"], opt);
    ASSERT_TRUE(got.ok()) << name << ": " << got.error().to_string();
    ASSERT_EQ(got->shape(), want.shape()) << name;
    const bool exact = opt.mode != GridSampleMode::bicubic;
    // Magnitude for the tolerance: the largest |input| times the sum of |weights| (<= 1.6
    // for bicubic's negative lobes, 1 otherwise).
    double max_in = 0;
    for (int64_t i = 0; i < x.numel(); ++i) max_in = std::max(max_in, std::fabs(x.get_as_double(i)));
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float w = want.data<float>()[i], g = got->data<float>()[i];
      const std::string at = name + " (" + text(c["mode"]) + ", " + text(c["pad"]) + ", align_corners=" + std::to_string(opt.align_corners) +
                             ", input " + shape_to_string(x.shape()) + ") index " + std::to_string(i);
      auto& cat = bitwise[std::to_string(x.rank() - 2) + "-D " + text(c["mode"])];
      cat.first += test::exact_equal(g, w);
      cat.second += 1;
      if (exact) {
        ASSERT_TRUE(test::exact_equal(g, w)) << at << ": got " << g << " want " << w;
      } else {
        ASSERT_TRUE(test::float_agree(g, w, 1.6 * max_in, 16)) << at << ": got " << g << " want " << w;
      }
    }
    (exact ? exact_cases : tolerance_cases)++;
  }
  for (const auto& [cat, n] : bitwise) {
    std::cout << "[ golden   ] " << cat << ": " << n.first << "/" << n.second << " values bit-identical to PyTorch\n";
  }
  EXPECT_GE(exact_cases, 100);
  EXPECT_GE(tolerance_cases, 40);
}

TEST(GoldenTorch, FastAndReferenceAgreeOnEveryGoldenInput) {
  auto file = read_npz(kGolden + "grid_sample_torch.npz");
  ASSERT_TRUE(file.ok());
  for (auto& [name, c] : group(*file)) {
    GridSampleOptions opt;
    opt.mode = *parse_grid_sample_mode(text(c["mode"]));
    opt.padding = *parse_grid_sample_padding(text(c["pad"]));
    opt.align_corners = c["ac"].get_as_double(0) != 0;
    const Tensor a = *grid_sample(c["x"], c["grid"], opt, KernelImpl::reference);
    const Tensor b = *grid_sample(c["x"], c["grid"], opt, KernelImpl::fast);
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_TRUE(test::exact_equal(a.data<float>()[i], b.data<float>()[i])) << name;
  }
}

TEST(GoldenTorch, DeformableAttentionCoreAllMethods) {
  auto file = read_npz(kGolden + "msda_torch.npz");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  std::set<std::string> methods;
  std::map<std::string, std::pair<int64_t, int64_t>> bitwise;
  for (auto& [name, c] : group(*file)) {
    const MsdaMethod m = *parse_msda_method(text(c["method"]));
    methods.insert(to_string(m));
    std::vector<MsdaLevelShape> shapes;
    for (int64_t l = 0; l < c["shapes"].dim(0); ++l) {
      shapes.push_back({static_cast<int64_t>(c["shapes"].get_as_double(2 * l)), static_cast<int64_t>(c["shapes"].get_as_double(2 * l + 1))});
    }
    std::vector<int64_t> points;
    for (int64_t l = 0; l < c["points"].numel(); ++l) points.push_back(static_cast<int64_t>(c["points"].get_as_double(l)));
    const MsdaValue v = *msda_prepare_from_tokens(c["value"], shapes);
    MsdaOptions o;
    o.method = m;
    auto got = msda(v, c["loc"], c["w"], points, o);
    ASSERT_TRUE(got.ok()) << name << got.error().to_string();
    const Tensor& want = c["y"];
    ASSERT_EQ(got->shape(), want.shape()) << name;
    double max_v = 0;
    for (int64_t i = 0; i < c["value"].numel(); ++i) max_v = std::max(max_v, std::fabs(c["value"].get_as_double(i)));
    int64_t P = 0;
    for (auto p : points) P += p;
    for (int64_t i = 0; i < want.numel(); ++i) {
      bitwise[to_string(m)].first += test::exact_equal(got->data<float>()[i], want.data<float>()[i]);
      bitwise[to_string(m)].second += 1;
      // Magnitude: max|value| (weights sum to 1); depth: P products + P additions.
      ASSERT_TRUE(test::float_agree(got->data<float>()[i], want.data<float>()[i], max_v, static_cast<int>(2 * P)))
          << name << " (" << to_string(m) << ") index " << i << ": got " << got->data<float>()[i] << " want " << want.data<float>()[i];
    }
  }
  EXPECT_EQ(methods.size(), 3u);
  for (const auto& [cat, n] : bitwise) {
    std::cout << "[ golden   ] deform-attn " << cat << ": " << n.first << "/" << n.second << " values bit-identical to PyTorch\n";
  }
}

}  // namespace
}  // namespace rkd
