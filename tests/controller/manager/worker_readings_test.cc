#include "controller/manager/worker_readings.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::manager {
namespace {

promql::Sample S(const std::string& name, std::map<std::string, std::string> labels, double value,
                 double timestamp = 0) {
  labels["__name__"] = name;
  return promql::Sample{std::move(labels), value, timestamp};
}

std::map<std::string, std::string> Worker(const std::string& job, int rank,
                                          const std::string& ns = "", const std::string& pod = "") {
  std::map<std::string, std::string> labels = {
      {"trainingjob", job}, {"role", "worker"}, {"rank", std::to_string(rank)}};
  if (!ns.empty()) labels["namespace"] = ns;
  if (!pod.empty()) labels["pod"] = pod;
  return labels;
}

TEST(WorkerReadingsTest, FoldsEveryMetricOfARank) {
  WorkerReadings out;
  FoldSamples({S("hptrain_compute_seconds_sum", Worker("a", 1, "ns"), 12.5),
               S("hptrain_compute_seconds_count", Worker("a", 1, "ns"), 40),
               S("hptrain_batch_size", Worker("a", 1, "ns"), 96),
               S("hptrain_samples_per_second", Worker("a", 1, "ns"), 310.5),
               S("hptrain_step", Worker("a", 1, "ns"), 41),
               S("hptrain_epoch", Worker("a", 1, "ns"), 2),
               S("hptrain_eval_worker_accuracy", Worker("a", 1, "ns"), 0.3)},  // not a reading
              {"ns/a"}, 100, &out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out["ns/a"].count(1), 1u);
  const WorkerReading& r = out["ns/a"][1];
  EXPECT_DOUBLE_EQ(r.compute_seconds, 12.5);
  EXPECT_EQ(r.compute_steps, 40);
  EXPECT_EQ(r.batch_size, 96);
  EXPECT_DOUBLE_EQ(r.samples_per_second, 310.5);
  EXPECT_EQ(r.step, 41);
  EXPECT_EQ(r.epoch, 2);
  EXPECT_DOUBLE_EQ(r.newest_sample_seconds, 100);  // no timestamps: "now"
}

TEST(WorkerReadingsTest, FoldsTheTrainingLossAndTheEvaluationMetricsByName) {
  WorkerReadings out;
  std::map<std::string, std::string> rmse = Worker("a", 0, "ns");
  rmse["metric"] = "rmse";
  std::map<std::string, std::string> mae = Worker("a", 0, "ns");
  mae["metric"] = "mae";
  FoldSamples({S("hptrain_train_loss", Worker("a", 0, "ns"), 0.25),
               S("hptrain_eval_accuracy", Worker("a", 0, "ns"), 0),
               S("hptrain_eval_metric", rmse, 1.5), S("hptrain_eval_metric", mae, 1.25),
               S("hptrain_eval_metric", Worker("a", 0, "ns"), 9),  // no metric label
               S("hptrain_step", Worker("a", 1, "ns"), 3)},
              {"ns/a"}, 100, &out);
  const WorkerReading& r = out["ns/a"][0];
  ASSERT_TRUE(r.train_loss.has_value());
  EXPECT_DOUBLE_EQ(*r.train_loss, 0.25);
  ASSERT_TRUE(r.eval_accuracy.has_value());
  EXPECT_DOUBLE_EQ(*r.eval_accuracy, 0);
  EXPECT_EQ(r.eval_metrics, (std::map<std::string, double>{{"mae", 1.25}, {"rmse", 1.5}}));
  // A rank that reports neither has neither.
  EXPECT_FALSE(out["ns/a"][1].train_loss.has_value());
  EXPECT_FALSE(out["ns/a"][1].eval_accuracy.has_value());
  EXPECT_TRUE(out["ns/a"][1].eval_metrics.empty());
}

TEST(WorkerReadingsTest, NamespacesJobsRolesAndRanksSelect) {
  WorkerReadings out;
  std::map<std::string, std::string> ps = Worker("a", 0, "ns");
  ps["role"] = "ps";
  std::map<std::string, std::string> no_rank = {{"trainingjob", "a"}, {"role", "worker"}};
  // The scrape's own job label names no TrainingJob; the runtime's trainingjob label wins.
  std::map<std::string, std::string> scraped = Worker("a", 3);
  scraped["job"] = "ns/hptrain-jobs";
  FoldSamples({S("hptrain_batch_size", Worker("a", 0, "ns"), 1),
               S("hptrain_batch_size", Worker("a", 1, "other"), 2),   // another namespace's a
               S("hptrain_batch_size", Worker("b", 0, "ns"), 3),      // a job not asked for
               S("hptrain_batch_size", ps, 4),                        // not a worker
               S("hptrain_batch_size", no_rank, 5),                   // no rank
               S("hptrain_batch_size", Worker("a", 2), 6),            // no namespace: any a
               S("hptrain_batch_size", scraped, 7)},                  // the scrape's job
              {"ns/a", "x/a"}, 1, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out["ns/a"].size(), 3u);
  EXPECT_EQ(out["ns/a"][0].batch_size, 1);
  EXPECT_EQ(out["ns/a"][2].batch_size, 6);
  EXPECT_EQ(out["ns/a"][3].batch_size, 7);
  EXPECT_EQ(out["x/a"].size(), 2u);  // ranks 2 and 3, which name no namespace
  EXPECT_EQ(out["x/a"].count(0), 0u);
}

TEST(WorkerReadingsTest, SeriesOfRuntimesBeforeTheTrainingJobLabelAreReadByTheirJobLabel) {
  // Such a runtime exposed the job's name as "job": a scrape with honor_labels keeps it, one
  // without renames it exported_job and sets job to the scrape job's name.
  std::map<std::string, std::string> honored = {{"job", "a"}, {"role", "worker"}, {"rank", "0"}};
  std::map<std::string, std::string> renamed = {
      {"exported_job", "a"}, {"job", "ns/hptrain-jobs"}, {"role", "worker"}, {"rank", "1"}};
  std::map<std::string, std::string> scrape_job_only = {
      {"job", "ns/hptrain-jobs"}, {"role", "worker"}, {"rank", "2"}};
  std::map<std::string, std::string> none = {{"role", "worker"}, {"rank", "3"}};
  WorkerReadings out;
  FoldSamples({S("hptrain_batch_size", honored, 8), S("hptrain_batch_size", renamed, 9),
               S("hptrain_batch_size", scrape_job_only, 10), S("hptrain_batch_size", none, 11)},
              {"ns/a", "ns/hptrain-jobs"}, 1, &out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out["ns/a"].size(), 2u);
  EXPECT_EQ(out["ns/a"][0].batch_size, 8);
  EXPECT_EQ(out["ns/a"][1].batch_size, 9);
}

TEST(WorkerReadingsTest, TheNewestPodOfARankWins) {
  WorkerReadings out;
  FoldSamples({S("hptrain_batch_size", Worker("a", 0, "ns", "a-worker-0-old"), 16, 50),
               S("hptrain_compute_seconds_count", Worker("a", 0, "ns", "a-worker-0-old"), 900, 50),
               S("hptrain_batch_size", Worker("a", 0, "ns", "a-worker-0"), 20, 70),
               S("hptrain_compute_seconds_count", Worker("a", 0, "ns", "a-worker-0"), 3, 70)},
              {"ns/a"}, 100, &out);
  const WorkerReading& r = out["ns/a"][0];
  EXPECT_EQ(r.pod, "a-worker-0");
  EXPECT_EQ(r.batch_size, 20);
  EXPECT_EQ(r.compute_steps, 3);  // never mixed with the old pod's
}

}  // namespace
}  // namespace hptrain::manager
