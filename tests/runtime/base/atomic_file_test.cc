#include "runtime/base/atomic_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "atomic_file_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0700);
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "'").c_str()), 0);
  }

  std::vector<std::string> ListDir() const {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return names;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

TEST_F(AtomicFileTest, WritesNewFile) {
  const std::string path = dir_ + "/summary.json";
  ASSERT_TRUE(WriteFileAtomically(path, "{\"job\": \"a\"}\n").ok());
  auto contents = ReadFile(path);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, "{\"job\": \"a\"}\n");
  EXPECT_THAT(ListDir(), ElementsAre("summary.json"));
}

TEST_F(AtomicFileTest, ReplacesContentsAndLeavesNoTempFile) {
  const std::string path = dir_ + "/summary.json";
  ASSERT_TRUE(WriteFileAtomically(path, std::string(100000, 'x')).ok());
  ASSERT_TRUE(WriteFileAtomically(path, "short").ok());
  EXPECT_EQ(ReadFile(path).value(), "short");
  EXPECT_THAT(ListDir(), ElementsAre("summary.json"));
}

TEST_F(AtomicFileTest, WritesEmptyAndLargeContents) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(ReadFile(path).value(), "");
  std::string large(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 31);
  ASSERT_TRUE(WriteFileAtomically(path, large).ok());
  EXPECT_EQ(ReadFile(path).value(), large);
}

TEST_F(AtomicFileTest, RelativePathUsesCurrentDirectory) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(dir_.c_str()), 0);
  const absl::Status status = WriteFileAtomically("relative.txt", "r");
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(ReadFile(dir_ + "/relative.txt").value(), "r");
}

TEST_F(AtomicFileTest, ReplacesSymlinkInsteadOfWritingThroughIt) {
  const std::string target = dir_ + "/target";
  const std::string link = dir_ + "/link";
  ASSERT_TRUE(WriteFileAtomically(target, "target").ok());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(link, "new").ok());
  EXPECT_EQ(ReadFile(target).value(), "target");
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(ReadFile(link).value(), "new");
}

TEST_F(AtomicFileTest, UnwritableDirectoryLeavesOldFileIntactAndNoTempFile) {
  const std::string path = dir_ + "/summary.json";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);

  // Root ignores directory permissions, so as root the write runs in a child that drops to nobody.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    const absl::Status status = WriteFileAtomically(path, "new contents");
    const bool as_expected = absl::IsPermissionDenied(status) &&
                             std::string(status.message()).find(path) != std::string::npos;
    ::_exit(as_expected ? 0 : 1);
  }
  int wait_status = 0;
  ASSERT_EQ(::waitpid(pid, &wait_status, 0), pid);
  ASSERT_TRUE(WIFEXITED(wait_status));
  EXPECT_EQ(WEXITSTATUS(wait_status), 0) << "expected PermissionDenied naming " << path;

  EXPECT_EQ(ReadFile(path).value(), "old");
  EXPECT_THAT(ListDir(), ElementsAre("summary.json"));
}

TEST_F(AtomicFileTest, FailedRenameRemovesTempFile) {
  // rename() of a file over a non-empty directory fails after the temporary file was written.
  const std::string path = dir_ + "/occupied";
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomically(path + "/inner", "keep").ok());
  const absl::Status status = WriteFileAtomically(path, "new");
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("rename"));
  EXPECT_THAT(ListDir(), ElementsAre("occupied"));
  EXPECT_EQ(ReadFile(path + "/inner").value(), "keep");
}

TEST_F(AtomicFileTest, MissingDirectoryIsNotFound) {
  const std::string path = dir_ + "/no/such/dir/file";
  const absl::Status status = WriteFileAtomically(path, "x");
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
}

TEST_F(AtomicFileTest, EmptyPathIsInvalid) {
  EXPECT_TRUE(absl::IsInvalidArgument(WriteFileAtomically("", "x")));
}

TEST_F(AtomicFileTest, ReadMissingFileIsNotFoundNamingPath) {
  const std::string path = dir_ + "/missing.json";
  auto contents = ReadFile(path);
  ASSERT_FALSE(contents.ok());
  EXPECT_TRUE(absl::IsNotFound(contents.status())) << contents.status();
  EXPECT_THAT(std::string(contents.status().message()), HasSubstr(path));
}

TEST_F(AtomicFileTest, ReadDirectoryIsFailedPrecondition) {
  auto contents = ReadFile(dir_);
  ASSERT_FALSE(contents.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(contents.status())) << contents.status();
  EXPECT_THAT(std::string(contents.status().message()), HasSubstr(dir_));
}

}  // namespace
}  // namespace hptrain
