#include "runtime/cli/flags.h"

#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::cli {
namespace {

struct Args {
  explicit Args(std::vector<std::string> a) : storage(std::move(a)) {
    for (auto& s : storage) argv.push_back(s.data());
  }
  int argc() const { return static_cast<int>(argv.size()); }
  std::vector<std::string> storage;
  std::vector<char*> argv;
};

TEST(FlagSet, ParsesValuesBooleansRepeatedAndPositional) {
  std::string job;
  int rank = -1;
  bool resume = false;
  std::vector<std::string> sets;
  FlagSet set("worker", "");
  set.String("job", &job, "", "");
  set.Int("rank", &rank, "", "");
  set.Bool("resume", &resume, "");
  set.Repeated("set", &sets, "");
  Args args({"worker", "--job", "j.yaml", "--rank=3", "--resume", "--set", "a=1", "--set=b=2",
             "extra"});
  ASSERT_TRUE(set.Parse(args.argc(), args.argv.data()).ok());
  EXPECT_EQ(job, "j.yaml");
  EXPECT_EQ(rank, 3);
  EXPECT_TRUE(resume);
  EXPECT_EQ(sets, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(set.positional(), (std::vector<std::string>{"extra"}));
}

TEST(FlagSet, EnvironmentFillsFlagsNotOnTheCommandLine) {
  setenv("HPTRAIN_TEST_RANK", "7", 1);
  setenv("HPTRAIN_TEST_JOB", "from-env.yaml", 1);
  std::string job;
  int rank = -1;
  FlagSet set("worker", "");
  set.String("job", &job, "HPTRAIN_TEST_JOB", "");
  set.Int("rank", &rank, "HPTRAIN_TEST_RANK", "");
  Args args({"worker", "--job", "flag.yaml"});
  ASSERT_TRUE(set.Parse(args.argc(), args.argv.data()).ok());
  EXPECT_EQ(job, "flag.yaml");  // the command line wins
  EXPECT_EQ(rank, 7);
  unsetenv("HPTRAIN_TEST_RANK");
  unsetenv("HPTRAIN_TEST_JOB");
}

TEST(FlagSet, ErrorsNameTheFlag) {
  int rank = 0;
  FlagSet set("worker", "");
  set.Int("rank", &rank, "HPTRAIN_TEST_BAD", "");
  Args unknown({"worker", "--bogus", "1"});
  absl::Status status = set.Parse(unknown.argc(), unknown.argv.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--bogus"), std::string::npos);

  FlagSet set2("worker", "");
  set2.Int("rank", &rank, "", "");
  Args bad({"worker", "--rank", "two"});
  status = set2.Parse(bad.argc(), bad.argv.data());
  EXPECT_NE(status.message().find("--rank: expected an integer, got \"two\""), std::string::npos);

  FlagSet set3("worker", "");
  set3.Int("rank", &rank, "", "");
  Args missing({"worker", "--rank"});
  EXPECT_NE(set3.Parse(missing.argc(), missing.argv.data()).message().find("needs a value"),
            std::string::npos);

  setenv("HPTRAIN_TEST_BAD", "x", 1);
  FlagSet set4("worker", "");
  set4.Int("rank", &rank, "HPTRAIN_TEST_BAD", "");
  Args none({"worker"});
  EXPECT_NE(set4.Parse(none.argc(), none.argv.data()).message().find("$HPTRAIN_TEST_BAD"),
            std::string::npos);
  unsetenv("HPTRAIN_TEST_BAD");
}

TEST(FlagSet, HelpListsEveryFlagWithItsEnvironmentVariable) {
  std::string job;
  FlagSet set("worker", "--job JOB");
  set.String("job", &job, "HPTRAIN_JOB", "TrainingJob file");
  Args args({"worker", "--help"});
  ASSERT_TRUE(set.Parse(args.argc(), args.argv.data()).ok());
  EXPECT_TRUE(set.help_requested());
  EXPECT_NE(set.Help().find("--job VALUE"), std::string::npos);
  EXPECT_NE(set.Help().find("[$HPTRAIN_JOB]"), std::string::npos);
}

TEST(FlagSet, AProgramOfItsOwnIsNamedInHelpAndErrors) {
  int ranks = 4;
  FlagSet set = FlagSet::ForProgram("hptrain-allreduce-latency", "[--ranks N]");
  set.Int("ranks", &ranks, "", "ranks");
  EXPECT_EQ(set.Help().rfind("usage: hptrain-allreduce-latency [--ranks N]\n", 0), 0u)
      << set.Help();
  Args unknown({"hptrain-allreduce-latency", "--rank", "2"});
  const absl::Status status = set.Parse(unknown.argc(), unknown.argv.data());
  EXPECT_NE(status.message().find("(see hptrain-allreduce-latency --help)"), std::string::npos)
      << status.message();
  FlagSet command("run", "JOB.yaml");
  EXPECT_EQ(command.Help().rfind("usage: hptrain run JOB.yaml\n", 0), 0u) << command.Help();
}

}  // namespace
}  // namespace hptrain::cli

namespace hptrain::cli {
namespace {

TEST(FlagSet, ParseOrExitStopsOnHelpAndOnBadFlags) {
  std::string job;
  int code = -1;
  FlagSet help("ps", "");
  help.String("job", &job, "", "");
  Args help_args({"ps", "--help"});
  EXPECT_FALSE(help.ParseOrExit(help_args.argc(), help_args.argv.data(), &code));
  EXPECT_EQ(code, 0);

  FlagSet bad("ps", "");
  bad.String("job", &job, "", "");
  Args bad_args({"ps", "--bogus"});
  EXPECT_FALSE(bad.ParseOrExit(bad_args.argc(), bad_args.argv.data(), &code));
  EXPECT_EQ(code, 2);

  FlagSet good("ps", "");
  good.String("job", &job, "", "");
  Args good_args({"ps", "--job", "j.yaml"});
  EXPECT_TRUE(good.ParseOrExit(good_args.argc(), good_args.argv.data(), &code));
  EXPECT_EQ(job, "j.yaml");
}

}  // namespace
}  // namespace hptrain::cli
