#include "runtime/ps/coordinator_service.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/job/job_spec.h"
#include "runtime/comm/topology.h"
#include "runtime/ps/grpc_status.h"

namespace hptrain::ps {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;
namespace v1 = hptrain::v1;

namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int InitialMembers(const CoordinatorConfig& config) {
  const int slots = static_cast<int>(config.groups.size());
  return config.elastic && config.initial_members >= 0 ? std::min(config.initial_members, slots)
                                                       : slots;
}

}  // namespace

CoordinatorService::CoordinatorService(CoordinatorConfig config)
    : config_(std::move(config)),
      membership_(InitialMembers(config_), config_.heartbeat_timeout) {
  allocation_.set_generation(1);
  allocation_.set_effective_step(0);
  for (int b : config_.allocation) allocation_.add_batch_sizes(b);
  allocation_.set_membership_epoch(0);
  for (int slot : membership_.members()) allocation_.add_members(slot);
  allocation_.set_membership_reason("start");
  schedule_.push_back(allocation_);
}

int64_t CoordinatorService::HighestStep() const {
  int64_t highest = max_asked_step_;
  for (const auto& [rank, report] : progress_) highest = std::max(highest, report.step());
  return highest;
}

v1::Allocation CoordinatorService::ScheduleChange(v1::MembershipChange change, int64_t at_step) {
  const bool lost = change.reason() == "lost";
  allocation_.set_generation(allocation_.generation() + 1);
  allocation_.clear_batch_sizes();
  for (int b : job::EvenAllocation(config_.global_batch, world_size())) {
    allocation_.add_batch_sizes(b);
  }
  allocation_.set_membership_epoch(change.epoch());
  allocation_.clear_members();
  for (int slot : membership_.members()) allocation_.add_members(slot);
  allocation_.set_membership_reason(change.reason());
  if (lost) {
    // At once: the survivors abandon the step they are in and continue from the new rank 0's
    // position, so every step from now on is this epoch's.
    allocation_.set_effective_step(0);
    schedule_.assign(1, allocation_);
  } else {
    allocation_.set_effective_step(std::max({HighestStep() + 1, at_step,
                                             schedule_.back().effective_step() + 1}));
    schedule_.push_back(allocation_);
  }
  change.set_effective_step(allocation_.effective_step());
  membership_.SetEffectiveStep(change.epoch(), change.effective_step());
  std::fprintf(stderr, "hptrain coordinator: membership epoch %lld: %s slot %d (%s); members %s%s\n",
               static_cast<long long>(change.epoch()), change.reason().c_str(), change.slots(0),
               change.detail().c_str(), absl::StrJoin(change.members(), ",").c_str(),
               lost ? "" : absl::StrCat(", from step ", change.effective_step()).c_str());
  return allocation_;
}

bool CoordinatorService::AllMembersDone() const {
  for (int slot : membership_.members()) {
    auto it = done_.find(slot);
    if (it == done_.end() || !it->second.ok()) return false;
  }
  return true;
}

Status CoordinatorService::Authorize(ServerContext* context) {
  const std::string reason = TokenRejection(*context, config_.token);
  if (reason.empty()) return Status::OK;
  if (on_rejected_) on_rejected_(reason);
  return Unauthenticated(reason);
}

Status CoordinatorService::CheckRank(int rank) const {
  if (rank < 0 || rank >= slots()) {
    return Status(StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("rank ", rank, " out of range [0, ", slots(), ")"));
  }
  return Status::OK;
}

#define HPTRAIN_AUTHORIZE(context)                  \
  do {                                              \
    grpc::Status auth_status = Authorize(context);  \
    if (!auth_status.ok()) return auth_status;      \
  } while (0)

void CoordinatorService::SetKey(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[key] = value;
  }
  cv_.notify_all();
}

Status CoordinatorService::Set(ServerContext* context, const v1::SetRequest* request,
                               v1::SetResponse*) {
  HPTRAIN_AUTHORIZE(context);
  {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[request->key()] = request->value();
  }
  cv_.notify_all();
  return Status::OK;
}

