#include "controller/reconcile/desired_objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/escaping.h"
#include "controller/reconcile/labels.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::HeteroJob;
using testing::ShorthandJob;

DesiredObjects Build(const Json& object, int64_t generation = 0,
                     const std::string& default_image = "") {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(object);
  EXPECT_TRUE(job.ok()) << job.status();
  absl::StatusOr<DesiredObjects> desired =
      BuildDesiredObjects(*job, "tok", generation, default_image);
  EXPECT_TRUE(desired.ok()) << desired.status();
  return *desired;
}

std::map<std::string, std::string> EnvOf(const Json& container) {
  std::map<std::string, std::string> env;
  for (const Json& var : container["env"]) {
    env[var["name"].get<std::string>()] = var.value("value", "<from>");
  }
  return env;
}

const Json& Container(const Json& pod, const std::string& name) {
  for (const Json& c : pod["spec"]["containers"]) {
    if (c["name"] == name) return c;
  }
  static const Json kNone;
  ADD_FAILURE() << "no container " << name;
  return kNone;
}

TEST(DesiredObjectsTest, NamesAndOrder) {
  DesiredObjects d = Build(ShorthandJob(3));
  EXPECT_EQ(Name(d.secret), "mlp-hptrain");
  EXPECT_EQ(Name(d.service), "mlp");
  std::vector<std::string> names;
  for (const Json& pod : d.pods) names.push_back(Name(pod));
  EXPECT_THAT(names, ElementsAre("mlp-ps-0", "mlp-worker-0", "mlp-worker-1", "mlp-worker-2"));
  for (const Json* object : {&d.secret, &d.service, &d.pods[0], &d.pods[3]}) {
    EXPECT_EQ(Namespace(*object), "team-a");
  }
}

TEST(DesiredObjectsTest, EveryObjectIsOwnedAndLabelled) {
  Json job = ShorthandJob(2);
  DesiredObjects d = Build(job);
  Json owner = {{"apiVersion", "hptrain.io/v1alpha1"},
                {"kind", "TrainingJob"},
                {"name", "mlp"},
                {"uid", testing::kJobUid},
                {"controller", true},
                {"blockOwnerDeletion", true}};
  std::vector<const Json*> all = {&d.secret, &d.service};
  for (const Json& pod : d.pods) all.push_back(&pod);
  for (const Json* object : all) {
    EXPECT_EQ((*object)["metadata"]["ownerReferences"], Json::array({owner})) << Name(*object);
    EXPECT_TRUE(IsControlledBy(*object, job));
    EXPECT_EQ(Label(*object, "hptrain.io/job"), "mlp");
    EXPECT_EQ(Label(*object, "app.kubernetes.io/managed-by"), "hptrain-controller");
  }
  EXPECT_EQ(d.pods[0]["metadata"]["labels"],
            (Json{{"hptrain.io/job", "mlp"},
                  {"hptrain.io/role", "ps"},
                  {"hptrain.io/rank", "0"},
                  {"app.kubernetes.io/managed-by", "hptrain-controller"}}));
  EXPECT_EQ(d.pods[2]["metadata"]["labels"],
            (Json{{"hptrain.io/job", "mlp"},
                  {"hptrain.io/role", "worker"},
                  {"hptrain.io/rank", "1"},
                  {"hptrain.io/group", "worker"},
                  {"app.kubernetes.io/managed-by", "hptrain-controller"}}));
}

