// WorkerSession: everything a training process of a job holds besides its training loop, shared by
// `hptrain worker` (the built-in trainer) and the Python package (python/hptrain: the user's own
// loop). Create does, in order:
//   1. parse the job file (with the --set overrides); start /metrics, /healthz, /readyz;
//   2. reach the coordinator, register (rank, group, metrics address), read the allocation;
//   3. choose the device and check every worker chose alike; rendezvous with the other workers
//      through the coordinator's KV store (Gloo TCP mesh, NCCL where the job runs on it) and, for
//      the parameter-server strategies, look the PS shards' addresses up there;
// and starts the heartbeat (a coordinator-side stop request ends the run). While the loop trains,
// the session turns its step and evaluation records into metrics and progress reports (off the
// step's critical path), and answers the allocation of every step (one step ahead). Finish reports
// the final totals and the outcome to the coordinator.
//
// Thread-safety: one thread drives the session (the training loop's); the heartbeat, the progress
// sender and the allocation prefetcher run threads of their own behind it.
#ifndef HPTRAIN_RUNTIME_CLI_WORKER_SESSION_H_
#define HPTRAIN_RUNTIME_CLI_WORKER_SESSION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cli/worker_device.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/trainer.h"

namespace hptrain::cli {

class FlagSet;

// How a worker process finds its job: `hptrain worker`'s flags, each with its HPTRAIN_* variable
// (how the controller and `hptrain run` configure a user's program).
struct WorkerConfig {
  std::string job_file;
  std::vector<std::string> overrides;  // --set path=value; $HPTRAIN_SET: one per line
  std::string coordinator;
  int rank = -1;
  std::string group;
  std::string token_file;
  std::string metrics_host = "0.0.0.0";
  int metrics_port = 0;
  std::string bind_host = "127.0.0.1";
  std::string node_name;  // the node this worker runs on (docs/algorithms.md §2); "" = unknown
  int rendezvous_timeout_s = 120;
  bool resume = false;
  int workers_on_host = 1;  // a pod holds one worker; `hptrain run` passes the world size
  int local_rank = -1;      // index among the host's workers; -1: rank mod workers_on_host
  std::string tls_dir;      // spec.security.tls: ca.crt, tls.crt, tls.key
};

// Declares `hptrain worker`'s flags on `set`, bound to `config`, with their variables.
void DefineWorkerFlags(FlagSet& set, WorkerConfig* config);

// $HPTRAIN_RESUME ("1"/"true" or "0"/"false") into *resume; unset or empty leaves it.
absl::Status ResumeFromEnvironment(bool* resume);

// $HPTRAIN_SET's overrides (one path=value per line) appended to *overrides: the --set of
// `hptrain run`, for the processes it starts.
void OverridesFromEnvironment(std::vector<std::string>* overrides);

// The configuration of a process started by `hptrain run` or the controller for a job with
// spec.trainer, from the environment alone. `caller` names the asker in errors
// ("hp.init()"). InvalidArgument naming the first required variable that is missing
// (HPTRAIN_JOB, HPTRAIN_COORDINATOR, HPTRAIN_RANK, HPTRAIN_TOKEN_FILE) or malformed.
absl::StatusOr<WorkerConfig> WorkerConfigFromEnvironment(const std::string& caller);

class WorkerSession {
 public:
  // Steps 1-3 above. Errors name what failed (the job file, the coordinator, the rendezvous).
  static absl::StatusOr<std::unique_ptr<WorkerSession>> Create(const WorkerConfig& config);
  ~WorkerSession();

  const job::JobSpec& spec() const;
  const WorkerConfig& config() const;
  // The worker's slot (its --rank), and the workers of the epoch it trains in.
  int rank() const;
  int world() const;
  // Elastic jobs: this worker joins a running job (its communicators come with the trainer's first
  // membership change; communicator() is null until then).
  bool joining() const;
  const WorkerDevice& device() const;
  // The allocation the coordinator gave at registration: every rank's batch size.
  const std::vector<int>& initial_allocation() const;

  // The trainer's options (rank, allocation, resume, device, communicators) and callbacks
  // (progress, metrics, evaluations, stop requests, the allocation of every step with
  // spec.rebalance) for this session.
  train::TrainerOptions TrainerOptions() const;
  train::TrainerCallbacks TrainerCallbacks();
  comm::Communicator* communicator();

  // The libtorch threads the loop trains with (logged, exported).
  void SetTorchThreads(int threads, const std::string& basis);
  // /readyz answers 200 from now on.
  void SetReady();
  // Whether the coordinator asked this worker to stop, and why.
  bool stop_requested() const;
  std::string stop_reason() const;

  // The final progress report (byte totals including the last collectives) and the outcome to
  // the coordinator. A Cancelled `status` (a stop request) becomes Aborted with the reason.
  // Returns the status to exit with.
  absl::Status Finish(absl::Status status);

  class Impl;

 private:
  explicit WorkerSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hptrain::cli

#endif  // HPTRAIN_RUNTIME_CLI_WORKER_SESSION_H_
