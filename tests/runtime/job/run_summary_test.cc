#include "runtime/job/run_summary.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

using ::testing::HasSubstr;

RunSummary Example() {
  RunSummary s;
  s.job = "fmnist-hps";
  s.strategy = "hps";
  s.workers = 2;
  s.epochs = 2;
  s.steps = 468;
  s.wall_seconds = 41.25;
  s.samples_per_second = 2909.5;
  s.final = {0.8712, 0.3561, 0.4012, {{"accuracy", 0.8712}, {"top5_accuracy", 0.9875}}};
  s.per_epoch = {{1, 0.81, 0.55, 20.5, 22.0, {{"accuracy", 0.81}, {"top5_accuracy", 0.97}}},
                 {2, 0.8712, 0.4012, 20.75, 43.0}};
  s.evaluations = {{117, 0.5, 0.74, 0.71, 12.5, {{"accuracy", 0.74}, {"top5_accuracy", 0.95}}},
                   {234, 1.0, 0.81, 0.52, 22.0},
                   {468, 2.0, 0.8712, 0.356, 43.0}};
  s.ranks = {{0, "fast", int64_t{5} << 32, 123456789, 96, 30.5, 8.25, 4096, 8192, 2.5},
             {1, "slow", 1024, 2048, 32, 31.0, 7.5}};
  return s;
}

void ExpectEqual(const RunSummary& a, const RunSummary& b) {
  EXPECT_EQ(a.job, b.job);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.metric, b.metric);
  EXPECT_EQ(a.final.metrics, b.final.metrics);
  EXPECT_EQ(a.workers, b.workers);
  EXPECT_EQ(a.epochs, b.epochs);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.wall_seconds, b.wall_seconds);
  EXPECT_EQ(a.samples_per_second, b.samples_per_second);
  EXPECT_EQ(a.final.test_accuracy, b.final.test_accuracy);
  EXPECT_EQ(a.final.test_loss, b.final.test_loss);
  EXPECT_EQ(a.final.train_loss, b.final.train_loss);
  ASSERT_EQ(a.per_epoch.size(), b.per_epoch.size());
  for (size_t i = 0; i < a.per_epoch.size(); ++i) {
    EXPECT_EQ(a.per_epoch[i].epoch, b.per_epoch[i].epoch);
    EXPECT_EQ(a.per_epoch[i].test_accuracy, b.per_epoch[i].test_accuracy);
    EXPECT_EQ(a.per_epoch[i].train_loss, b.per_epoch[i].train_loss);
    EXPECT_EQ(a.per_epoch[i].wall_seconds, b.per_epoch[i].wall_seconds);
    EXPECT_EQ(a.per_epoch[i].elapsed_seconds, b.per_epoch[i].elapsed_seconds);
    EXPECT_EQ(a.per_epoch[i].metrics, b.per_epoch[i].metrics);
  }
  ASSERT_EQ(a.evaluations.size(), b.evaluations.size());
  for (size_t i = 0; i < a.evaluations.size(); ++i) {
    EXPECT_EQ(a.evaluations[i].step, b.evaluations[i].step);
    EXPECT_EQ(a.evaluations[i].epochs, b.evaluations[i].epochs);
    EXPECT_EQ(a.evaluations[i].test_accuracy, b.evaluations[i].test_accuracy);
    EXPECT_EQ(a.evaluations[i].test_loss, b.evaluations[i].test_loss);
    EXPECT_EQ(a.evaluations[i].elapsed_seconds, b.evaluations[i].elapsed_seconds);
    EXPECT_EQ(a.evaluations[i].metrics, b.evaluations[i].metrics);
  }
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    EXPECT_EQ(a.ranks[i].rank, b.ranks[i].rank);
    EXPECT_EQ(a.ranks[i].group, b.ranks[i].group);
    EXPECT_EQ(a.ranks[i].bytes_sent, b.ranks[i].bytes_sent);
    EXPECT_EQ(a.ranks[i].bytes_received, b.ranks[i].bytes_received);
    EXPECT_EQ(a.ranks[i].batch_size, b.ranks[i].batch_size);
    EXPECT_EQ(a.ranks[i].compute_seconds, b.ranks[i].compute_seconds);
    EXPECT_EQ(a.ranks[i].comm_seconds, b.ranks[i].comm_seconds);
    EXPECT_EQ(a.ranks[i].ps_bytes_sent, b.ranks[i].ps_bytes_sent);
    EXPECT_EQ(a.ranks[i].ps_bytes_received, b.ranks[i].ps_bytes_received);
    EXPECT_EQ(a.ranks[i].exposed_comm_seconds, b.ranks[i].exposed_comm_seconds);
  }
}

