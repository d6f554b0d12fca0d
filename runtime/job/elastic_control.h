// The control file of an elastic `hptrain run` (spec.elastic, docs/elastic.md): a plain text file
// the launcher reads as it polls the coordinator (every 200 ms); every line appended to it is one
// command to the running job:
//
//   add                    start a worker in the lowest free slot (< maxReplicas); it joins
//   remove SLOT [at STEP]  ChangeMembership REMOVE: the slot leaves at a step boundary (not
//                          before STEP), its worker exits 0 and is not restarted
//   kill SLOT              SIGKILL the process of that slot's worker (for tests and demos: the
//                          launcher then reports it lost and restarts it as spec.runPolicy says)
//
// Blank lines and lines starting with '#' are ignored; words are separated by blanks. A line that
// is none of the above gets one warning on stderr and is ignored (ParseControlLine's error).
// Lines already in the file when the run starts are not commands (a file left from an earlier
// run replays nothing); a line is read once its newline has been written.
//
// Also here, pure pieces of the elastic launcher's bookkeeping: which slot `add` takes, what the
// coordinator is told of a lost worker, when every member is done, and how long the job has had
// too few members. Not thread-safe (one thread, the launcher's poll, uses them).
#ifndef HPTRAIN_RUNTIME_JOB_ELASTIC_CONTROL_H_
#define HPTRAIN_RUNTIME_JOB_ELASTIC_CONTROL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/job/supervisor.h"

namespace hptrain::job {

struct ControlCommand {
  enum class Kind { kAdd, kRemove, kKill };
  Kind kind = Kind::kAdd;
  int slot = -1;        // remove, kill
  int64_t at_step = 0;  // remove: not before this global step; 0 = the next boundary
};

// Parses one line of a job with `slots` worker slots (spec.Slots()). Returns nullopt for a blank
// line or a comment. Errors (InvalidArgument, naming what is wrong, without the line itself):
// "unknown command 'stop' (add, remove SLOT [at STEP], kill SLOT)", "slot 7 is not in 0..5",
// "expected: remove SLOT [at STEP]", "STEP must be a positive integer".
absl::StatusOr<std::optional<ControlCommand>> ParseControlLine(absl::string_view line, int slots);

// Reads the lines appended to a control file.
class ControlFile {
 public:
  // Creates `path` (mode 0644) when it does not exist; reading starts at its current end. Errors
  // name the path (the errno's code: NotFound for a missing directory, PermissionDenied, ...).
  static absl::StatusOr<ControlFile> Open(const std::string& path);

  // The complete lines appended since the last call (without their newlines), in order; a last
  // line without its newline waits for the next call. A file truncated or replaced by a shorter
  // one is read from its start again. A file that cannot be read gives no lines (it may be
  // being replaced).
  std::vector<std::string> ReadNewLines();

  const std::string& path() const { return path_; }

 private:
  explicit ControlFile(std::string path, int64_t offset)
      : path_(std::move(path)), offset_(offset) {}
  std::string path_;
  int64_t offset_ = 0;  // bytes consumed (complete lines)
};

// The lowest slot below `slots` that `busy` (slots with a running worker) lacks, or nullopt.
std::optional<int> LowestFreeSlot(const std::vector<int>& busy, int slots);

// What the coordinator is told of a worker that ended on its own (MembershipChangeRequest.reason):
// "exit 1", "killed by signal 9".
std::string LostReason(const ChildStatus& child);

// The slot of a worker child named "worker-<slot>"; nullopt for any other name (a ps).
std::optional<int> WorkerSlot(const std::string& child_name);

// The members the launcher goes by: the coordinator's `members` (JobStatus.members), or, while it
// reports none and no change either (a coordinator that does not fill them in), the first
// members 0 .. replicas-1.
std::vector<int> CurrentMembers(const std::vector<int>& members, int changes, int replicas);

// Whether the job's work is done: `members` (the coordinator's, in rank order) is not empty and
// every member is in `finished` (slots whose worker exited 0 after reporting done), and the
// coordinator counts at least as many done reports as there are members.
bool MembersFinished(const std::vector<int>& members, const std::vector<int>& finished,
                     int done_reports);

// How long the job has had fewer members than spec.elastic.minReplicas.
class ShortageTimer {
 public:
  explicit ShortageTimer(int min_members) : min_members_(min_members) {}
  // `members` is the current count at time `now_seconds` (any monotonic clock). Returns the
  // seconds the count has been below the minimum without a break, 0 when it is not below.
  double Update(int members, double now_seconds);

 private:
  int min_members_;
  std::optional<double> below_since_;
};

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_ELASTIC_CONTROL_H_
