// Replays the recorded kube-apiserver v1.28.7 exchanges (shared/fixtures/kube): for each one the
// client issues the recorded request against a local server that answers with the recorded
// response, and the test checks both what the client sent (method, path, query, content type,
// body) and what it made of the answer.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/kube/api_error.h"
#include "controller/kube/client.h"
#include "tests/controller/kube/fake_server.h"
#include "tests/controller/kube/test_client.h"
#include "tests/controller/kube/fixtures.h"

namespace hptrain::kube {
namespace {

using ::hptrain::kube::testing::NewTestClient;

using ::hptrain::kube::testing::FakeServer;
using ::hptrain::kube::testing::Fixture;
using ::hptrain::kube::testing::LoadFixture;
using ::hptrain::kube::testing::RecordedRequest;

constexpr char kToken[] = "replay-token";

const Resource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                     "CustomResourceDefinition", false};
const Resource kEventsV1{"events.k8s.io", "v1", "events", "Event", true};

// Checks that `sent` is the request recorded in `fixture`.
void ExpectSameRequest(const Fixture& fixture, const RecordedRequest& sent) {
  SCOPED_TRACE(fixture.file);
  EXPECT_EQ(sent.method, fixture.method);
  EXPECT_EQ(sent.target, fixture.path);
  RecordedRequest recorded;
  size_t q = fixture.path.find('?');
  recorded.query = q == std::string::npos ? "" : fixture.path.substr(q + 1);
  EXPECT_EQ(sent.Params(), recorded.Params());
  std::string content_type = fixture.request_headers.value("Content-Type", "");
  EXPECT_EQ(sent.Header("Content-Type"), content_type);
  nlohmann::json expected_body = fixture.RequestJson();
  if (expected_body.is_null()) {
    EXPECT_TRUE(sent.body.empty()) << sent.body;
  } else {
    EXPECT_EQ(nlohmann::json::parse(sent.body, nullptr, false), expected_body);
  }
  EXPECT_EQ(sent.Header("Authorization"), absl::StrCat("Bearer ", kToken));
  EXPECT_EQ(sent.Header("User-Agent").rfind("hptrain-controller/", 0), 0u)
      << sent.Header("User-Agent");
}

class KubeClientFixtureTest : public ::testing::Test {
 protected:
  // Serves fixture `number` for every request, runs `call`, and checks the one request sent.
  void Replay(const std::string& number, const std::function<void(Client&, const Fixture&)>& call) {
    absl::StatusOr<Fixture> fixture = LoadFixture(number);
    ASSERT_TRUE(fixture.ok()) << fixture.status();
    FakeServer server(testing::ReplayHandler(*fixture));
    ASSERT_TRUE(server.Start().ok());
    std::unique_ptr<Client> client = NewTestClient(server.url(), kToken);
    ASSERT_NE(client, nullptr);
    call(*client, *fixture);
    server.Stop();
    std::vector<RecordedRequest> sent = server.requests();
    ASSERT_EQ(sent.size(), 1u) << fixture->file;
    ExpectSameRequest(*fixture, sent[0]);
  }

  void SetUp() override { HPTRAIN_REQUIRE_FIXTURES(); }
};

TEST_F(KubeClientFixtureTest, VersionAndDiscovery) {
  Replay("01", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> v = c.Raw("GET", "/version");
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ((*v)["gitVersion"], "v1.28.7");
  });
  Replay("02", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> api = c.Raw("GET", "/api");
    ASSERT_TRUE(api.ok()) << api.status();
    EXPECT_EQ((*api)["versions"], nlohmann::json::array({"v1"}));
  });
  Replay("05", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> apis = c.Raw("GET", "/apis");
    ASSERT_TRUE(apis.ok()) << apis.status();
    EXPECT_EQ((*apis)["kind"], "APIGroupList");
  });
  Replay("06", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> group = c.Raw("GET", "/apis/hptrain.io/v1alpha1");
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_EQ((*group)["resources"][0]["name"], "trainingjobs");
  });
}

TEST_F(KubeClientFixtureTest, CustomResourceDefinition) {
  Replay("03", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> crd = c.Create(kCrds, "", f.RequestJson());
    ASSERT_TRUE(crd.ok()) << crd.status();
    EXPECT_EQ(NameOf(*crd), "trainingjobs.hptrain.io");
  });
  Replay("04", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> crd = c.Get(kCrds, "", "trainingjobs.hptrain.io");
    ASSERT_TRUE(crd.ok()) << crd.status();
    bool established = false;
    for (const nlohmann::json& condition : (*crd)["status"]["conditions"]) {
      if (condition["type"] == "Established") established = condition["status"] == "True";
    }
    EXPECT_TRUE(established);
  });
}

