// Object semantics of the API server double over real HTTP: resourceVersions, metadata,
// optimistic concurrency, generation and status-subresource rules, patches, server-side apply,
// validation, lists (selectors, pagination), scale, finalizers and discovery.
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/apiserver/openapi_schema.h"
#include "tests/controller/apiserver/test_objects.h"

namespace hptrain::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

uint64_t Rv(const nlohmann::json& object) {
  uint64_t rv = 0;
  EXPECT_TRUE(absl::SimpleAtoi(object["metadata"].value("resourceVersion", ""), &rv)) << object;
  return rv;
}

std::vector<std::string> Names(const nlohmann::json& list) {
  std::vector<std::string> names;
  for (const nlohmann::json& item : list["items"]) names.push_back(item["metadata"]["name"]);
  return names;
}

using ApiServerCrudTest = ApiServerTest;

TEST_F(ApiServerCrudTest, ResourceVersionIsOneGlobalIncreasingCounter) {
  nlohmann::json job = MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  nlohmann::json pod = MustCreate(PodPath("ns"), Pod("p", "ns"));
  EXPECT_GT(Rv(pod), Rv(job));
  HttpResult got = client_->Get(TjPath("ns", "a"));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(Rv(got.body), Rv(job));
  HttpResult patched =
      client_->Patch(PodPath("ns", "p"), {{"metadata", {{"labels", {{"x", "1"}}}}}},
                     "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.text;
  EXPECT_GT(Rv(patched.body), Rv(pod));
  EXPECT_EQ(server_->resource_version(), Rv(patched.body));
}

TEST_F(ApiServerCrudTest, CreateFillsServerMetadata) {
  nlohmann::json job = MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  const nlohmann::json& meta = job["metadata"];
  EXPECT_EQ(meta["namespace"], "ns");
  EXPECT_EQ(meta["uid"].get<std::string>().size(), 36u);
  EXPECT_TRUE(meta.contains("creationTimestamp"));
  EXPECT_EQ(meta["generation"], 1);
  EXPECT_EQ(meta["managedFields"][0]["operation"], "Update");
  // Pods carry no generation and start Pending.
  nlohmann::json pod = MustCreate(PodPath("ns"), Pod("p", "ns"));
  EXPECT_FALSE(pod["metadata"].contains("generation"));
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_EQ(pod["spec"]["dnsPolicy"], "ClusterFirst");
}

TEST_F(ApiServerCrudTest, GenerateNameAddsRandomSuffix) {
  nlohmann::json pod = Pod("", "ns");
  pod["metadata"].erase("name");
  pod["metadata"]["generateName"] = "worker-";
  nlohmann::json a = MustCreate(PodPath("ns"), pod);
  nlohmann::json b = MustCreate(PodPath("ns"), pod);
  std::string name = a["metadata"]["name"];
  EXPECT_EQ(name.rfind("worker-", 0), 0u);
  EXPECT_EQ(name.size(), std::string("worker-").size() + 5);
  EXPECT_NE(a["metadata"]["name"], b["metadata"]["name"]);
}

TEST_F(ApiServerCrudTest, DuplicateCreateIsAlreadyExists) {
  MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  HttpResult again = client_->Post(TjPath("ns"), TrainingJob("a", "ns"));
  ASSERT_EQ(again.status, 409);
  EXPECT_EQ(again.body["reason"], "AlreadyExists");
  EXPECT_EQ(again.body["message"], "trainingjobs.hptrain.io \"a\" already exists");
  EXPECT_EQ(again.body["details"],
            nlohmann::json({{"name", "a"}, {"group", "hptrain.io"}, {"kind", "trainingjobs"}}));
}

TEST_F(ApiServerCrudTest, GetMissingIsNotFoundStatus) {
  HttpResult missing = client_->Get(PodPath("ns", "nope"));
  ASSERT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["kind"], "Status");
  EXPECT_EQ(missing.body["status"], "Failure");
  EXPECT_EQ(missing.body["reason"], "NotFound");
  EXPECT_EQ(missing.body["code"], 404);
  EXPECT_EQ(missing.body["message"], "pods \"nope\" not found");
  EXPECT_FALSE(missing.body["details"].contains("group"));  // core group: omitted
}

