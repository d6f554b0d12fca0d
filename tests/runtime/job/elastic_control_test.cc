// The elastic launcher's control file and bookkeeping (runtime/job/elastic_control.h): what each
// line means, which lines are refused and why, and how appended lines are read.
#include "runtime/job/elastic_control.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ControlCommand Parsed(const std::string& line, int slots = 6) {
  auto command = ParseControlLine(line, slots);
  EXPECT_TRUE(command.ok()) << line << ": " << command.status();
  if (!command.ok() || !command->has_value()) {
    ADD_FAILURE() << "no command in '" << line << "'";
    return {};
  }
  return **command;
}

std::string ErrorOf(const std::string& line, int slots = 6) {
  auto command = ParseControlLine(line, slots);
  EXPECT_FALSE(command.ok()) << "'" << line << "' was accepted";
  EXPECT_TRUE(command.ok() || absl::IsInvalidArgument(command.status())) << command.status();
  return command.ok() ? "" : std::string(command.status().message());
}

TEST(ParseControlLine, AddRemoveAndKill) {
  EXPECT_EQ(Parsed("add").kind, ControlCommand::Kind::kAdd);
  const ControlCommand remove = Parsed("remove 3");
  EXPECT_EQ(remove.kind, ControlCommand::Kind::kRemove);
  EXPECT_EQ(remove.slot, 3);
  EXPECT_EQ(remove.at_step, 0);
  const ControlCommand remove_at = Parsed("  remove\t5 at 120 \r");
  EXPECT_EQ(remove_at.kind, ControlCommand::Kind::kRemove);
  EXPECT_EQ(remove_at.slot, 5);
  EXPECT_EQ(remove_at.at_step, 120);
  const ControlCommand kill = Parsed("kill 0");
  EXPECT_EQ(kill.kind, ControlCommand::Kind::kKill);
  EXPECT_EQ(kill.slot, 0);
}

TEST(ParseControlLine, BlankLinesAndCommentsAreNoCommand) {
  for (const char* line : {"", "   ", "\t", "# remove 1", "  #add"}) {
    auto command = ParseControlLine(line, 4);
    ASSERT_TRUE(command.ok()) << line;
    EXPECT_FALSE(command->has_value()) << line;
  }
}

TEST(ParseControlLine, BadLinesSayWhatIsWrong) {
  EXPECT_THAT(ErrorOf("stop 1"), HasSubstr("unknown command 'stop'"));
  EXPECT_THAT(ErrorOf("stop 1"), HasSubstr("remove SLOT [at STEP]"));
  EXPECT_THAT(ErrorOf("add 2"), HasSubstr("expected: add"));
  EXPECT_THAT(ErrorOf("remove"), HasSubstr("expected: remove SLOT [at STEP]"));
  EXPECT_THAT(ErrorOf("remove 1 2"), HasSubstr("expected: remove SLOT [at STEP]"));
  EXPECT_THAT(ErrorOf("remove 1 at"), HasSubstr("expected: remove SLOT [at STEP]"));
  EXPECT_THAT(ErrorOf("remove 1 at 0"), HasSubstr("STEP must be a positive integer, got '0'"));
  EXPECT_THAT(ErrorOf("remove 1 at x"), HasSubstr("got 'x'"));
  EXPECT_THAT(ErrorOf("kill one"), HasSubstr("SLOT must be an integer, got 'one'"));
  EXPECT_THAT(ErrorOf("kill"), HasSubstr("expected: kill SLOT"));
  // Slots are 0 .. slots-1 (spec.elastic.maxReplicas).
  EXPECT_THAT(ErrorOf("kill 6", 6), HasSubstr("slot 6 is not in 0..5"));
  EXPECT_THAT(ErrorOf("remove -1", 6), HasSubstr("slot -1 is not in 0..5"));
  EXPECT_EQ(Parsed("kill 5", 6).slot, 5);
  EXPECT_THAT(ErrorOf("ADD"), HasSubstr("unknown command 'ADD'"));
}

class ControlFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "elastic_control_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/control";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  void Append(const std::string& text) {
    std::ofstream out(path_, std::ios::app);
    out << text;
  }
  std::string dir_;
  std::string path_;
};

