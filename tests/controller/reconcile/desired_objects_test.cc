#include "controller/reconcile/desired_objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

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
                     const RuntimeImage& default_image = {}) {
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
                                              "secret": {"secretName": "mlp-hptrain"}},
                                             {"name": "hptrain-tmp", "emptyDir": {}}])"));
  ASSERT_EQ(spec["containers"].size(), 1u);
  const Json& c = spec["containers"][0];
  EXPECT_EQ(c["name"], "worker");
  EXPECT_EQ(c["image"], testing::kImage);
  EXPECT_EQ(c["command"], Json::array({"hptrain", "worker"}));
  EXPECT_EQ(c["volumeMounts"], Json::parse(R"([{"name": "hptrain-job",
                                                "mountPath": "/etc/hptrain", "readOnly": true},
                                               {"name": "hptrain-tmp", "mountPath": "/tmp"}])"));
  EXPECT_EQ(c["ports"], Json::parse(R"([{"name": "metrics", "containerPort": 9090,
                                         "protocol": "TCP"}])"));
  std::map<std::string, std::string> want = {
      {"HPTRAIN_JOB", "/etc/hptrain/job.yaml"},
      {"HPTRAIN_TOKEN_FILE", "/etc/hptrain/token"},
      {"HPTRAIN_COORDINATOR", "mlp-ps-0.mlp.team-a.svc:29400"},
      {"HPTRAIN_RANK", "1"},
      {"HPTRAIN_GROUP", "worker"},
      {"HPTRAIN_NODE_NAME", "<from>"},
      {"HPTRAIN_PS_HOST", "0.0.0.0"},
      {"HPTRAIN_PS_PORT", "29400"},
      {"HPTRAIN_METRICS_HOST", "0.0.0.0"},
      {"HPTRAIN_METRICS_PORT", "9090"},
      {"HPTRAIN_BIND_HOST", "0.0.0.0"}};
  EXPECT_EQ(EnvOf(c), want);
  // The node name from the downward API, for the hierarchical exchange.
  bool node_name = false;
  for (const Json& var : c["env"]) {
    if (var["name"] != "HPTRAIN_NODE_NAME") continue;
    node_name = true;
    EXPECT_EQ(var["valueFrom"], Json::parse(R"({"fieldRef": {"fieldPath": "spec.nodeName"}})"));
  }
  EXPECT_TRUE(node_name);
}

TEST(DesiredObjectsTest, PsPodFallsBackToFirstGroupImageWithoutItsGpus) {
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
  // The default resources, not the group's GPUs.
  EXPECT_EQ(c["resources"], Json::parse(R"({"requests": {"cpu": "1", "memory": "2Gi"},
                                            "limits": {"memory": "4Gi"}})"));
  EXPECT_FALSE(ps["spec"].contains("nodeSelector"));
  EXPECT_EQ(ps["spec"]["imagePullSecrets"], Json::parse(R"([{"name": "regcred"}])"));
  EXPECT_EQ(c["command"], Json::array({"hptrain", "ps"}));
  EXPECT_EQ(EnvOf(c).count("HPTRAIN_GROUP"), 0u);
  EXPECT_EQ(EnvOf(c).count("HPTRAIN_NODE_NAME"), 0u);
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
  EXPECT_FALSE(ca.contains("args"));  // hptrain's settings come from the spec alone
  // User env kept after hptrain's (a template may not set HPTRAIN_*: reserved_env_test.cc).
  std::map<std::string, std::string> env = EnvOf(ca);
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(env["HPTRAIN_RANK"], "0");
  EXPECT_EQ(env["HPTRAIN_GROUP"], "a100");
  EXPECT_EQ(env["HPTRAIN_COORDINATOR"], "hetero-ps-0.hetero.training.svc:29400");
  EXPECT_EQ(ca["env"].back()["name"], "NCCL_DEBUG");
  // User volumes and mounts kept beside the job's.
  ASSERT_EQ(a100["spec"]["volumes"].size(), 3u);
  EXPECT_EQ(a100["spec"]["volumes"][0]["name"], "data");
  EXPECT_EQ(a100["spec"]["volumes"][1]["name"], "hptrain-job");
  EXPECT_EQ(a100["spec"]["volumes"][2]["name"], "hptrain-tmp");
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

TEST(DesiredObjectsTest, EveryPodIsProbedOnTheMetricsPort) {
  const Json readiness = Json::parse(R"({"httpGet": {"path": "/readyz", "port": "metrics"},
                                         "periodSeconds": 5})");
  const Json liveness = Json::parse(R"({"httpGet": {"path": "/healthz", "port": "metrics"},
                                        "initialDelaySeconds": 30, "periodSeconds": 10,
                                        "timeoutSeconds": 5, "failureThreshold": 6})");
  for (const Json& job : {ShorthandJob(2), testing::ShardedJob("hps", 2), HeteroJob()}) {
    for (const Json& pod : Build(job).pods) {
      SCOPED_TRACE(Name(pod));
      const Json& c = Container(pod, Label(pod, "hptrain.io/role"));
      EXPECT_EQ(c["readinessProbe"], readiness);
      EXPECT_EQ(c["livenessProbe"], liveness);
      // The probes name the port the pods serve /metrics, /healthz and /readyz on.
      EXPECT_EQ(EnvOf(c)["HPTRAIN_METRICS_PORT"], "9090");
      EXPECT_EQ(c["ports"].back(), Json::parse(R"({"name": "metrics", "containerPort": 9090,
                                                   "protocol": "TCP"})"));
    }
  }
}

