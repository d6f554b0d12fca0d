// TrainingJob: the job document that `hptrain run` executes locally and that the controller
// submits to Kubernetes (apiVersion hptrain.io/v1alpha1, kind TrainingJob). These types are the
// single in-memory form of the spec; the YAML parser (job_parser.h) fills them and validation
// (job_validate.h) checks them. The controller reuses them rather than defining its own.
//
// Pod templates (image, resources, nodeSelector, tolerations, env) matter only on Kubernetes: the
// runtime keeps them as opaque YAML text, and the CRD schema validates them.
#ifndef HPTRAIN_RUNTIME_JOB_JOB_SPEC_H_
#define HPTRAIN_RUNTIME_JOB_JOB_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/sync/strategy_options.h"

namespace hptrain::job {

struct ModelSpec {
  std::string name;               // lenet5 | mlp | resnet20 | vgg11 | alexnet (empty with torchscript)
  std::string torchscript;        // path of a TorchScript module; exclusive with name
  std::vector<int> hidden;        // mlp only: hidden layer widths (default {256, 128})
};

// spec.trainer: the user's own training program (python/hptrain, docs/python.md), run in place of
// the built-in trainer in every worker with the HPTRAIN_* environment of `hptrain worker`. Empty
// command: the built-in trainer.
struct TrainerSpec {
  std::vector<std::string> command;  // the program and its fixed arguments
  std::vector<std::string> args;     // appended to command
  std::string working_dir;           // "" = the job file's directory (hptrain run), the image's (pods)
  bool set() const { return !command.empty(); }
};

struct SyntheticSpec {
  int64_t samples = 4096;         // training samples
  int64_t test_samples = 1024;
  std::vector<int64_t> shape = {1, 28, 28};  // C, H, W of one sample
  int classes = 10;
};

// spec.dataset.augment: random transforms of the training split (runtime/train/data/augment.h).
// Every draw comes from (seed, epoch, sample index), never from a worker's generator, so a
// rebalance, a restart or another worker count never changes what a sample looks like. The test
// split is center-cropped to the same size. At most one of randomCrop and randomResizedCrop.
struct RandomCropSpec {
  int64_t size = 0;               // output height = width; 0 = off
  int64_t padding = 0;            // zero padding on every side before the crop
};
struct RandomResizedCropSpec {
  int64_t size = 0;               // output height = width; 0 = off
  std::vector<double> scale = {0.08, 1.0};        // area fraction range of the crop
  std::vector<double> ratio = {3.0 / 4.0, 4.0 / 3.0};  // aspect ratio (w / h) range
};
struct AugmentSpec {
  RandomCropSpec random_crop;
  bool horizontal_flip = false;   // flip left-right with probability 1/2
  RandomResizedCropSpec random_resized_crop;
  bool any() const {
    return random_crop.size > 0 || horizontal_flip || random_resized_crop.size > 0;
  }
};

struct DatasetSpec {
  // fashion-mnist | mnist | cifar10 | cifar100 | synthetic (format idx, cifar-binary, synthetic);
  // with format npy, imagefolder, filelist or webdataset a free label for messages and reports.
  std::string name;
  std::string path;               // directory with the files; defaults per built-in name
  // idx | cifar-binary | synthetic (the built-in sets) | npy | imagefolder | filelist | webdataset;
  // defaults per built-in name
  std::string format;
  std::string layout;             // npy 4-D images: NHWC (default) or NCHW
  // Built-in sets: subtract their mean, divide by their std. Other formats: the per-channel mean
  // and std of the training split, computed once and logged, unless `mean` and `std` are given.
  // false: pixels / 255.
  bool normalize = true;
  std::vector<double> mean;       // explicit per-channel (or one) mean of pixels in [0, 1]
  std::vector<double> std;        // and std; both or neither
  // imagefolder, filelist, webdataset: decoded images are resized to [height, width] ([n]: n x n);
  // empty = every image must already have the first image's size.
  std::vector<int64_t> image_size;
  int channels = 0;               // decoded images: 1 (gray) or 3 (RGB); 0 = as the first image
  int classes = 0;                // class count; 0 = the largest label in either split + 1
  bool skip_corrupt = false;      // a corrupt sample is dropped from its batch, counted and logged
  AugmentSpec augment;
  SyntheticSpec synthetic;
  // True for the built-in sets' formats (idx, cifar-binary, synthetic).
  bool builtin_format() const;
};

// spec.task: what the model's outputs mean, its loss and the metrics reported
// (runtime/train/task.h).
//   classification  cross-entropy; top-1 (accuracy) and top-5 accuracy          (default)
//   multilabel      BCE-with-logits over multi-hot targets; micro F1 at 0.5, mAP
//   regression      MSE; RMSE and MAE
//   torchscript     spec.model.torchscript's own loss(outputs, targets) method (and metric(), if
//                   it has one)
inline constexpr const char* kTaskNames[] = {"classification", "multilabel", "regression",
                                             "torchscript"};

// spec.precision: fp32 | bf16 | fp16 — autocast for forward and backward, fp32 master weights
// and optimizer; fp16 adds dynamic loss scaling (runtime/train/precision.h).
inline constexpr const char* kPrecisionNames[] = {"fp32", "bf16", "fp16"};

// spec.strategy: the strategy's type and the values of its parameters. The parameters, their
// types, ranges and defaults are defined by the strategy descriptors
// (runtime/sync/strategy_descriptor.h); a parameter the job file leaves out reads as its default.
using StrategySpec = sync::StrategyOptions;

// multistep's adaptive interval starts at H_0 (docs/algorithms.md §3b), within [hMin, hMax].
inline constexpr int kMultistepH0 = 8;

struct ScheduleSpec {
  std::string type = "constant";  // constant | step | cosine
  double warmup_epochs = 0.0;     // linear warm-up from 0 to lr over this many epochs
  int step_size = 0;              // step: epochs between decays
  double gamma = 0.1;             // step: decay factor
  double min_lr = 0.0;            // cosine: final learning rate
};

struct OptimizerSpec {
  std::string type = "sgd";       // sgd | adam
  double lr = 0.01;
  double momentum = 0.0;          // sgd
  double weight_decay = 0.0;
  bool nesterov = false;          // sgd
  double beta1 = 0.9;             // adam
  double beta2 = 0.999;           // adam
  double eps = 1e-8;              // adam
  ScheduleSpec schedule;
};

struct WorkerGroupSpec {
  std::string name;
  int replicas = 1;
  int batch_size = 0;             // per-worker batch of this group; 0 = share the global batch equally
  std::string template_yaml;      // pod template, opaque to the runtime
};

struct RebalanceSpec {
  bool enabled = false;
  double interval_seconds = 30.0;
  int interval_steps = 0;         // when > 0, rebalance every this many steps instead
  int min_batch = 1;
  int max_batch = 0;              // 0 = no maximum
  double hysteresis = 0.05;
};

struct CheckpointSpec {
  std::string path;               // checkpoint file; empty = no checkpoints
  int interval_steps = 0;         // 0 = only at the end of the run
  // Kubernetes: a volume source (persistentVolumeClaim, nfs, ...) as YAML, mounted at the
  // checkpoint file's directory in the ps and every worker pod, so that the gang a restart
  // creates resumes from it; empty = none (a restarted gang starts over).
  std::string volume_yaml;
};

// MP² snapshot collection (docs/algorithms.md §1b "DATASET"): rank 0 records parameter histories of
// this run into a dataset file for `hptrain mp2 train` (runtime/ps/mp2/dataset.h).
struct CollectSpec {
  std::string path;               // dataset file; empty = no collection
  int every = 1;                  // steps between recorded rounds (T_h)
  int samples = 1024;             // elements traced per predicted tensor
  int window_every = 200;         // recorded rounds between full-snapshot windows
  int window_length = 15;         // consecutive full snapshots per window
};

// Gang scheduling on Kubernetes: the ps and all workers are scheduled together or not at all.
struct GangSchedulingSpec {
  bool enabled = false;
  std::string provider = "volcano";  // volcano | scheduler-plugins
  std::string queue;                 // volcano only
  // The PodGroup's priorityClassName (both providers), also given to every pod whose template
  // names none. "" = the cluster's default priority.
  std::string priority_class_name;
};

// spec.runPolicy.restartPolicy, as in Kubeflow's training operator: what a failed pod does.
//   Never      the job fails.
//   OnFailure  a gang restart, within backoffLimit, whatever the exit code.
//   ExitCode   (default) exit codes that no retry can fix fail the job at once with reason
//              BadInput: 2 (bad input: the job file, data or flags) and 130 (interrupted);
//              every other failure (exit 1, signals, a lost pod) restarts the gang.
struct RunPolicySpec {
  std::string restart_policy = "ExitCode";  // Never | OnFailure | ExitCode
  int backoff_limit = 3;
  int64_t active_deadline_seconds = 0;   // 0 = none
  int64_t ttl_seconds_after_finished = 0;  // 0 = keep
  bool suspend = false;
  // How long a worker waits for a peer in one collective (and for the workers' connection set-up)
  // before it fails: a hung or cut-off peer fails the gang within this, not never. 0 = the
  // workers' --rendezvous-timeout (120 s).
  int64_t peer_timeout_seconds = 0;
};

// spec.elastic (docs/elastic.md): the job's workers may come and go while it trains. Worker slots
// 0 .. maxReplicas-1 (a worker's --rank is its slot); the job starts with the group's replicas as
// members, a worker that registers later joins at a step boundary, a lost or removed one leaves
// there, and the global batch is divided over whoever is a member. Below minReplicas for longer
// than joinTimeoutSeconds the job falls back to a gang restart from the checkpoint. One worker
// group only.
struct ElasticSpec {
  bool enabled = false;  // spec.elastic is present
  int min_replicas = 1;
  int max_replicas = 0;  // 0 (unset) = the group's replicas
  int64_t join_timeout_seconds = 300;
};

// spec.security.tls: TLS on the coordinator's and the parameter servers' gRPC (docs/security.md).
// On Kubernetes the certificate comes from a Secret in cert-manager's layout (tls.crt, tls.key,
// ca.crt); under `hptrain run` a CA and a server certificate are generated for each run. The job
// token is required either way.
struct TlsSpec {
  bool enabled = false;
  std::string secret_name;  // Kubernetes only; required there when enabled
  bool mutual = false;      // clients present a certificate signed by the CA too
};

struct SecuritySpec {
  TlsSpec tls;
};

// Testing knobs, never for production jobs: a per-rank slowdown factor f stretches that worker's
// compute in each step to f x the CPU time it used. slowdown_file names a control file whose
// factors (one per rank, whitespace-separated) replace them while the job runs.
// slowdown_window n charges each step the median CPU time of the last n steps at its batch size
// (runtime/train/slowdown.h).
struct TestingSpec {
  std::vector<double> slowdown;
  std::string slowdown_file;
  int slowdown_window = 1;
  // Trains a cpu job through the GPU code path (device buffers, host staging, the tensor
  // optimizer) with CPU tensors, so machines without a GPU test that path.
  bool device_path = false;
  // false: a cuda worker's convolutions use PyTorch's own CUDA kernels instead of cuDNN's. They
  // are slower and round like the CPU's, where even deterministic cuDNN parts from the CPU's
  // result within a few steps (bench/gpu/torch_parity.py); the GPU parity tests use it.
  bool cudnn = true;
  // Dynamic loss scaling as spec.precision fp16 does it (runtime/train/precision.h), without
  // autocast, on any device: the loss scaled, the gradients checked for inf/nan on every worker
  // before the exchange, a step with one skipped by all. CPU-only machines test it this way.
  bool loss_scaling = false;
  // Under loss scaling: the worker of rank infGradientRank writes an inf into its gradient at
  // global step infGradientStep (0-based; -1: never), so that the step is skipped.
  int64_t inf_gradient_step = -1;
  int inf_gradient_rank = 0;
};

// The priority scheduler's defaults for all-reduce (docs/algorithms.md §3b).
inline constexpr int64_t kSchedulerPartitionElements = int64_t{8} << 20;
inline constexpr int64_t kSchedulerCreditElements = int64_t{16} << 20;

// spec.scheduler: how a step's gradient exchange is ordered (docs/algorithms.md §3b). "none": the
// reducer's buckets in backward's order; "priority": the sub-tensor priority scheduler
// (runtime/comm/priority_scheduler.h), ssgd and multistep only.
struct ExchangeSchedulerSpec {
  std::string type = "none";      // none | priority
  int64_t partition_elements = 0; // δ: largest chunk; 0 = unset (kSchedulerPartitionElements)
  int64_t credit_elements = 0;    // most elements in flight; 0 = unset (kSchedulerCreditElements)

