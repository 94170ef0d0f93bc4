#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/npy.h"

namespace rkd {
namespace {

const std::string kDir = std::string(RKD_TEST_DATA_DIR) + "/npy/";

std::span<const uint8_t> as_bytes(const std::string& s) { return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

TEST(Npy, ReadsEveryFormatVersionWrittenByNumpy) {
  for (const char* v : {"f32_v1.npy", "f32_v2.npy", "f32_v3.npy"}) {
    auto t = read_npy(kDir + v);
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    EXPECT_EQ(t->shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(t->dtype(), DType::f32);
    for (int i = 0; i < 24; ++i) EXPECT_EQ(t->data<float>()[i], static_cast<float>(i) / 8) << v;
  }
}

TEST(Npy, ReadsEveryDtype) {
  const std::pair<const char*, DType> cases[] = {{"float16", DType::f16}, {"int8", DType::i8},   {"uint8", DType::u8}, {"int16", DType::i16},
                                                 {"int32", DType::i32},   {"int64", DType::i64}, {"bool", DType::b8}};
  for (auto [name, dt] : cases) {
    auto t = read_npy(kDir + name + ".npy");
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    EXPECT_EQ(t->dtype(), dt);
    EXPECT_EQ(t->shape(), (Shape{6}));
    if (dt == DType::b8) {
      EXPECT_EQ(t->get_as_double(1), 1.0);  // -2 % 2 == 0
    } else if (dt == DType::u8) {
      EXPECT_EQ(t->get_as_double(0), 253.0);
    } else {
      EXPECT_EQ(t->get_as_double(0), -3.0) << name;
    }
  }
  auto s = read_npy(kDir + "scalar.npy");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->get_as_double(0), 2.5);
}

TEST(Npy, RefusesWhatItCannotReadWithNamedErrors) {
  auto be = read_npy(kDir + "big_endian.npy");
  ASSERT_FALSE(be.ok());
  EXPECT_EQ(be.error().kind, ErrorKind::unsupported);
  EXPECT_NE(be.error().message.find("big_endian.npy"), std::string::npos);
  EXPECT_NE(be.error().message.find("big-endian"), std::string::npos);
  auto fo = read_npy(kDir + "fortran.npy");
  ASSERT_FALSE(fo.ok());
  EXPECT_NE(fo.error().message.find("Fortran"), std::string::npos);
  auto f64 = read_npy(kDir + "float64.npy");
  ASSERT_FALSE(f64.ok());
  EXPECT_NE(f64.error().message.find("<f8"), std::string::npos);
  auto missing = read_npy(kDir + "does_not_exist.npy");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::io);
}

TEST(Npy, MalformedHeadersAreErrorsNotCrashes) {
  const std::string good = *serialize_npy(Tensor::from_floats({2, 2}, std::vector<float>{1, 2, 3, 4}));
  // Every truncation of a valid file is an error.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(parse_npy(as_bytes(good.substr(0, n)), "t.npy").ok()) << n;
  }
  auto with_header = [](const std::string& dict, const std::string& data) {
    std::string s = std::string("\x93NUMPY\x01\x00", 8);
    s += static_cast<char>(dict.size() & 0xff);
    s += static_cast<char>(dict.size() >> 8);
    return s + dict + data;
  };
  const char* bad[] = {
      "{'descr': '<f4', 'fortran_order': False}\n",                         // no shape
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n",       // negative
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n",  // unknown key
      "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, }\n",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }\n",
      "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n",
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }\n",  // no data for it
      "not a dict\n",
  };
  for (const char* h : bad) {
    auto r = parse_npy(as_bytes(with_header(h, std::string(8, '\0'))), "bad.npy");
    EXPECT_FALSE(r.ok()) << h;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("bad.npy"), std::string::npos);
    }
  }
  // Trailing bytes after the data.
  EXPECT_FALSE(parse_npy(as_bytes(good + "xx"), "t.npy").ok());
  // Unsupported version.
  std::string v9 = good;
  v9[6] = 9;
  auto r9 = parse_npy(as_bytes(v9), "t.npy");
  ASSERT_FALSE(r9.ok());
  EXPECT_EQ(r9.error().kind, ErrorKind::unsupported);
  // A bool array holding 2.
  auto b = with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }\n", std::string("\x01\x02", 2));
  EXPECT_FALSE(parse_npy(as_bytes(b), "b.npy").ok());
}

