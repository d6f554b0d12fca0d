// Semantic checks of a TrainingJob spec, after parsing (job_parser.h) and before anything runs.
// The controller calls ValidateJob too, so a job rejected here is rejected the same way on
// Kubernetes and by `hptrain run`.
//
// What is checked:
//   * required fields: metadata.name (a DNS-1123 label, as is metadata.namespace), a model
//     (spec.model.name or spec.model.torchscript, not both) and spec.dataset.name unless
//     spec.trainer is set,
//     spec.globalBatchSize > 0, spec.epochs >= 1, at least one worker group with replicas >= 1
//     and a unique DNS-1123 label as name;
//   * spec.strategy: the type, then every parameter against its strategy's descriptor (type,
//     applicability, range, enum, and the descriptor's cross-field rules; see below);
//   * enumerations: model name, dataset name and format (and that the format is the one the
//     data set comes in), optimizer and schedule type, device (cpu | cuda | auto), scheduler
//     type (none | priority), communicator backend (auto | gloo | nccl);
//   * ranges: lr > 0, momentum in [0, 1), weightDecay >= 0, bucketMiB >= 1, ps.shards in
//     [1, 64], rebalance hysteresis in [0, 1), scheduler partitionElements and creditElements
//     >= 1 and credit >= partition (defaults for the unset one), counts >= 0, ...;
//   * cross-field rules: globalBatchSize >= world size; if any group sets batchSize, every group
//     does and the sum of replicas x batchSize equals globalBatchSize; testing.slowdown has one
//     factor >= 1 per worker; sgd-only settings with adam and the reverse, schedule
//     settings of another schedule type, and mlp's `hidden` with another model; ps.shards above
//     1 with a strategy that has no parameter server (UsesParameterServer()); scheduler
//     partitionElements/creditElements only with type priority, and priority only with ssgd or
//     multistep, never with multistep's delay 1 or compression, nor with device cuda; backend
//     nccl never with device cpu or the priority scheduler, only with a strategy that exchanges
//     on the device (ExchangesOnDevice()) and without spec.communicator.hierarchical (what a
//     worker learns at start, its GPU and the build, ResolveDevice() and ResolveBackend() check);
//   * spec.trainer (the user's program): a non-empty command whose program is not ""; args or
//     workingDir without a command is an error, and so is any of spec.model with it
//     ("spec.model: cannot be combined with spec.trainer ..."). With it spec.model and
//     spec.dataset are not required; a data set the job names is still checked, but not against
//     the number of workers (what the built-in trainer alone needs: a model, a synthetic data set
//     of at least one sample per worker).
//
// spec.strategy is checked against its strategy's descriptor (runtime/sync/strategy_descriptor.h,
// sync::CheckStrategyOptions): a parameter is set when the job file (or code) gave it a value,
// whatever the value, so `density: 0` is out of range rather than "unset". The other sections
// count a field as set when it differs from its documented default.
#ifndef HPTRAIN_RUNTIME_JOB_JOB_VALIDATE_H_
#define HPTRAIN_RUNTIME_JOB_JOB_VALIDATE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/job/job_spec.h"

namespace hptrain::job {

// Returns OK, or InvalidArgument "<field path>: <reason>" for the first problem found, with
// Kubernetes-style paths (`spec.workerGroups[1].replicas`). No source-file prefix: the parser
// adds it. Pure; thread-safe.
absl::Status ValidateJob(const JobSpec& spec);

// The built-in strategy types spec.strategy.type accepts, in documentation order (ssgd first):
// the descriptors' names.
const std::vector<std::string>& StrategyTypes();

// The YAML names of the spec.strategy parameters that strategy `type` takes, e.g. topk ->
// {density, errorFeedback, warmupEpochs, sparseEncoding}; empty for ssgd, ps and unknown types.
std::vector<std::string> StrategyParameters(absl::string_view type);

// The most parameter-server shards a job may ask for (spec.ps.shards).
inline constexpr int kMaxPsShards = 64;

// True for the strategies that run a parameter server in the ps processes: ps, hps and mp2.
bool UsesParameterServer(absl::string_view type);

// The number of ps processes `spec` runs: spec.ps.shards for a parameter-server strategy, else
// 1 (the coordinator alone). Never below 1.
int PsShardCount(const JobSpec& spec);

// True if `name` is a DNS-1123 label: 1-63 characters of [a-z0-9-], starting and ending with
// a letter or digit.
bool IsDnsLabel(absl::string_view name);

// True if `name` is a DNS-1123 subdomain: at most 253 characters, DNS-1123 labels joined by '.'
// (a PriorityClass's name).
bool IsDnsSubdomain(absl::string_view name);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_JOB_VALIDATE_H_
