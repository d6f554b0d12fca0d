#include "runtime/job/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

WorkerGroupSpec Group(const std::string& name, int replicas, int batch_size = 0) {
  WorkerGroupSpec group;
  group.name = name;
  group.replicas = replicas;
  group.batch_size = batch_size;
  return group;
}

TEST(JobSpecTest, WorldSizeSumsReplicas) {
  JobSpec spec;
  EXPECT_EQ(spec.WorldSize(), 0);
  spec.worker_groups = {Group("a", 2), Group("b", 3)};
  EXPECT_EQ(spec.WorldSize(), 5);
}

TEST(JobSpecTest, RankGroupsFollowDocumentOrder) {
  JobSpec spec;
  spec.worker_groups = {Group("a100", 2), Group("t4", 1)};
  EXPECT_THAT(spec.RankGroups(), ElementsAre("a100", "a100", "t4"));
}

TEST(JobSpecTest, EqualSplitGivesTheRemainderToLowerRanks) {
  JobSpec spec;
  spec.global_batch_size = 130;
  spec.worker_groups = {Group("cpu", 4)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(33, 33, 32, 32));
}

TEST(JobSpecTest, EqualSplitCrossesGroups) {
  JobSpec spec;
  spec.global_batch_size = 11;
  spec.worker_groups = {Group("a", 1), Group("b", 3)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(3, 3, 3, 2));
}

TEST(JobSpecTest, ExactSplit) {
  JobSpec spec;
  spec.global_batch_size = 128;
  spec.worker_groups = {Group("cpu", 4)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(32, 32, 32, 32));
}

TEST(JobSpecTest, GroupBatchSizesAreUsedAsGiven) {
  JobSpec spec;
  spec.global_batch_size = 64;
  spec.worker_groups = {Group("t4", 2, 8), Group("a100", 2, 24)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(8, 8, 24, 24));
}

TEST(JobSpecTest, MixedGroupsSplitWhatIsLeft) {
  // Not a valid job (validation rejects it) but the helper stays total.
  JobSpec spec;
  spec.global_batch_size = 21;
  spec.worker_groups = {Group("fixed", 1, 10), Group("free", 2)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(10, 6, 5));
}

TEST(JobSpecTest, NoGroupsNoAllocation) {
  JobSpec spec;
  spec.global_batch_size = 64;
  EXPECT_THAT(spec.InitialAllocation(), IsEmpty());
  EXPECT_THAT(spec.RankGroups(), IsEmpty());
}

}  // namespace
}  // namespace hptrain::job