TEST_F(ApiServerCrudTest, StaleResourceVersionIsConflictAndAbsentOneIsUnconditional) {
  nlohmann::json job = MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  nlohmann::json first = job;
  first["spec"]["globalBatchSize"] = 256;
  HttpResult updated = client_->Put(TjPath("ns", "a"), first);
  ASSERT_EQ(updated.status, 200) << updated.text;

  nlohmann::json stale = job;  // still carries the creation's resourceVersion
  stale["spec"]["globalBatchSize"] = 64;
  HttpResult conflict = client_->Put(TjPath("ns", "a"), stale);
  ASSERT_EQ(conflict.status, 409);
  EXPECT_EQ(conflict.body["reason"], "Conflict");
  EXPECT_EQ(conflict.body["message"],
            "Operation cannot be fulfilled on trainingjobs.hptrain.io \"a\": the object has been "
            "modified; please apply your changes to the latest version and try again");

  stale["metadata"].erase("resourceVersion");
  HttpResult unconditional = client_->Put(TjPath("ns", "a"), stale);
  ASSERT_EQ(unconditional.status, 200) << unconditional.text;
  EXPECT_EQ(unconditional.body["spec"]["globalBatchSize"], 64);
}

TEST_F(ApiServerCrudTest, GenerationBumpsOnlyOnSpecChanges) {
  MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  auto merge = [&](const std::string& path, const nlohmann::json& patch) {
    HttpResult result = client_->Patch(path, patch, "application/merge-patch+json");
    EXPECT_EQ(result.status, 200) << result.text;
    return result.body;
  };
  EXPECT_EQ(merge(TjPath("ns", "a"),
                  {{"metadata", {{"labels", {{"x", "y"}}}}}})["metadata"]["generation"],
            1);
  EXPECT_EQ(merge(TjPath("ns", "a") + "/status",
                  {{"status", {{"phase", "Running"}}}})["metadata"]["generation"],
            1);
  EXPECT_EQ(
      merge(TjPath("ns", "a"), {{"spec", {{"globalBatchSize", 512}}}})["metadata"]["generation"],
      2);
}

TEST_F(ApiServerCrudTest, StatusSubresourceRules) {
  nlohmann::json sent = TrainingJob("a", "ns");
  sent["status"] = {{"phase", "Hacked"}};
  nlohmann::json job = MustCreate(TjPath("ns"), sent);
  EXPECT_FALSE(job.contains("status")) << "status on create is dropped";

  HttpResult status =
      client_->Patch(TjPath("ns", "a") + "/status",
                     {{"status", {{"phase", "Running"}}}, {"spec", {{"globalBatchSize", 1}}}},
                     "application/merge-patch+json");
  ASSERT_EQ(status.status, 200) << status.text;
  EXPECT_EQ(status.body["status"]["phase"], "Running");
  EXPECT_EQ(status.body["spec"]["globalBatchSize"], 128) << "spec via /status is dropped";

  HttpResult main = client_->Patch(TjPath("ns", "a"), {{"status", {{"phase", "Hacked"}}}},
                                   "application/merge-patch+json");
  ASSERT_EQ(main.status, 200) << main.text;
  EXPECT_EQ(main.body["status"]["phase"], "Running") << "status via main resource is dropped";
  EXPECT_EQ(Rv(main.body), Rv(status.body)) << "a no-op write keeps the resourceVersion";

  nlohmann::json put = status.body;
  put["status"]["phase"] = "Succeeded";
  HttpResult put_status = client_->Put(TjPath("ns", "a") + "/status", put);
  ASSERT_EQ(put_status.status, 200) << put_status.text;
  EXPECT_EQ(put_status.body["status"]["phase"], "Succeeded");
  EXPECT_EQ(put_status.body["metadata"]["managedFields"].back()["subresource"], "status");
}