TEST(DesiredObjectsTest, WorkerPodSpec) {
  DesiredObjects d = Build(ShorthandJob(2), /*generation=*/4);
  const Json& pod = d.pods[2];
  EXPECT_EQ(Annotation(pod, "hptrain.io/restart-generation"), "4");
  EXPECT_EQ(Annotation(pod, "hptrain.io/spec-hash"), ParseTrainingJob(ShorthandJob(2))->spec_hash);
  const Json& spec = pod["spec"];
  EXPECT_EQ(spec["restartPolicy"], "Never");
  EXPECT_EQ(spec["hostname"], "mlp-worker-1");
  EXPECT_EQ(spec["subdomain"], "mlp");
  EXPECT_FALSE(spec.contains("schedulerName"));
  EXPECT_EQ(spec["volumes"], Json::parse(R"([{"name": "hptrain-job",
                                              "secret": {"secretName": "mlp-hptrain"}}])"));
  ASSERT_EQ(spec["containers"].size(), 1u);
  const Json& c = spec["containers"][0];
  EXPECT_EQ(c["name"], "worker");
  EXPECT_EQ(c["image"], testing::kImage);
  EXPECT_EQ(c["command"], Json::array({"hptrain", "worker"}));
  EXPECT_EQ(c["volumeMounts"], Json::parse(R"([{"name": "hptrain-job",
                                                "mountPath": "/etc/hptrain", "readOnly": true}])"));
  EXPECT_EQ(c["ports"], Json::parse(R"([{"name": "metrics", "containerPort": 9090,
                                         "protocol": "TCP"}])"));
  std::map<std::string, std::string> want = {
      {"HPTRAIN_JOB", "/etc/hptrain/job.yaml"},
      {"HPTRAIN_TOKEN_FILE", "/etc/hptrain/token"},
      {"HPTRAIN_COORDINATOR", "mlp-ps-0.mlp.team-a.svc:29400"},
      {"HPTRAIN_RANK", "1"},
      {"HPTRAIN_GROUP", "worker"},
      {"HPTRAIN_PS_HOST", "0.0.0.0"},
      {"HPTRAIN_PS_PORT", "29400"},
      {"HPTRAIN_METRICS_HOST", "0.0.0.0"},
      {"HPTRAIN_METRICS_PORT", "9090"},
      {"HPTRAIN_BIND_HOST", "0.0.0.0"}};
  EXPECT_EQ(EnvOf(c), want);
}

TEST(DesiredObjectsTest, PsPodFallsBackToFirstGroupImageWithoutResources) {
  Json job = ShorthandJob(2);
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["resources"] = {
      {"limits", {{"nvidia.com/gpu", 2}}}};
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Always";
  job["spec"]["workers"]["template"]["spec"]["nodeSelector"] = {{"pool", "gpu"}};
  job["spec"]["workers"]["template"]["spec"]["imagePullSecrets"] = {{{"name", "regcred"}}};
  DesiredObjects d = Build(job);
  const Json& ps = d.pods[0];
  const Json& c = Container(ps, "ps");
  EXPECT_EQ(c["image"], testing::kImage);
  EXPECT_EQ(c["imagePullPolicy"], "Always");
  EXPECT_FALSE(c.contains("resources"));
  EXPECT_FALSE(ps["spec"].contains("nodeSelector"));
  EXPECT_EQ(ps["spec"]["imagePullSecrets"], Json::parse(R"([{"name": "regcred"}])"));
  EXPECT_EQ(c["command"], Json::array({"hptrain", "ps"}));
  EXPECT_EQ(EnvOf(c).count("HPTRAIN_GROUP"), 0u);
  EXPECT_EQ(EnvOf(c)["HPTRAIN_RANK"], "0");
  EXPECT_EQ(c["ports"][0]["name"], "coordinator");
  EXPECT_EQ(c["ports"][0]["containerPort"], 29400);
  EXPECT_EQ(c["ports"][1]["name"], "metrics");
  // The workers keep their GPUs.
  EXPECT_EQ(Container(d.pods[1], "worker")["resources"]["limits"]["nvidia.com/gpu"], 2);
}

