// WorkerDevice: where one worker trains and over which collective back end, decided from the job
// and what the process sees, and the start-up check that every worker of the job decided alike.
//
//   device   spec.device resolved (job::ResolveDevice) against the GPUs this process sees; a
//            cuda worker takes GPU (local rank mod visible GPUs): in a pod that is GPU 0 of the
//            one the device plugin gave it (CUDA_VISIBLE_DEVICES), in a local run the workers
//            of the host spread over its GPUs, several to a GPU when there are fewer GPUs.
//   backend  spec.communicator.backend resolved (job::ResolveBackend): nccl only where every
//            worker of the host has a GPU of its own.
#ifndef HPTRAIN_RUNTIME_CLI_WORKER_DEVICE_H_
#define HPTRAIN_RUNTIME_CLI_WORKER_DEVICE_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/kv_store.h"
#include "runtime/job/job_spec.h"

namespace hptrain::cli {

struct WorkerDevice {
  std::string kind = "cpu";    // "cpu" or "cuda"
  std::string device = "cpu";  // as libtorch names it: "cpu" or "cuda:N"
  int cuda_index = -1;         // N on cuda, -1 on cpu
  std::string backend = "gloo";  // "gloo" or "nccl"
};

// `local_rank`: this worker's index among the `workers_on_host` workers of its host;
// `visible_gpus`: the CUDA devices the process sees; `nccl_built`: this build has NCCL;
// `cuda_built`: this build's libtorch has CUDA (train::CudaBuilt).
// InvalidArgument from ResolveBackend (spec.communicator.backend ...); FailedPrecondition
// "spec.device: cuda, but this hptrain build has no CUDA" or "... this process sees no GPU" when
// cuda is asked for explicitly.
absl::StatusOr<WorkerDevice> ChooseWorkerDevice(const job::JobSpec& spec, int local_rank,
                                                int workers_on_host, int visible_gpus,
                                                bool nccl_built, bool cuda_built = true);

// Every worker publishes its device kind and back end under "device/<rank>" and reads all the
// others' (waiting up to `timeout`): FailedPrecondition naming the ranks on each side when they
// differ (spec.device auto on a mix of GPU and CPU hosts: a job trains on one kind of device),
// DeadlineExceeded naming the rank that did not publish. The store's traffic, not the
// communicator's: it adds no bytes to the job's counters.
absl::Status CheckSameDevice(comm::KeyValueStore& store, int rank, int world,
                             const WorkerDevice& mine, std::chrono::milliseconds timeout);

}  // namespace hptrain::cli

#endif  // HPTRAIN_RUNTIME_CLI_WORKER_DEVICE_H_
