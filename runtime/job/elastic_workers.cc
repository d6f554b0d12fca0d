#include "runtime/job/elastic_workers.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/job/restart_policy.h"

namespace hptrain::job {
namespace {

constexpr const char* kPrefix = "hptrain run: ";

void Erase(std::vector<int>& slots, int slot) {
  slots.erase(std::remove(slots.begin(), slots.end(), slot), slots.end());
}

}  // namespace

ElasticWorkers::ElasticWorkers(ElasticWorkersOptions options, std::optional<ControlFile> control,
                               std::ostream& log)
    : options_(std::move(options)),
      control_(std::move(control)),
      log_(log),
      restarts_(static_cast<size_t>(std::max(options_.slots, 0)), 0),
      shortage_(options_.min_members) {}

void ElasticWorkers::BeginGang(Supervisor* supervisor, SpawnWorkerFn spawn,
                               ChangeMembershipFn change) {
  supervisor_ = supervisor;
  spawn_ = std::move(spawn);
  change_ = std::move(change);
  pids_.clear();
  finished_.clear();
  shortage_ = ShortageTimer(options_.min_members);
  fatal_reason_.clear();
}

absl::Status ElasticWorkers::StartWorker(int slot) {
  absl::StatusOr<pid_t> pid = spawn_(slot);
  if (!pid.ok()) return pid.status();
  pids_[slot] = *pid;
  Erase(finished_, slot);
  return absl::OkStatus();
}

std::optional<pid_t> ElasticWorkers::PidOf(int slot) const {
  auto it = pids_.find(slot);
  if (it == pids_.end()) return std::nullopt;
  return it->second;
}

std::vector<int> ElasticWorkers::RunningSlots() const {
  std::vector<int> running;
  for (const auto& [slot, pid] : pids_) {
    if (supervisor_ != nullptr && supervisor_->IsRunning(pid)) running.push_back(slot);
  }
  return running;
}

absl::Status ElasticWorkers::Poll(const std::vector<int>& members, double now_seconds) {
  if (control_) {
    for (const std::string& line : control_->ReadNewLines()) {
      absl::StatusOr<std::optional<ControlCommand>> command =
          ParseControlLine(line, options_.slots);
      if (!command.ok()) {
        log_ << kPrefix << "control file " << control_->path() << ": ignoring '" << line
             << "': " << command.status().message() << "\n"
             << std::flush;
        continue;
      }
      if (command->has_value()) RunCommand(**command);
    }
  }
  const double short_for = shortage_.Update(static_cast<int>(members.size()), now_seconds);
  if (short_for > options_.join_timeout_seconds) {
    return absl::FailedPreconditionError(
        absl::StrCat("the job had ", members.size(), members.size() == 1 ? " member" : " members",
                     " (fewer than spec.elastic.minReplicas, ", options_.min_members, ") for ",
                     std::lround(short_for), " s (spec.elastic.joinTimeoutSeconds is ",
                     options_.join_timeout_seconds, ")"));
  }
  return absl::OkStatus();
}

void ElasticWorkers::RunCommand(const ControlCommand& command) {
  const std::string where = absl::StrCat(kPrefix, "control file: ");
  switch (command.kind) {
    case ControlCommand::Kind::kAdd: {
      const std::optional<int> slot = LowestFreeSlot(RunningSlots(), options_.slots);
      if (!slot) {
        log_ << where << "add: every slot 0.." << options_.slots - 1
             << " has a worker (spec.elastic.maxReplicas)\n"
             << std::flush;
        return;
      }
      if (absl::Status started = StartWorker(*slot); !started.ok()) {
        log_ << where << "add: " << started.message() << "\n" << std::flush;
        return;
      }
      log_ << where << "started worker-" << *slot << " (pid " << pids_[*slot]
           << "); it joins the job\n"
           << std::flush;
      return;
    }
    case ControlCommand::Kind::kRemove: {
      if (absl::Status changed =
              change_(MembershipChangeKind::kRemove, command.slot, command.at_step, "control file");
          !changed.ok()) {
        log_ << where << "remove " << command.slot << ": " << changed.message() << "\n"
             << std::flush;
        return;
      }
      log_ << where << "slot " << command.slot << " leaves the job"
           << (command.at_step > 0 ? absl::StrCat(" at step ", command.at_step) : "") << "\n"
           << std::flush;
      return;
    }
    case ControlCommand::Kind::kKill: {
      auto it = pids_.find(command.slot);
      if (it == pids_.end() || supervisor_ == nullptr || !supervisor_->IsRunning(it->second) ||
          !supervisor_->Signal(it->second, SIGKILL).ok()) {
        log_ << where << "kill " << command.slot << ": slot " << command.slot
             << " has no running worker\n"
             << std::flush;
        return;
      }
      log_ << where << "killed worker-" << command.slot << " (pid " << it->second << ")\n"
           << std::flush;
      return;
    }
  }
}

bool ElasticWorkers::AbsorbFailure(const ChildStatus& child) {
  const std::optional<int> slot = WorkerSlot(child.name);
  if (!slot || *slot >= options_.slots) return false;  // a ps: the gang's failure
  auto it = pids_.find(*slot);
  if (it == pids_.end() || it->second != child.pid) return false;  // not one of this gang's
  const int exit_code = child.signaled ? 128 + child.term_signal : child.exit_code;
  const WorkerRestartDecision decision =
      DecideWorkerRestart(options_.restart_policy, options_.backoff_limit, *slot,
                          restarts_[static_cast<size_t>(*slot)], exit_code);
  if (decision.action == WorkerRestartAction::kFailJob) {
    fatal_reason_ = decision.reason;
    return false;
  }
  // The survivors stop waiting for it at once, rather than after the heartbeat timeout.
  const absl::Status lost = change_(MembershipChangeKind::kLost, *slot, 0, LostReason(child));
  std::string what;  // what becomes of the slot
  if (decision.action == WorkerRestartAction::kLeave) {
    what = decision.reason;
  } else {
    ++restarts_[static_cast<size_t>(*slot)];
    if (absl::Status started = StartWorker(*slot); !started.ok()) {
      fatal_reason_ = absl::StrCat("; restarting slot ", *slot, " failed: ", started.message());
      return false;
    }
    what = absl::StrCat("the job goes on without slot ", *slot, ", ", decision.reason);
  }
  log_ << kPrefix << child.Describe() << "; " << what << "\n";
  if (!lost.ok())
    log_ << kPrefix << "reporting slot " << *slot << " lost: " << lost.message() << "\n";
  log_ << std::flush;
  return true;
}

void ElasticWorkers::Exited(const ChildStatus& child) {
  const std::optional<int> slot = WorkerSlot(child.name);
  if (!slot) return;
  auto it = pids_.find(*slot);
  if (it == pids_.end() || it->second != child.pid) return;
  if (std::find(finished_.begin(), finished_.end(), *slot) == finished_.end()) {
    finished_.push_back(*slot);
  }
}

bool ElasticWorkers::Finished(const std::vector<int>& members, int done_reports) const {
  return MembersFinished(members, finished_, done_reports);
}

}  // namespace hptrain::job
