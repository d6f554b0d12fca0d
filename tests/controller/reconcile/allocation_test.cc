#include "controller/reconcile/allocation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/kube_time.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::Cluster;
using ::testing::HasSubstr;

std::string Message(const absl::StatusOr<AllocationRecord>& record) {
  return std::string(record.status().message());
}

Cluster RunningHetero() {
  Cluster c(testing::HeteroJob());
  c.Settle();
  c.SetAllPods("Running");
  c.Settle();
  return c;
}

TEST(RecordAllocationTest, WritesBatchSizesGenerationTimeAndCondition) {
  Cluster c = RunningHetero();
  c.Advance(absl::Minutes(2));
  absl::StatusOr<AllocationRecord> record = RecordAllocation(c.job(), {200, 200, 112}, c.now());
  ASSERT_TRUE(record.ok()) << record.status();
  const Json& s = record->status;
  EXPECT_EQ(s["workers"][0]["batchSize"], 200);
  EXPECT_EQ(s["workers"][1]["batchSize"], 200);
  EXPECT_EQ(s["workers"][2]["batchSize"], 112);
  EXPECT_EQ(s["allocationGeneration"], 1);
  EXPECT_EQ(s["lastRebalanceTime"], FormatKubeTime(c.now()));
  const Json* cond = FindCondition(s, kConditionRebalanced);
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ((*cond)["status"], "True");
  EXPECT_EQ((*cond)["reason"], "Rebalanced");
  EXPECT_EQ((*cond)["observedGeneration"], 3);
  EXPECT_EQ(record->event.type, "Normal");
  EXPECT_EQ(record->event.reason, "Rebalanced");
  EXPECT_EQ(record->event.message, "allocation 1: batch sizes [200, 200, 112] by rank");
  // Everything else is the reconciler's status, untouched.
  EXPECT_EQ(s["phase"], "Running");
  EXPECT_EQ(s["workers"][2]["group"], "t4");

  // The reconciler keeps what the rebalancer wrote.
  c.job()["status"] = s;
  EXPECT_TRUE(c.Reconcile().NoWrites()) << c.Reconcile().DebugString();

  // A second allocation: generation 2, the condition's transition time stays.
  std::string first = (*cond)["lastTransitionTime"];
  c.Advance(absl::Minutes(1));
  record = RecordAllocation(c.job(), {180, 180, 152}, c.now());
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->status["allocationGeneration"], 2);
  EXPECT_EQ(record->status["lastRebalanceTime"], FormatKubeTime(c.now()));
  EXPECT_EQ((*FindCondition(record->status, kConditionRebalanced))["lastTransitionTime"], first);
}

TEST(RecordAllocationTest, RejectsAllocationsThatDoNotFit) {
  Cluster c = RunningHetero();
  EXPECT_THAT(Message(RecordAllocation(c.job(), {256, 256}, c.now())),
              HasSubstr("2 batch sizes, the job has 3 workers"));
  EXPECT_THAT(Message(RecordAllocation(c.job(), {256, 256, 1}, c.now())),
              HasSubstr("adds up to 513, spec.globalBatchSize is 512"));
  EXPECT_THAT(Message(RecordAllocation(c.job(), {512, 0, 0}, c.now())),
              HasSubstr("rank 1 has batch size 0"));

  Cluster fresh(testing::HeteroJob());
  absl::Status no_status = RecordAllocation(fresh.job(), {200, 200, 112}, fresh.now()).status();
  EXPECT_EQ(no_status.code(), absl::StatusCode::kFailedPrecondition);

  Json bad = c.job();
  bad["spec"]["globalBatchSize"] = "x";
  EXPECT_EQ(RecordAllocation(bad, {200, 200, 112}, c.now()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hptrain::reconcile