  // The values in force, defaults for unset ones.
  int64_t partition() const {
    return partition_elements > 0 ? partition_elements : kSchedulerPartitionElements;
  }
  int64_t credit() const { return credit_elements > 0 ? credit_elements : kSchedulerCreditElements; }
};

// spec.topology: which workers share a node (docs/algorithms.md §2). Under `hptrain run` it
// defines the nodes; without it the workers' $HPTRAIN_NODE_NAME (a pod's node on Kubernetes,
// the --placement host) does.
struct TopologySpec {
  int workers_per_node = 0;     // workersPerNode: every node n consecutive ranks; 0 = unset
  std::vector<int> node_sizes;  // nodes: [n_0, n_1, ...], the workers of each node in rank order

  bool set() const { return workers_per_node != 0 || !node_sizes.empty(); }
  // The field that defines the nodes, for errors.
  const char* path() const {
    return node_sizes.empty() ? "spec.topology.workersPerNode" : "spec.topology.nodes";
  }
  // The workers of each node in rank order (the list, or world / n nodes of n).
  std::vector<int> NodeSizes(int world) const {
    if (!node_sizes.empty()) return node_sizes;
    if (workers_per_node <= 0) return {};
    return std::vector<int>(world / workers_per_node, workers_per_node);
  }
};

// spec.communicator: how the collectives run (docs/algorithms.md §2b (iv)).
struct CommunicatorSpec {
  bool hierarchical = false;              // intra-node, then leaders, then intra-node broadcast
  bool compress_inter_node_only = false;  // compressed all-reduces: encode only between nodes
  std::string backend = "auto";           // auto | gloo | nccl (see ResolveBackend)
};

struct JobSpec {
  // metadata
  std::string name;
  std::string ns = "default";