TEST_F(ApiServerCrudTest, PatchFormats) {
  MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  HttpResult json_patch = client_->Patch(
      TjPath("ns", "a"),
      nlohmann::json::array({{{"op", "replace"}, {"path", "/spec/workers/replicas"}, {"value", 8}},
                             {{"op", "add"}, {"path", "/metadata/labels/tier"}, {"value", "a"}}}),
      "application/json-patch+json");
  ASSERT_EQ(json_patch.status, 200) << json_patch.text;
  EXPECT_EQ(json_patch.body["spec"]["workers"]["replicas"], 8);
  EXPECT_EQ(json_patch.body["metadata"]["labels"]["tier"], "a");

  HttpResult failed_test = client_->Patch(
      TjPath("ns", "a"),
      nlohmann::json::array({{{"op", "test"}, {"path", "/spec/globalBatchSize"}, {"value", 1}}}),
      "application/json-patch+json");
  EXPECT_EQ(failed_test.status, 422) << failed_test.text;

  // Strategic merge patch acts as a merge patch: null deletes, lists are replaced.
  HttpResult strategic =
      client_->Patch(TjPath("ns", "a"), {{"metadata", {{"labels", {{"tier", nullptr}}}}}},
                     "application/strategic-merge-patch+json");
  ASSERT_EQ(strategic.status, 200) << strategic.text;
  EXPECT_FALSE(strategic.body["metadata"]["labels"].contains("tier"));

  HttpResult unknown = client_->Patch(TjPath("ns", "a"), {{"spec", nullptr}}, "text/plain");
  EXPECT_EQ(unknown.status, 415);
  EXPECT_EQ(unknown.body["reason"], "UnsupportedMediaType");
}

TEST_F(ApiServerCrudTest, ServerSideApplyCreatesMergesAndDetectsConflicts) {
  const std::string path = TjPath("ns", "applied") + "?fieldManager=hptrain-controller";
  nlohmann::json config = TrainingJob("applied", "ns");
  HttpResult created = client_->Patch(path, config, "application/apply-patch+yaml");
  ASSERT_EQ(created.status, 201) << created.text;
  EXPECT_EQ(created.body["metadata"]["managedFields"][0]["operation"], "Apply");
  EXPECT_EQ(created.body["metadata"]["managedFields"][0]["manager"], "hptrain-controller");

  HttpResult again = client_->Patch(path, config, "application/apply-patch+yaml");
  ASSERT_EQ(again.status, 200) << again.text;
  EXPECT_EQ(Rv(again.body), Rv(created.body)) << "re-applying the same config changes nothing";

  // YAML bodies work too.
  std::string yaml =
      "apiVersion: hptrain.io/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: applied\n"
      "spec:\n  globalBatchSize: 7\n";
  HttpResult conflict =
      client_->Send("PATCH", TjPath("ns", "applied") + "?fieldManager=someone-else", yaml,
                    "application/apply-patch+yaml");
  ASSERT_EQ(conflict.status, 409) << conflict.text;
  EXPECT_EQ(conflict.body["message"],
            "Apply failed with 1 conflict: conflict with \"hptrain-controller\": "
            ".spec.globalBatchSize");
  EXPECT_EQ(conflict.body["details"]["causes"][0],
            nlohmann::json({{"reason", "FieldManagerConflict"},
                            {"message", "conflict with \"hptrain-controller\""},
                            {"field", ".spec.globalBatchSize"}}));

  HttpResult forced =
      client_->Send("PATCH", TjPath("ns", "applied") + "?fieldManager=someone-else&force=true",
                    yaml, "application/apply-patch+yaml");
  ASSERT_EQ(forced.status, 200) << forced.text;
  EXPECT_EQ(forced.body["spec"]["globalBatchSize"], 7);
  EXPECT_EQ(forced.body["metadata"]["generation"], 2);

  // The first manager lost globalBatchSize; omitting strategy from its config removes it.
  nlohmann::json smaller = config;
  smaller["spec"].erase("strategy");
  smaller["spec"].erase("globalBatchSize");
  HttpResult shrunk = client_->Patch(path, smaller, "application/apply-patch+yaml");
  ASSERT_EQ(shrunk.status, 200) << shrunk.text;
  EXPECT_FALSE(shrunk.body["spec"].contains("strategy"));
  EXPECT_EQ(shrunk.body["spec"]["globalBatchSize"], 7) << "still owned by someone-else";

  HttpResult no_manager =
      client_->Patch(TjPath("ns", "applied"), config, "application/apply-patch+yaml");
  EXPECT_EQ(no_manager.status, 400);
}

