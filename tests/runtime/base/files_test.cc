#include "runtime/base/files.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/files_test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { RemoveTree(dir_); }
  void Touch(const std::string& path) { std::ofstream(path) << "x"; }
  std::string dir_;
};

TEST_F(FilesTest, ExistsAndIsDirectory) {
  Touch(dir_ + "/f");
  EXPECT_TRUE(PathExists(dir_));
  EXPECT_TRUE(IsDirectory(dir_));
  EXPECT_TRUE(PathExists(dir_ + "/f"));
  EXPECT_FALSE(IsDirectory(dir_ + "/f"));
  EXPECT_FALSE(PathExists(dir_ + "/missing"));
  EXPECT_FALSE(IsDirectory(dir_ + "/missing"));
}

TEST(Files, ParentDirectoryAndFileName) {
  struct Case {
    std::string path, parent, name;
  };
  for (const Case& c : std::vector<Case>{{"a/b/c.ckpt", "a/b", "c.ckpt"},
                                         {"c.ckpt", "", "c.ckpt"},
                                         {"/c.ckpt", "/", "c.ckpt"},
                                         {"a//c", "a", "c"},
                                         {"a/b/", "a/b", ""}}) {
    EXPECT_EQ(ParentDirectory(c.path), c.parent) << c.path;
    EXPECT_EQ(FileName(c.path), c.name) << c.path;
  }
}

TEST_F(FilesTest, ListsNamesWithoutDots) {
  Touch(dir_ + "/a");
  Touch(dir_ + "/b");
  ASSERT_EQ(mkdir((dir_ + "/sub").c_str(), 0755), 0);
  std::vector<std::string> names = ListDirectory(dir_);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "sub"}));
  EXPECT_TRUE(ListDirectory(dir_ + "/missing").empty());
}

TEST_F(FilesTest, RemovesATreeWithoutFollowingLinks) {
  const std::string tree = dir_ + "/tree";
  const std::string kept = dir_ + "/kept";
  ASSERT_EQ(mkdir(tree.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((tree + "/deep").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(kept.c_str(), 0755), 0);
  Touch(tree + "/deep/file");
  Touch(kept + "/precious");
  ASSERT_EQ(symlink(kept.c_str(), (tree + "/link").c_str()), 0);
  EXPECT_TRUE(RemoveTree(tree));
  EXPECT_FALSE(PathExists(tree));
  EXPECT_TRUE(PathExists(kept + "/precious"));  // the link went, not what it points to
  Touch(dir_ + "/plain");
  EXPECT_TRUE(RemoveTree(dir_ + "/plain"));
  EXPECT_FALSE(PathExists(dir_ + "/plain"));
  EXPECT_TRUE(RemoveTree(dir_ + "/never-was"));
}

// Every file under runtime/ keeps to files.h's rule: no <filesystem> (see files.h for why).
TEST(Files, RuntimeSourcesDoNotIncludeFilesystem) {
  std::vector<std::string> pending = {"runtime"};
  int checked = 0;
  std::vector<std::string> offenders;
  while (!pending.empty()) {
    const std::string dir = pending.back();
    pending.pop_back();
    for (const std::string& name : ListDirectory(dir)) {
      const std::string path = dir + "/" + name;
      if (IsDirectory(path)) {
        pending.push_back(path);
        continue;
      }
      const std::string ext = name.substr(name.find_last_of('.') + 1);
      if (ext != "cc" && ext != "h" && ext != "cu" && ext != "cuh") continue;
      std::stringstream text;
      text << std::ifstream(path).rdbuf();
      ++checked;
      if (text.str().find("#include <filesystem>") != std::string::npos) offenders.push_back(path);
    }
  }
  EXPECT_GT(checked, 100) << "run from the source directory (ctest does)";
  EXPECT_TRUE(offenders.empty()) << "includes <filesystem>: " << offenders.front();
}

}  // namespace
}  // namespace hptrain
