// Request building blocks: resource paths, query encoding, timestamps, object metadata.
#include <gtest/gtest.h>

#include "controller/kube/object_meta.h"
#include "controller/kube/query.h"
#include "controller/kube/resource.h"
#include "controller/kube/timestamps.h"

namespace hptrain::kube {
namespace {

TEST(KubeResourceTest, PathsForCoreNamedAndClusterScopedResources) {
  EXPECT_EQ(Pods().CollectionPath("fixtures"), "/api/v1/namespaces/fixtures/pods");
  EXPECT_EQ(Pods().CollectionPath(""), "/api/v1/pods");
  EXPECT_EQ(Pods().ObjectPath("fixtures", "resnet-worker-0", "status"),
            "/api/v1/namespaces/fixtures/pods/resnet-worker-0/status");
  EXPECT_EQ(TrainingJobs().ObjectPath("fixtures", "resnet"),
            "/apis/hptrain.io/v1alpha1/namespaces/fixtures/trainingjobs/resnet");
  EXPECT_EQ(TrainingJobs().ApiVersion(), "hptrain.io/v1alpha1");
  EXPECT_EQ(Leases().CollectionPath("ns"), "/apis/coordination.k8s.io/v1/namespaces/ns/leases");
  EXPECT_EQ(Namespaces().CollectionPath("ignored"), "/api/v1/namespaces");
  EXPECT_EQ(Events().ApiVersion(), "v1");
}

TEST(KubeQueryTest, EncodesValuesButKeepsSlashes) {
  Query query;
  query.Add("labelSelector", "hptrain.io/job=resnet,role in (ps, worker)").Add("limit", 2);
  query.AddIfSet("continue", "");
  EXPECT_EQ(query.Encoded(),
            "?labelSelector=hptrain.io/job%3Dresnet%2Crole%20in%20%28ps%2C%20worker%29&limit=2");
  EXPECT_EQ(Query().Encoded(), "");
  EXPECT_EQ(EncodeQueryValue("a+b&c=d~"), "a%2Bb%26c%3Dd~");
}

TEST(KubeTimestampsTest, FormatsAndParsesKubernetesTimes) {
  absl::Time t = absl::FromUnixSeconds(1795054430) + absl::Microseconds(123456);
  EXPECT_EQ(FormatKubeTime(t), "2026-11-19T02:13:50Z");
  EXPECT_EQ(FormatMicroTime(t), "2026-11-19T02:13:50.123456Z");
  absl::StatusOr<absl::Time> parsed = ParseKubeTime("2026-11-19T02:13:50.123456Z");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, t);
  EXPECT_FALSE(ParseKubeTime("yesterday").ok());
}

TEST(KubeObjectMetaTest, ReadsMetadataTolerantly) {
  nlohmann::json pod = {{"metadata",
                         {{"name", "w-0"},
                          {"namespace", "ns"},
                          {"uid", "u1"},
                          {"resourceVersion", "7"},
                          {"labels", {{"hptrain.io/job", "j"}, {"bad", 3}}}}}};
  EXPECT_EQ(KeyOf(pod), "ns/w-0");
  EXPECT_EQ(UidOf(pod), "u1");
  EXPECT_EQ(ResourceVersionOf(pod), "7");
  EXPECT_EQ(LabelsOf(pod).size(), 1u);
  EXPECT_FALSE(IsBeingDeleted(pod));
  EXPECT_EQ(NameOf(nlohmann::json("not an object")), "");
  EXPECT_EQ(KeyOf(nlohmann::json{{"metadata", {{"name", "cluster-thing"}}}}), "cluster-thing");
  std::string ns, name;
  SplitKey("ns/w-0", &ns, &name);
  EXPECT_EQ(ns, "ns");
  EXPECT_EQ(name, "w-0");
  SplitKey("solo", &ns, &name);
  EXPECT_EQ(ns, "");
  EXPECT_EQ(name, "solo");
}

}  // namespace
}  // namespace hptrain::kube