  // spec
  TrainerSpec trainer;
  ModelSpec model;
  DatasetSpec dataset;
  std::string task = "classification";  // spec.task (kTaskNames)
  std::string precision = "fp32";       // spec.precision (kPrecisionNames)
  StrategySpec strategy;
  OptimizerSpec optimizer;
  int global_batch_size = 0;
  int epochs = 1;
  int64_t max_steps = 0;          // stop after this many global steps; 0 = run all epochs
  int64_t eval_every_steps = 0;   // also evaluate every this many global steps; 0 = epoch ends
  uint64_t seed = 42;
  std::string device = "auto";    // cpu | cuda | auto (see ResolveDevice)
  bool deterministic = false;     // cuda: deterministic cuDNN, no autotuning, no TF32
  int threads = 0;                // torch intra-op threads per worker; 0 = cores / workers
  int bucket_mib = 25;            // gradient bucket size for the communicator, MiB
  std::vector<WorkerGroupSpec> worker_groups;
  std::string ps_template_yaml;
  int ps_shards = 1;              // spec.ps.shards: parameter-server processes (ps, hps, mp2)
  std::string scheduler_name;     // Kubernetes scheduler of the job's pods; empty = default
  ExchangeSchedulerSpec scheduler;  // spec.scheduler: the gradient exchange's order
  TopologySpec topology;
  CommunicatorSpec communicator;
  GangSchedulingSpec gang_scheduling;
  RebalanceSpec rebalance;
  CheckpointSpec checkpoint;
  CollectSpec collect;
  RunPolicySpec run_policy;
  ElasticSpec elastic;
  SecuritySpec security;
  TestingSpec testing;

