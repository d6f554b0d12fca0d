// The runtime parser's side of the CRD contract: every examples/*.yaml and examples/data/*.yaml
// parses, and every examples/invalid/*.yaml is refused with the error its "# parser: <text>" line
// names. The CRD's side of the same files is tests/deploy/crd_schema_test.py, so a manifest that
// one side accepts and the other refuses fails one of the two.
//
// Runs from the source root (CTest's WORKING_DIRECTORY).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/job/job_parser.h"

namespace hptrain::job {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text after "# parser: " in `text`; empty when there is no such line.
std::string ExpectedParserError(const std::string& text) {
  static const std::string kMarker = "# parser: ";
  size_t at = text.find(kMarker);
  if (at == std::string::npos) return "";
  size_t begin = at + kMarker.size();
  return text.substr(begin, text.find('\n', begin) - begin);
}

TEST(DeployExamplesTest, EveryExampleParses) {
  std::vector<fs::path> files = YamlFiles("examples");
  ASSERT_GE(files.size(), 4u);
  std::vector<fs::path> data = YamlFiles("examples/data");  // one job per user-data format
  ASSERT_GE(data.size(), 4u);
  files.insert(files.end(), data.begin(), data.end());
  for (const fs::path& path : files) {
    absl::StatusOr<JobSpec> spec = ParseJobFile(path.string());
    EXPECT_TRUE(spec.ok()) << path << ": " << spec.status();
  }
}

TEST(DeployExamplesTest, EveryInvalidExampleFailsForItsReason) {
  std::vector<fs::path> files = YamlFiles("examples/invalid");
  ASSERT_GE(files.size(), 5u);
  for (const fs::path& path : files) {
    std::string expected = ExpectedParserError(ReadFile(path));
    ASSERT_FALSE(expected.empty()) << path << ": no '# parser: <error>' line";
    absl::StatusOr<JobSpec> spec = ParseJobFile(path.string());
    ASSERT_FALSE(spec.ok()) << path << ": parsed, expected an error containing " << expected;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(spec.status().message()), testing::HasSubstr(expected)) << path;
  }
}

}  // namespace
}  // namespace hptrain::job