TEST_F(ApiServerCrudTest, NameValidationAndValidatorHook) {
  HttpResult bad_name = client_->Post(PodPath("ns"), Pod("Bad_Name", "ns"));
  ASSERT_EQ(bad_name.status, 422) << bad_name.text;
  EXPECT_EQ(bad_name.body["reason"], "Invalid");
  EXPECT_EQ(bad_name.body["details"]["kind"], "Pod");
  EXPECT_EQ(bad_name.body["details"]["causes"][0]["field"], "metadata.name");

  server_->AddValidator("trainingjobs.hptrain.io", [](const nlohmann::json& object,
                                                      const nlohmann::json&) {
    std::vector<Cause> causes;
    if (object["spec"]["workers"].value("replicas", 0) < 1) {
      causes.push_back({"FieldValueInvalid", "Invalid value: 0: too few", "spec.workers.replicas"});
    }
    return causes;
  });
  HttpResult invalid = client_->Post(TjPath("ns"), TrainingJob("a", "ns", 0));
  ASSERT_EQ(invalid.status, 422) << invalid.text;
  EXPECT_EQ(invalid.body["message"],
            "TrainingJob.hptrain.io \"a\" is invalid: spec.workers.replicas: Invalid value: 0: "
            "too few");
  EXPECT_EQ(client_->Post(TjPath("ns"), TrainingJob("a", "ns", 1)).status, 201);
}

TEST_F(ApiServerCrudTest, PostedCrdServesItsTypeWithSchemaPruningAndValidation) {
  nlohmann::json schema = {{"type", "object"},
                           {"properties",
                            {{"spec",
                              {{"type", "object"},
                               {"required", {"size"}},
                               {"properties",
                                {{"size", {{"type", "integer"}, {"minimum", 1}}},
                                 {"mode",
                                  {{"type", "string"},
                                   {"enum", nlohmann::json::array({"fast", "slow"})},
                                   {"default", "fast"}}}}}}}}}};
  nlohmann::json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "widgets.example.com"}}},
      {"spec",
       {{"group", "example.com"},
        {"scope", "Namespaced"},
        {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
        {"versions",
         {{{"name", "v1"},
           {"served", true},
           {"storage", true},
           {"subresources", {{"status", nlohmann::json::object()}}},
           {"schema", {{"openAPIV3Schema", schema}}}}}}}}};
  MustCreate("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  EXPECT_TRUE(server_->WaitFor(
      [&] {
        auto stored = server_->Get("customresourcedefinitions.apiextensions.k8s.io", "",
                                   "widgets.example.com");
        return stored.ok() && (*stored)["status"]["conditions"].is_array();
      },
      absl::Seconds(5)));

  const std::string path = "/apis/example.com/v1/namespaces/ns/widgets";
  nlohmann::json widget = {{"apiVersion", "example.com/v1"},
                           {"kind", "Widget"},
                           {"metadata", {{"name", "w"}}},
                           {"spec", {{"size", 0}, {"unknown", true}}}};
  HttpResult invalid = client_->Post(path, widget);
  ASSERT_EQ(invalid.status, 422) << invalid.text;
  EXPECT_EQ(invalid.body["details"]["causes"][0]["message"],
            "Invalid value: 0: spec.size in body should be greater than or equal to 1");
  widget["spec"]["size"] = 2;
  nlohmann::json created = MustCreate(path, widget);
  EXPECT_FALSE(created["spec"].contains("unknown")) << "unknown fields are pruned";
  EXPECT_EQ(created["spec"]["mode"], "fast") << "defaults are applied";
  EXPECT_EQ(client_->Get("/apis/example.com/v1").status, 200);
}

