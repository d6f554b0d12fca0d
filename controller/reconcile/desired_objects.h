// The objects a TrainingJob should own, built from its parsed spec (controller contract):
//   Secret  J-hptrain   type Opaque, immutable, data {token, job.yaml}; annotated with the spec
//                       hash. Immutable because it is never updated: a new spec replaces it.
//   Service J           headless (clusterIP None), selects every pod of the job, ports 29400
//                       "coordinator" and 9090 "metrics", publishNotReadyAddresses (workers
//                       resolve J-ps-0.J.N.svc before any pod is ready).
//   Pod     J-ps-0      `hptrain ps` from spec.ps.template or, when absent, from the first worker
//                       group's image (and imagePullPolicy / imagePullSecrets; with spec.trainer,
//                       the default image instead) with the default resources below, so no GPU
//                       is spent on it and it is not pinned to the GPU pools.
//   Pods    J-ps-s      parameter-server strategies (ps, hps, mp2) only: spec.ps.shards = S pods
//                       J-ps-0 .. J-ps-<S-1>, all from the ps template, rank s. The coordinator
//                       stays in J-ps-0; each pod serves one range of the parameters.
//   Services J-ps-s     parameter-server strategies only, one per ps pod: ClusterIP, selecting
//                       that pod (job, role ps, rank s), port 29400 "grpc". Each shard
//                       advertises its Service's DNS name to the coordinator.
//   Pods    J-worker-r  `hptrain worker` (or the spec.trainer program, below), rank r, from the
//                       template of r's group.
// Every object carries the job's labels and controller owner reference; pods also carry the
// restart generation and spec hash annotations (labels.h) and, with gang scheduling, the
// PodGroup marker (parsed_job.h), and the PodGroup itself is desired (pod_group.h); with
// spec.gangScheduling.priorityClassName, pods whose template names no priorityClassName get it.
// Pod env: HPTRAIN_JOB, HPTRAIN_TOKEN_FILE (the Secret mounted
// read-only at /etc/hptrain), HPTRAIN_COORDINATOR=J-ps-0.J.N.svc:29400, HPTRAIN_RANK,
// HPTRAIN_GROUP and HPTRAIN_NODE_NAME (workers; the downward API's spec.nodeName, which
// groups the workers by node for the hierarchical exchange), HPTRAIN_PS_HOST/PORT, HPTRAIN_METRICS_HOST/PORT, HPTRAIN_BIND_HOST;
// with a parameter-server strategy the ps pods also get HPTRAIN_PS_SHARD=<s> and
// HPTRAIN_PS_ADVERTISE=J-ps-s.N.svc:29400 (their Service). `hptrain ps|worker` take all of their
// configuration from these variables (no flags); a template may set none of the HPTRAIN_* names
// (reserved_env.h; ParseTrainingJob refuses it).
//
// The user's program (spec.trainer): the worker container runs spec.trainer.command with
// spec.trainer.args followed by the template's own args, in spec.trainer.workingDir when set
// (else the template's or the image's), in the template's image (the default image when it
// names none), with the environment, Secret, volumes, ports, readiness probe and defaults of an
// `hptrain worker` container, HPTRAIN_RESUME included: the program reads them as `hptrain
// worker` would (python/hptrain's hp.init()). It gets no liveness probe unless the template has
// one: the program serves /healthz only once it has called hp.init(). The ps pods are those of
// every job (`hptrain ps`), except that without spec.ps.template they run the default image
// rather than the first group's, which holds the user's program and need not hold hptrain.
//
// Defaults of every pod, ps and worker, each kept only where the template leaves the field
// unset (pod_template.h says how they merge):
//   * the restricted Pod Security Standard: pod securityContext runAsNonRoot, runAsUser,
//     runAsGroup and fsGroup kRuntimeUser (the runtime image's user), fsGroupChangePolicy
//     OnRootMismatch, seccompProfile RuntimeDefault; every container allowPrivilegeEscalation
//     false and capabilities drop [ALL]; the main container readOnlyRootFilesystem, with an
//     emptyDir "hptrain-tmp" at /tmp for scratch; automountServiceAccountToken false (the
//     runtime never calls the API server);
//   * probes on the metrics port: readiness GET /readyz (ready once the process has joined the
//     job; a shard's Service sends traffic only then), liveness GET /healthz;
//   * resources requests cpu 1, memory 2Gi and limits memory 4Gi when the main container names
//     neither cpu nor memory (a GPU-only template keeps its GPUs beside them), so that no pod
//     runs BestEffort;
//   * the default image (RuntimeImage) when the main container names none, then also its pull
//     policy and pull secrets;
//   * with spec.device cuda, one GPU per worker: limits nvidia.com/gpu "1" on the worker
//     container, unless its template names nvidia.com/gpu in requests or limits (the template's
//     count wins, 0 included). The NVIDIA device plugin must advertise the resource
//     (charts/hptrain/README.md). device auto and cpu add nothing: an auto worker uses what its
//     pod was given. The ps pods never get a GPU.
// Checkpoints: with spec.checkpoint.volume, a volume "hptrain-checkpoint" of that source is
// mounted at the directory of spec.checkpoint.path in every ps and worker pod. Without it, that
// directory and spec.collect.path's, when outside /tmp, get an emptyDir instead (the root
// filesystem is read-only), unless the template mounts a volume there or above.
// TLS (spec.security.tls.enabled): the Secret spec.security.tls.secretName (tls.crt, tls.key,
// ca.crt: cert-manager's layout) is mounted read-only at /etc/hptrain/tls in the ps and every
// worker pod, and HPTRAIN_TLS_DIR points there (docs/security.md says what the certificate must
// name).
// Resume: on every gang after the first (restart_generation > 0, or the gang after a
// runPolicy.suspend of a job that had started) of a job with spec.checkpoint.path, the workers
// get HPTRAIN_RESUME=1, the equivalent of `hptrain worker
// --resume`: they continue from the checkpoint when the file exists, else start over. The ps
// pods do not: a ps starts empty either way, and worker 0 re-initialises it from the checkpoint.
// The first gang never resumes, so a checkpoint left behind by an earlier job at the same path
// is not picked up by a new one.
//
// Pure and deterministic; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_DESIRED_OBJECTS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_DESIRED_OBJECTS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/parsed_job.h"
#include "controller/reconcile/pod_template.h"

