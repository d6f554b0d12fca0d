// ElasticWorkers: the workers of an elastic `hptrain run` (spec.elastic, docs/elastic.md), which
// come and go while the gang (the ps and the other workers) keeps running:
//   1. The launcher starts the first members, slots 0 .. replicas-1 (StartWorker; a worker's
//      --rank is its slot), and calls Poll() on every poll of the coordinator (200 ms).
//   2. A worker that fails on its own (exits non-zero, dies by a signal) is reported lost to the
//      coordinator at once (ChangeMembership LOST, "exit 1" / "killed by signal 9") and, as
//      spec.runPolicy says (DecideWorkerRestart, restart_policy.h), started again alone in its
//      slot, left out (Never), or the job fails (a permanent exit code, or backoffLimit restarts
//      of that slot). AbsorbFailure() is the Supervisor's WaitOptions::absorb_failure.
//   3. A worker that exits 0 (done, or removed from the members) is not restarted (Exited()).
//   4. The control file's lines (elastic_control.h) add a worker in the lowest free slot, remove a
//      member (ChangeMembership REMOVE), or SIGKILL a slot's worker; a bad line is one warning.
//   5. The job's work is done when every current member's worker exited 0 after reporting done
//      (Finished()). Fewer members than minReplicas for longer than joinTimeoutSeconds makes
//      Poll() fail, which the launcher turns into a gang restart from the checkpoint.
// The object lives for the whole run; BeginGang() starts each gang's bookkeeping (the slots'
// restart counts are the run's). Not thread-safe: the Supervisor::Wait() thread calls it.
#ifndef HPTRAIN_RUNTIME_JOB_ELASTIC_WORKERS_H_
#define HPTRAIN_RUNTIME_JOB_ELASTIC_WORKERS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/job/elastic_control.h"
#include "runtime/job/supervisor.h"

namespace hptrain::job {

struct ElasticWorkersOptions {
  int slots = 1;        // spec.Slots(): slots 0 .. slots-1
  int min_members = 1;  // spec.elastic.minReplicas
  double join_timeout_seconds = 300;
  std::string restart_policy = "ExitCode";  // spec.runPolicy
  int backoff_limit = 3;
};

enum class MembershipChangeKind { kRemove, kLost };

// Starts the worker of `slot` under the gang's Supervisor, returning its pid (Supervisor::Spawn's
// errors).
using SpawnWorkerFn = std::function<absl::StatusOr<pid_t>(int slot)>;
// Sends ChangeMembership to the gang's coordinator; its error as is.
using ChangeMembershipFn = std::function<absl::Status(MembershipChangeKind kind, int slot,
                                                      int64_t at_step, const std::string& reason)>;

class ElasticWorkers {
 public:
  // `control` (may be empty: no control file) is read on every Poll(). Messages (what happened
  // and what the launcher does, warnings on bad control lines) go to `log`, one line each,
  // prefixed "hptrain run: "; it must outlive the object.
  ElasticWorkers(ElasticWorkersOptions options, std::optional<ControlFile> control,
                 std::ostream& log);

  // Forgets the previous gang's workers and shortage time; keeps the slots' restart counts.
  void BeginGang(Supervisor* supervisor, SpawnWorkerFn spawn, ChangeMembershipFn change);

  // Starts a worker in `slot` (1); its errors are SpawnWorkerFn's.
  absl::Status StartWorker(int slot);

  // Runs the control file's new commands (4), then checks the member count (5). `members` is the
  // coordinator's (slots, in rank order); `now_seconds` any monotonic clock. Errors:
  // FailedPrecondition "the job had 1 member (fewer than spec.elastic.minReplicas, 2) for 300 s
  // (spec.elastic.joinTimeoutSeconds)" once the shortage has lasted that long.
  absl::Status Poll(const std::vector<int>& members, double now_seconds);

  // (2) Whether the run goes on after `child` failed on its own: true after reporting it lost and
  // restarting it or leaving its slot empty; false for a ps, or when the job fails (then
  // fatal_reason() says why).
  bool AbsorbFailure(const ChildStatus& child);

  // (3) `child` exited 0 on its own.
  void Exited(const ChildStatus& child);

  // (5) Whether every member of `members` has finished; `done_reports` is JobStatus.done.
  bool Finished(const std::vector<int>& members, int done_reports) const;

  // Why a worker's failure fails the job, to append to its Describe(): "; runPolicy.backoffLimit
  // is 3, reached after 3 restarts of slot 1", "; exit code 2 means bad input, ..."; empty
  // when none did.
  const std::string& fatal_reason() const { return fatal_reason_; }

  // Worker restarts so far by slot (size `slots`), over the whole run.
  const std::vector<int>& restarts() const { return restarts_; }

  // The pid of `slot`'s latest worker in this gang, running or not; nullopt when none started.
  std::optional<pid_t> PidOf(int slot) const;

  // The slots with a running worker, ascending.
  std::vector<int> RunningSlots() const;

  // Where the control file is; empty without one.
  std::string control_path() const { return control_ ? control_->path() : ""; }

 private:
  void RunCommand(const ControlCommand& command);

  ElasticWorkersOptions options_;
  std::optional<ControlFile> control_;
  std::ostream& log_;
  Supervisor* supervisor_ = nullptr;
  SpawnWorkerFn spawn_;
  ChangeMembershipFn change_;
  std::map<int, pid_t> pids_;  // each slot's latest worker of this gang
  std::vector<int> finished_;  // slots whose latest worker exited 0
  std::vector<int> restarts_;
  ShortageTimer shortage_;
  std::string fatal_reason_;
};

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_ELASTIC_WORKERS_H_