TEST(Npy, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  const std::string good = *serialize_npy(Tensor::from_floats({3}, std::vector<float>{1, 2, 3}));
  for (int i = 0; i < 20000; ++i) {
    std::string s = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) s[rng() % s.size()] = static_cast<char>(rng());
    (void)parse_npy(as_bytes(s), "fuzz.npy");
  }
}

TEST(Npy, WriteReadRoundTripAllDtypesAndViews) {
  const auto dir = std::filesystem::temp_directory_path() / ("rkd_npy_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (DType dt : {DType::f32, DType::f16, DType::i8, DType::u8, DType::i16, DType::i32, DType::i64, DType::b8}) {
    Tensor t = Tensor::empty(dt, {3, 5});
    for (size_t i = 0; i < t.nbytes(); ++i) static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(dt == DType::b8 ? i % 2 : i * 7);
    const std::string p = (dir / (std::string(dtype_name(dt)) + ".npy")).string();
    ASSERT_TRUE(write_npy(p, t).ok());
    auto back = read_npy(p);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(back->shape(), t.shape());
    EXPECT_EQ(std::memcmp(back->raw(), t.raw(), t.nbytes()), 0) << dtype_name(dt);
  }
  // A permuted view is written in C order of the view.
  Tensor t = Tensor::from_floats({2, 3}, std::vector<float>{0, 1, 2, 3, 4, 5});
  const std::string p = (dir / "perm.npy").string();
  ASSERT_TRUE(write_npy(p, *t.permute({1, 0})).ok());
  auto back = *read_npy(p);
  EXPECT_EQ(back.shape(), (Shape{3, 2}));
  EXPECT_EQ(back.data<float>()[1], 3.0f);
  std::filesystem::remove_all(dir);
}

TEST(Npy, FailedWriteLeavesTheExistingFileIntact) {
  const auto dir = std::filesystem::temp_directory_path() / ("rkd_npy_atomic_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string p = (dir / "keep.npy").string();
  ASSERT_TRUE(write_npy(p, Tensor::from_floats({1}, std::vector<float>{42})).ok());
  Tensor bf = Tensor::empty(DType::bf16, {2});
  auto s = write_npy(p, bf);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::unsupported);
  EXPECT_EQ(read_npy(p)->data<float>()[0], 42.0f);
  // Writing into a missing folder fails without creating anything.
  EXPECT_FALSE(write_npy((dir / "no" / "such.npy").string(), bf.to(DType::f32).value()).ok());
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

TEST(Npz, ReadsNumpySavezStoredAndCompressed) {
  for (const char* f : {"pair.npz", "pair_compressed.npz"}) {
    auto m = read_npz(kDir + f);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    ASSERT_EQ(m->size(), 2u);
    EXPECT_EQ(m->at("a").shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(m->at("a").data<float>()[23], 23.0f / 8);
    EXPECT_EQ(m->at("b").get_as_double(4), 4.0);
  }
}

TEST(Npz, WriteReadRoundTripAndGarbage) {
  const auto p = (std::filesystem::temp_directory_path() / ("rkd_test_" + std::to_string(::getpid()) + ".npz")).string();
  TensorMap m;
  m["x"] = Tensor::from_floats({2}, std::vector<float>{1, 2});
  m["y"] = Tensor::empty(DType::i64, {3});
  for (bool compress : {false, true}) {
    ASSERT_TRUE(write_npz(p, m, compress).ok());
    auto back = read_npz(p);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(back->at("x").data<float>()[1], 2.0f);
    EXPECT_EQ(back->at("y").shape(), (Shape{3}));
  }
  std::string bytes = *read_file_bytes(p);
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::string s = bytes;
    s[rng() % s.size()] = static_cast<char>(rng());
    if (i % 5 == 0) s.resize(rng() % s.size());
    (void)parse_npz(as_bytes(s), "fuzz.npz");
  }
  EXPECT_FALSE(parse_npz(as_bytes("not a zip"), "x.npz").ok());
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace rkd
