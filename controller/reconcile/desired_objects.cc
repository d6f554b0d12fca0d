#include "controller/reconcile/desired_objects.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/pod_group.h"
#include "controller/reconcile/pod_template.h"
#include "controller/reconcile/rewritten_container.h"
#include "runtime/base/status.h"
#include "runtime/job/job_validate.h"

namespace hptrain::reconcile {
namespace {

// The container of `pod_template` named `name`, else its first; null when it has none.
const Json* MainContainer(const Json& pod_template, absl::string_view name) {
  const Json* containers = Find(pod_template, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array() || containers->empty()) return nullptr;
  return &(*containers)[RewrittenContainerIndex(pod_template, name)];
}

// spec.ps.template when given, else a template with the first group's image only (none for a
// spec.trainer job: its workers' image is the user's program's, which need not hold hptrain).
Json PsTemplate(const ParsedJob& job) {
  if (!job.ps_template.is_null()) return job.ps_template;
  Json container = {{"name", kRolePs}};
  Json spec = Json::object();
  if (!job.worker_templates.empty() && !job.spec.trainer.set()) {
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

// Readiness: the runtime answers /readyz once the process has joined the job (a worker after
// the rendezvous, a ps once it serves); a shard's Service routes to it only then.
Json ReadinessProbe() {
  return Json{{"httpGet", {{"path", "/readyz"}, {"port", kMetricsPortName}}}, {"periodSeconds", 5}};
}

// Liveness: /healthz is answered by the metrics server's own threads, not by the training loop,
// so a worker deep in a long step, or blocked in an all-reduce on a slow peer, still answers;
// only a process wedged as a whole (or starved of CPU for a minute) fails it. With restartPolicy
// Never a failed liveness check fails the pod, and the controller restarts the whole gang, so a
// false alarm is expensive: six misses 10 s apart, after 30 s for the process to read its job
// and open the port (an mp2 ps loads its predictor first).
Json LivenessProbe() {
  return Json{{"httpGet", {{"path", "/healthz"}, {"port", kMetricsPortName}}},
              {"initialDelaySeconds", 30},
              {"periodSeconds", 10},
              {"timeoutSeconds", 5},
              {"failureThreshold", 6}};
}

// For a main container that names neither cpu nor memory: requests keep the pod out of the
// BestEffort class (the first evicted under node pressure) and let the scheduler count it. No CPU
// limit: CFS quota throttling stalls a throttled worker in the middle of a step, and every
// synchronous collective waits for the slowest worker, so one throttled pod slows the whole job;
// above its request a pod only uses CPU nobody else asked for. Memory is not compressible, so
// it is limited: a leak ends in this pod's OOM kill (and a gang restart) rather than the node's.
Json DefaultResources() {
  return Json{{"requests", {{"cpu", "1"}, {"memory", "2Gi"}}}, {"limits", {{"memory", "4Gi"}}}};
}

// The directory of an absolute file path; "" for a relative path or a file in "/".
std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (path.empty() || path.front() != '/' || slash == 0) return "";
  return path.substr(0, slash);
}

bool InScratch(const std::string& directory) {
  return directory == kScratchPath || absl::StartsWith(directory, absl::StrCat(kScratchPath, "/"));
}

// spec.checkpoint.volume as JSON. The runtime's parser keeps it as YAML text; the manifest
// (job.yaml, which is JSON) holds it as the user wrote it.
absl::StatusOr<Json> CheckpointVolumeSource(const ParsedJob& job) {
  const Json manifest = Json::parse(job.manifest, nullptr, /*allow_exceptions=*/false);
  const Json* source = Find(manifest, {"spec", "checkpoint", "volume"});
  if (source == nullptr || !source->is_object() || source->empty()) {
    return absl::InvalidArgumentError(
        "spec.checkpoint.volume: must be a volume source, e.g. "
        "{persistentVolumeClaim: {claimName: NAME}}");
  }
  Json out = *source;
  out.erase("name");  // the volume is named by the controller
  return out;
}

// The volumes every pod of `job` gets besides the job's Secret (desired_objects.h).
absl::StatusOr<std::vector<PodVolume>> JobVolumes(const ParsedJob& job) {
  std::vector<PodVolume> volumes;
  auto scratch = [&](const char* name, const std::string& directory) {
    if (directory.empty() || InScratch(directory)) return;
    for (const PodVolume& v : volumes) {
      if (v.path == directory) return;
    }
    volumes.push_back({name, Json{{"emptyDir", Json::object()}}, directory, /*scratch=*/true});
  };
  volumes.push_back({kScratchVolumeName, Json{{"emptyDir", Json::object()}}, kScratchPath,
                     /*scratch=*/true});
  const job::CheckpointSpec& checkpoint = job.spec.checkpoint;
  if (!checkpoint.volume_yaml.empty()) {
    // Validation made the path absolute and below a directory.
    HPTRAIN_ASSIGN_OR_RETURN(Json source, CheckpointVolumeSource(job));
    volumes.push_back({kCheckpointVolumeName, std::move(source), DirectoryOf(checkpoint.path),
                       /*scratch=*/false});
  } else {
    scratch(kCheckpointVolumeName, DirectoryOf(checkpoint.path));
  }
  scratch(kCollectVolumeName, DirectoryOf(job.spec.collect.path));
  const job::TlsSpec& tls = job.spec.security.tls;
  if (tls.enabled) {
    volumes.push_back({kTlsVolumeName, Json{{"secret", {{"secretName", tls.secret_name}}}},
                       kTlsPath, /*scratch=*/false, /*read_only=*/true});
  }
  return volumes;
}

PodSettings CommonSettings(const ParsedJob& job, int64_t restart_generation,
                           const RuntimeImage& default_image,
                           const std::vector<PodVolume>& volumes) {
  PodSettings s;
  s.ns = job.ns;
  s.owner_reference = OwnerReference(job.name, job.uid);
  s.secret_name = SecretName(job.name);
  s.mount_path = kMountPath;
  s.subdomain = ServiceName(job.name);
  s.scheduler_name = job.scheduler_name;
  if (job.gang != GangScheduler::kNone) {
    s.priority_class_name = job.spec.gang_scheduling.priority_class_name;
  }
  s.default_image = default_image;
  s.annotations[kRestartGenerationAnnotation] = absl::StrCat(restart_generation);
  s.annotations[kSpecHashAnnotation] = job.spec_hash;
  if (job.gang == GangScheduler::kVolcano) s.annotations[kVolcanoGroupAnnotation] = job.name;
  s.readiness_probe = ReadinessProbe();
  s.liveness_probe = LivenessProbe();
  s.resources = DefaultResources();
  // The restricted Pod Security Standard. fsGroup makes a checkpoint volume writable by the
  // runtime's user where the volume's driver supports ownership (most block-backed claims; not
  // NFS); OnRootMismatch skips the recursive chown of a volume that is already right.
  s.pod_security_context = Json{{"runAsNonRoot", true},
                                {"runAsUser", kRuntimeUser},
                                {"runAsGroup", kRuntimeUser},
                                {"fsGroup", kRuntimeUser},
                                {"fsGroupChangePolicy", "OnRootMismatch"},
                                {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  s.container_security_context = Json{{"allowPrivilegeEscalation", false},
                                      {"capabilities", {{"drop", Json::array({"ALL"})}}}};
  // Only the main container's root filesystem is made read-only: the runtime writes nothing but
  // /tmp and the volumes above, while a user's sidecar may need to write anywhere.
  s.main_security_context = Json{{"readOnlyRootFilesystem", true}};
  // The runtime talks to the coordinator only; a token it never uses is one less to leak.
  s.automount_service_account_token = false;
  s.volumes = volumes;
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
  if (role == kRoleWorker) {
    s->env.emplace_back("HPTRAIN_GROUP", std::string(group));
    // The node, for the node-based hierarchical exchange: the workers of one node group.
    s->field_env.emplace_back("HPTRAIN_NODE_NAME", "spec.nodeName");
  }
  if (job.spec.security.tls.enabled) s->env.emplace_back("HPTRAIN_TLS_DIR", kTlsPath);
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
  }
}

// A worker of a spec.trainer job runs the user's program with the same environment. The
// liveness probe is left to the template: the program answers /healthz only from hp.init() on,
// which may come after minutes of imports and data loading; a failed probe would restart the
// gang over and over.
void UseTrainer(const job::TrainerSpec& trainer, PodSettings* s) {
  s->command = trainer.command;
  s->args = trainer.args;
  s->working_dir = trainer.working_dir;
  s->liveness_probe = nullptr;
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
  if (job.spec.elastic.enabled) {
    metadata["annotations"][kManifestHashAnnotation] = job.manifest_hash;
  }
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
                                                   const RuntimeImage& default_image,
                                                   bool resume_gang) {
  DesiredObjects out;
  out.secret = BuildSecret(job, token);
  out.service = BuildService(job);
  HPTRAIN_ASSIGN_OR_RETURN(const std::vector<PodVolume> volumes, JobVolumes(job));
  const bool resume =
      (restart_generation > 0 || resume_gang) && !job.spec.checkpoint.path.empty();

  int rank = 0;
  for (size_t g = 0; g < job.spec.worker_groups.size(); ++g) {
    const job::WorkerGroupSpec& group = job.spec.worker_groups[g];
    for (int i = 0; i < group.replicas; ++i, ++rank) {
      // An elastic job never has a worker above its last slot, whatever the replica count says.
      if (job.spec.elastic.enabled && job.spec.elastic.max_replicas > 0 &&
          rank >= job.spec.elastic.max_replicas) {
        break;
      }
      PodSettings w = CommonSettings(job, restart_generation, default_image, volumes);
      FinishSettings(job, kRoleWorker, rank, group.name, &w);
      if (resume) w.env.emplace_back(kResumeEnv, "1");
      if (job.spec.trainer.set()) UseTrainer(job.spec.trainer, &w);
      if (job.spec.device == "cuda") w.default_limits[kGpuResource] = "1";
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
    PodSettings ps = CommonSettings(job, restart_generation, default_image, volumes);
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
  // An elastic job's gang is what it cannot train without: its minReplicas (scaling then does not
  // touch the PodGroup).
  const int gang_workers = job.spec.elastic.enabled
                               ? std::min(job.spec.WorldSize(), job.spec.elastic.min_replicas)
                               : job.spec.WorldSize();
  out.pod_group = BuildPodGroup(job, shards, gang_workers);
  return out;
}

}  // namespace hptrain::reconcile
