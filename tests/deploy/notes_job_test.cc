// The job that the chart's NOTES.txt gives to paste after an install (a heredoc to
// `kubectl apply -f -`, so no checkout of the repository is needed) is one the runtime's parser
// and validator accept: the same check the controller and the webhook make. The CRD's side of it
// is tests/deploy/chart_lint_test.py (test_notes_job_is_valid).
//
// Runs from the source root (CTest's WORKING_DIRECTORY).
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/job/job_parser.h"

namespace hptrain::job {
namespace {

constexpr char kNotes[] = "charts/hptrain/templates/NOTES.txt";
constexpr char kHeredoc[] = "kubectl apply --server-side -f - <<'EOF'\n";

// The heredoc's text in NOTES.txt; empty when there is none.
std::string NotesJob() {
  std::ifstream in(kNotes);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string notes = text.str();
  size_t begin = notes.find(kHeredoc);
  if (begin == std::string::npos) return "";
  begin += sizeof(kHeredoc) - 1;
  size_t end = notes.find("\nEOF\n", begin);
  if (end == std::string::npos) return "";
  return notes.substr(begin, end + 1 - begin);
}

TEST(NotesJobTest, TheRuntimeAcceptsTheJobInTheChartsNotes) {
  const std::string job = NotesJob();
  ASSERT_FALSE(job.empty()) << kNotes << ": no heredoc job ending in a line EOF";
  // Helm prints it as it is: no template actions inside.
  EXPECT_EQ(job.find("{{"), std::string::npos);
  absl::StatusOr<JobSpec> spec = ParseJobText(job, {}, kNotes);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "synthetic-mlp");
  // The check is the real validator's: a broken copy of the same job is refused.
  absl::StatusOr<JobSpec> broken = ParseJobText(job, {"spec.globalBatchSize=0"}, kNotes);
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.status().message()), ::testing::HasSubstr("globalBatchSize"));
}

}  // namespace
}  // namespace hptrain::job
