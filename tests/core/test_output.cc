// OutputTransaction (core/output.h): destinations refused before the work, temporaries
// beside them, publish all at once, nothing left behind on failure.
#include "core/output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

class OutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rkd_output_test_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    old_cwd_ = fs::current_path();
    fs::current_path(root_);
  }
  void TearDown() override {
    fs::current_path(old_cwd_);
    fs::remove_all(root_);
  }
  static void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
  static std::string read(const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  // Hidden temporaries anywhere below the root.
  int temporaries() const {
    int n = 0;
    for (const auto& e : fs::recursive_directory_iterator(root_)) n += e.path().filename().string().find(".rkdeploy-") != std::string::npos;
    return n;
  }
  fs::path root_, old_cwd_;
};

TEST_F(OutputTest, FileIsPublishedOnlyOnPublish) {
  write("out.txt", "OLD");
  {
    rkd::OutputTransaction tx;
    auto tmp = tx.file("out.txt");
    ASSERT_TRUE(tmp.ok()) << tmp.error().to_string();
    EXPECT_NE(*tmp, (root_ / "out.txt").string());
    EXPECT_EQ(fs::path(*tmp).parent_path(), root_);
    write(*tmp, "NEW");
    EXPECT_EQ(read("out.txt"), "OLD");
    ASSERT_TRUE(tx.publish().ok());
  }
  EXPECT_EQ(read("out.txt"), "NEW");
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(OutputTest, AbandonedTransactionRemovesItsTemporaries) {
  write("keep.txt", "KEEP");
  {
    rkd::OutputTransaction tx;
    ASSERT_TRUE(tx.file("keep.txt").ok());
    ASSERT_TRUE(tx.file("new.txt").ok());
    ASSERT_TRUE(tx.folder("dir").ok());
    ASSERT_TRUE(tx.files_in("files").ok());
    ASSERT_TRUE(tx.file("files/a.npy").ok());
    EXPECT_EQ(temporaries(), 4);
  }
  EXPECT_EQ(temporaries(), 0);
  EXPECT_EQ(read("keep.txt"), "KEEP");
  EXPECT_FALSE(fs::exists("new.txt"));
  EXPECT_FALSE(fs::exists("dir"));
  EXPECT_FALSE(fs::exists("files"));
}

TEST_F(OutputTest, RefusalsBeforeAnyWork) {
  fs::create_directories("adir/sub");
  write("adir/model.onnx", "MODEL");
  write("afile", "KEEP");
  fs::create_directories("full");
  write("full/mine.txt", "MINE");
  rkd::OutputTransaction tx({"adir/model.onnx"});
  auto expect_error = [](const auto& r, rkd::ErrorKind kind, const std::string& part) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, kind) << r.error().to_string();
    EXPECT_NE(r.error().message.find(part), std::string::npos) << r.error().to_string();
  };
  expect_error(tx.file("adir"), rkd::ErrorKind::invalid, "is a folder");
  expect_error(tx.file("adir/model.onnx"), rkd::ErrorKind::invalid, "is also an input");
  expect_error(tx.file("nodir/x.png"), rkd::ErrorKind::io, "does not exist");
  expect_error(tx.file("afile/x.png"), rkd::ErrorKind::io, "is not a folder");
  expect_error(tx.file("/dev/null"), rkd::ErrorKind::invalid, "not a regular file");
  expect_error(tx.folder("adir"), rkd::ErrorKind::invalid, "holds an input");
  expect_error(tx.folder("afile"), rkd::ErrorKind::invalid, "is not a folder");
  expect_error(tx.folder("."), rkd::ErrorKind::invalid, "working folder");
  expect_error(tx.folder(".."), rkd::ErrorKind::invalid, "working folder");
  expect_error(tx.folder("full"), rkd::ErrorKind::invalid, "not empty");
  expect_error(tx.folder("nodir/out"), rkd::ErrorKind::io, "does not exist");
  expect_error(tx.files_in("afile"), rkd::ErrorKind::invalid, "not a folder");
  ASSERT_TRUE(tx.file("twice.txt").ok());
  expect_error(tx.file("./twice.txt"), rkd::ErrorKind::invalid, "named twice");
  EXPECT_EQ(read("adir/model.onnx"), "MODEL");
  EXPECT_EQ(read("afile"), "KEEP");
  EXPECT_EQ(read("full/mine.txt"), "MINE");
}

