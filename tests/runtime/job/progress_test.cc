#include "runtime/job/progress.h"

#include <cmath>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

// Epoch 2 of 4, step 250 of 1000 (250 steps per epoch), 30 s in.
ProgressState QuarterDone() {
  ProgressState s;
  s.epoch = 2;
  s.epochs = 4;
  s.step = 250;
  s.total_steps = 1000;
  s.steps_per_epoch = 250;
  s.loss = 0.43214;
  s.samples_per_second = 1234.46;
  s.elapsed_seconds = 30.0;
  return s;
}

TEST(ProgressMathTest, EtaExtrapolatesElapsedOverStepsLeft) {
  ProgressState s = QuarterDone();
  ASSERT_TRUE(FractionDone(s).has_value());
  EXPECT_DOUBLE_EQ(*FractionDone(s), 0.25);
  ASSERT_TRUE(EstimateRemainingSeconds(s).has_value());
  EXPECT_DOUBLE_EQ(*EstimateRemainingSeconds(s), 90.0);  // 30 s for 1/4: 90 s for the other 3/4

  s.step = 1000;
  EXPECT_DOUBLE_EQ(*EstimateRemainingSeconds(s), 0.0);
  s.step = 1500;  // overshoot clamps
  EXPECT_DOUBLE_EQ(*FractionDone(s), 1.0);
}

TEST(ProgressMathTest, TotalDerivedFromEpochsWhenMissing) {
  ProgressState s = QuarterDone();
  s.total_steps = 0;  // 4 epochs x 250 steps
  EXPECT_DOUBLE_EQ(*FractionDone(s), 0.25);
}

TEST(ProgressMathTest, EtaUnknownBeforeFirstStepOrWithoutTotal) {
  ProgressState s = QuarterDone();
  s.step = 0;
  EXPECT_FALSE(EstimateRemainingSeconds(s).has_value());
  s = QuarterDone();
  s.total_steps = 0;
  s.steps_per_epoch = 0;
  EXPECT_FALSE(FractionDone(s).has_value());
  EXPECT_FALSE(EstimateRemainingSeconds(s).has_value());
}

TEST(ProgressFormatTest, Durations) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(44.6), "45s");
  EXPECT_EQ(FormatDuration(187), "3m07s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(2 * 86400 + 3 * 3600), "2d03h");
  EXPECT_EQ(FormatDuration(-1), "--");
  EXPECT_EQ(FormatDuration(NAN), "--");
}

TEST(ProgressFormatTest, Bytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(300 * 1024 * 1024 + 100 * 1024), "300 MiB");
  EXPECT_EQ(FormatBytes(int64_t{12} * 1024 * 1024 * 1024 + 512 * 1024 * 1024), "12.5 GiB");
  EXPECT_EQ(FormatBytes(-1), "--");
}

TEST(ProgressDisplayTest, TerminalRedrawsOneLineWithBar) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/true);
  display.Update(QuarterDone());
  EXPECT_EQ(out.str(),
            "\r\033[2K[#####...............]  25% epoch 2/4 step 250/1000 loss 0.4321 1234 "
            "samples/s ETA 1m30s");
  EXPECT_THAT(out.str(), Not(HasSubstr("\n")));
}

TEST(ProgressDisplayTest, ElasticJobsShowTheMemberCount) {
  ProgressState state = QuarterDone();
  state.members = 3;
  std::ostringstream tty;
  ProgressDisplay bar(tty, /*is_tty=*/true);
  bar.Update(state);
  EXPECT_THAT(tty.str(), HasSubstr("loss 0.4321 members 3 1234 samples/s"));
  std::ostringstream log;
  ProgressDisplay plain(log, /*is_tty=*/false);
  plain.Update(state);
  EXPECT_THAT(log.str(), HasSubstr("loss 0.4321 members 3 1234.5 samples/s"));
}

TEST(ProgressDisplayTest, TerminalThrottlesToTenRedrawsPerSecond) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/true);
  ProgressState s = QuarterDone();
  for (int i = 0; i < 100; ++i) {  // one update per 10 ms for one second
    s.step = 250 + i;
    s.elapsed_seconds = 30.0 + 0.01 * i;
    display.Update(s);
  }
  const int redraws = Count(out.str(), "\r\033[2K");
  EXPECT_GE(redraws, 9);
  EXPECT_LE(redraws, 10);
}

