// CoordinatorService: the job's coordinator (proto/hptrain/v1/coordinator.proto), the gRPC
// service of the `hptrain ps` process. See the proto for the protocol; this class holds the state:
// the rendezvous key-value map, membership, the allocation with its generation, per-rank progress
// and per-epoch results. Every handler first checks the job token.
//
// Elastic jobs (CoordinatorConfig::elastic, docs/elastic.md): ranks are slots (groups.size() of
// them), the members change in epochs (membership.h), and every change becomes an allocation of
// the global batch over the new members: a join or a removal at the step after the highest one any
// worker has asked for (as SetAllocation), a loss at once (the allocations scheduled before it are
// dropped, the new one is in force at every step). A worker that reports failure, re-registers or
// misses heartbeats for heartbeat_timeout is lost, not a reason to stop the job; the job is
// finished when every member has reported done.
//
// Thread-safety: all handlers may run concurrently (gRPC's sync server); one mutex guards state.
#ifndef HPTRAIN_RUNTIME_PS_COORDINATOR_SERVICE_H_
#define HPTRAIN_RUNTIME_PS_COORDINATOR_SERVICE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/hptrain/v1/coordinator.grpc.pb.h"
#include "runtime/ps/membership.h"

namespace hptrain::ps {

struct CoordinatorConfig {
  std::string job;
  std::string strategy;
  std::string token;                  // required on every call
  std::vector<std::string> groups;    // group of each rank; size() is the world size
  std::vector<int> allocation;        // initial batch size of each rank
  int global_batch = 0;
  bool elastic = false;
  int initial_members = -1;  // elastic: slots 0 .. initial_members-1 start the job; -1 = all
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(30);  // elastic
  std::chrono::milliseconds max_wait = std::chrono::minutes(5);  // cap on Get/Wait timeouts
};

class CoordinatorService final : public hptrain::v1::Coordinator::Service {
 public:
  explicit CoordinatorService(CoordinatorConfig config);

  // Called with "missing_token" or "bad_token" for every refused call (for a metric).
  void set_on_rejected(std::function<void(const std::string&)> fn) { on_rejected_ = std::move(fn); }

  // Blocks until Shutdown was called, every rank reported done, or `timeout` passed.
  // Returns true when the job is over (shutdown or all done).
  bool WaitUntilFinished(std::chrono::milliseconds timeout);
  bool shutdown_requested();
  // Asks every worker to stop at its next heartbeat.
  void RequestStop(const std::string& reason);
  // Sets a key of the rendezvous store from inside the process (the ps registers its own
  // parameter-server shard's address this way).
  void SetKey(const std::string& key, const std::string& value);
  hptrain::v1::JobStatus Snapshot();
  // Elastic jobs: drops the members whose heartbeats stopped (called periodically).
  void ExpireSilentMembers();

  grpc::Status Set(grpc::ServerContext*, const hptrain::v1::SetRequest*,
                   hptrain::v1::SetResponse*) override;
  grpc::Status Get(grpc::ServerContext*, const hptrain::v1::GetRequest*,
                   hptrain::v1::GetResponse*) override;
  grpc::Status Wait(grpc::ServerContext*, const hptrain::v1::WaitRequest*,
                    hptrain::v1::WaitResponse*) override;
  grpc::Status Register(grpc::ServerContext*, const hptrain::v1::RegisterRequest*,
                        hptrain::v1::RegisterResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const hptrain::v1::HeartbeatRequest*,
                         hptrain::v1::HeartbeatResponse*) override;
  grpc::Status GetAllocation(grpc::ServerContext*, const hptrain::v1::GetAllocationRequest*,
                             hptrain::v1::Allocation*) override;
  grpc::Status SetAllocation(grpc::ServerContext*, const hptrain::v1::SetAllocationRequest*,
                             hptrain::v1::Allocation*) override;
  grpc::Status ReportProgress(grpc::ServerContext*, const hptrain::v1::ProgressReport*,
                              hptrain::v1::ReportResponse*) override;
  grpc::Status ReportEpoch(grpc::ServerContext*, const hptrain::v1::EpochReport*,
                           hptrain::v1::ReportResponse*) override;
  grpc::Status ReportDone(grpc::ServerContext*, const hptrain::v1::DoneReport*,
                          hptrain::v1::ReportResponse*) override;
  grpc::Status GetJobStatus(grpc::ServerContext*, const hptrain::v1::GetJobStatusRequest*,
                            hptrain::v1::JobStatus*) override;
  grpc::Status Shutdown(grpc::ServerContext*, const hptrain::v1::ShutdownRequest*,
                        hptrain::v1::ShutdownResponse*) override;
  grpc::Status ChangeMembership(grpc::ServerContext*,
                               const hptrain::v1::MembershipChangeRequest*,
                               hptrain::v1::Allocation*) override;

 private:
  grpc::Status Authorize(grpc::ServerContext* context);
  grpc::Status CheckRank(int rank) const;
  bool WaitForKeys(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   int64_t timeout_ms, grpc::ServerContext* context, std::string* missing);
  int slots() const { return static_cast<int>(config_.groups.size()); }
  // The members of the newest epoch (every rank for a non-elastic job).
  int world_size() const { return static_cast<int>(membership_.members().size()); }
  // With mu_ held: `change` as the newest allocation, in force from `at_step` on (planned) or at
  // once (`lost`).
  hptrain::v1::Allocation ScheduleChange(hptrain::v1::MembershipChange change, int64_t at_step);
  // With mu_ held: the highest step any worker has asked the allocation for or reported.
  int64_t HighestStep() const;
  bool AllMembersDone() const;
  // With mu_ held: the allocation in force at `step`.
  const hptrain::v1::Allocation& InForce(int64_t step) const;

  const CoordinatorConfig config_;
  std::function<void(const std::string&)> on_rejected_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
  std::map<int, hptrain::v1::RegisterRequest> members_;  // registrations, by slot
  Membership membership_;
  std::map<int, hptrain::v1::ProgressReport> progress_;
  // Every evaluation, by step (then epoch: a worker without the step field sends 0).
  std::map<std::pair<int64_t, int>, hptrain::v1::EpochReport> evaluations_;
  std::map<int, hptrain::v1::DoneReport> done_;
  hptrain::v1::Allocation allocation_;  // the newest
  // Allocations in effective_step order, the first in force; later ones are pending.
  std::vector<hptrain::v1::Allocation> schedule_;
  int64_t max_asked_step_ = -1;  // the highest step a worker asked the allocation for
  std::string stop_reason_;
  bool shutdown_ = false;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_COORDINATOR_SERVICE_H_