// The field names and nesting of docs/design.md ("Job file and run summary"), in its order.
TEST(RunSummaryTest, JsonHasExactlyTheDesignFieldNames) {
  RunSummary s = Example();
  s.per_epoch.resize(1);
  s.evaluations.resize(1);
  s.ranks.resize(1);
  EXPECT_EQ(RunSummaryToJson(s), R"({
  "job": "fmnist-hps",
  "strategy": "hps",
  "task": "classification",
  "metric": "accuracy",
  "workers": 2,
  "epochs": 2,
  "steps": 468,
  "wall_seconds": 41.25,
  "samples_per_second": 2909.5,
  "final": {
    "test_accuracy": 0.8712,
    "test_loss": 0.3561,
    "train_loss": 0.4012,
    "metrics": {
      "accuracy": 0.8712,
      "top5_accuracy": 0.9875
    }
  },
  "per_epoch": [
    {
      "epoch": 1,
      "test_accuracy": 0.81,
      "train_loss": 0.55,
      "wall_seconds": 20.5,
      "elapsed_seconds": 22.0,
      "metrics": {
        "accuracy": 0.81,
        "top5_accuracy": 0.97
      }
    }
  ],
  "evaluations": [
    {
      "step": 117,
      "epochs": 0.5,
      "test_accuracy": 0.74,
      "test_loss": 0.71,
      "elapsed_seconds": 12.5,
      "metrics": {
        "accuracy": 0.74,
        "top5_accuracy": 0.95
      }
    }
  ],
  "ranks": [
    {
      "rank": 0,
      "group": "fast",
      "bytes_sent": 21474836480,
      "bytes_received": 123456789,
      "batch_size": 96,
      "compute_seconds": 30.5,
      "comm_seconds": 8.25,
      "exposed_comm_seconds": 2.5,
      "ps_bytes_sent": 4096,
      "ps_bytes_received": 8192
    }
  ]
}
)");
}

TEST(RunSummaryTest, RoundTripsExactly) {
  const RunSummary original = Example();
  auto parsed = RunSummaryFromJson(RunSummaryToJson(original));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectEqual(*parsed, original);
}

TEST(RunSummaryTest, EmptyListsRoundTrip) {
  RunSummary original;
  original.job = "empty";
  auto parsed = RunSummaryFromJson(RunSummaryToJson(original));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectEqual(*parsed, original);
  EXPECT_THAT(RunSummaryToJson(original), HasSubstr("\"per_epoch\": [],"));
}

TEST(RunSummaryTest, NonFiniteValuesBecomeNullAndReadBackAsNan) {
  RunSummary s = Example();
  s.final.test_loss = NAN;
  s.per_epoch[0].test_accuracy = INFINITY;
  const std::string json = RunSummaryToJson(s);
  EXPECT_THAT(json, HasSubstr("\"test_loss\": null"));
  auto parsed = RunSummaryFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(std::isnan(parsed->final.test_loss));
  EXPECT_TRUE(std::isnan(parsed->per_epoch[0].test_accuracy));
}

