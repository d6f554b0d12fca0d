// The run summary from the coordinator's last status (runtime/job/status_summary.h): an elastic
// job's ranks keyed by slot, its membership changes, and the strategy decision of its first member.
#include "runtime/job/status_summary.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;

TEST(StatusSummary, ElasticJobKeepsSlotsAndCarriesTheMembershipChanges) {
  JobSpec spec;
  spec.name = "elastic";
  spec.strategy.type = "auto";
  spec.elastic.enabled = true;
  hptrain::v1::JobStatus status;
  for (int slot : {0, 2}) {
    hptrain::v1::ProgressReport* r = status.add_ranks();
    r->set_rank(slot);
    r->set_step(40);
    r->set_batch_size(32);
    r->set_strategy_decision(slot == 2 ? "picked fp32 (slot 2)" : "picked fp32 (slot 0)");
  }
  status.add_members(2);
  status.add_members(0);
  hptrain::v1::MembershipChange* change = status.add_membership_changes();
  change->set_epoch(1);
  change->set_reason("lost");
  change->add_slots(1);
  change->add_members(2);
  change->add_members(0);
  change->set_unix_seconds(1.7e9);
  change->set_detail("killed by signal 9");

  const RunSummary summary = BuildSummary(spec, status, 10.0, 0.0);
  EXPECT_TRUE(summary.elastic);
  ASSERT_EQ(summary.ranks.size(), 2u);
  EXPECT_EQ(summary.ranks[0].rank, 0);
  EXPECT_EQ(summary.ranks[1].rank, 2);
  EXPECT_EQ(summary.strategy_decision, "picked fp32 (slot 2)");  // the first member's
  ASSERT_EQ(summary.membership_changes.size(), 1u);
  EXPECT_EQ(summary.membership_changes[0].epoch, 1);
  EXPECT_EQ(summary.membership_changes[0].reason, "lost");
  EXPECT_THAT(summary.membership_changes[0].slots, ElementsAre(1));
  EXPECT_THAT(summary.membership_changes[0].members, ElementsAre(2, 0));
  EXPECT_EQ(summary.membership_changes[0].detail, "killed by signal 9");
  EXPECT_EQ(summary.steps, 40);

  spec.elastic.enabled = false;  // a job without spec.elastic: rank 0 decides, no elastic fields
  const RunSummary plain = BuildSummary(spec, status, 10.0, 0.0);
  EXPECT_FALSE(plain.elastic);
  EXPECT_EQ(plain.strategy_decision, "picked fp32 (slot 0)");
}

}  // namespace
}  // namespace hptrain::job