bool CoordinatorService::WaitForKeys(std::unique_lock<std::mutex>& lock,
                                     const std::vector<std::string>& keys, int64_t timeout_ms,
                                     ServerContext* context, std::string* missing) {
  auto timeout = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(timeout_ms),
                                                     config_.max_wait);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    while (kv_.count(key) == 0) {
      // Wake up periodically to notice a cancelled call or a shutdown.
      auto slice = std::min(deadline, std::chrono::steady_clock::now() +
                                          std::chrono::milliseconds(200));
      cv_.wait_until(lock, slice);
      if (kv_.count(key)) break;
      if (std::chrono::steady_clock::now() >= deadline || context->IsCancelled() || shutdown_) {
        *missing = key;
        return false;
      }
    }
  }
  return true;
}

Status CoordinatorService::Get(ServerContext* context, const v1::GetRequest* request,
                               v1::GetResponse* response) {
  HPTRAIN_AUTHORIZE(context);
  std::unique_lock<std::mutex> lock(mu_);
  std::string missing;
  if (!WaitForKeys(lock, {request->key()}, request->timeout_ms(), context, &missing)) {
    return Status(request->timeout_ms() == 0 ? StatusCode::NOT_FOUND
                                             : StatusCode::DEADLINE_EXCEEDED,
                  absl::StrCat("key \"", missing, "\" not set"));
  }
  response->set_value(kv_[request->key()]);
  return Status::OK;
}

Status CoordinatorService::Wait(ServerContext* context, const v1::WaitRequest* request,
                                v1::WaitResponse*) {
  HPTRAIN_AUTHORIZE(context);
  std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  std::unique_lock<std::mutex> lock(mu_);
  std::string missing;
  if (!WaitForKeys(lock, keys, request->timeout_ms(), context, &missing)) {
    return Status(StatusCode::DEADLINE_EXCEEDED,
                  absl::StrCat("key \"", missing, "\" not set within ", request->timeout_ms(),
                               " ms"));
  }
  return Status::OK;
}