TEST(RunSummaryTest, ParsesHandWrittenJsonAndIgnoresAddedFields) {
  auto parsed = RunSummaryFromJson(R"({"job": "j", "strategy": "ssgd", "workers": 1,
      "epochs": 1, "steps": 10, "wall_seconds": 2, "samples_per_second": 100.5,
      "added_later": {"anything": [1, 2]},
      "final": {"test_accuracy": 0.5, "test_loss": 1, "train_loss": 1.5},
      "per_epoch": [{"epoch": 1, "test_accuracy": 0.5, "train_loss": 1.5, "wall_seconds": 2,
                     "extra": true}],
      "ranks": [{"rank": 0, "group": "default", "bytes_sent": 0, "bytes_received": 0,
                 "batch_size": 64, "compute_seconds": 1, "comm_seconds": 0.5}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->wall_seconds, 2.0);  // an integer where a float is expected is fine
  EXPECT_EQ(parsed->ranks[0].batch_size, 64);
  EXPECT_EQ(parsed->per_epoch[0].epoch, 1);
  EXPECT_TRUE(parsed->evaluations.empty());  // written before evaluations existed
  EXPECT_EQ(parsed->task, "classification");  // written before tasks existed
  EXPECT_EQ(parsed->metric, "accuracy");
  EXPECT_TRUE(parsed->final.metrics.empty());
}

// A task other than classification: its metrics by name, in the task's order, whatever their
// names' alphabetical order; test_accuracy 0.
TEST(RunSummaryTest, RegressionMetricsRoundTripInTheirOrder) {
  RunSummary s = Example();
  s.task = "regression";
  s.metric = "rmse";
  s.final = {0.0, 0.04, 0.05, {{"rmse", 0.2}, {"mae", 0.125}}};
  s.per_epoch = {{1, 0.0, 0.05, 20.5, 22.0, {{"rmse", 0.2}, {"mae", 0.125}}}};
  s.evaluations.clear();
  const std::string json = RunSummaryToJson(s);
  EXPECT_THAT(json, HasSubstr("\"metric\": \"rmse\""));
  EXPECT_THAT(json, HasSubstr("\"metrics\": {\n      \"rmse\": 0.2,\n      \"mae\": 0.125\n"));
  auto parsed = RunSummaryFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectEqual(*parsed, s);
  EXPECT_DOUBLE_EQ(MetricValue(parsed->final.metrics, "mae"), 0.125);
  EXPECT_TRUE(std::isnan(MetricValue(parsed->final.metrics, "accuracy")));

  std::string bad = json;
  bad.replace(bad.find("\"mae\": 0.125"), 12, "\"mae\": \"x\"");
  auto error = RunSummaryFromJson(bad);
  ASSERT_FALSE(error.ok());
  EXPECT_THAT(std::string(error.status().message()),
              HasSubstr("final.metrics.mae: expected a number"));
}

TEST(RunSummaryTest, ErrorsNameTheField) {
  const std::string good = RunSummaryToJson(Example());
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t pos = s.rfind(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return s.replace(pos, from.size(), to);
  };
  struct Case {
    std::string json;
    std::string message;
  } cases[] = {
      {replace("\"bytes_sent\": 1024", "\"bytes_sent\": 1.5"),
       "ranks[1].bytes_sent: expected an integer"},
      {replace("\"comm_seconds\": 7.5", "\"seconds\": 7.5"), "ranks[1].comm_seconds: missing"},
      {replace("\"strategy\": \"hps\"", "\"strategy\": 3"), "strategy: expected a string"},
      {replace("\"test_loss\": 0.3561", "\"test_loss\": \"low\""),
       "final.test_loss: expected a number"},
      {replace("\"epoch\": 2", "\"epoch\": 99999999999"), "per_epoch[1].epoch: out of range"},
      {replace("\"step\": 468", "\"step\": \"last\""), "evaluations[2].step: expected an integer"},
      {replace("\"evaluations\": [", "\"evaluations\": {\"a\": ["), "run summary:"},
      {replace("\"ranks\": [", "\"ranks\": {\"a\": ["), "run summary:"},  // malformed
      {"[]", "expected a JSON object"},
  };
  for (const Case& c : cases) {
    auto parsed = RunSummaryFromJson(c.json);
    ASSERT_FALSE(parsed.ok()) << c.message;
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.message));
  }
}

// Each worker's own accuracy (gossip) is written as its spread, min/max/mean plus the list by
// rank, in the final metrics, per epoch and per evaluation, and read back; a run without it
// (every other strategy) has no such key.
TEST(RunSummaryTest, WorkerAccuracySpreadRoundTripsAndIsAbsentWithout) {
  RunSummary s = Example();
  s.final.worker_test_accuracy = {0.75, 0.875, 0.8125};
  s.per_epoch[1].worker_test_accuracy = {0.75, 0.875, 0.8125};
  s.evaluations[0].worker_test_accuracy = {0.5, 0.25};
  const std::string json = RunSummaryToJson(s);
  EXPECT_THAT(json, HasSubstr("\"worker_test_accuracy\": {\n      \"min\": 0.75,\n      "
                              "\"max\": 0.875,\n      \"mean\": 0.8125,"));
  EXPECT_THAT(json, HasSubstr("\"min\": 0.25,"));
  EXPECT_THAT(json, HasSubstr("\"max\": 0.5,"));
  EXPECT_THAT(json, HasSubstr("\"mean\": 0.375,"));
  auto parsed = RunSummaryFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->final.worker_test_accuracy, s.final.worker_test_accuracy);
  EXPECT_TRUE(parsed->per_epoch[0].worker_test_accuracy.empty());
  EXPECT_EQ(parsed->per_epoch[1].worker_test_accuracy, s.per_epoch[1].worker_test_accuracy);
  EXPECT_EQ(parsed->evaluations[0].worker_test_accuracy, s.evaluations[0].worker_test_accuracy);
  EXPECT_TRUE(parsed->evaluations[1].worker_test_accuracy.empty());

  EXPECT_THAT(RunSummaryToJson(Example()), ::testing::Not(HasSubstr("worker_test_accuracy")));

  std::string bad = json;
  const std::string first = "\"ranks\": [\n        0.75";
  const size_t at = bad.find(first);
  ASSERT_NE(at, std::string::npos) << json;
  bad.replace(at, first.size(), "\"ranks\": [\n        \"x\"");
  auto error = RunSummaryFromJson(bad);
  ASSERT_FALSE(error.ok());
  EXPECT_THAT(std::string(error.status().message()),
              HasSubstr("final.worker_test_accuracy.ranks[0]: expected a number"));
}

