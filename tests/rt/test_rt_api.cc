// The embeddable runtime's C API (include/rkdeploy/rkdeploy.h) through the shared library only:
// every misuse a status and a message naming the cause, nothing crashes, the model unchanged
// after a refused call. The artifact comes from the rt_artifact fixture (RKD_TEST_ARTIFACT: a
// one-convolution TFLite model compiled by rkdeploy, input x int8 [1, 5, 5, 2]).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "rkdeploy/rkdeploy.h"
#include "rkdeploy/rkdeploy.hpp"

namespace {

std::string artifact() {
  const char* p = std::getenv("RKD_TEST_ARTIFACT");
  return p ? p : "";
}

std::string last() { return rkd_last_error(); }

TEST(RtApi, VersionsAndNames) {
  EXPECT_EQ(rkd_api_version(), RKD_API_VERSION);
  EXPECT_STRNE(rkd_version(), "");
  EXPECT_STREQ(rkd_status_name(RKD_ERROR_INVALID), "invalid");
  EXPECT_STREQ(rkd_class_name(0), "person");
  EXPECT_EQ(rkd_class_name(80), nullptr);
  EXPECT_EQ(rkd_class_name(-1), nullptr);
}

TEST(RtApi, OpenRefusalsNameTheCause) {
  rkd_model* m = reinterpret_cast<rkd_model*>(1);
  EXPECT_EQ(rkd_open("/nonexistent/model.rkd", nullptr, &m), RKD_ERROR_IO);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(last().find("/nonexistent/model.rkd"), std::string::npos) << last();
  EXPECT_EQ(rkd_open(nullptr, nullptr, &m), RKD_ERROR_INVALID);
  EXPECT_EQ(rkd_open(artifact().c_str(), nullptr, nullptr), RKD_ERROR_INVALID);
  // A damaged file: its first half.
  std::ifstream in(artifact(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u) << "RKD_TEST_ARTIFACT: " << artifact();
  const std::string cut = testing::TempDir() + "rt_api_cut.rkd";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_EQ(rkd_open(cut.c_str(), nullptr, &m), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("rt_api_cut.rkd"), std::string::npos) << last();
  rkd_options o;
  rkd_options_init(&o);
  o.struct_size = 3;
  EXPECT_EQ(rkd_open(artifact().c_str(), &o, &m), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("struct_size"), std::string::npos) << last();
  rkd_options_init(&o);
  o.backend = static_cast<rkd_backend>(7);
  EXPECT_EQ(rkd_open(artifact().c_str(), &o, &m), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("backend"), std::string::npos) << last();
  rkd_options_init(&o);
  o.backend = RKD_BACKEND_DEVICE;
  o.device = "/nonexistent/accel9";
  EXPECT_NE(rkd_open(artifact().c_str(), &o, &m), RKD_OK);
  EXPECT_NE(last().find("/nonexistent/accel9"), std::string::npos) << last();
  o.device = nullptr;
  o.cores = 9;
  EXPECT_EQ(rkd_open(artifact().c_str(), &o, &m), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("cores"), std::string::npos) << last();
}

TEST(RtApi, RunsAndRefusesMisuse) {
  rkd_model* m = nullptr;
  ASSERT_EQ(rkd_open(artifact().c_str(), nullptr, &m), RKD_OK) << last();
  ASSERT_EQ(rkd_input_count(m), 1u);
  ASSERT_GE(rkd_output_count(m), 1u);
  rkd_tensor_info in;
  ASSERT_EQ(rkd_input_info(m, 0, &in), RKD_OK);
  EXPECT_STREQ(in.name, "x");
  EXPECT_EQ(in.dtype, RKD_INT8);
  EXPECT_EQ(in.rank, 4);
  EXPECT_EQ(in.bytes, 50u);
  size_t idx = 9;
  EXPECT_EQ(rkd_find_input(m, "x", &idx), RKD_OK);
  EXPECT_EQ(idx, 0u);
  EXPECT_EQ(rkd_find_input(m, "nope", &idx), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("no input named 'nope' (the model has x)"), std::string::npos) << last();
  EXPECT_EQ(rkd_input_info(m, 1, &in), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("input index 1 out of range (the model has 1)"), std::string::npos) << last();
  const void* out = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(rkd_output(m, 0, &out, &bytes), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("rkd_run first"), std::string::npos) << last();
  std::vector<int8_t> x(50);
  for (int i = 0; i < 50; ++i) x[static_cast<size_t>(i)] = static_cast<int8_t>(i);
  EXPECT_EQ(rkd_set_input(m, 0, x.data(), 49), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("input 'x' takes 50 bytes (int8 [1, 5, 5, 2]), got 49"), std::string::npos) << last();
  ASSERT_EQ(rkd_set_input(m, 0, x.data(), 50), RKD_OK);
  ASSERT_EQ(rkd_run(m), RKD_OK) << last();
  ASSERT_EQ(rkd_output(m, 0, &out, &bytes), RKD_OK);
  rkd_tensor_info oi;
  ASSERT_EQ(rkd_output_info(m, 0, &oi), RKD_OK);
  EXPECT_EQ(bytes, oi.bytes);
  const std::vector<uint8_t> first(static_cast<const uint8_t*>(out), static_cast<const uint8_t*>(out) + bytes);
  // The same input through the zero-copy buffer: the same output.
  void* buf = nullptr;
  ASSERT_EQ(rkd_input_buffer(m, 0, &buf), RKD_OK);
  std::memcpy(buf, x.data(), 50);
  ASSERT_EQ(rkd_run(m), RKD_OK);
  ASSERT_EQ(rkd_output(m, 0, &out, &bytes), RKD_OK);
  EXPECT_EQ(std::vector<uint8_t>(static_cast<const uint8_t*>(out), static_cast<const uint8_t*>(out) + bytes), first);
  // Detections need a photo fed since the inputs were set.
  size_t count = 0;
  EXPECT_EQ(rkd_detections(m, nullptr, 0, &count), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("no photo fed"), std::string::npos) << last();
  EXPECT_EQ(rkd_set_image(m, nullptr, 4, 4), RKD_ERROR_INVALID);
  const uint8_t px[12] = {};
  EXPECT_EQ(rkd_set_image(m, px, 0, 4), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("each side must be 1 to"), std::string::npos) << last();
  EXPECT_NE(rkd_set_image_file(m, "/nonexistent/photo.png"), RKD_OK);
  EXPECT_NE(last().find("/nonexistent/photo.png"), std::string::npos) << last();
  // NULLs.
  EXPECT_EQ(rkd_run(nullptr), RKD_ERROR_INVALID);
  EXPECT_EQ(rkd_input_count(nullptr), 0u);
  EXPECT_EQ(rkd_output(m, 0, nullptr, &bytes), RKD_ERROR_INVALID);
  rkd_close(m);
  rkd_close(nullptr);
}

// Threads sharing one model: every call serialised (no crash, every run the single-threaded
// answer); the output pointer stays the same buffer from run to run until rkd_close, as the
// header says; options.threads is bounded like the command line's --threads.
TEST(RtApi, ThreadsShareAModelAndOutputsStayPut) {
  rkd_options o;
  rkd_options_init(&o);
  o.threads = 100000;
  rkd_model* m = nullptr;
  EXPECT_EQ(rkd_open(artifact().c_str(), &o, &m), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("options.threads 100000: must be 0 (one per core) to 1024"), std::string::npos) << last();
  o.threads = -3;
  EXPECT_EQ(rkd_open(artifact().c_str(), &o, &m), RKD_ERROR_INVALID);
  o.threads = 1;
  ASSERT_EQ(rkd_open(artifact().c_str(), &o, &m), RKD_OK) << last();
  std::vector<int8_t> x(50);
  for (int i = 0; i < 50; ++i) x[static_cast<size_t>(i)] = static_cast<int8_t>(3 * i - 70);
  ASSERT_EQ(rkd_set_input(m, 0, x.data(), x.size()), RKD_OK);
  ASSERT_EQ(rkd_run(m), RKD_OK) << last();
  const void* out = nullptr;
  size_t bytes = 0;
  ASSERT_EQ(rkd_output(m, 0, &out, &bytes), RKD_OK);
  const std::vector<uint8_t> want(static_cast<const uint8_t*>(out), static_cast<const uint8_t*>(out) + bytes);
  std::atomic<int> failures{0}, moved{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 40; ++k) {
        if (rkd_set_input(m, 0, x.data(), x.size()) != RKD_OK || rkd_run(m) != RKD_OK) {
          ++failures;
          continue;
        }
        const void* p = nullptr;
        size_t n = 0;
        if (rkd_output(m, 0, &p, &n) != RKD_OK || n != want.size()) ++failures;
        if (p != out) ++moved;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(moved.load(), 0) << "rkd_output's pointer changed between runs";
  // The pointer taken before the threads still holds the answer (every run wrote the same).
  EXPECT_EQ(std::vector<uint8_t>(static_cast<const uint8_t*>(out), static_cast<const uint8_t*>(out) + bytes), want);
  rkd_close(m);
}

// An artifact edited anywhere (one byte in its middle) is refused by its digest, naming the file.
TEST(RtApi, AnEditedArtifactIsRefused) {
  std::ifstream in(artifact(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  const std::string edited = testing::TempDir() + "rt_api_edited.rkd";
  std::ofstream(edited, std::ios::binary) << bytes;
  rkd_model* m = nullptr;
  EXPECT_EQ(rkd_open(edited.c_str(), nullptr, &m), RKD_ERROR_INVALID);
  EXPECT_NE(last().find("rt_api_edited.rkd: damaged"), std::string::npos) << last();
}

TEST(RtApi, CppWrapperThrowsWithTheStatus) {
  try {
    rkdeploy::Model m("/nonexistent/model.rkd");
    FAIL() << "opened a missing file";
  } catch (const rkdeploy::Error& e) {
    EXPECT_EQ(e.status(), RKD_ERROR_IO);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.rkd"), std::string::npos);
  }
  rkdeploy::Model m(artifact());
  EXPECT_EQ(m.input_info(m.input_index("x")).bytes, 50u);
  EXPECT_THROW(m.output_index("nope"), rkdeploy::Error);
}

}  // namespace
