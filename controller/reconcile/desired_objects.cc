#include "controller/reconcile/desired_objects.h"

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/pod_template.h"
#include "runtime/job/job_validate.h"

namespace hptrain::reconcile {
namespace {

// The container of `pod_template` named `name`, else its first; null when it has none.
const Json* MainContainer(const Json& pod_template, absl::string_view name) {
  const Json* containers = Find(pod_template, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array() || containers->empty()) return nullptr;
  for (const Json& c : *containers) {
    if (StringAt(c, {"name"}) == name) return &c;
  }
  return &(*containers)[0];
}

// spec.ps.template when given, else a template with the first group's image only.
Json PsTemplate(const ParsedJob& job) {
  if (!job.ps_template.is_null()) return job.ps_template;
  Json container = {{"name", kRolePs}};
  Json spec = Json::object();
  if (!job.worker_templates.empty()) {
    const Json& first = job.worker_templates[0];
    if (const Json* c = MainContainer(first, kRoleWorker); c != nullptr) {
      for (const char* key : {"image", "imagePullPolicy"}) {
        if (const Json* v = Find(*c, {key}); v != nullptr && v->is_string()) container[key] = *v;
      }
    }
    if (const Json* secrets = Find(first, {"spec", "imagePullSecrets"}); secrets != nullptr) {
      spec["imagePullSecrets"] = *secrets;
    }
  }
  spec["containers"] = Json::array({std::move(container)});
  return Json{{"spec", std::move(spec)}};
}

PodSettings CommonSettings(const ParsedJob& job, int64_t restart_generation,
                           absl::string_view default_image) {
  PodSettings s;
  s.ns = job.ns;
  s.owner_reference = OwnerReference(job.name, job.uid);
  s.secret_name = SecretName(job.name);
  s.mount_path = kMountPath;
  s.subdomain = ServiceName(job.name);
  s.scheduler_name = job.scheduler_name;
  s.default_image = std::string(default_image);
  s.annotations[kRestartGenerationAnnotation] = absl::StrCat(restart_generation);
  s.annotations[kSpecHashAnnotation] = job.spec_hash;
  if (job.gang == GangScheduler::kVolcano) s.annotations[kVolcanoGroupAnnotation] = job.name;
  return s;
}

void FinishSettings(const ParsedJob& job, absl::string_view role, int rank, absl::string_view group,
                    PodSettings* s) {
  s->name = role == kRolePs ? PsPodName(job.name, rank) : WorkerPodName(job.name, rank);
  s->hostname = s->name;
  s->container_name = std::string(role);
  s->command = {"hptrain", std::string(role)};
  s->labels = PodLabels(job.name, role, rank, group);
  if (job.gang == GangScheduler::kSchedulerPlugins)
    s->labels[kSchedulerPluginsGroupLabel] = job.name;
  const std::string mount(kMountPath);
  s->env = {
      {"HPTRAIN_JOB", mount + "/job.yaml"},
      {"HPTRAIN_TOKEN_FILE", mount + "/token"},
      {"HPTRAIN_COORDINATOR", absl::StrCat(PsPodName(job.name), ".", ServiceName(job.name), ".",
                                           job.ns, ".svc:", kCoordinatorPort)},
      {"HPTRAIN_RANK", absl::StrCat(rank)},
  };
  if (role == kRoleWorker) s->env.emplace_back("HPTRAIN_GROUP", std::string(group));
  s->env.insert(s->env.end(), {{"HPTRAIN_PS_HOST", "0.0.0.0"},
                               {"HPTRAIN_PS_PORT", absl::StrCat(kCoordinatorPort)},
                               {"HPTRAIN_METRICS_HOST", "0.0.0.0"},
                               {"HPTRAIN_METRICS_PORT", absl::StrCat(kMetricsPort)},
                               {"HPTRAIN_BIND_HOST", "0.0.0.0"}});
  s->ports.clear();
  if (role == kRolePs) s->ports.push_back({kCoordinatorPortName, kCoordinatorPort});
  s->ports.push_back({kMetricsPortName, kMetricsPort});
  if (role == kRolePs && job::UsesParameterServer(job.spec.strategy.type)) {
    s->env.insert(s->env.end(),
                  {{"HPTRAIN_PS_SHARD", absl::StrCat(rank)},
                   {"HPTRAIN_PS_ADVERTISE", absl::StrCat(PsServiceName(job.name, rank), ".", job.ns,
                                                         ".svc:", kCoordinatorPort)}});
    s->readiness_probe =
        Json{{"httpGet", {{"path", "/readyz"}, {"port", kMetricsPortName}}}, {"periodSeconds", 5}};
  }
}

Json ObjectMeta(const ParsedJob& job, const std::string& name) {
  return Json{{"name", name},
              {"namespace", job.ns},
              {"labels", JobLabels(job.name)},
              {"ownerReferences", Json::array({OwnerReference(job.name, job.uid)})}};
}

Json BuildSecret(const ParsedJob& job, absl::string_view token) {
  Json metadata = ObjectMeta(job, SecretName(job.name));
  metadata["annotations"] = {{kSpecHashAnnotation, job.spec_hash}};
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata", std::move(metadata)},
      {"type", "Opaque"},
      {"immutable", true},
      {"data",
       {{"token", absl::Base64Escape(token)}, {"job.yaml", absl::Base64Escape(job.manifest)}}}};
}

Json BuildService(const ParsedJob& job) {
  Json ports = Json::array();
  for (const auto& [name, port] :
       {std::pair<const char*, int>{kCoordinatorPortName, kCoordinatorPort},
        std::pair<const char*, int>{kMetricsPortName, kMetricsPort}}) {
    ports.push_back(
        Json{{"name", name}, {"port", port}, {"targetPort", port}, {"protocol", "TCP"}});
  }
  return Json{{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", ObjectMeta(job, ServiceName(job.name))},
              {"spec",
               {{"clusterIP", "None"},
                {"selector", {{kJobLabel, job.name}}},
                {"publishNotReadyAddresses", true},
                {"ports", std::move(ports)}}}};
}

// The Service in front of ps pod `shard`: a stable virtual IP that only routes to the pod once
// it is ready (the headless Service publishes pods that are not).
Json BuildPsService(const ParsedJob& job, int shard) {
  Json selector = {{kJobLabel, job.name}, {kRoleLabel, kRolePs}, {kRankLabel, absl::StrCat(shard)}};
  return Json{{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", ObjectMeta(job, PsServiceName(job.name, shard))},
              {"spec",
               {{"type", "ClusterIP"},
                {"selector", std::move(selector)},
                {"ports", Json::array({Json{{"name", kPsServicePortName},
                                            {"port", kCoordinatorPort},
                                            {"targetPort", kCoordinatorPort},
                                            {"protocol", "TCP"}}})}}}};
}

}  // namespace

std::string WorkerTemplatePath(const ParsedJob& job, size_t index) {
  if (job.workers_shorthand) return "spec.workers.template";
  return absl::StrCat("spec.workerGroups[", index, "].template");
}

absl::StatusOr<DesiredObjects> BuildDesiredObjects(const ParsedJob& job, absl::string_view token,
                                                   int64_t restart_generation,
                                                   absl::string_view default_image) {
  DesiredObjects out;
  out.secret = BuildSecret(job, token);
  out.service = BuildService(job);

  int rank = 0;
  for (size_t g = 0; g < job.spec.worker_groups.size(); ++g) {
    const job::WorkerGroupSpec& group = job.spec.worker_groups[g];
    for (int i = 0; i < group.replicas; ++i, ++rank) {
      PodSettings w = CommonSettings(job, restart_generation, default_image);
      FinishSettings(job, kRoleWorker, rank, group.name, &w);
      absl::StatusOr<Json> pod = BuildPodFromTemplate(job.worker_templates[g], w);
      if (!pod.ok()) {
        return absl::Status(pod.status().code(),
                            absl::StrCat(WorkerTemplatePath(job, g), ".", pod.status().message()));
      }
      out.pods.push_back(*std::move(pod));
    }
  }

  // Built after the workers: without spec.ps.template the ps pods take the first group's image,
  // and a group without one has already been reported under its own path.
  const Json ps_template = PsTemplate(job);
  const int shards = job::PsShardCount(job.spec);
  std::vector<Json> ps_pods;
  for (int shard = 0; shard < shards; ++shard) {
    PodSettings ps = CommonSettings(job, restart_generation, default_image);
    FinishSettings(job, kRolePs, shard, "", &ps);
    absl::StatusOr<Json> ps_pod = BuildPodFromTemplate(ps_template, ps);
    if (!ps_pod.ok()) {
      return absl::Status(ps_pod.status().code(),
                          absl::StrCat("spec.ps.template.", ps_pod.status().message()));
    }
    ps_pods.push_back(*std::move(ps_pod));
    if (job::UsesParameterServer(job.spec.strategy.type)) {
      out.ps_services.push_back(BuildPsService(job, shard));
    }
  }
  out.pods.insert(out.pods.begin(), std::make_move_iterator(ps_pods.begin()),
                  std::make_move_iterator(ps_pods.end()));
  return out;
}

}  // namespace hptrain::reconcile