// gossip: each rank's model exchanges and threshold are written and read back; other
// strategies' summaries have no such keys, and summaries written without them read as 0.
TEST(RunSummaryTest, GossipExchangesPerRankRoundTrip) {
  RunSummary s = Example();
  EXPECT_THAT(RunSummaryToJson(s), ::testing::Not(HasSubstr("\"exchanges\"")));
  EXPECT_THAT(RunSummaryToJson(s), ::testing::Not(HasSubstr("\"threshold\"")));
  s.strategy = "gossip";
  s.ranks[0].exchanges = 41;
  s.ranks[0].threshold = 0.0625;  // θ, as the trigger calibrated it
  const std::string json = RunSummaryToJson(s);
  EXPECT_THAT(json, HasSubstr("\"exchanges\": 41"));
  EXPECT_THAT(json, HasSubstr("\"threshold\": 0.0625"));
  auto parsed = RunSummaryFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ranks[0].exchanges, 41);
  EXPECT_EQ(parsed->ranks[0].threshold, 0.0625);
  auto older = RunSummaryFromJson(RunSummaryToJson(Example()));
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(older->ranks[0].exchanges, 0);
  EXPECT_EQ(older->ranks[0].threshold, 0.0);
}

TEST(RunSummaryTest, StrategyDecisionRoundTripsAndIsAbsentWithout) {
  RunSummary s = Example();
  EXPECT_THAT(RunSummaryToJson(s), ::testing::Not(HasSubstr("strategy_decision")));
  s.strategy = "auto";
  s.strategy_decision = "picked fp32 (ssgd's all-reduce): exposed communication 9 % of compute";
  const std::string json = RunSummaryToJson(s);
  EXPECT_THAT(json, HasSubstr("\"strategy\": \"auto\",\n  \"strategy_decision\": \"picked fp32"));
  auto parsed = RunSummaryFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->strategy_decision, s.strategy_decision);
  auto older = RunSummaryFromJson(RunSummaryToJson(Example()));
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(older->strategy_decision, "");
}

TEST(RunSummaryTest, ElasticMembershipChangesAndWorkerRestartsRoundTripAndAreAbsentWithout) {
  RunSummary s = Example();
  EXPECT_THAT(RunSummaryToJson(s), ::testing::Not(HasSubstr("membership_changes")));
  EXPECT_THAT(RunSummaryToJson(s), ::testing::Not(HasSubstr("worker_restarts")));
  s.elastic = true;
  s.membership_changes = {{1, "lost", {1}, {0}, 0, 1.7e9, "killed by signal 9"},
                          {2, "joined", {1}, {0, 1}, 37, 1.7e9 + 4.5, ""},
                          {3, "removed", {0}, {1}, 60, 1.7e9 + 9.25, "control file"}};
  s.worker_restarts = {0, 1, 0};
  const std::string json = RunSummaryToJson(s);
  EXPECT_THAT(json, HasSubstr("\"worker_restarts\": [\n    0,\n    1,\n    0\n  ]"));
  EXPECT_THAT(json, HasSubstr("\"reason\": \"joined\""));
  auto parsed = RunSummaryFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectEqual(*parsed, s);
  EXPECT_TRUE(parsed->elastic);
  EXPECT_EQ(parsed->worker_restarts, s.worker_restarts);
  ASSERT_EQ(parsed->membership_changes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const MembershipChangeSummary& a = parsed->membership_changes[i];
    const MembershipChangeSummary& b = s.membership_changes[i];
    EXPECT_EQ(a.epoch, b.epoch);
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(a.slots, b.slots);
    EXPECT_EQ(a.members, b.members);
    EXPECT_EQ(a.effective_step, b.effective_step);
    EXPECT_EQ(a.unix_seconds, b.unix_seconds);
    EXPECT_EQ(a.detail, b.detail);
  }
  // An elastic run without changes still says so, with an empty list.
  s.membership_changes.clear();
  EXPECT_THAT(RunSummaryToJson(s), HasSubstr("\"membership_changes\": []"));
  std::string bad = json;
  bad.replace(bad.find("\"slots\": [\n        1"), 20, "\"slots\": [\n        \"1\"");
  auto refused = RunSummaryFromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("membership_changes[0].slots[0]: expected an integer"));
}

}  // namespace
}  // namespace hptrain::job