TEST_F(KubeClientFixtureTest, CreateGetAndErrors) {
  Replay("08", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job = c.Create(TrainingJobs(), "fixtures", f.RequestJson());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(ResourceVersionOf(*job), "222");
    EXPECT_EQ(UidOf(*job), "1ef09602-7bd7-4da6-a3bf-4e507c0ae9ec");
  });
  Replay("09", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job = c.Create(TrainingJobs(), "fixtures", f.RequestJson());
    ASSERT_FALSE(job.ok());
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(IsInvalid(job.status()));
    std::optional<ApiError> error = GetApiError(job.status());
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->reason, "Invalid");
    ASSERT_EQ(error->causes.size(), 2u);
    EXPECT_EQ(error->causes[0].field, "spec.strategy.type");
    EXPECT_EQ(error->causes[0].reason, "FieldValueNotSupported");
    EXPECT_EQ(error->causes[1].field, "spec.workerGroups[0].replicas");
    EXPECT_EQ(error->causes[1].reason, "FieldValueInvalid");
    EXPECT_EQ(std::string(job.status().message()).find('\n'), std::string::npos);
  });
  Replay("10", [](Client& c, const Fixture& f) {
    // The namespace comes from the object when none is given.
    absl::StatusOr<nlohmann::json> job = c.Create(TrainingJobs(), "", f.RequestJson());
    ASSERT_FALSE(job.ok());
    EXPECT_TRUE(kube::IsAlreadyExists(job.status()));
    EXPECT_EQ(job.status().message(),
              "trainingjobs.hptrain.io \"resnet\" already exists (409 AlreadyExists)");
  });
  Replay("11", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job = c.Create(TrainingJobs(), "fixtures", f.RequestJson());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(NameOf(*job), "vgg");
  });
  Replay("12", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> job = c.Get(TrainingJobs(), "fixtures", "resnet");
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ((*job)["spec"]["globalBatchSize"], 128);
  });
  Replay("13", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> job = c.Get(TrainingJobs(), "fixtures", "nope");
    ASSERT_FALSE(job.ok());
    EXPECT_TRUE(kube::IsNotFound(job.status()));
    EXPECT_EQ(job.status().message(), "trainingjobs.hptrain.io \"nope\" not found (404 NotFound)");
  });
}

TEST_F(KubeClientFixtureTest, ListPagesAndLabelSelector) {
  Replay("14", [](Client& c, const Fixture&) {
    ListOptions options;
    options.limit = 1;
    absl::StatusOr<ObjectList> page = c.List(TrainingJobs(), "fixtures", options);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_EQ(page->items.size(), 1u);
    EXPECT_EQ(NameOf(page->items[0]), "resnet");
    EXPECT_FALSE(page->continue_token.empty());
    EXPECT_EQ(page->remaining_item_count, 1);
    EXPECT_EQ(page->resource_version, "223");
  });
  Replay("16", [](Client& c, const Fixture&) {
    ListOptions options;
    options.label_selector = "team=vision";
    absl::StatusOr<ObjectList> list = c.List(TrainingJobs(), "fixtures", options);
    ASSERT_TRUE(list.ok()) << list.status();
    ASSERT_EQ(list->items.size(), 2u);
    EXPECT_EQ(NameOf(list->items[1]), "vgg");
    EXPECT_TRUE(list->continue_token.empty());
  });
}

TEST_F(KubeClientFixtureTest, ListAllFollowsContinue) {
  absl::StatusOr<Fixture> page1 = LoadFixture("14");
  absl::StatusOr<Fixture> page2 = LoadFixture("15");
  ASSERT_TRUE(page1.ok() && page2.ok());
  FakeServer server([&](const RecordedRequest& request, testing::Connection& connection) {
    connection.Write(request.target == page2->path ? page2->ResponseBytes()
                                                   : page1->ResponseBytes());
  });
  ASSERT_TRUE(server.Start().ok());
  std::unique_ptr<Client> client = NewTestClient(server.url(), kToken);
  ListOptions options;
  options.limit = 1;
  absl::StatusOr<ObjectList> all = client->ListAll(TrainingJobs(), "fixtures", options);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->items.size(), 2u);
  EXPECT_EQ(NameOf(all->items[0]), "resnet");
  EXPECT_EQ(NameOf(all->items[1]), "vgg");
  EXPECT_EQ(all->resource_version, "223");
  server.Stop();
  std::vector<RecordedRequest> sent = server.requests();
  ASSERT_EQ(sent.size(), 2u);
  ExpectSameRequest(*page1, sent[0]);
  ExpectSameRequest(*page2, sent[1]);
}