TEST_F(ApiServerCrudTest, ListWithLabelAndFieldSelectors) {
  MustCreate(PodPath("ns"), Pod("a", "ns", {{"role", "worker"}, {"job", "x"}}));
  MustCreate(PodPath("ns"), Pod("b", "ns", {{"role", "ps"}, {"job", "x"}}));
  MustCreate(PodPath("ns"), Pod("c", "ns", {{"role", "worker"}}));
  MustCreate(PodPath("other"), Pod("d", "other", {{"role", "worker"}, {"job", "y"}}));
  auto list = [&](const std::string& query) {
    HttpResult result = client_->Get(PodPath("ns") + "?" + query);
    EXPECT_EQ(result.status, 200) << result.text;
    return Names(result.body);
  };
  EXPECT_THAT(list("labelSelector=role%3Dworker"), ElementsAre("a", "c"));
  EXPECT_THAT(list("labelSelector=role%3D%3Dworker,job"), ElementsAre("a"));
  EXPECT_THAT(list("labelSelector=role!%3Dworker"), ElementsAre("b"));
  EXPECT_THAT(list("labelSelector=role%20in%20(ps,x)"), ElementsAre("b"));
  EXPECT_THAT(list("labelSelector=role%20notin%20(ps)"), ElementsAre("a", "c"));
  EXPECT_THAT(list("labelSelector=!job"), ElementsAre("c"));
  EXPECT_THAT(list("fieldSelector=metadata.name%3Db"), ElementsAre("b"));
  ASSERT_TRUE(server_->SetPodPhase("ns", "c", "Running").ok());
  EXPECT_THAT(list("fieldSelector=status.phase%3DRunning"), ElementsAre("c"));
  EXPECT_THAT(list("fieldSelector=status.phase!%3DRunning,metadata.name!%3Da"), ElementsAre("b"));
  EXPECT_EQ(client_->Get(PodPath("ns") + "?fieldSelector=spec.image%3Dx").status, 400);

  HttpResult all = client_->Get("/api/v1/pods?labelSelector=role%3Dworker");
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(all.body["kind"], "PodList");
  EXPECT_THAT(Names(all.body), ElementsAre("a", "c", "d"));
  EXPECT_FALSE(all.body["metadata"].contains("continue")) << "built-in lists omit it";
  EXPECT_EQ(server_->List("pods", "", "job").size(), 3u);
}

TEST_F(ApiServerCrudTest, PaginationIsConsistentWithTheFirstPage) {
  for (const char* name : {"a", "b", "c", "d", "e"})
    MustCreate(TjPath("ns"), TrainingJob(name, "ns"));
  HttpResult page1 = client_->Get(TjPath("ns") + "?limit=2");
  ASSERT_EQ(page1.status, 200);
  EXPECT_THAT(Names(page1.body), ElementsAre("a", "b"));
  EXPECT_EQ(page1.body["metadata"]["remainingItemCount"], 3);
  std::string token = page1.body["metadata"]["continue"];
  ASSERT_FALSE(token.empty());
  std::string list_rv = page1.body["metadata"]["resourceVersion"];

  // Changes after the first page do not show up in later pages.
  MustCreate(TjPath("ns"), TrainingJob("bb", "ns"));
  ASSERT_EQ(client_->Delete(TjPath("ns", "d")).status, 200);

  HttpResult page2 = client_->Get(TjPath("ns") + "?limit=2&continue=" + token);
  ASSERT_EQ(page2.status, 200) << page2.text;
  EXPECT_THAT(Names(page2.body), ElementsAre("c", "d"));
  EXPECT_EQ(page2.body["metadata"]["resourceVersion"], list_rv);
  HttpResult page3 = client_->Get(
      TjPath("ns") + "?limit=2&continue=" + page2.body["metadata"]["continue"].get<std::string>());
  ASSERT_EQ(page3.status, 200);
  EXPECT_THAT(Names(page3.body), ElementsAre("e"));
  EXPECT_EQ(page3.body["metadata"]["continue"], "");

  HttpResult fresh = client_->Get(TjPath("ns"));
  EXPECT_THAT(Names(fresh.body), ElementsAre("a", "b", "bb", "c", "e"));
  EXPECT_EQ(fresh.body["metadata"]["continue"], "") << "custom resources always carry it";

  server_->CompactHistory();
  HttpResult expired = client_->Get(TjPath("ns") + "?limit=2&continue=" + token);
  EXPECT_EQ(expired.status, 410);
  EXPECT_EQ(expired.body["reason"], "Expired");
  EXPECT_EQ(client_->Get(TjPath("ns") + "?limit=2&continue=garbage!").status, 400);
}

