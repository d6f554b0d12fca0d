// The objects a TrainingJob should own, built from its parsed spec (controller contract):
//   Secret  J-hptrain   type Opaque, immutable, data {token, job.yaml}; annotated with the spec
//                       hash. Immutable because it is never updated: a new spec replaces it.
//   Service J           headless (clusterIP None), selects every pod of the job, ports 29400
//                       "coordinator" and 9090 "metrics", publishNotReadyAddresses (workers
//                       resolve J-ps-0.J.N.svc before any pod is ready).
//   Pod     J-ps-0      `hptrain ps` from spec.ps.template or, when absent, from the first worker
//                       group's image (and imagePullPolicy / imagePullSecrets) with no resources,
//                       so no GPU is spent on it and it is not pinned to the GPU pools.
//   Pods    J-ps-s      parameter-server strategies (ps, hps, mp2) only: spec.ps.shards = S pods
//                       J-ps-0 .. J-ps-<S-1>, all from the ps template, rank s. The coordinator
//                       stays in J-ps-0; each pod serves one range of the parameters.
//   Services J-ps-s     parameter-server strategies only, one per ps pod: ClusterIP, selecting
//                       that pod (job, role ps, rank s), port 29400 "grpc". Each shard
//                       advertises its Service's DNS name to the coordinator.
//   Pods    J-worker-r  `hptrain worker`, rank r, from the template of r's group.
// Every object carries the job's labels and controller owner reference; pods also carry the
// restart generation and spec hash annotations (labels.h) and, with gang scheduling, the
// PodGroup marker (parsed_job.h). Pod env: HPTRAIN_JOB, HPTRAIN_TOKEN_FILE (the Secret mounted
// read-only at /etc/hptrain), HPTRAIN_COORDINATOR=J-ps-0.J.N.svc:29400, HPTRAIN_RANK,
// HPTRAIN_GROUP (workers), HPTRAIN_PS_HOST/PORT, HPTRAIN_METRICS_HOST/PORT, HPTRAIN_BIND_HOST;
// with a parameter-server strategy the ps pods also get HPTRAIN_PS_SHARD=<s> and
// HPTRAIN_PS_ADVERTISE=J-ps-s.N.svc:29400 (their Service), and a readiness probe on
// GET /readyz at the metrics port (a shard's Service sends traffic only once it is ready).
//
// Pure and deterministic; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_DESIRED_OBJECTS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_DESIRED_OBJECTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/reconcile/object_meta.h"
#include "controller/reconcile/parsed_job.h"

namespace hptrain::reconcile {

inline constexpr char kMountPath[] = "/etc/hptrain";
inline constexpr char kVolcanoGroupAnnotation[] = "scheduling.k8s.io/group-name";
inline constexpr char kSchedulerPluginsGroupLabel[] = "scheduling.x-k8s.io/pod-group";

struct DesiredObjects {
  Json secret;
  Json service;                   // the headless Service J
  std::vector<Json> ps_services;  // J-ps-0 .. J-ps-<S-1>; empty without a parameter server
  std::vector<Json> pods;         // the ps pods by shard first, then the workers by rank
};

// Builds every object of `job`. `token` goes into the Secret; `restart_generation` is stamped
// on the pods; `default_image` is used where a template names no image (may be empty).
// Returns InvalidArgument "<field path>: <reason>" when a template is malformed or no image is
// known for a pod, e.g. "spec.workerGroups[1].template.spec.containers[0].image: required".
absl::StatusOr<DesiredObjects> BuildDesiredObjects(const ParsedJob& job, absl::string_view token,
                                                   int64_t restart_generation,
                                                   absl::string_view default_image);

// The Kubernetes field path of worker group `index`'s template ("spec.workers.template" for
// the shorthand form, else "spec.workerGroups[<index>].template").
std::string WorkerTemplatePath(const ParsedJob& job, size_t index);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_DESIRED_OBJECTS_H_