Status CoordinatorService::Register(ServerContext* context, const v1::RegisterRequest* request,
                                    v1::RegisterResponse* response) {
  HPTRAIN_AUTHORIZE(context);
  Status rank_ok = CheckRank(request->rank());
  if (!rank_ok.ok()) return rank_ok;
  if (request->group() != config_.groups[request->rank()]) {
    return Status(StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("rank ", request->rank(), " belongs to group \"",
                               config_.groups[request->rank()], "\", not \"", request->group(),
                               "\""));
  }
  if (!request->node_name().empty()) {
    SetKey(comm::NodeNameKey(request->rank()), request->node_name());
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int slot = request->rank();
  const bool again = members_.count(slot) > 0;
  members_[slot] = *request;
  if (config_.elastic) {
    // A slot that is not a member joins; one that registers again was restarted: its old process
    // is lost, the new one joins.
    if (again && membership_.IsMember(slot)) {
      ScheduleChange(membership_.Leave(slot, "lost", "registered again", UnixNow()), 0);
    }
    done_.erase(slot);
    // A first registration of a member of the epoch in force starts with the others (even if a
    // removal is planned for it); anybody else joins, with the state of the members.
    const v1::Allocation& now = InForce(std::max<int64_t>(HighestStep(), 0));
    const bool starts = !again && std::find(now.members().begin(), now.members().end(), slot) !=
                                      now.members().end();
    if (starts) {
      // It forms the epoch in force with the others.
    } else if (!membership_.IsMember(slot)) {
      *response->mutable_allocation() = ScheduleChange(membership_.Join(slot, UnixNow()), 0);
      response->set_joining(true);
    } else {
      *response->mutable_allocation() = allocation_;
      response->set_joining(true);
    }
    membership_.Seen(slot, Membership::Clock::now());
  }
  response->set_world_size(world_size());
  return Status::OK;
}

Status CoordinatorService::Heartbeat(ServerContext* context, const v1::HeartbeatRequest* request,
                                     v1::HeartbeatResponse* response) {
  HPTRAIN_AUTHORIZE(context);
  std::lock_guard<std::mutex> lock(mu_);
  response->set_stop(!stop_reason_.empty());
  response->set_stop_reason(stop_reason_);
  if (config_.elastic && membership_.IsMember(request->rank())) {
    membership_.Seen(request->rank(), Membership::Clock::now());
  }
  response->set_membership_epoch(membership_.epoch());
  response->set_membership_lost(membership_.LostSince(request->membership_epoch()));
  response->set_lost_epoch(membership_.LastLoss());
  return Status::OK;
}

Status CoordinatorService::GetAllocation(ServerContext* context,
                                         const v1::GetAllocationRequest* request,
                                         v1::Allocation* response) {
  HPTRAIN_AUTHORIZE(context);
  std::lock_guard<std::mutex> lock(mu_);
  if (!request->at_step()) {
    *response = allocation_;
    return Status::OK;
  }
  const int64_t step = request->step();
  max_asked_step_ = std::max(max_asked_step_, step);
  // Workers run in lockstep and ask one step ahead (ps/allocation_prefetcher.h): once one asks
  // for step s it has finished step s - 2's exchange, so every worker has asked for s - 1 and no
  // one asks for a step before s - 1 again. Allocations replaced by then are history.
  while (schedule_.size() > 1 && schedule_[1].effective_step() <= max_asked_step_ - 1) {
    schedule_.erase(schedule_.begin());
  }
  *response = InForce(step);
  return Status::OK;
}

const v1::Allocation& CoordinatorService::InForce(int64_t step) const {
  size_t in_force = 0;
  for (size_t i = 1; i < schedule_.size(); ++i) {
    if (schedule_[i].effective_step() <= step) in_force = i;
  }
  return schedule_[in_force];
}

Status CoordinatorService::SetAllocation(ServerContext* context,
                                         const v1::SetAllocationRequest* request,
                                         v1::Allocation* response) {
  HPTRAIN_AUTHORIZE(context);
  std::unique_lock<std::mutex> members_lock(mu_);
  const int world = world_size();
  members_lock.unlock();
  if (request->batch_sizes_size() != world) {
    return Status(StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("allocation has ", request->batch_sizes_size(),
                               " entries, the job has ", world, " workers"));
  }
  int64_t sum = 0;
  for (int b : request->batch_sizes()) {
    if (b < 1) {
      return Status(StatusCode::INVALID_ARGUMENT, "every worker needs a batch of at least 1");
    }
    sum += b;
  }
  if (sum != config_.global_batch) {
    return Status(StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("allocation sums to ", sum, ", the global batch is ",
                               config_.global_batch));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (request->batch_sizes_size() != world_size()) {
    return Status(StatusCode::FAILED_PRECONDITION, "the membership changed meanwhile");
  }
  const int64_t highest = HighestStep();
  allocation_.set_generation(allocation_.generation() + 1);
  allocation_.mutable_batch_sizes()->CopyFrom(request->batch_sizes());
  allocation_.set_effective_step(
      std::max(highest + std::max(1, request->lead_steps()), schedule_.back().effective_step() + 1));
  schedule_.push_back(allocation_);
  *response = allocation_;
  return Status::OK;
}

Status CoordinatorService::ReportProgress(ServerContext* context,
                                          const v1::ProgressReport* request,
                                          v1::ReportResponse*) {
  HPTRAIN_AUTHORIZE(context);
  Status rank_ok = CheckRank(request->rank());
  if (!rank_ok.ok()) return rank_ok;
  std::lock_guard<std::mutex> lock(mu_);
  progress_[request->rank()] = *request;
  return Status::OK;
}

Status CoordinatorService::ReportEpoch(ServerContext* context, const v1::EpochReport* request,
                                       v1::ReportResponse*) {
  HPTRAIN_AUTHORIZE(context);
  std::lock_guard<std::mutex> lock(mu_);
  evaluations_[{request->step(), request->epoch()}] = *request;
  return Status::OK;
}

Status CoordinatorService::ReportDone(ServerContext* context, const v1::DoneReport* request,
                                      v1::ReportResponse*) {
  HPTRAIN_AUTHORIZE(context);
  Status rank_ok = CheckRank(request->rank());
  if (!rank_ok.ok()) return rank_ok;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_[request->rank()] = *request;
    if (!request->ok() && config_.elastic) {
      // An elastic job goes on without it (the launcher or the controller may start it again).
      if (membership_.IsMember(request->rank())) {
        ScheduleChange(membership_.Leave(request->rank(), "lost",
                                         absl::StrCat("failed: ", request->message()), UnixNow()),
                       0);
      }
    } else if (!request->ok() && stop_reason_.empty()) {
      stop_reason_ = absl::StrCat("rank ", request->rank(), " failed: ", request->message());
    }
  }
  cv_.notify_all();
  return Status::OK;
}

v1::JobStatus CoordinatorService::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  v1::JobStatus status;
  status.set_job(config_.job);
  status.set_strategy(config_.strategy);
  status.set_world_size(world_size());
  status.set_registered(static_cast<int>(members_.size()));
  for (const auto& [rank, member] : members_) status.add_registered_ranks(rank);
  int failed = 0, succeeded = 0;
  for (const auto& [rank, done] : done_) {
    // An elastic job counts its members only: a removed worker is done, a lost one gone.
    if (config_.elastic && !membership_.IsMember(rank)) continue;
    (done.ok() ? succeeded : failed) += 1;
  }
  status.set_done(succeeded);
  status.set_failed(failed);
  status.set_membership_epoch(membership_.epoch());
  for (int slot : membership_.members()) status.add_members(slot);
  for (const auto& change : membership_.changes()) *status.add_membership_changes() = change;
  for (const auto& [rank, report] : progress_) *status.add_ranks() = report;
  for (const auto& [key, report] : evaluations_) {
    *status.add_evaluations() = report;
    if (!report.interim()) *status.add_epochs() = report;  // epoch ends, in epoch order
  }
  *status.mutable_allocation() = allocation_;
  for (int r = 0; r < slots(); ++r) {
    status.add_groups(config_.groups[r]);
    auto it = members_.find(r);
    status.add_metrics_addresses(it == members_.end() ? "" : it->second.metrics_address());
  }
  status.set_failure(stop_reason_);
  return status;
}