  // Derived helpers.
  int WorldSize() const;
  // Group name of each rank, ranks numbered group by group in document order.
  std::vector<std::string> RankGroups() const;
  // Initial batch size of each rank: the groups' batchSize where set, else an equal split of the
  // global batch by largest remainder (lower ranks get the extra samples).
  std::vector<int> InitialAllocation() const;
  // Worker slots: the world size, or spec.elastic's maxReplicas (at least the world size).
  int Slots() const;
  // The group of each slot: RankGroups(), then the (one) elastic group's name for the slots
  // beyond the world size.
  std::vector<std::string> SlotGroups() const;
};

// The global batch divided over `members` workers by largest remainder (lower ranks get the extra
// samples): the elastic job's allocation after a membership change, InitialAllocation's rule.
std::vector<int> EvenAllocation(int global_batch, int members);

// The device a worker of `spec` trains on, "cpu" or "cuda", given whether the worker sees a GPU
// (`gpu_visible`). spec.device cpu and cuda are taken as written (cuda without a GPU is the
// trainer's error, not a silent fall-back); auto is cuda when a GPU is visible and the job uses
// nothing that cuda does not support yet (spec.scheduler.type priority, which ValidateJob refuses
// with an explicit cuda), else cpu. The workers of one job must all resolve to the same device:
// the trainer checks that at start. Pure.
std::string ResolveDevice(const JobSpec& spec, bool gpu_visible);

// True for the strategies whose gradient exchange runs on device buffers on cuda, the ones NCCL
// can carry: the descriptor's devices (runtime/sync/strategy_descriptor.h, StrategyDevices) say
// which, e.g. topk and dgc unless sparseEncoding is compact. Every other strategy stages through
// host memory (parameter servers, model exchanges), which only Gloo reads. Each strategy's
// traits().reduces_on_device agrees with it (tests/runtime/sync/compression_test.cc checks).
bool ExchangesOnDevice(const StrategySpec& strategy);

// Why a strategy that ExchangesOnDevice lets through host memory does so, for error messages:
// " (sparseEncoding: compact)" where a setting is the reason, "" where the strategy always does.
std::string HostOnlyReason(const StrategySpec& strategy);

// The collective back end of a worker of `spec` that trains on `device` (ResolveDevice's
// result): "gloo" or "nccl". `nccl_built`: this build has NCCL; `one_gpu_per_worker`: every
// worker of the job has a GPU of its own (NCCL cannot put two ranks on one GPU).
//   auto  nccl when device is cuda, NCCL is built, every worker has its own GPU, the strategy
//         exchanges on the device (ExchangesOnDevice) and spec.communicator.hierarchical is
//         off (the hierarchical all-reduce runs over Gloo's transport); otherwise gloo, which
//         on cuda stages through host buffers, so several workers may share one GPU.
//   gloo  gloo, on either device.
//   nccl  nccl, or InvalidArgument "spec.communicator.backend: ..." (one line) when device is
//         not cuda, NCCL is not built, the workers share a GPU, the strategy does not exchange
//         on the device, or spec.communicator.hierarchical is on.
// An unknown backend is InvalidArgument too. Pure.
absl::StatusOr<std::string> ResolveBackend(const JobSpec& spec, const std::string& device,
                                           bool nccl_built, bool one_gpu_per_worker);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_JOB_SPEC_H_
