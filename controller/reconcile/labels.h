// Names, labels, annotations and owner references of the objects a TrainingJob owns.
//
// For a job J in namespace N (see the controller contract):
//   Pod     J-ps-0            role ps, rank "0"; with a parameter-server strategy (ps, hps, mp2)
//                             and spec.ps.shards = S, J-ps-0 .. J-ps-<S-1>, rank "<shard>"
//   Pods    J-worker-<rank>   role worker, ranks 0.. numbered group by group in document order
//   Service J                 headless, selects every pod of the job
//   Service J-ps-<shard>      parameter-server strategies only: ClusterIP, selects that ps pod
//   Secret  J-hptrain         keys `token` and `job.yaml`
// Every owned object carries a controller owner reference to the job and the labels
// hptrain.io/job and app.kubernetes.io/managed-by; pods also carry role, rank and (workers)
// group. Names are deterministic, so reconciling twice never creates a second copy of anything.
//
// Pure and thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_LABELS_H_
#define HPTRAIN_CONTROLLER_RECONCILE_LABELS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile {

// Labels.
inline constexpr char kJobLabel[] = "hptrain.io/job";
inline constexpr char kRoleLabel[] = "hptrain.io/role";
inline constexpr char kRankLabel[] = "hptrain.io/rank";
inline constexpr char kGroupLabel[] = "hptrain.io/group";
inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "hptrain-controller";
inline constexpr char kRolePs[] = "ps";
inline constexpr char kRoleWorker[] = "worker";

// Annotations the controller stamps on what it creates.
// The gang restart generation a pod was created in (gang_restart.h): "0", "1", ...
inline constexpr char kRestartGenerationAnnotation[] = "hptrain.io/restart-generation";
// The hash of the job.yaml a pod or the Secret was made from (parsed_job.h); a pod whose hash
// differs from the job's current one runs an outdated spec.
inline constexpr char kSpecHashAnnotation[] = "hptrain.io/spec-hash";
// On an elastic job's Secret: the hash of the whole manifest, worker replicas included
// (parsed_job.h); the Secret is replaced when it is outdated only while the job has no pods.
inline constexpr char kManifestHashAnnotation[] = "hptrain.io/manifest-hash";

// Ports of the headless Service and the containers (controller contract).
inline constexpr int kCoordinatorPort = 29400;
inline constexpr char kCoordinatorPortName[] = "coordinator";
inline constexpr int kMetricsPort = 9090;
inline constexpr char kMetricsPortName[] = "metrics";
// The port of each per-shard parameter-server Service (the coordinator port of its pod).
inline constexpr char kPsServicePortName[] = "grpc";

// Object names, from the job's name.
std::string PsPodName(absl::string_view job, int shard = 0);
// The per-shard Service of ps pod `shard`; the same name as the pod.
std::string PsServiceName(absl::string_view job, int shard);
std::string WorkerPodName(absl::string_view job, int rank);
std::string ServiceName(absl::string_view job);
std::string SecretName(absl::string_view job);

// "hptrain.io/job=J": every object of the job.
std::string JobSelector(absl::string_view job);
// "hptrain.io/job=J,hptrain.io/role=worker": the job's worker pods (status.selector, the scale
// subresource's labelSelectorPath).
std::string WorkerSelector(absl::string_view job);

// {hptrain.io/job: J, app.kubernetes.io/managed-by: hptrain-controller}: the Service and Secret.
Json JobLabels(absl::string_view job);
// JobLabels plus role and rank, and the group for workers (`group` ignored for ps).
Json PodLabels(absl::string_view job, absl::string_view role, int rank, absl::string_view group);

// The controller owner reference to the TrainingJob `job` (apiVersion hptrain.io/v1alpha1, kind
// TrainingJob, its name and uid, controller: true, blockOwnerDeletion: true).
Json OwnerReference(absl::string_view job_name, absl::string_view job_uid);

// True when `object`'s controller owner reference names this TrainingJob: by uid when the job
// has one (a job deleted and re-created under the same name has a new uid, and the old one's
// children are not adopted), else by name.
bool IsControlledBy(const Json& object, const Json& job);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_LABELS_H_