TEST(DesiredObjectsTest, MixedGroupsKeepTheirOwnPlacementAndResources) {
  DesiredObjects d = Build(HeteroJob());
  ASSERT_EQ(d.pods.size(), 4u);
  const Json& a100 = d.pods[1];
  const Json& t4 = d.pods[3];
  EXPECT_EQ(Name(a100), "hetero-worker-0");
  EXPECT_EQ(Name(t4), "hetero-worker-2");
  EXPECT_EQ(Label(a100, "hptrain.io/group"), "a100");
  EXPECT_EQ(Label(d.pods[2], "hptrain.io/group"), "a100");
  EXPECT_EQ(Label(t4, "hptrain.io/group"), "t4");
  // Template labels are kept, ours win.
  EXPECT_EQ(Label(a100, "pool"), "a100");
  EXPECT_EQ(Label(a100, "hptrain.io/role"), "worker");

  EXPECT_EQ(a100["spec"]["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-40GB");
  EXPECT_EQ(t4["spec"]["nodeSelector"]["nvidia.com/gpu.product"], "Tesla-T4");
  EXPECT_EQ(a100["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
  EXPECT_EQ(t4["spec"]["tolerations"][0]["effect"], "NoSchedule");

  const Json& ca = Container(a100, "worker");
  EXPECT_EQ(ca["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_EQ(ca["resources"]["limits"]["memory"], "32Gi");
  EXPECT_EQ(ca["args"], Json::array({"--log-level=debug"}));
  // User env kept after hptrain's; a user value for one of hptrain's names is dropped.
  std::map<std::string, std::string> env = EnvOf(ca);
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(env["HPTRAIN_RANK"], "0");
  EXPECT_EQ(env["HPTRAIN_GROUP"], "a100");
  EXPECT_EQ(env["HPTRAIN_COORDINATOR"], "hetero-ps-0.hetero.training.svc:29400");
  EXPECT_EQ(ca["env"].back()["name"], "NCCL_DEBUG");
  // User volumes and mounts kept beside the job's.
  ASSERT_EQ(a100["spec"]["volumes"].size(), 2u);
  EXPECT_EQ(a100["spec"]["volumes"][0]["name"], "data");
  EXPECT_EQ(a100["spec"]["volumes"][1]["name"], "hptrain-job");
  EXPECT_EQ(ca["volumeMounts"][0]["mountPath"], "/data");

  // The t4 template's only container is named "main": it becomes the worker container.
  const Json& ct = Container(t4, "worker");
  EXPECT_EQ(ct["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(EnvOf(ct)["HPTRAIN_RANK"], "2");
  EXPECT_EQ(EnvOf(ct)["HPTRAIN_GROUP"], "t4");

  // The ps pod comes from spec.ps.template.
  const Json& ps = Container(d.pods[0], "ps");
  EXPECT_EQ(ps["resources"]["requests"]["cpu"], "4");
  EXPECT_FALSE(d.pods[0]["spec"].contains("nodeSelector"));
}

TEST(DesiredObjectsTest, SecretCarriesTokenAndManifest) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(ShorthandJob(2));
  ASSERT_TRUE(job.ok());
  DesiredObjects d = *BuildDesiredObjects(*job, "tok-123", 0, "");
  EXPECT_EQ(d.secret["type"], "Opaque");
  EXPECT_EQ(d.secret["immutable"], true);
  std::string token, manifest;
  ASSERT_TRUE(absl::Base64Unescape(d.secret["data"]["token"].get<std::string>(), &token));
  ASSERT_TRUE(absl::Base64Unescape(d.secret["data"]["job.yaml"].get<std::string>(), &manifest));
  EXPECT_EQ(token, "tok-123");
  EXPECT_EQ(manifest, job->manifest);
  EXPECT_EQ(Annotation(d.secret, "hptrain.io/spec-hash"), job->spec_hash);
}

TEST(DesiredObjectsTest, HeadlessServiceSelectsEveryPod) {
  DesiredObjects d = Build(ShorthandJob(2));
  EXPECT_EQ(d.service["spec"], Json::parse(R"({
    "clusterIP": "None",
    "selector": {"hptrain.io/job": "mlp"},
    "publishNotReadyAddresses": true,
    "ports": [{"name": "coordinator", "port": 29400, "targetPort": 29400, "protocol": "TCP"},
              {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"}]})"));
}

TEST(DesiredObjectsTest, SchedulerAndGangMarkers) {
  Json job = ShorthandJob(2);
  job["spec"]["gangScheduling"] = {{"enabled", true}, {"provider", "volcano"}};
  DesiredObjects d = Build(job);
  for (const Json& pod : d.pods) {
    EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
    EXPECT_EQ(Annotation(pod, "scheduling.k8s.io/group-name"), "mlp");
  }
  job["spec"]["gangScheduling"] = {{"enabled", true}, {"provider", "scheduler-plugins"}};
  d = Build(job);
  EXPECT_EQ(Label(d.pods[1], "scheduling.x-k8s.io/pod-group"), "mlp");
  EXPECT_EQ(d.pods[1]["spec"]["schedulerName"], "scheduler-plugins-scheduler");

  job["spec"].erase("gangScheduling");
  job["spec"]["schedulerName"] = "bin-packer";
  job["spec"]["workers"]["template"]["spec"]["schedulerName"] = "ignored";
  d = Build(job);
  EXPECT_EQ(d.pods[1]["spec"]["schedulerName"], "bin-packer");
  EXPECT_EQ(Annotation(d.pods[1], "scheduling.k8s.io/group-name"), "");
}

TEST(DesiredObjectsTest, MissingImage) {
  Json job = ShorthandJob(2);
  job["spec"]["workers"]["template"]["spec"]["containers"][0].erase("image");
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
  ASSERT_TRUE(parsed.ok());
  absl::StatusOr<DesiredObjects> d = BuildDesiredObjects(*parsed, "t", 0, "");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "spec.workers.template.spec.containers[0].image: required");

  d = BuildDesiredObjects(*parsed, "t", 0, "hptrain/runtime:9.9");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Container(d->pods[0], "ps")["image"], "hptrain/runtime:9.9");
  EXPECT_EQ(Container(d->pods[1], "worker")["image"], "hptrain/runtime:9.9");
}

TEST(DesiredObjectsTest, MalformedTemplate) {
  Json job = HeteroJob();
  job["spec"]["workerGroups"][1]["template"]["spec"]["containers"] = {{"name", "x"}};
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
  ASSERT_TRUE(parsed.ok());
  absl::StatusOr<DesiredObjects> d = BuildDesiredObjects(*parsed, "t", 0, "");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr("spec.workerGroups[1].template.spec.containers: must be a list"));
}

TEST(DesiredObjectsTest, PsShardsMakeOnePodAndServiceEach) {
  DesiredObjects d = Build(testing::ShardedJob("hps", 2));
  std::vector<std::string> names;
  for (const Json& pod : d.pods) names.push_back(Name(pod));
  EXPECT_THAT(names, ElementsAre("mlp-ps-0", "mlp-ps-1", "mlp-worker-0", "mlp-worker-1"));
  EXPECT_EQ(Label(d.pods[1], "hptrain.io/role"), "ps");
  EXPECT_EQ(Label(d.pods[1], "hptrain.io/rank"), "1");
  EXPECT_EQ(d.pods[1]["spec"]["hostname"], "mlp-ps-1");

  const std::map<std::string, std::string> worker = EnvOf(Container(d.pods[2], "worker"));
  for (int shard = 0; shard < 2; ++shard) {
    SCOPED_TRACE(shard);
    const Json& c = Container(d.pods[shard], "ps");
    std::map<std::string, std::string> env = EnvOf(c);
    EXPECT_EQ(env["HPTRAIN_PS_SHARD"], std::to_string(shard));
    EXPECT_EQ(env["HPTRAIN_PS_ADVERTISE"], "mlp-ps-" + std::to_string(shard) + ".team-a.svc:29400");
    EXPECT_EQ(env["HPTRAIN_RANK"], std::to_string(shard));
    // Every shard finds the coordinator (in ps-0) the way the workers do.
    EXPECT_EQ(env["HPTRAIN_COORDINATOR"], worker.at("HPTRAIN_COORDINATOR"));
    EXPECT_EQ(c["command"], Json::array({"hptrain", "ps"}));
    EXPECT_EQ(c["ports"][0]["containerPort"], 29400);
    EXPECT_EQ(c["readinessProbe"], Json::parse(R"({"httpGet": {"path": "/readyz",
                                                    "port": "metrics"}, "periodSeconds": 5})"));
  }
  EXPECT_EQ(EnvOf(Container(d.pods[2], "worker")).count("HPTRAIN_PS_SHARD"), 0u);
  EXPECT_FALSE(Container(d.pods[2], "worker").contains("readinessProbe"));

  ASSERT_EQ(d.ps_services.size(), 2u);
  Json owner = OwnerReference("mlp", testing::kJobUid);
  for (int shard = 0; shard < 2; ++shard) {
    const Json& service = d.ps_services[shard];
    EXPECT_EQ(Name(service), "mlp-ps-" + std::to_string(shard));
    EXPECT_EQ(Namespace(service), "team-a");
    EXPECT_EQ(service["metadata"]["ownerReferences"], Json::array({owner}));
    EXPECT_EQ(service["metadata"]["labels"], JobLabels("mlp"));
  }
  EXPECT_EQ(d.ps_services[1]["spec"], Json::parse(R"({
    "type": "ClusterIP",
    "selector": {"hptrain.io/job": "mlp", "hptrain.io/role": "ps", "hptrain.io/rank": "1"},
    "ports": [{"name": "grpc", "port": 29400, "targetPort": 29400, "protocol": "TCP"}]})"));
  // The headless Service is the same as without shards.
  EXPECT_EQ(d.service, Build(ShorthandJob(2)).service);
}

TEST(DesiredObjectsTest, EveryPsShardComesFromThePsTemplate) {
  Json job = HeteroJob();
  job["spec"]["ps"]["shards"] = 3;
  job["spec"]["ps"]["template"]["spec"]["nodeSelector"] = {{"pool", "cpu"}};
  DesiredObjects d = Build(job);
  ASSERT_EQ(d.pods.size(), 6u);
  ASSERT_EQ(d.ps_services.size(), 3u);
  for (int shard = 0; shard < 3; ++shard) {
    SCOPED_TRACE(shard);
    const Json& pod = d.pods[shard];
    EXPECT_EQ(Name(pod), "hetero-ps-" + std::to_string(shard));
    EXPECT_EQ(Container(pod, "ps")["resources"]["requests"]["cpu"], "4");
    EXPECT_EQ(pod["spec"]["nodeSelector"], (Json{{"pool", "cpu"}}));
    EXPECT_EQ(EnvOf(Container(pod, "ps"))["HPTRAIN_PS_ADVERTISE"],
              "hetero-ps-" + std::to_string(shard) + ".training.svc:29400");
  }
  EXPECT_EQ(Name(d.pods[3]), "hetero-worker-0");
}

TEST(DesiredObjectsTest, PsStrategyWithOneShardGetsItsService) {
  for (const char* type : {"ps", "hps", "mp2"}) {
    SCOPED_TRACE(type);
    Json job = ShorthandJob(2);
    job["spec"]["strategy"] = {{"type", type}};
    if (std::string(type) == "mp2") job["spec"]["strategy"]["predictor"] = "zero";
    DesiredObjects d = Build(job);
    ASSERT_EQ(d.pods.size(), 3u);
    ASSERT_EQ(d.ps_services.size(), 1u);
    EXPECT_EQ(Name(d.ps_services[0]), "mlp-ps-0");
    EXPECT_EQ(EnvOf(Container(d.pods[0], "ps"))["HPTRAIN_PS_SHARD"], "0");
  }
}

TEST(DesiredObjectsTest, WithoutParameterServerNothingChanges) {
  DesiredObjects d = Build(ShorthandJob(2));
  EXPECT_TRUE(d.ps_services.empty());
  ASSERT_EQ(d.pods.size(), 3u);
  const Json& c = Container(d.pods[0], "ps");
  EXPECT_EQ(EnvOf(c).count("HPTRAIN_PS_SHARD"), 0u);
  EXPECT_EQ(EnvOf(c).count("HPTRAIN_PS_ADVERTISE"), 0u);
  EXPECT_FALSE(c.contains("readinessProbe"));
}

TEST(DesiredObjectsTest, PsTemplateReadinessProbeIsKept) {
  Json job = testing::ShardedJob("ps", 2);
  Json probe = {{"httpGet", {{"path", "/readyz"}, {"port", 9090}}}, {"periodSeconds", 30}};
  job["spec"]["ps"]["template"] =
      Json::parse(R"({"spec": {"containers": [{"name": "ps", "image": "x"}]}})");
  job["spec"]["ps"]["template"]["spec"]["containers"][0]["readinessProbe"] = probe;
  DesiredObjects d = Build(job);
  EXPECT_EQ(Container(d.pods[1], "ps")["readinessProbe"], probe);
}

TEST(DesiredObjectsTest, Deterministic) {
  EXPECT_EQ(DumpJson(Build(HeteroJob()).pods[2]), DumpJson(Build(HeteroJob()).pods[2]));
}

}  // namespace
}  // namespace hptrain::reconcile