TEST(DesiredObjectsTest, TemplateProbesWin) {
  Json job = ShorthandJob(1);
  Json liveness = Json::parse(R"({"exec": {"command": ["true"]}, "periodSeconds": 60})");
  Json readiness = Json::parse(R"({"tcpSocket": {"port": 9090}})");
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["livenessProbe"] = liveness;
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["readinessProbe"] = readiness;
  DesiredObjects d = Build(job);
  EXPECT_EQ(Container(d.pods[1], "worker")["livenessProbe"], liveness);
  EXPECT_EQ(Container(d.pods[1], "worker")["readinessProbe"], readiness);
  // The ps pod, derived from the group's image only, gets ours.
  EXPECT_EQ(Container(d.pods[0], "ps")["livenessProbe"]["httpGet"]["path"], "/healthz");
}

TEST(DesiredObjectsTest, DefaultResourcesOnlyWhereTheTemplateNamesNoCpuOrMemory) {
  const Json defaults = Json::parse(R"({"requests": {"cpu": "1", "memory": "2Gi"},
                                        "limits": {"memory": "4Gi"}})");
  DesiredObjects d = Build(ShorthandJob(1));
  EXPECT_EQ(Container(d.pods[0], "ps")["resources"], defaults);
  EXPECT_EQ(Container(d.pods[1], "worker")["resources"], defaults);

  // HeteroJob: a100 names cpu and memory, the ps template cpu and memory requests: theirs, as
  // written. t4 names cpu only: also theirs.
  d = Build(HeteroJob());
  EXPECT_EQ(Container(d.pods[0], "ps")["resources"],
            Json::parse(R"({"requests": {"cpu": "4", "memory": "8Gi"}})"));
  EXPECT_EQ(Container(d.pods[1], "worker")["resources"],
            Json::parse(R"({"limits": {"nvidia.com/gpu": 1, "cpu": "8", "memory": "32Gi"}})"));
  EXPECT_EQ(Container(d.pods[3], "worker")["resources"],
            Json::parse(R"({"limits": {"nvidia.com/gpu": "1", "cpu": "4"}})"));

  // A GPU-only template keeps its GPUs and gets cpu and memory beside them, so the pod is not
  // BestEffort.
  Json job = ShorthandJob(1);
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["resources"] =
      Json::parse(R"({"limits": {"nvidia.com/gpu": 2}})");
  d = Build(job);
  EXPECT_EQ(Container(d.pods[1], "worker")["resources"],
            Json::parse(R"({"requests": {"cpu": "1", "memory": "2Gi"},
                            "limits": {"memory": "4Gi", "nvidia.com/gpu": 2}})"));

  job["spec"]["workers"]["template"]["spec"]["containers"][0]["resources"] = "lots";
  absl::StatusOr<DesiredObjects> bad = BuildDesiredObjects(*ParseTrainingJob(job), "t", 0, "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "spec.workers.template.spec.containers[0].resources: must be a map");
}

const Json& Resources(const DesiredObjects& d, size_t pod) {
  return Container(d.pods[pod], pod == 0 ? "ps" : "worker")["resources"];
}

