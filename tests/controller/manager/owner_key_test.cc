#include "controller/manager/owner_key.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace hptrain::manager {
namespace {

using Json = nlohmann::json;

Json Object(Json metadata) {
  metadata["namespace"] = "team-a";
  return {{"metadata", metadata}};
}

TEST(OwnerJobKeyTest, TheControllerReferenceNamesTheJob) {
  Json pod = Object({{"name", "a-worker-0"},
                     {"labels", {{"hptrain.io/job", "other"}}},
                     {"ownerReferences",
                      {{{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"name", "rs"},
                        {"controller", true}},
                       {{"apiVersion", "hptrain.io/v1alpha1"}, {"kind", "TrainingJob"},
                        {"name", "a"}, {"uid", "u"}, {"controller", true}}}}});
  EXPECT_EQ(OwnerJobKey(pod), "team-a/a");
}

TEST(OwnerJobKeyTest, FallsBackToTheJobLabel) {
  // A reference that is not the controller's, or malformed, does not count.
  Json pod = Object({{"name", "b-ps-0"},
                     {"labels", {{"hptrain.io/job", "b"}}},
                     {"ownerReferences",
                      {{{"apiVersion", "hptrain.io/v1alpha1"}, {"kind", "TrainingJob"},
                        {"name", "x"}, {"controller", false}},
                       {{"apiVersion", "hptrain.io/v1alpha1"}, {"kind", "TrainingJob"},
                        {"name", "y"}, {"controller", "yes"}},
                       "garbage"}}});
  EXPECT_EQ(OwnerJobKey(pod), "team-a/b");
}

TEST(OwnerJobKeyTest, NothingNamesNoJob) {
  EXPECT_EQ(OwnerJobKey(Object({{"name", "x"}})), std::nullopt);
  EXPECT_EQ(OwnerJobKey(Json::object()), std::nullopt);
  EXPECT_EQ(OwnerJobKey(Json("not an object")), std::nullopt);
}

}  // namespace
}  // namespace hptrain::manager
