// Membership: the coordinator's record of an elastic job's members (docs/elastic.md). The members
// are worker slots in rank order; every change begins a membership epoch and is logged as a
// MembershipChange. Joiners are appended, so the first member of every epoch was a member of the
// one before (it holds the model the others continue from). The coordinator calls it under its
// own mutex, and turns each change into an allocation (coordinator_service.h).
//
// Heartbeats: a member is silent when it has been seen (registered or sent a heartbeat) and its
// last sign of life is older than the timeout; Silent() names them, the coordinator drops them as
// lost.
//
// Thread-safety: none (the coordinator's mutex guards it).
#ifndef HPTRAIN_RUNTIME_PS_MEMBERSHIP_H_
#define HPTRAIN_RUNTIME_PS_MEMBERSHIP_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/hptrain/v1/coordinator.pb.h"

namespace hptrain::ps {

class Membership {
 public:
  using Clock = std::chrono::steady_clock;

  // The epoch-0 members (slots 0 .. initial-1), and how long a member may stay silent.
  Membership(int initial, std::chrono::milliseconds heartbeat_timeout);

  int64_t epoch() const { return epoch_; }
  const std::vector<int>& members() const { return members_; }
  bool IsMember(int slot) const;
  // Position of `slot` in members(), or -1.
  int RankOf(int slot) const;

  // Each begins the next epoch and returns its record (effective_step left 0: the caller knows
  // when it takes effect); `now_unix` stamps it. Join appends `slot` (not a member); Leave
  // erases it (a member) with reason "removed" or "lost".
  hptrain::v1::MembershipChange Join(int slot, double now_unix);
  hptrain::v1::MembershipChange Leave(int slot, const std::string& reason,
                                      const std::string& detail, double now_unix);

  // A sign of life from `slot` (registration or heartbeat).
  void Seen(int slot, Clock::time_point now);
  // Members seen before whose last sign of life is older than the heartbeat timeout.
  std::vector<int> Silent(Clock::time_point now) const;
  // Whether an epoch after `epoch` began because a member was lost.
  bool LostSince(int64_t epoch) const;
  // The newest epoch that began because a member was lost; 0 if none did.
  int64_t LastLoss() const;

  // Records when the change that began `epoch` takes effect (the coordinator decides it).
  void SetEffectiveStep(int64_t epoch, int64_t step);

  // Every change so far, oldest first.
  const std::vector<hptrain::v1::MembershipChange>& changes() const { return changes_; }

 private:
  hptrain::v1::MembershipChange Begin(const std::string& reason, int slot,
                                      const std::string& detail, double now_unix);

  std::chrono::milliseconds heartbeat_timeout_;
  int64_t epoch_ = 0;
  std::vector<int> members_;
  std::map<int, Clock::time_point> seen_;
  std::vector<hptrain::v1::MembershipChange> changes_;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_MEMBERSHIP_H_
