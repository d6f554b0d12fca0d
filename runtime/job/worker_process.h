// How `hptrain run` starts the worker of one rank: `hptrain worker` with flags, or, for a job with
// spec.trainer, the user's program (command + args) with the environment `hptrain worker` reads in
// place of those flags (the same names and meanings as its flags, runtime/cli/worker_command.cc;
// python/hptrain's hp.init() reads them):
//
//   HPTRAIN_JOB                 the job file, absolute (the program runs in another directory)
//   HPTRAIN_SET                 the `hptrain run --set` overrides, one path=value per line; absent
//                               when there are none
//   HPTRAIN_COORDINATOR         host:port of the coordinator (ps-0)
//   HPTRAIN_RANK, HPTRAIN_GROUP the worker's rank and its worker group
//   HPTRAIN_LOCAL_RANK          its index among the workers on its host (the rank: every worker
//                               of a local run shares this machine)
//   HPTRAIN_WORKERS_ON_HOST     the workers on its host (all of them)
//   HPTRAIN_TOKEN_FILE          the file holding the job token
//   HPTRAIN_TLS_DIR             ca.crt, tls.crt, tls.key (spec.security.tls only)
//   HPTRAIN_BIND_HOST           the address its collectives bind to (its placement host's)
//   HPTRAIN_METRICS_HOST, HPTRAIN_METRICS_PORT  where it serves /metrics (port 0: any free one)
//   HPTRAIN_NODE_NAME           its node: the placement host's address (only with --placement)
//   HPTRAIN_RENDEZVOUS_TIMEOUT  seconds to wait for the job's peers (hptrain run's own timeout)
//   HPTRAIN_RESUME              1 or 0: continue from spec.checkpoint.path (as --resume)
//
// HPTRAIN_SET, HPTRAIN_TLS_DIR and HPTRAIN_NODE_NAME are left out of the program's environment
// when the launcher does not set them, so that a value left in the caller's cannot reach it.
// PYTHONPATH starts with the built Python package's directory (TrainerPythonPath). The program runs
// in spec.trainer.workingDir (relative: from the job file's directory; default: the job file's
// directory). Both kinds of worker run behind the placement host's command prefix (placement.h).
// Pure, apart from TrainerPythonPath's look at the disk.
#ifndef HPTRAIN_RUNTIME_JOB_WORKER_PROCESS_H_
#define HPTRAIN_RUNTIME_JOB_WORKER_PROCESS_H_

#include <string>
#include <utility>
#include <vector>

#include "runtime/job/job_spec.h"
#include "runtime/job/placement.h"

namespace hptrain::job {

// What every worker of one gang shares.
struct WorkerLaunch {
  std::string binary;                  // the hptrain executable
  std::string job_file;                // as given to `hptrain run`; HPTRAIN_JOB makes it absolute
  std::vector<std::string> overrides;  // --set path=value
  std::string coordinator;             // host:port
  std::string token_file;
  std::string tls_dir;  // "" without spec.security.tls
  bool resume = false;
  int rendezvous_timeout_s = 120;
  bool placed = false;      // a placement file names the workers' hosts
  std::string python_path;  // PYTHONPATH of the user's program; "" = inherited
};

struct WorkerProcess {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // added to the launcher's
  std::vector<std::string> unset_env;                    // inherited names left out
  std::string working_dir;                               // "" = the launcher's
};

// The process of worker `rank` on `host` (HostPlacement{} without a placement).
WorkerProcess MakeWorkerProcess(const JobSpec& spec, const WorkerLaunch& launch, int rank,
                                const HostPlacement& host);

// `path` made absolute against the current directory, lexically normalized.
std::string AbsolutePath(const std::string& path);

// The directory a job's program runs in: spec.trainer.workingDir, relative to the job file's
// directory, or that directory itself. Absolute.
std::string TrainerWorkingDir(const TrainerSpec& trainer, const std::string& job_file);

// The ranks of a job of `world` workers missing from `registered` (the coordinator's
// registered_ranks), ascending.
std::vector<int> MissingRanks(const std::vector<int>& registered, int world);

// Why a run of a spec.trainer job failed when the programs of `ranks` (not empty) did not join
// within `timeout_s`: "worker 2 did not join the job within 120 s: did the program call
// hp.init()?", "workers 1, 2 did not join ...".
std::string NotJoinedMessage(const std::vector<int>& ranks, int timeout_s);

// The same for a program that exited 0 without joining; `exit` is its ChildStatus::Describe(),
// e.g. "worker-1 (pid 7) exited with status 0".
std::string ExitedWithoutJoiningMessage(const std::string& exit);

// The PYTHONPATH of a user's program: the package directory, then `inherited` ($PYTHONPATH) when
// not empty. The package directory is `override_dir` ($HPTRAIN_PYTHONPATH) when not empty, else
// <directory of `binary`>/../python when that directory exists; with neither, `inherited` as is.
std::string TrainerPythonPath(const std::string& binary, const std::string& override_dir,
                              const std::string& inherited);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_WORKER_PROCESS_H_
