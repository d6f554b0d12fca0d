// The worker's metric families (runtime/cli/worker_metrics.h): the per-worker accuracy of gossip's
// own models is exported only once an evaluation measured it.
#include "runtime/cli/worker_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/metrics/exposition.h"
#include "runtime/metrics/registry.h"

namespace hptrain::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(WorkerMetrics, OwnModelAccuracyOnlyWhenTheEvaluationMeasuredIt) {
  metrics::Registry registry;
  WorkerMetrics worker_metrics(registry);
  train::EpochStats stats;
  stats.test_accuracy = 0.875;
  stats.rank = 1;
  worker_metrics.OnEpoch(stats);  // every other strategy: no per-worker accuracies
  std::string text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("\nhptrain_eval_accuracy 0.875\n"));
  EXPECT_THAT(text, Not(HasSubstr("\nhptrain_eval_worker_accuracy ")));

  stats.worker_test_accuracy = {0.5, 0.625, 0.75};  // gossip: this worker's is rank 1's
  worker_metrics.OnEpoch(stats);
  text = metrics::TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("\nhptrain_eval_worker_accuracy 0.625\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_eval_worker_accuracy gauge\n"));
}

}  // namespace
}  // namespace hptrain::cli
