// Launcher: `hptrain run JOB.yaml` — runs a TrainingJob as local processes, the same processes
// the controller runs as pods:
//   1. parse and validate the job; preflight (data sets open, model builds) so bad input fails
//      before any process starts;
//   2. create a private run directory with a fresh job token (mode 0600);
//   3. start `hptrain ps` on a free 127.0.0.1 port, wait for its port file;
//   4. start `hptrain worker` for every rank, pointed at the coordinator, or, for a job with
//      spec.trainer, the user's program with the same settings as HPTRAIN_* environment
//      (worker_process.h); such a program must join the job (register with the coordinator, as
//      hp.init() does) within the rendezvous timeout, and may not exit 0 without having joined;
//   5. supervise them (supervisor.h): poll the coordinator for progress, draw it, and once every
//      worker reported done, ask the ps to shut down; any child failing stops all of them, and
//      spec.runPolicy (restart_policy.h) decides whether steps 3-5 run again, the workers resuming
//      from the last checkpoint;
//   6. print the summary table and write --output-json atomically, only for a successful run.
// An elastic job (spec.elastic) runs steps 4-5 with ElasticWorkers (elastic_workers.h): a worker
// that fails is reported lost and restarted alone, the gang going on meanwhile; a control file
// (elastic_control.h; --control, or one in the run directory) adds, removes and kills workers;
// the gang restarts only when the ps fails or the members stay below minReplicas.
#ifndef HPTRAIN_RUNTIME_JOB_LAUNCHER_H_
#define HPTRAIN_RUNTIME_JOB_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hptrain::job {

struct LaunchOptions {
  std::string job_file;
  std::vector<std::string> overrides;  // --set path=value, passed on to every child
  std::string output_json;             // run summary path; empty = none
  bool resume = false;                 // the first gang resumes too (restarted gangs always do)
  std::string binary;                  // the hptrain executable children run
  bool quiet = false;                  // no progress display
  std::string placement_file;          // where each process runs (placement.h); empty = here
  // How long a worker waits for its peers (passed on to every worker), and how long a
  // spec.trainer program may take to join the job.
  int rendezvous_timeout_s = 120;
  // Elastic jobs: the control file (elastic_control.h); empty = "control" in the run directory.
  // InvalidArgument (exit 2) for a job without spec.elastic.
  std::string control_file;
};

// Returns the process exit code (0 success, 1 failure, 2 bad input, 130 interrupted) after
// printing any error as one line on stderr.
int Launch(const LaunchOptions& options);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_LAUNCHER_H_
