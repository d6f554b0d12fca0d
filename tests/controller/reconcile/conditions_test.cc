#include "controller/reconcile/conditions.h"

#include <gtest/gtest.h>

#include "controller/reconcile/kube_time.h"

namespace hptrain::reconcile {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);
const absl::Time kT1 = kT0 + absl::Minutes(5);
const absl::Time kT2 = kT0 + absl::Minutes(9);

TEST(ConditionsTest, AddedConditionHasEveryField) {
  Json status = Json::object();
  EXPECT_EQ(SetCondition(&status, {"Running", kTrue, "Running", "all 3 pods are running"}, 4, kT0),
            ConditionChange::kTransition);
  EXPECT_EQ(status["conditions"], Json::parse(R"([{
    "type": "Running", "status": "True", "reason": "Running",
    "message": "all 3 pods are running", "observedGeneration": 4,
    "lastTransitionTime": "2027-01-15T08:00:00Z"}])"));
  EXPECT_TRUE(IsConditionTrue(status, "Running"));
  EXPECT_FALSE(IsConditionTrue(status, "Failed"));
  EXPECT_EQ(FindCondition(status, "Failed"), nullptr);
}

TEST(ConditionsTest, TransitionTimeMovesOnlyWhenStatusFlips) {
  Json status;
  SetCondition(&status, {"Running", kTrue, "Running", "a"}, 1, kT0);
  // Same everything: no change at all.
  EXPECT_EQ(SetCondition(&status, {"Running", kTrue, "Running", "a"}, 1, kT1),
            ConditionChange::kNone);
  // New message, reason or generation: updated, time kept.
  EXPECT_EQ(SetCondition(&status, {"Running", kTrue, "Running", "b"}, 2, kT1),
            ConditionChange::kUpdated);
  const Json* c = FindCondition(status, "Running");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["lastTransitionTime"], FormatKubeTime(kT0));
  EXPECT_EQ((*c)["message"], "b");
  EXPECT_EQ((*c)["observedGeneration"], 2);
  // Flip: time moves.
  EXPECT_EQ(SetCondition(&status, {"Running", kFalse, "GangRestart", "c"}, 2, kT2),
            ConditionChange::kTransition);
  c = FindCondition(status, "Running");
  EXPECT_EQ((*c)["lastTransitionTime"], FormatKubeTime(kT2));
  EXPECT_FALSE(IsConditionTrue(status, "Running"));
  // Still one entry of the type.
  EXPECT_EQ(status["conditions"].size(), 1u);
}

TEST(ConditionsTest, OrderIsKeptAndNewTypesAppended) {
  Json status;
  SetCondition(&status, {"Created", kTrue, "Created", ""}, 1, kT0);
  SetCondition(&status, {"Running", kTrue, "Running", ""}, 1, kT0);
  SetCondition(&status, {"Created", kTrue, "Created", "again"}, 1, kT1);
  ASSERT_EQ(status["conditions"].size(), 2u);
  EXPECT_EQ(status["conditions"][0]["type"], "Created");
  EXPECT_EQ(status["conditions"][1]["type"], "Running");
}

TEST(ConditionsTest, ToleratesMalformedStatus) {
  Json status = {{"conditions", "oops"}};
  EXPECT_EQ(FindCondition(status, "Running"), nullptr);
  EXPECT_EQ(SetCondition(&status, {"Running", kUnknown, "Probing", ""}, 0, kT0),
            ConditionChange::kTransition);
  EXPECT_EQ(status["conditions"].size(), 1u);
  // An entry without lastTransitionTime gets one.
  status["conditions"][0].erase("lastTransitionTime");
  EXPECT_EQ(SetCondition(&status, {"Running", kUnknown, "Probing", ""}, 0, kT1),
            ConditionChange::kTransition);
  EXPECT_EQ(status["conditions"][0]["lastTransitionTime"], FormatKubeTime(kT1));
}

}  // namespace
}  // namespace hptrain::reconcile