TEST_F(ApiServerCrudTest, ScaleSubresourceReadsAndWritesReplicaPaths) {
  MustCreate(TjPath("ns"), TrainingJob("a", "ns", 3));
  ASSERT_TRUE(server_
                  ->Mutate("trainingjobs.hptrain.io", "ns", "a",
                           [](nlohmann::json* job) {
                             (*job)["status"] = {{"replicas", 2}, {"selector", "hptrain.io/job=a"}};
                           })
                  .ok());
  HttpResult scale = client_->Get(TjPath("ns", "a") + "/scale");
  ASSERT_EQ(scale.status, 200) << scale.text;
  EXPECT_EQ(scale.body["kind"], "Scale");
  EXPECT_EQ(scale.body["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale.body["spec"]["replicas"], 3);
  EXPECT_EQ(scale.body["status"],
            nlohmann::json({{"replicas", 2}, {"selector", "hptrain.io/job=a"}}));

  nlohmann::json wanted = scale.body;
  wanted["spec"]["replicas"] = 5;
  HttpResult put = client_->Put(TjPath("ns", "a") + "/scale", wanted);
  ASSERT_EQ(put.status, 200) << put.text;
  EXPECT_EQ(put.body["spec"]["replicas"], 5);
  HttpResult stale = client_->Put(TjPath("ns", "a") + "/scale", wanted);
  EXPECT_EQ(stale.status, 409) << "the Scale's resourceVersion is a precondition";
  HttpResult patched = client_->Patch(TjPath("ns", "a") + "/scale", {{"spec", {{"replicas", 1}}}},
                                      "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.text;
  nlohmann::json job = *server_->Get("trainingjobs", "ns", "a");
  EXPECT_EQ(job["spec"]["workers"]["replicas"], 1);
  EXPECT_EQ(job["metadata"]["generation"], 3);

  nlohmann::json groups = TrainingJob("g", "ns");
  groups["spec"].erase("workers");
  groups["spec"]["workerGroups"] = {{{"name", "a100"}, {"replicas", 2}}};
  MustCreate(TjPath("ns"), groups);
  HttpResult missing = client_->Get(TjPath("ns", "g") + "/scale");
  ASSERT_EQ(missing.status, 500);
  EXPECT_EQ(missing.body["message"],
            "Internal error occurred: the spec replicas field \".spec.workers.replicas\" does not "
            "exist");
}

TEST_F(ApiServerCrudTest, SecretStringDataBecomesBase64Data) {
  nlohmann::json secret = {{"apiVersion", "v1"},
                           {"kind", "Secret"},
                           {"metadata", {{"name", "s"}}},
                           {"stringData", {{"token", "not-a-real-token"}}}};
  nlohmann::json created = MustCreate("/api/v1/namespaces/ns/secrets", secret);
  EXPECT_EQ(created["data"]["token"], "bm90LWEtcmVhbC10b2tlbg==");
  EXPECT_EQ(created["type"], "Opaque");
  EXPECT_FALSE(created.contains("stringData"));
}

TEST_F(ApiServerCrudTest, DeleteAnswersAndPreconditions) {
  nlohmann::json job = MustCreate(TjPath("ns"), TrainingJob("a", "ns"));
  HttpResult wrong_uid =
      client_->Delete(TjPath("ns", "a"), {{"preconditions", {{"uid", "not-the-uid"}}}});
  ASSERT_EQ(wrong_uid.status, 409);
  EXPECT_THAT(wrong_uid.body["message"].get<std::string>(),
              ::testing::HasSubstr("Precondition failed: UID in precondition: not-the-uid"));
  HttpResult deleted = client_->Delete(
      TjPath("ns", "a"),
      {{"preconditions", {{"resourceVersion", job["metadata"]["resourceVersion"]}}}});
  ASSERT_EQ(deleted.status, 200) << deleted.text;
  EXPECT_EQ(deleted.body["kind"], "Status");
  EXPECT_EQ(deleted.body["status"], "Success");
  EXPECT_EQ(deleted.body["details"]["uid"], job["metadata"]["uid"]);
  EXPECT_EQ(client_->Get(TjPath("ns", "a")).status, 404);
  EXPECT_EQ(client_->Delete(TjPath("ns", "a")).status, 404);
  EXPECT_EQ(client_->Delete(TjPath("ns", "b") + "?propagationPolicy=Sideways").status, 400);
}

TEST_F(ApiServerCrudTest, FinalizersHoldDeletionUntilRemoved) {
  nlohmann::json job = TrainingJob("a", "ns");
  job["metadata"]["finalizers"] = {"example.com/cleanup"};
  MustCreate(TjPath("ns"), job);
  HttpResult deleting = client_->Delete(TjPath("ns", "a"));
  ASSERT_EQ(deleting.status, 200);
  EXPECT_TRUE(deleting.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(deleting.body["metadata"]["generation"], 2);
  ASSERT_EQ(client_->Get(TjPath("ns", "a")).status, 200);
  HttpResult cleared = client_->Patch(TjPath("ns", "a"), {{"metadata", {{"finalizers", nullptr}}}},
                                      "application/merge-patch+json");
  ASSERT_EQ(cleared.status, 200) << cleared.text;
  EXPECT_EQ(client_->Get(TjPath("ns", "a")).status, 404);
}

TEST_F(ApiServerCrudTest, UnsupportedRequests) {
  EXPECT_EQ(client_->Get("/api/v1/namespaces/ns/widgets").status, 404);
  EXPECT_EQ(client_->Get("/apis/hptrain.io/v9/namespaces/ns/trainingjobs").status, 404);
  EXPECT_EQ(client_->Put(TjPath("ns"), TrainingJob("a", "ns")).status, 405);
  EXPECT_EQ(client_->Post(TjPath("ns", "a"), TrainingJob("a", "ns")).status, 405);
  EXPECT_EQ(client_->Get(PodPath("ns", "a") + "/log").status, 404);
  EXPECT_EQ(client_->Send("POST", TjPath("ns"), "{not json", "application/json").status, 400);
  HttpResult mismatch = client_->Post(TjPath("ns"), TrainingJob("a", "elsewhere"));
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_EQ(mismatch.body["reason"], "BadRequest");
  HttpResult rename = client_->Put(TjPath("ns", "a"), TrainingJob("b", "ns"));
  EXPECT_EQ(rename.status, 400);
}

TEST_F(ApiServerCrudTest, DiscoveryDocuments) {
  HttpResult version = client_->Get("/version");
  ASSERT_EQ(version.status, 200);
  EXPECT_EQ(version.body["gitVersion"], "v1.28.7");
  EXPECT_EQ(version.body["minor"], "28");
  EXPECT_EQ(client_->Get("/api").body["versions"], nlohmann::json::array({"v1"}));
  HttpResult groups = client_->Get("/apis");
  std::set<std::string> names;
  for (const nlohmann::json& group : groups.body["groups"]) names.insert(group["name"]);
  EXPECT_TRUE(names.count("hptrain.io") && names.count("coordination.k8s.io") &&
              names.count("events.k8s.io"));
  HttpResult resources = client_->Get("/apis/hptrain.io/v1alpha1");
  ASSERT_EQ(resources.status, 200);
  std::vector<std::string> served;
  for (const nlohmann::json& r : resources.body["resources"]) served.push_back(r["name"]);
  EXPECT_THAT(served,
              UnorderedElementsAre("trainingjobs", "trainingjobs/status", "trainingjobs/scale"));
  EXPECT_EQ(resources.body["resources"][0]["shortNames"], nlohmann::json::array({"tj"}));
  HttpResult core = client_->Get("/api/v1");
  ASSERT_EQ(core.status, 200);
  EXPECT_EQ(core.body["groupVersion"], "v1");
}

TEST_F(ApiServerCrudTest, InProcessAccessActsAsKubelet) {
  nlohmann::json pod = Pod("p", "ns");
  pod["status"] = {{"phase", "Running"}, {"podIP", "10.0.0.7"}};
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  HttpResult got = client_->Get(PodPath("ns", "p"));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body["status"]["podIP"], "10.0.0.7") << "Put keeps the given status";
  ASSERT_TRUE(server_->SetPodPhase("ns", "p", "Succeeded").ok());
  EXPECT_EQ((*server_->Get("pods", "ns", "p"))["status"]["phase"], "Succeeded");
  EXPECT_TRUE(absl::IsNotFound(server_->SetPodPhase("ns", "missing", "Running")));
  EXPECT_TRUE(absl::IsNotFound(server_->Get("widgets", "ns", "p").status()));
  absl::StatusOr<nlohmann::json> created = server_->Create("trainingjobs", TrainingJob("a", "ns"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(
      absl::IsAlreadyExists(server_->Create("trainingjobs", TrainingJob("a", "ns")).status()));
}

}  // namespace
}  // namespace hptrain::testing
