// Our CBUF tiling against the vendor's, as captured on an RK3588 (tests/data/npu/
// vendor_tiling.json: the facts and where they come from). The captures are fp16 runs, so
// plan_tiling runs with 2-byte elements and the fp16 runs' bank use (no spare bank). Layers
// marked "match" must give the vendor's banks and slices exactly; layers marked "differs" must
// still differ (the file says why), so a change in either direction updates the file.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "npu/lower/lower.h"

namespace rkd::npu {
namespace {

std::string rows_text(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t r : v) {
    if (!s.empty()) s += ",";
    s += std::to_string(r);
  }
  return s;
}

TEST(NpuVendorTiling, SlicesAndBanksAgainstCapturedRuns) {
  std::ifstream f(std::string(RKD_TEST_DATA_DIR) + "/npu/vendor_tiling.json");
  ASSERT_TRUE(f.good());
  const auto doc = nlohmann::json::parse(f);
  int matched = 0, differ = 0;
  for (const auto& l : doc.at("layers")) {
    std::string name = l.at("capture").get<std::string>();
    name += " [";
    name += l.at("layer").get<std::string>();
    name += ", ";
    name += l.at("run").get<std::string>();
    name += "]";
    lower::TileGeometry g;
    const int64_t C = l.at("C"), K = l.at("K"), stride = l.at("stride"), pad = l.at("pad");
    g.C = (C + 7) / 8 * 8;  // fp16 C2 = 8
    g.H = l.at("H");
    g.W = l.at("W");
    g.KH = K;
    g.stride_h = stride;
    g.pad_top = pad;
    g.OH = (g.H + 2 * pad - K) / stride + 1;
    g.weight_bytes = l.at("weight_bytes");
    g.element_bytes = 2;
    g.spare_banks = 0;
    auto t = lower::plan_tiling(g);
    ASSERT_TRUE(t.ok()) << name << ": " << t.error().to_string();
    std::vector<int64_t> in, out;
    for (const auto& s : t->slices) {
      in.push_back(s.in_rows);
      out.push_back(s.out_rows);
    }
    const auto v_in = l.at("in_rows").get<std::vector<int64_t>>(), v_out = l.at("out_rows").get<std::vector<int64_t>>();
    const bool same = t->data_banks == l.at("data_banks").get<int64_t>() && t->weight_banks == l.at("weight_banks").get<int64_t>() && in == v_in &&
                      out == v_out && !l.contains("channel_split");
    std::printf("%-62s vendor banks %lld+%lld rows in [%s] out [%s]\n%-62s ours   banks %lld+%lld rows in [%s] out [%s]  %s\n", name.c_str(),
                static_cast<long long>(l.at("data_banks").get<int64_t>()), static_cast<long long>(l.at("weight_banks").get<int64_t>()),
                rows_text(v_in).c_str(), rows_text(v_out).c_str(), "", static_cast<long long>(t->data_banks), static_cast<long long>(t->weight_banks),
                rows_text(in).c_str(), rows_text(out).c_str(), same ? "same" : "differs (why: vendor_tiling.json)");
    if (l.at("expect") == "match") {
      EXPECT_TRUE(same) << name;
      ++matched;
    } else {
      EXPECT_FALSE(same) << name << " now matches the vendor: update vendor_tiling.json";
      EXPECT_FALSE(l.value("why", std::string()).empty()) << name << ": a difference needs its reason";
      ++differ;
    }
  }
  EXPECT_GE(matched, 2);
  std::printf("%d layers as the vendor tiles them, %d with documented differences\n", matched, differ);
}

}  // namespace
}  // namespace rkd::npu