TEST_F(ControlFileTest, CreatesTheFileAndReadsOnlyCompleteAppendedLines) {
  auto control = ControlFile::Open(path_);
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_EQ(::access(path_.c_str(), F_OK), 0);
  EXPECT_THAT(control->ReadNewLines(), IsEmpty());
  Append("add\nremove 1 at 20\nkil");
  EXPECT_THAT(control->ReadNewLines(), ElementsAre("add", "remove 1 at 20"));
  EXPECT_THAT(control->ReadNewLines(), IsEmpty());  // "kil" has no newline yet
  Append("l 2\r\n\n");
  EXPECT_THAT(control->ReadNewLines(), ElementsAre("kill 2", ""));
  EXPECT_THAT(control->ReadNewLines(), IsEmpty());
}

TEST_F(ControlFileTest, LinesBeforeTheRunAreNotCommandsAndATruncatedFileIsReadAgain) {
  Append("remove 0\n");  // left by an earlier run
  auto control = ControlFile::Open(path_);
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_THAT(control->ReadNewLines(), IsEmpty());
  Append("add\n");
  EXPECT_THAT(control->ReadNewLines(), ElementsAre("add"));
  {
    std::ofstream truncate(path_, std::ios::trunc);
    truncate << "kill 1\n";
  }
  EXPECT_THAT(control->ReadNewLines(), ElementsAre("kill 1"));
}

TEST_F(ControlFileTest, MissingDirectoryIsAnErrorNamingThePath) {
  auto control = ControlFile::Open(dir_ + "/no/such/control");
  ASSERT_FALSE(control.ok());
  EXPECT_THAT(control.status().message(), HasSubstr(dir_ + "/no/such/control"));
}

TEST(ElasticBookkeeping, LowestFreeSlot) {
  EXPECT_EQ(LowestFreeSlot({}, 4), 0);
  EXPECT_EQ(LowestFreeSlot({0, 1, 3}, 4), 2);
  EXPECT_EQ(LowestFreeSlot({1, 0, 2}, 4), 3);
  EXPECT_EQ(LowestFreeSlot({0, 1, 2, 3}, 4), std::nullopt);
}

TEST(ElasticBookkeeping, LostReasonAndWorkerSlot) {
  ChildStatus exited;
  exited.exited = true;
  exited.exit_code = 1;
  EXPECT_EQ(LostReason(exited), "exit 1");
  ChildStatus killed;
  killed.signaled = true;
  killed.term_signal = 9;
  EXPECT_EQ(LostReason(killed), "killed by signal 9");
  EXPECT_EQ(WorkerSlot("worker-12"), 12);
  EXPECT_EQ(WorkerSlot("ps-0"), std::nullopt);
  EXPECT_EQ(WorkerSlot("worker-"), std::nullopt);
  EXPECT_EQ(WorkerSlot("worker-x"), std::nullopt);
}

TEST(ElasticBookkeeping, MembersFinishedNeedsEveryMemberAndEnoughDoneReports) {
  // Slot 1 left (removed) and finished; the members are 0 and 2.
  EXPECT_FALSE(MembersFinished({0, 2}, {1}, 1));
  EXPECT_FALSE(MembersFinished({0, 2}, {1, 0}, 2));
  EXPECT_TRUE(MembersFinished({0, 2}, {1, 0, 2}, 3));
  // A member whose exit the coordinator has not yet counted as done.
  EXPECT_FALSE(MembersFinished({0, 2}, {0, 2}, 1));
  EXPECT_FALSE(MembersFinished({}, {0}, 1));  // no members: nobody did the work
}

TEST(ElasticBookkeeping, CurrentMembersAreTheCoordinatorsOrTheFirstOnesWhileItNamesNone) {
  EXPECT_THAT(CurrentMembers({2, 0}, 1, 3), ElementsAre(2, 0));
  EXPECT_THAT(CurrentMembers({}, 0, 3), ElementsAre(0, 1, 2));
  EXPECT_THAT(CurrentMembers({}, 2, 3), IsEmpty());  // every member left
}

TEST(ElasticBookkeeping, ShortageTimerMeasuresOneUnbrokenShortage) {
  ShortageTimer timer(2);
  EXPECT_EQ(timer.Update(3, 0.0), 0.0);
  EXPECT_EQ(timer.Update(1, 10.0), 0.0);  // below from now on
  EXPECT_EQ(timer.Update(1, 25.0), 15.0);
  EXPECT_EQ(timer.Update(0, 40.0), 30.0);
  EXPECT_EQ(timer.Update(2, 41.0), 0.0);  // back at the minimum: the count starts over
  EXPECT_EQ(timer.Update(1, 50.0), 0.0);
  EXPECT_EQ(timer.Update(1, 53.0), 3.0);
}

}  // namespace
}  // namespace hptrain::job