TEST(ProgressDisplayTest, TerminalEpochEndClearsBarAndNextUpdateRedraws) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/true);
  ProgressState s = QuarterDone();
  display.Update(s);
  display.EpochEnd(2, 0.8712, 0.35612, 0.40121, 12.34);
  s.elapsed_seconds += 0.001;  // well inside the throttle interval
  display.Update(s);
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("1m30s\r\033[2Kepoch 2/4 done in 12.3s: train_loss 0.4012 "
                              "test_loss 0.3561 test_accuracy 87.12%\n\r\033[2K["));
  display.Finish();
  EXPECT_THAT(out.str(), testing::EndsWith("ETA 1m30s\r\033[2K"));
  const size_t length = out.str().size();
  display.Finish();  // idempotent
  EXPECT_EQ(out.str().size(), length);
}

TEST(ProgressDisplayTest, PlainOutputWritesLinesEveryIntervalAndAtEpochEnds) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/false);
  ProgressState s = QuarterDone();
  s.step = 1;
  s.elapsed_seconds = 0.1;
  // 1000 steps at 0.05 s each: 50 s in all, 12.5 s per epoch.
  for (int64_t step = 1; step <= 1000; ++step) {
    s.step = step;
    s.epoch = static_cast<int>((step - 1) / 250) + 1;
    s.elapsed_seconds = 0.05 * static_cast<double>(step);
    display.Update(s);
  }
  display.Finish();
  const std::string text = out.str();
  EXPECT_THAT(text, Not(HasSubstr("\r")));
  EXPECT_THAT(text, Not(HasSubstr("\033")));
  EXPECT_THAT(text, StartsWith("epoch 1/4 step 1/1000 (0.1%) loss 0.4321 1234.5 samples/s "
                               "elapsed 0s ETA 50s\n"));
  for (const char* boundary :
       {"step 250/1000", "step 500/1000", "step 750/1000", "step 1000/1000 (100.0%)"}) {
    EXPECT_THAT(text, HasSubstr(boundary));
  }
  // The first line, one per 10 s (4 in 50 s) and four epoch ends, some of which coincide.
  const int lines = Count(text, "\n");
  EXPECT_GE(lines, 6);
  EXPECT_LE(lines, 9);
}

TEST(ProgressDisplayTest, PlainEpochEndAndUnknownValues) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/false);
  display.EpochEnd(1, NAN, NAN, 0.5, 3.0);
  EXPECT_EQ(out.str(), "epoch 1 done in 3.0s: train_loss 0.5000 test_loss -- test_accuracy --\n");
  ProgressState s;
  s.epoch = 1;
  display.Update(s);  // nothing known yet
  EXPECT_THAT(out.str(), HasSubstr("epoch 1 step 0 loss -- 0.0 samples/s elapsed 0s ETA --\n"));
}

TEST(ProgressDisplayTest, TerminalInterimEvaluationClearsBarOnItsOwnLine) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/true);
  ProgressState s = QuarterDone();
  display.Update(s);
  display.Evaluation(250, 1.25, 0.8712, 0.35612);
  s.elapsed_seconds += 0.001;
  display.Update(s);
  EXPECT_THAT(out.str(), HasSubstr("1m30s\r\033[2Kstep 250 (epoch 1.25): test_loss 0.3561 "
                                   "test_accuracy 87.12%\n\r\033[2K["));
}

RunSummary TwoRankSummary() {
  RunSummary s;
  s.job = "fmnist-hps";
  s.strategy = "hps";
  s.workers = 2;
  s.epochs = 5;
  s.steps = 1170;
  s.wall_seconds = 83.2;
  s.samples_per_second = 2950.14;
  s.final = {0.8712, 0.3561, 0.4012};
  s.ranks = {{0, "fast", 300 * 1024 * 1024, 200 * 1024 * 1024, 96, 40.123, 12.0},
             {1, "slow-group", 1536, 2048, 32, 41.5, 11.25}};
  return s;
}

TEST(FormatSummaryTableTest, TotalsAboveAlignedPerRankTable) {
  EXPECT_EQ(FormatSummaryTable(TwoRankSummary()),
            "job fmnist-hps  strategy hps  workers 2  epochs 5  steps 1170\n"
            "wall 1m23s  throughput 2950.1 samples/s\n"
            "final test_accuracy 87.12%  test_loss 0.3561  train_loss 0.4012\n"
            "total sent 300 MiB  received 200 MiB  compute 81.6s  comm 23.2s\n"
            "\n"
            "rank  group       batch      sent  received  compute s  comm s\n"
            "   0  fast           96   300 MiB   200 MiB      40.12   12.00\n"
            "   1  slow-group     32  1.50 KiB  2.00 KiB      41.50   11.25\n");
}