TEST_F(KubeClientFixtureTest, UpdateAndOptimisticConcurrency) {
  Replay("17", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job = c.Update(TrainingJobs(), f.RequestJson());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(ResourceVersionOf(*job), "224");
    EXPECT_EQ((*job)["metadata"]["generation"], 2);
  });
  Replay("18", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job = c.Update(TrainingJobs(), f.RequestJson());
    ASSERT_FALSE(job.ok());
    EXPECT_TRUE(IsConflict(job.status()));
    EXPECT_EQ(job.status().code(), absl::StatusCode::kAborted);
    EXPECT_NE(job.status().message().find("(409 Conflict)"), std::string::npos);
  });
}

TEST_F(KubeClientFixtureTest, PatchesAndStatus) {
  Replay("19", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job =
        c.Patch(TrainingJobs(), "fixtures", "resnet", PatchType::kMerge, f.RequestJson());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ((*job)["spec"]["globalBatchSize"], 1024);
    EXPECT_EQ((*job)["metadata"]["generation"], 3);
  });
  Replay("20", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job =
        c.PatchStatus(TrainingJobs(), "fixtures", "resnet", PatchType::kMerge, f.RequestJson());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ((*job)["status"]["phase"], "Running");
    EXPECT_EQ((*job)["metadata"]["generation"], 3);  // /status leaves generation alone
  });
  Replay("21", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job =
        c.Patch(TrainingJobs(), "fixtures", "resnet", PatchType::kMerge, f.RequestJson());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ((*job)["status"]["phase"], "Running");  // status via the main resource: dropped
  });
  Replay("25", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job =
        c.Patch(TrainingJobs(), "fixtures", "vgg", PatchType::kJson, f.RequestJson());
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ((*job)["spec"]["workerGroups"][0]["replicas"], 8);
  });
  Replay("28", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> pod =
        c.PatchStatus(Pods(), "fixtures", "resnet-worker-0", PatchType::kMerge, f.RequestJson());
    ASSERT_TRUE(pod.ok()) << pod.status();
    EXPECT_EQ((*pod)["status"]["phase"], "Failed");
  });
}

TEST_F(KubeClientFixtureTest, ScaleSubresourceOnAnArrayPathIsAnInternalError) {
  Replay("22", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> scale = c.Get(TrainingJobs(), "fixtures", "resnet", "scale");
    ASSERT_FALSE(scale.ok());
    EXPECT_EQ(scale.status().code(), absl::StatusCode::kInternal);
    std::optional<ApiError> error = GetApiError(scale.status());
    ASSERT_TRUE(error.has_value());
    ASSERT_EQ(error->causes.size(), 1u);
    EXPECT_NE(error->causes[0].message.find("does not exist"), std::string::npos);
  });
}

TEST_F(KubeClientFixtureTest, ServerSideApply) {
  Replay("23", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job =
        c.Apply(TrainingJobs(), f.RequestJson(), "hptrain-controller");
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ((*job)["metadata"]["managedFields"][0]["manager"], "hptrain-controller");
    EXPECT_EQ((*job)["metadata"]["managedFields"][0]["operation"], "Apply");
  });
  Replay("24", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> job = c.Apply(TrainingJobs(), f.RequestJson(), "someone-else");
    ASSERT_FALSE(job.ok());
    EXPECT_TRUE(IsConflict(job.status()));
    std::optional<ApiError> error = GetApiError(job.status());
    ASSERT_TRUE(error.has_value());
    ASSERT_EQ(error->causes.size(), 1u);
    EXPECT_EQ(error->causes[0].reason, "FieldManagerConflict");
    EXPECT_EQ(error->causes[0].field, ".spec.globalBatchSize");
  });
}