TEST(DesiredObjectsGpuTest, CudaWorkersGetOneGpuEachAndThePsNone) {
  Json job = ShorthandJob(2);
  job["spec"]["device"] = "cuda";
  DesiredObjects d = Build(job);
  ASSERT_EQ(d.pods.size(), 3u);
  for (size_t pod : {1, 2}) {
    EXPECT_EQ(Resources(d, pod), Json::parse(R"({"requests": {"cpu": "1", "memory": "2Gi"},
                                                 "limits": {"memory": "4Gi",
                                                            "nvidia.com/gpu": "1"}})"))
        << Name(d.pods[pod]);
  }
  EXPECT_EQ(Resources(d, 0), Json::parse(R"({"requests": {"cpu": "1", "memory": "2Gi"},
                                             "limits": {"memory": "4Gi"}})"));

  // A template that chose its cpu and memory keeps them, and the GPU is added beside.
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["resources"] =
      Json::parse(R"({"requests": {"cpu": "6"}})");
  d = Build(job);
  EXPECT_EQ(Resources(d, 1),
            Json::parse(R"({"requests": {"cpu": "6"}, "limits": {"nvidia.com/gpu": "1"}})"));
}

TEST(DesiredObjectsGpuTest, TheTemplatesGpuCountWins) {
  Json job = ShorthandJob(1);
  job["spec"]["device"] = "cuda";
  Json& container = job["spec"]["workers"]["template"]["spec"]["containers"][0];
  for (const char* resources : {R"({"limits": {"nvidia.com/gpu": 2}})",
                                R"({"requests": {"nvidia.com/gpu": "4"}})",
                                R"({"limits": {"nvidia.com/gpu": 0, "cpu": "2"}})"}) {
    container["resources"] = Json::parse(resources);
    DesiredObjects d = Build(job);
    const Json& got = Resources(d, 1);
    EXPECT_EQ(got.value("limits", Json::object()).value("nvidia.com/gpu", Json()),
              container["resources"].value("limits", Json::object()).value("nvidia.com/gpu",
                                                                           Json()))
        << resources;
    EXPECT_EQ(got.value("requests", Json::object()).value("nvidia.com/gpu", Json()),
              container["resources"].value("requests", Json::object()).value("nvidia.com/gpu",
                                                                             Json()))
        << resources;
  }

  // Per group: a group that names its GPUs keeps them, the others get one.
  Json hetero = HeteroJob();  // device cuda
  hetero["spec"]["workerGroups"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
        ["nvidia.com/gpu"] = 2;
  hetero["spec"]["workerGroups"][1]["template"]["spec"]["containers"][0]["resources"]["limits"]
      .erase("nvidia.com/gpu");
  DesiredObjects d = Build(hetero);
  ASSERT_EQ(d.pods.size(), 4u);
  EXPECT_EQ(Resources(d, 1)["limits"]["nvidia.com/gpu"], 2);
  EXPECT_EQ(Resources(d, 2)["limits"]["nvidia.com/gpu"], 2);
  EXPECT_EQ(Resources(d, 3), Json::parse(R"({"limits": {"cpu": "4", "nvidia.com/gpu": "1"}})"));
  EXPECT_FALSE(Resources(d, 0).value("limits", Json::object()).contains("nvidia.com/gpu"));
}

TEST(DesiredObjectsGpuTest, CpuAndAutoAddNoGpu) {
  for (const char* device : {"cpu", "auto"}) {
    Json job = ShorthandJob(2);
    job["spec"]["device"] = device;
    absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
    if (!parsed.ok()) {
      std::printf("spec.device %s not accepted by this build's parser, not checked: %s\n",
                  device, std::string(parsed.status().message()).c_str());
      continue;
    }
    absl::StatusOr<DesiredObjects> d = BuildDesiredObjects(*parsed, "tok", 0, "");
    ASSERT_TRUE(d.ok()) << d.status();
    for (size_t pod = 0; pod < d->pods.size(); ++pod) {
      EXPECT_EQ(Resources(*d, pod), Json::parse(R"({"requests": {"cpu": "1", "memory": "2Gi"},
                                                    "limits": {"memory": "4Gi"}})"))
          << device << " " << Name(d->pods[pod]);
    }
  }
}

TEST(DesiredObjectsGpuTest, MalformedTemplateResourcesAreReported) {
  Json job = ShorthandJob(1);
  job["spec"]["device"] = "cuda";
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["resources"] =
      Json::parse(R"({"requests": {"cpu": "1"}, "limits": ["nvidia.com/gpu"]})");
  absl::StatusOr<DesiredObjects> bad = BuildDesiredObjects(*ParseTrainingJob(job), "t", 0, "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "spec.workers.template.spec.containers[0].resources.limits: must be a map");
}

Json CheckpointJob(const Json& volume) {
  Json job = ShorthandJob(2);
  job["spec"]["checkpoint"] = {{"path", "/checkpoints/mlp/job.ckpt"}, {"intervalSteps", 50}};
  if (!volume.is_null()) job["spec"]["checkpoint"]["volume"] = volume;
  return job;
}

const Json* VolumeNamed(const Json& pod, const std::string& name) {
  for (const Json& v : pod["spec"]["volumes"]) {
    if (v["name"] == name) return &v;
  }
  return nullptr;
}

const Json* MountAt(const Json& container, const std::string& path) {
  for (const Json& m : container["volumeMounts"]) {
    if (m["mountPath"] == path) return &m;
  }
  return nullptr;
}

TEST(DesiredObjectsTest, CheckpointVolumeIsMountedInEveryPod) {
  DesiredObjects d = Build(CheckpointJob(
      Json::parse(R"({"persistentVolumeClaim": {"claimName": "mlp-checkpoints"}})")));
  ASSERT_EQ(d.pods.size(), 3u);
  for (const Json& pod : d.pods) {
    SCOPED_TRACE(Name(pod));
    const Json* volume = VolumeNamed(pod, "hptrain-checkpoint");
    ASSERT_NE(volume, nullptr);
    EXPECT_EQ(*volume, Json::parse(R"({"name": "hptrain-checkpoint",
        "persistentVolumeClaim": {"claimName": "mlp-checkpoints"}})"));
    const Json& c = Container(pod, Label(pod, "hptrain.io/role"));
    const Json* mount = MountAt(c, "/checkpoints/mlp");
    ASSERT_NE(mount, nullptr);
    EXPECT_EQ(*mount, Json::parse(R"({"name": "hptrain-checkpoint",
                                      "mountPath": "/checkpoints/mlp"})"));
  }

  // A name in the source is replaced by ours; other sources pass through as written.
  d = Build(CheckpointJob(
      Json::parse(R"({"name": "mine", "nfs": {"server": "nfs.local", "path": "/exports/ckpt"}})")));
  EXPECT_EQ(*VolumeNamed(d.pods[1], "hptrain-checkpoint"),
            Json::parse(R"({"name": "hptrain-checkpoint",
                            "nfs": {"server": "nfs.local", "path": "/exports/ckpt"}})"));
}

TEST(DesiredObjectsTest, TemplateMountAtTheCheckpointDirectoryWins) {
  Json job = CheckpointJob(Json::parse(R"({"persistentVolumeClaim": {"claimName": "c"}})"));
  Json& spec = job["spec"]["workers"]["template"]["spec"];
  spec["volumes"] =
      Json::parse(R"([{"name": "own", "persistentVolumeClaim": {"claimName": "o"}}])");
  spec["containers"][0]["volumeMounts"] =
      Json::parse(R"([{"name": "own", "mountPath": "/checkpoints/mlp"}])");
  DesiredObjects d = Build(job);
  const Json& worker = d.pods[1];
  EXPECT_EQ(VolumeNamed(worker, "hptrain-checkpoint"), nullptr);
  EXPECT_EQ((*MountAt(Container(worker, "worker"), "/checkpoints/mlp"))["name"], "own");
  // The ps pod has no such mount of its own, and gets ours.
  EXPECT_NE(VolumeNamed(d.pods[0], "hptrain-checkpoint"), nullptr);
}

TEST(DesiredObjectsTest, WritableDirectoriesWithoutAVolumeGetScratch) {
  // The root filesystem is read-only: a checkpoint or collect directory outside /tmp gets an
  // emptyDir, unless the template mounts a volume there or above.
  Json job = CheckpointJob(nullptr);
  job["spec"]["collect"] = {{"path", "/data/mp2/snapshots.bin"}};
  DesiredObjects d = Build(job);
  const Json& worker = d.pods[1];
  EXPECT_EQ(*VolumeNamed(worker, "hptrain-checkpoint"),
            Json::parse(R"({"name": "hptrain-checkpoint", "emptyDir": {}})"));
  EXPECT_NE(MountAt(Container(worker, "worker"), "/checkpoints/mlp"), nullptr);
  EXPECT_EQ(*VolumeNamed(worker, "hptrain-collect"),
            Json::parse(R"({"name": "hptrain-collect", "emptyDir": {}})"));
  EXPECT_NE(MountAt(Container(worker, "worker"), "/data/mp2"), nullptr);

  // Mounted by the template above it: scratch there would hide what the volume holds.
  Json& spec = job["spec"]["workers"]["template"]["spec"];
  spec["volumes"] =
      Json::parse(R"([{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}])");
  spec["containers"][0]["volumeMounts"] =
      Json::parse(R"([{"name": "data", "mountPath": "/data"}])");
  d = Build(job);
  EXPECT_EQ(VolumeNamed(d.pods[1], "hptrain-collect"), nullptr);
  EXPECT_EQ(MountAt(Container(d.pods[1], "worker"), "/data/mp2"), nullptr);

  // Below /tmp, or relative (to the image's working directory, /tmp): nothing more.
  job = ShorthandJob(1);
  job["spec"]["checkpoint"] = {{"path", "/tmp/ckpt/job.ckpt"}};
  job["spec"]["collect"] = {{"path", "snapshots.bin"}};
  d = Build(job);
  std::vector<std::string> names;
  for (const Json& v : d.pods[1]["spec"]["volumes"]) names.push_back(v["name"].get<std::string>());
  EXPECT_THAT(names, ElementsAre("hptrain-job", "hptrain-tmp"));
}

TEST(DesiredObjectsTest, TemplateMountAtTmpWins) {
  Json job = ShorthandJob(1);
  Json& spec = job["spec"]["workers"]["template"]["spec"];
  spec["volumes"] = Json::parse(R"([{"name": "fast", "emptyDir": {"medium": "Memory"}}])");
  spec["containers"][0]["volumeMounts"] =
      Json::parse(R"([{"name": "fast", "mountPath": "/tmp"}])");
  DesiredObjects d = Build(job);
  EXPECT_EQ(VolumeNamed(d.pods[1], "hptrain-tmp"), nullptr);
  EXPECT_EQ((*MountAt(Container(d.pods[1], "worker"), "/tmp"))["name"], "fast");
  EXPECT_NE(VolumeNamed(d.pods[0], "hptrain-tmp"), nullptr);
}

TEST(DesiredObjectsTest, LaterGangsOfACheckpointedJobResume) {
  const Json job = CheckpointJob(Json::parse(R"({"persistentVolumeClaim": {"claimName": "c"}})"));
  // The first gang starts fresh, even if a file is at the path already (an earlier job's).
  for (const Json& pod : Build(job, /*generation=*/0).pods) {
    const Json& c = Container(pod, Label(pod, "hptrain.io/role"));
    EXPECT_EQ(EnvOf(c).count("HPTRAIN_RESUME"), 0u) << Name(pod);
  }
  for (int64_t generation : {1, 4}) {
    DesiredObjects d = Build(job, generation);
    EXPECT_EQ(EnvOf(Container(d.pods[1], "worker"))["HPTRAIN_RESUME"], "1");
    EXPECT_EQ(EnvOf(Container(d.pods[2], "worker"))["HPTRAIN_RESUME"], "1");
    // The ps starts empty either way; worker 0 re-initialises it from the checkpoint.
    EXPECT_EQ(EnvOf(Container(d.pods[0], "ps")).count("HPTRAIN_RESUME"), 0u);
  }
  // Nothing to resume from without a checkpoint path.
  DesiredObjects d = Build(ShorthandJob(2), /*generation=*/3);
  EXPECT_EQ(EnvOf(Container(d.pods[1], "worker")).count("HPTRAIN_RESUME"), 0u);

  // A template cannot turn it off: HPTRAIN_* variables are reserved (reserved_env.h).
  Json own = job;
  own["spec"]["workers"]["template"]["spec"]["containers"][0]["env"] =
      Json::parse(R"([{"name": "HPTRAIN_RESUME", "value": "0"}])");
  EXPECT_THAT(std::string(ParseTrainingJob(own).status().message()),
              HasSubstr("env[0].name: HPTRAIN_RESUME is reserved"));
}

TEST(DesiredObjectsTest, DefaultImageBringsItsPullPolicyAndSecrets) {
  RuntimeImage image;
  image.image = "registry.example/hptrain/runtime:0.2.0";
  image.pull_policy = "Always";
  image.pull_secrets = {"regcred", "mirror"};
  Json job = ShorthandJob(1);
  job["spec"]["workers"]["template"]["spec"]["containers"][0].erase("image");
  DesiredObjects d = Build(job, 0, image);
  for (const Json& pod : d.pods) {
    SCOPED_TRACE(Name(pod));
    const Json& c = Container(pod, Label(pod, "hptrain.io/role"));
    EXPECT_EQ(c["image"], "registry.example/hptrain/runtime:0.2.0");
    EXPECT_EQ(c["imagePullPolicy"], "Always");
    EXPECT_EQ(pod["spec"]["imagePullSecrets"],
              Json::parse(R"([{"name": "regcred"}, {"name": "mirror"}])"));
  }

  // The template's own pull settings win.
  Json own = job;
  own["spec"]["workers"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never";
  own["spec"]["workers"]["template"]["spec"]["imagePullSecrets"] = {{{"name", "team-cred"}}};
  d = Build(own, 0, image);
  EXPECT_EQ(Container(d.pods[1], "worker")["imagePullPolicy"], "Never");
  EXPECT_EQ(d.pods[1]["spec"]["imagePullSecrets"], Json::parse(R"([{"name": "team-cred"}])"));

  // A template naming its own image keeps Kubernetes' defaults for it: the settings belong to
  // the default image.
  d = Build(ShorthandJob(1), 0, image);
  for (const Json& pod : d.pods) {
    SCOPED_TRACE(Name(pod));
    const Json& c = Container(pod, Label(pod, "hptrain.io/role"));
    EXPECT_EQ(c["image"], testing::kImage);
    EXPECT_FALSE(c.contains("imagePullPolicy"));
    EXPECT_FALSE(pod["spec"].contains("imagePullSecrets"));
  }
}

TEST(DesiredObjectsTest, Deterministic) {
  EXPECT_EQ(DumpJson(Build(HeteroJob()).pods[2]), DumpJson(Build(HeteroJob()).pods[2]));
}

}  // namespace
}  // namespace hptrain::reconcile

namespace hptrain::reconcile {
namespace {

TEST(DesiredObjectsTlsTest, TheSecretIsMountedReadOnlyAndNamedInTheEnvironment) {
  Json job = testing::ShorthandJob(2);
  job["spec"]["security"] = {{"tls", {{"enabled", true}, {"secretName", "mlp-tls"}}}};
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<DesiredObjects> d = BuildDesiredObjects(*parsed, "t", 0, {"img:1"});
  ASSERT_TRUE(d.ok()) << d.status();
  for (const Json& pod : d->pods) {
    bool volume = false;
    for (const Json& v : pod["spec"]["volumes"]) {
      if (v["name"] != "hptrain-tls") continue;
      volume = true;
      EXPECT_EQ(v["secret"], Json::parse(R"({"secretName": "mlp-tls"})"));
    }
    EXPECT_TRUE(volume) << Name(pod);
    const Json& c = pod["spec"]["containers"][0];
    bool mounted = false;
    for (const Json& m : c["volumeMounts"]) {
      if (m["name"] != "hptrain-tls") continue;
      mounted = true;
      EXPECT_EQ(m["mountPath"], "/etc/hptrain/tls");
      EXPECT_EQ(m["readOnly"], true);
    }
    EXPECT_TRUE(mounted) << Name(pod);
    EXPECT_EQ(EnvOf(c)["HPTRAIN_TLS_DIR"], "/etc/hptrain/tls") << Name(pod);
  }
}

TEST(DesiredObjectsTlsTest, KubernetesNeedsTheSecretAndNoRebalancing) {
  Json job = testing::ShorthandJob(2);
  job["spec"]["security"] = {{"tls", {{"enabled", true}}}};
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(job);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(std::string(parsed.status().message()).rfind("spec.security.tls.secretName: ", 0), 0u)
      << parsed.status();
  job["spec"]["security"]["tls"]["secretName"] = "mlp-tls";
  job["spec"]["rebalance"] = {{"enabled", true}};
  parsed = ParseTrainingJob(job);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(std::string(parsed.status().message()).rfind("spec.rebalance.enabled: ", 0), 0u)
      << parsed.status();
  job["spec"].erase("security");
  EXPECT_TRUE(ParseTrainingJob(job).ok());
}

}  // namespace
}  // namespace hptrain::reconcile