TEST(FormatSummaryTableTest, NoRanksOmitsTable) {
  RunSummary s = TwoRankSummary();
  s.ranks.clear();
  EXPECT_THAT(FormatSummaryTable(s), testing::EndsWith("compute 0.0s  comm 0.0s\n"));
}

// A strategy that decided from measured times says so under the header line.
TEST(FormatSummaryTableTest, StrategyDecisionFollowsTheHeader) {
  RunSummary s = TwoRankSummary();
  EXPECT_THAT(FormatSummaryTable(s), testing::Not(testing::HasSubstr("picked")));
  s.strategy = "auto";
  s.strategy_decision = "picked fp32 (ssgd's all-reduce): exposed communication 2 % of compute";
  const std::string table = FormatSummaryTable(s);
  const size_t header = table.find("strategy auto");
  ASSERT_NE(header, std::string::npos) << table;
  EXPECT_NE(table.find("\nstrategy auto picked fp32 (ssgd's all-reduce): exposed communication 2 % "
                       "of compute\n"),
            std::string::npos)
      << table;
}

// Gossip's per-worker accuracies follow the average model's on the epoch line, the interim
// evaluation line and the summary's final line; without them the lines are as before.
TEST(ProgressDisplayTest, WorkerAccuraciesFollowTheAverageModel) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/false);
  display.EpochEnd(1, 0.85, 0.4, 0.5, 3.0, {0.80, 0.86, 0.83});
  display.Evaluation(250, 1.25, 0.8712, 0.35612, {0.5, 0.25});
  EXPECT_EQ(out.str(),
            "epoch 1 done in 3.0s: train_loss 0.5000 test_loss 0.4000 test_accuracy 85.00% "
            "worker_accuracy min 80.00% mean 83.00% max 86.00%\n"
            "step 250 (epoch 1.25): test_loss 0.3561 test_accuracy 87.12% "
            "worker_accuracy min 25.00% mean 37.50% max 50.00%\n");

  RunSummary s = TwoRankSummary();
  const std::string plain = FormatSummaryTable(s);
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("worker_accuracy")));
  s.final.worker_test_accuracy = {0.5, 0.75};
  EXPECT_THAT(FormatSummaryTable(s),
              HasSubstr("train_loss 0.4012  worker_accuracy min 50.00% mean 62.50% max 75.00%\n"));
}

// Other tasks print their primary metric by name: accuracies as percentages, the others as they
// are; the summary's final line too.
TEST(ProgressDisplayTest, TheTasksPrimaryMetricByName) {
  std::ostringstream out;
  ProgressDisplay display(out, /*is_tty=*/false);
  display.EpochEnd(1, "rmse", 0.12345, 0.0152, 0.02, 3.0, {0.125, 0.25});
  display.Evaluation(250, 1.25, "f1", 0.75, 0.35612);
  EXPECT_EQ(out.str(),
            "epoch 1 done in 3.0s: train_loss 0.0200 test_loss 0.0152 test_rmse 0.1235 "
            "worker_rmse min 0.1250 mean 0.1875 max 0.2500\n"
            "step 250 (epoch 1.25): test_loss 0.3561 test_f1 0.7500\n");

  RunSummary s = TwoRankSummary();
  s.task = "regression";
  s.metric = "rmse";
  s.final = {0.0, 0.0152, 0.02, {{"rmse", 0.12345}, {"mae", 0.1}}};
  EXPECT_THAT(FormatSummaryTable(s),
              HasSubstr("\nfinal test_rmse 0.1235  test_loss 0.0152  train_loss 0.0200\n"));
}

// gossip: the per-rank table adds the model exchanges each worker took part in.
TEST(FormatSummaryTableTest, GossipAddsExchangesPerWorker) {
  RunSummary s = TwoRankSummary();
  s.strategy = "gossip";
  s.ranks[0].exchanges = 118;
  s.ranks[1].exchanges = 7;
  EXPECT_THAT(FormatSummaryTable(s),
              testing::EndsWith(
                  "rank  group       batch      sent  received  compute s  comm s  exchanges\n"
                  "   0  fast           96   300 MiB   200 MiB      40.12   12.00        118\n"
                  "   1  slow-group     32  1.50 KiB  2.00 KiB      41.50   11.25          7\n"));
}

}  // namespace
}  // namespace hptrain::job