Status CoordinatorService::GetJobStatus(ServerContext* context, const v1::GetJobStatusRequest*,
                                        v1::JobStatus* response) {
  HPTRAIN_AUTHORIZE(context);
  *response = Snapshot();
  return Status::OK;
}

Status CoordinatorService::Shutdown(ServerContext* context, const v1::ShutdownRequest*,
                                    v1::ShutdownResponse*) {
  HPTRAIN_AUTHORIZE(context);
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  return Status::OK;
}

void CoordinatorService::RequestStop(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_reason_.empty()) stop_reason_ = reason;
}

bool CoordinatorService::shutdown_requested() {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

bool CoordinatorService::WaitUntilFinished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    if (shutdown_) return true;
    if (config_.elastic) return AllMembersDone();
    return static_cast<int>(done_.size()) == world_size();
  });
}

void CoordinatorService::ExpireSilentMembers() {
  if (!config_.elastic) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (int slot : membership_.Silent(Membership::Clock::now())) {
    if (done_.count(slot)) continue;  // finished: its heartbeats ended with it
    ScheduleChange(membership_.Leave(slot, "lost",
                                     absl::StrCat("no heartbeat for ",
                                                  config_.heartbeat_timeout.count() / 1000, " s"),
                                     UnixNow()),
                   0);
  }
}

Status CoordinatorService::ChangeMembership(ServerContext* context,
                                            const v1::MembershipChangeRequest* request,
                                            v1::Allocation* response) {
  HPTRAIN_AUTHORIZE(context);
  if (!config_.elastic) {
    return Status(StatusCode::FAILED_PRECONDITION,
                  "the job is not elastic (spec.elastic): its members cannot change");
  }
  Status slot_ok = CheckRank(request->slot());
  if (!slot_ok.ok()) return slot_ok;
  std::lock_guard<std::mutex> lock(mu_);
  if (!membership_.IsMember(request->slot())) {
    // Already gone (a loss reported twice, a removal of a worker that died): nothing to do.
    *response = allocation_;
    return Status::OK;
  }
  switch (request->kind()) {
    case v1::MembershipChangeRequest::REMOVE:
      if (world_size() == 1) {
        return Status(StatusCode::FAILED_PRECONDITION,
                      absl::StrCat("slot ", request->slot(), " is the job's last member"));
      }
      *response = ScheduleChange(
          membership_.Leave(request->slot(), "removed", request->reason(), UnixNow()),
          request->at_step());
      return Status::OK;
    case v1::MembershipChangeRequest::LOST:
      *response = ScheduleChange(
          membership_.Leave(request->slot(), "lost", request->reason(), UnixNow()), 0);
      return Status::OK;
    default:
      return Status(StatusCode::INVALID_ARGUMENT, "membership change: kind REMOVE or LOST");
  }
}

}  // namespace hptrain::ps
