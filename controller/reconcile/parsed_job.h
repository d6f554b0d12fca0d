// A TrainingJob object (JSON, as the API server returns it) read into the runtime's JobSpec,
// plus the few things only the controller needs: pod templates as JSON, the scheduler, and the
// job.yaml the pods will run.
//
// The spec is parsed by the runtime's own parser (hptrain::job::ParseJobText; JSON is YAML), so
// a manifest is accepted on Kubernetes exactly when `hptrain run` accepts it. Two spec keys
// matter only here (the runtime reads and validates them, and ignores them):
//   spec.schedulerName    string; the pods' schedulerName (overrides the templates')
//   spec.gangScheduling   {enabled, provider: volcano | scheduler-plugins, queue,
//                         priorityClassName}; off unless enabled. The controller creates the
//                         provider's PodGroup "<job>" (pod_group.h) and the pods get its marker
//                         (Volcano: the annotation scheduling.k8s.io/group-name;
//                         scheduler-plugins: the label scheduling.x-k8s.io/pod-group) and, unless
//                         spec.schedulerName is set, the provider's scheduler ("volcano",
//                         "scheduler-plugins-scheduler").
//
// job.yaml (the Secret's key, read by `hptrain ps|worker`) is the manifest as the runtime parser
// reads it: apiVersion, kind, metadata {name, namespace} and spec, less spec.runPolicy (backoff, deadline, TTL and suspension are the controller's business on
// Kubernetes; a pod must not enforce them a second time). It is JSON text, which is valid YAML.
// Its hash (SpecHash) is stamped on the Secret and every pod; a change of any field the pods run
// with (a new replica count from `kubectl scale`, another strategy, ...) therefore shows up as
// pods with an outdated hash, which the reconciler replaces.
// Elastic jobs (spec.elastic) are the exception: their pods' hash leaves out the worker replica
// count, so that scaling adds or removes worker pods and restarts none (reconciler.h, "Elastic
// jobs"); manifest_hash is the hash of the whole manifest.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_PARSED_JOB_H_
#define HPTRAIN_CONTROLLER_RECONCILE_PARSED_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/reconcile/object_meta.h"
#include "runtime/job/job_spec.h"

namespace hptrain::reconcile {

enum class GangScheduler { kNone, kVolcano, kSchedulerPlugins };

struct ParsedJob {
  std::string name;
  std::string ns;
  std::string uid;
  int64_t generation = 0;
  job::JobSpec spec;           // validated by job::ValidateJob
  std::string manifest;        // job.yaml
  // SpecHash(manifest); for an elastic job, of the manifest without the workers' replicas.
  std::string spec_hash;
  std::string manifest_hash;  // SpecHash(manifest), whatever the job
  std::string scheduler_name;  // "" = the cluster's default scheduler
  GangScheduler gang = GangScheduler::kNone;
  // Pod template of each spec.worker_groups entry, same order; an empty object when the group
  // has none.
  std::vector<Json> worker_templates;
  // True when the job used the one-group shorthand spec.workers {replicas, template}.
  bool workers_shorthand = false;
  // spec.ps.template; null when absent (the ps pod then derives from the first group).
  Json ps_template;
};

// Reads and validates `object` (a TrainingJob). Returns InvalidArgument with a one-line message
// "<field path>: <reason>" when the runtime parser or validator rejects the spec, when a
// controller-only key is malformed, when TLS is enabled without spec.security.tls.secretName,
// when the job's name cannot name its objects (the Service name must start with a letter; a pod
// name, which is also its hostname, must fit 63 characters), or when a worker or ps template
// sets a reserved HPTRAIN_* variable (reserved_env.h), e.g.
// "spec.workerGroups[0].template.spec.containers[0].env[1].name: HPTRAIN_RANK is reserved: ...",
// or sets command (or args, where it runs hptrain) on the container the controller rewrites
// (rewritten_container.h), or when a file the pods read is named by a relative path
// (pod_paths.h: "spec.dataset.path: must be an absolute path in a pod (...), got \"data/x\"";
// `hptrain run` resolves those against its working directory).
// The admission webhook and the reconciler both judge a job by this function. Pure; thread-safe.
absl::StatusOr<ParsedJob> ParseTrainingJob(const Json& object);

// 16 lowercase hex digits of the 64-bit FNV-1a hash of `manifest`: stable across builds and
// platforms (std::hash is not).
std::string SpecHash(absl::string_view manifest);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_PARSED_JOB_H_