namespace hptrain::reconcile {

inline constexpr char kMountPath[] = "/etc/hptrain";
inline constexpr char kVolcanoGroupAnnotation[] = "scheduling.k8s.io/group-name";
inline constexpr char kSchedulerPluginsGroupLabel[] = "scheduling.x-k8s.io/pod-group";

// The uid and gid the pods run as: the runtime image's user (deploy/docker/runtime.Dockerfile,
// USER 65532:65532, the conventional "nonroot" of distroless images).
inline constexpr int kRuntimeUser = 65532;
inline constexpr char kScratchVolumeName[] = "hptrain-tmp";
inline constexpr char kScratchPath[] = "/tmp";
inline constexpr char kCheckpointVolumeName[] = "hptrain-checkpoint";
inline constexpr char kCollectVolumeName[] = "hptrain-collect";
inline constexpr char kResumeEnv[] = "HPTRAIN_RESUME";
inline constexpr char kTlsVolumeName[] = "hptrain-tls";
inline constexpr char kTlsPath[] = "/etc/hptrain/tls";
// The NVIDIA device plugin's extended resource; one per worker of a cuda job.
inline constexpr char kGpuResource[] = "nvidia.com/gpu";

struct DesiredObjects {
  Json secret;
  Json service;                   // the headless Service J
  std::vector<Json> ps_services;  // J-ps-0 .. J-ps-<S-1>; empty without a parameter server
  std::vector<Json> pods;         // the ps pods by shard first, then the workers by rank
  // With gang scheduling, the job's PodGroup (pod_group.h); else nullopt.
  std::optional<Json> pod_group;
};

// Builds every object of `job`. `token` goes into the Secret; `restart_generation`
// (status.restarts: 0 for the first gang) is stamped on the pods and decides HPTRAIN_RESUME;
// `default_image` is used where a template names no image (its image may be empty).
// Returns InvalidArgument "<field path>: <reason>" when a template is malformed or no image is
// known for a pod, e.g. "spec.workerGroups[1].template.spec.containers[0].image: required".
// `resume` (a gang that follows a suspension of a job that ran) asks for HPTRAIN_RESUME as a
// restart does.
absl::StatusOr<DesiredObjects> BuildDesiredObjects(const ParsedJob& job, absl::string_view token,
                                                   int64_t restart_generation,
                                                   const RuntimeImage& default_image,
                                                   bool resume = false);

// The Kubernetes field path of worker group `index`'s template ("spec.workers.template" for
// the shorthand form, else "spec.workerGroups[<index>].template").
std::string WorkerTemplatePath(const ParsedJob& job, size_t index);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_DESIRED_OBJECTS_H_