TEST_F(KubeClientFixtureTest, OwnedObjects) {
  Replay("26", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> pod = c.Create(Pods(), "fixtures", f.RequestJson());
    ASSERT_TRUE(pod.ok()) << pod.status();
    EXPECT_EQ((*pod)["metadata"]["ownerReferences"][0]["controller"], true);
  });
  Replay("27", [](Client& c, const Fixture&) {
    ListOptions options;
    options.label_selector = "hptrain.io/job=resnet";
    absl::StatusOr<ObjectList> pods = c.List(Pods(), "fixtures", options);
    ASSERT_TRUE(pods.ok()) << pods.status();
    ASSERT_EQ(pods->items.size(), 1u);
    // Core lists omit kind/apiVersion on items; the client fills them in.
    EXPECT_EQ(pods->items[0]["kind"], "Pod");
    EXPECT_EQ(pods->items[0]["apiVersion"], "v1");
    EXPECT_EQ(pods->resource_version, "229");
  });
  Replay("29", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> service = c.Create(Services(), "fixtures", f.RequestJson());
    ASSERT_TRUE(service.ok()) << service.status();
    EXPECT_EQ((*service)["spec"]["clusterIP"], "None");
  });
  Replay("30", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> secret = c.Create(Secrets(), "fixtures", f.RequestJson());
    ASSERT_TRUE(secret.ok()) << secret.status();
    EXPECT_EQ((*secret)["data"]["token"], "bm90LWEtcmVhbC10b2tlbg==");
  });
  Replay("31", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> event = c.Create(kEventsV1, "fixtures", f.RequestJson());
    ASSERT_TRUE(event.ok()) << event.status();
    EXPECT_EQ((*event)["reason"], "Rebalanced");
  });
}

TEST_F(KubeClientFixtureTest, Leases) {
  Replay("32", [](Client& c, const Fixture&) {
    absl::StatusOr<nlohmann::json> lease = c.Get(Leases(), "fixtures", "hptrain-controller");
    EXPECT_TRUE(kube::IsNotFound(lease.status()));
  });
  Replay("33", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> lease = c.Create(Leases(), "fixtures", f.RequestJson());
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ((*lease)["spec"]["holderIdentity"], "controller-a");
  });
  Replay("34", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> lease = c.Update(Leases(), f.RequestJson());
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(ResourceVersionOf(*lease), "237");
  });
  Replay("35", [](Client& c, const Fixture& f) {
    absl::StatusOr<nlohmann::json> lease = c.Update(Leases(), f.RequestJson());
    ASSERT_FALSE(lease.ok());
    EXPECT_TRUE(IsConflict(lease.status()));
  });
}

TEST_F(KubeClientFixtureTest, DeleteForeground) {
  Replay("37", [](Client& c, const Fixture&) {
    DeleteOptions options;
    options.propagation_policy = PropagationPolicy::kForeground;
    absl::StatusOr<nlohmann::json> job = c.Delete(TrainingJobs(), "fixtures", "vgg", options);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(IsBeingDeleted(*job));
    EXPECT_EQ((*job)["metadata"]["finalizers"], nlohmann::json::array({"foregroundDeletion"}));
  });
}

TEST_F(KubeClientFixtureTest, AuthenticationAndAuthorizationFailures) {
  Replay("40", [](Client& c, const Fixture&) {
    absl::StatusOr<ObjectList> namespaces = c.List(Namespaces(), "");
    ASSERT_FALSE(namespaces.ok());
    EXPECT_EQ(namespaces.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(namespaces.status().message(), "Unauthorized (401 Unauthorized)");
  });
  Replay("41", [](Client& c, const Fixture& f) {
    nlohmann::json body = f.RequestJson();
    absl::StatusOr<nlohmann::json> token =
        c.Raw("POST", "/api/v1/namespaces/fixtures/serviceaccounts/nobody/token", &body);
    ASSERT_TRUE(token.ok()) << token.status();
    EXPECT_EQ((*token)["kind"], "TokenRequest");
  });
  Replay("42", [](Client& c, const Fixture&) {
    absl::StatusOr<ObjectList> pods = c.List(Pods(), "fixtures");
    ASSERT_FALSE(pods.ok());
    EXPECT_EQ(pods.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_NE(pods.status().message().find("cannot list resource \"pods\""), std::string::npos);
    EXPECT_NE(pods.status().message().find("(403 Forbidden)"), std::string::npos);
  });
}

}  // namespace
}  // namespace hptrain::kube