// --force replaces a previous output: only the files its owner lists, and only when the folder
// holds nothing else; never a folder named through a symbolic link or one that holds an input.
TEST_F(OutputTest, ForceReplacesOnlyTheFilesAPreviousOutputLists) {
  const rkd::OwnedFiles owned = [](const std::string&) -> rkd::Result<std::vector<std::string>> {
    return std::vector<std::string>{"old.txt", "sub/a.bin", "../outside.txt", "/etc/hostname"};
  };
  write("outside.txt", "KEEP");
  fs::create_directories("full/sub");
  write("full/old.txt", "OLD");
  write("full/sub/a.bin", "OLD");
  {
    rkd::OutputTransaction tx({}, true);
    auto tmp = tx.folder("full", owned);
    ASSERT_TRUE(tmp.ok()) << tmp.error().to_string();
    write(fs::path(*tmp) / "manifest.json", "{}");
    EXPECT_TRUE(fs::exists("full/old.txt"));
    ASSERT_TRUE(tx.publish().ok());
  }
  EXPECT_TRUE(fs::exists("full/manifest.json"));
  EXPECT_FALSE(fs::exists("full/old.txt"));
  EXPECT_FALSE(fs::exists("full/sub"));
  EXPECT_EQ(read("outside.txt"), "KEEP");
  EXPECT_EQ(temporaries(), 0);

  // A file the listing does not name: refused whole, nothing touched.
  fs::remove("full/manifest.json");
  write("full/old.txt", "OLD");
  write("full/mine.txt", "MINE");
  {
    rkd::OutputTransaction tx({}, true);
    auto tmp = tx.folder("full", owned);
    ASSERT_FALSE(tmp.ok());
    EXPECT_NE(tmp.error().message.find("mine.txt"), std::string::npos) << tmp.error().message;
  }
  EXPECT_EQ(read("full/mine.txt"), "MINE");
  EXPECT_EQ(read("full/old.txt"), "OLD");
  fs::remove("full/mine.txt");
  // No owner (a command that writes no listing) and a symbolic link's name: refused.
  {
    rkd::OutputTransaction tx({}, true);
    EXPECT_FALSE(tx.folder("full").ok());
    fs::create_directory_symlink("full", "link");
    auto via_link = tx.folder("link", owned);
    ASSERT_FALSE(via_link.ok());
    EXPECT_NE(via_link.error().message.find("symbolic link"), std::string::npos) << via_link.error().message;
  }
  EXPECT_EQ(read("full/old.txt"), "OLD");
  // A file that appears after the check is kept (in the previous folder's hidden copy, named).
  {
    rkd::OutputTransaction tx({}, true);
    auto tmp = tx.folder("full", owned);
    ASSERT_TRUE(tmp.ok()) << tmp.error().to_string();
    write("full/late.txt", "LATE");
    const auto st = tx.publish();
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("kept in"), std::string::npos) << st.error().message;
  }
  int kept = 0;
  for (const auto& e : fs::directory_iterator(".")) {
    if (fs::exists(e.path() / "late.txt")) kept += read(e.path() / "late.txt") == "LATE";
  }
  EXPECT_EQ(kept, 1);
  // A folder that holds an input: refused even with force.
  fs::remove_all("full");
  fs::create_directories("full");
  write("full/model.onnx", "MODEL");
  rkd::OutputTransaction tx({"full/model.onnx"}, true);
  EXPECT_FALSE(tx.folder("full", owned).ok());
  EXPECT_EQ(read("full/model.onnx"), "MODEL");
}

TEST_F(OutputTest, FilesInANewFolderAppearTogether) {
  {
    rkd::OutputTransaction tx;
    ASSERT_TRUE(tx.files_in("od").ok());
    auto a = tx.file("od/a.npy");
    auto b = tx.file("od/b.npy");
    ASSERT_TRUE(a.ok() && b.ok());
    write(*a, "A");
    write(*b, "B");
    EXPECT_FALSE(fs::exists("od"));
    ASSERT_TRUE(tx.publish().ok());
  }
  EXPECT_EQ(read("od/a.npy"), "A");
  EXPECT_EQ(read("od/b.npy"), "B");
  // An existing folder keeps its other files.
  write("od/notes.txt", "MINE");
  {
    rkd::OutputTransaction tx;
    ASSERT_TRUE(tx.files_in("od").ok());
    auto a = tx.file("od/a.npy");
    ASSERT_TRUE(a.ok());
    write(*a, "A2");
    ASSERT_TRUE(tx.publish().ok());
  }
  EXPECT_EQ(read("od/a.npy"), "A2");
  EXPECT_EQ(read("od/b.npy"), "B");
  EXPECT_EQ(read("od/notes.txt"), "MINE");
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(OutputTest, SymbolicLinkKeepsPointingAtItsReplacedTarget) {
  write("target.txt", "OLD");
  fs::create_symlink("target.txt", "link.txt");
  {
    rkd::OutputTransaction tx;
    auto tmp = tx.file("link.txt");
    ASSERT_TRUE(tmp.ok());
    write(*tmp, "NEW");
    ASSERT_TRUE(tx.publish().ok());
  }
  EXPECT_TRUE(fs::is_symlink("link.txt"));
  EXPECT_EQ(read("target.txt"), "NEW");
  fs::create_symlink("nothing.txt", "dangling.txt");
  rkd::OutputTransaction tx;
  EXPECT_FALSE(tx.file("dangling.txt").ok());
}

}  // namespace
