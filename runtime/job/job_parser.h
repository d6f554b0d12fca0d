// Reading a TrainingJob manifest (YAML) into a JobSpec.
//
// The document is the Kubernetes object itself:
//
//   apiVersion: hptrain.io/v1alpha1
//   kind: TrainingJob
//   metadata: {name: my-job, namespace: team-a}     # name: DNS-1123 label; any other keys allowed
//   spec: {model: ..., dataset: ..., strategy: ..., workerGroups: [...], ...}
//   (or spec: {trainer: {command: [...], args: [...], workingDir: ...}, ...}: the user's program)
//
// so `hptrain run job.yaml` and `kubectl apply -f job.yaml` take the same file. Keys are the
// camelCase names of the CRD (spec.globalBatchSize, spec.strategy.bucketSize, ...). A key the
// parser does not know is an error, except inside `metadata` and inside pod `template`s, which
// are kept as opaque YAML text (WorkerGroupSpec::template_yaml, JobSpec::ps_template_yaml). A
// top-level `status` (as in `kubectl get -o yaml` output) is accepted and ignored. A null value
// (`epochs:` or `epochs: null`) means "not set", as in Kubernetes.
//
// Steps, in order:
//   1. Load the YAML text; it must hold exactly one document.
//   2. Apply `--set` overrides to the YAML tree (see below).
//   3. Convert the tree to a JobSpec, checking types and unknown keys.
//   4. Fill defaults that depend on other fields: the dataset's path and format from its name
//      (fashion-mnist, mnist: /usr/share/datasets/<name>, idx; cifar10, cifar100: no path,
//      cifar-binary; synthetic: synthetic) and mlp's hidden widths {256, 128}.
//   5. ValidateJob() (job_validate.h).
//
// Overrides: each string is `dotted.path=value`, e.g. `spec.epochs=1`,
// `spec.strategy.type=topk`, `spec.workerGroups.0.replicas=2`, `spec.testing.slowdown=[1,3]`.
// Path components are map keys; inside a list a component must be an index (0-based; an index
// equal to the list's length appends). Keys missing along the path are created. The value is
// parsed as YAML (`true`, `[8,8]`, `{a: 1}` work; an empty value is the empty string). Overrides
// apply in order, so a later one wins.
//
// Errors: every error is absl::InvalidArgumentError with one line
//   "<source>: <field path>: <reason>"
// e.g. `job.yaml: spec.globalBatchSize: must be an integer, got "abc"`, where field paths use
// Kubernetes' form `spec.workerGroups[1].replicas`. Special forms:
//   "<source>:<line>:<column>: malformed YAML: <yaml-cpp message>"   (1-based line and column)
//   "<source>: --set \"<override>\": <reason>"                     (malformed override)
//   NotFound "<path>: no such file" from ParseJobFile; PermissionDenied for unreadable files.
// Nothing here throws; yaml-cpp's exceptions are caught inside.
#ifndef HPTRAIN_RUNTIME_JOB_JOB_PARSER_H_
#define HPTRAIN_RUNTIME_JOB_JOB_PARSER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"

namespace hptrain::job {

// The only apiVersion and kind accepted.
inline constexpr char kApiVersion[] = "hptrain.io/v1alpha1";
inline constexpr char kKind[] = "TrainingJob";

// Reads the file at `path`, applies `overrides` and returns the validated spec. Errors name
// `path` as given as their source. Blocks on file I/O only; thread-safe.
absl::StatusOr<JobSpec> ParseJobFile(const std::string& path,
                                     const std::vector<std::string>& overrides = {});

// Same as ParseJobFile for a document already in memory; `source_name` stands in for the file
// name in error messages.
absl::StatusOr<JobSpec> ParseJobText(const std::string& text,
                                     const std::vector<std::string>& overrides = {},
                                     const std::string& source_name = "<job>");

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_JOB_PARSER_H_
