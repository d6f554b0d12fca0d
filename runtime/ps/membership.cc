#include "runtime/ps/membership.h"

#include <algorithm>

namespace hptrain::ps {

Membership::Membership(int initial, std::chrono::milliseconds heartbeat_timeout)
    : heartbeat_timeout_(heartbeat_timeout) {
  for (int slot = 0; slot < initial; ++slot) members_.push_back(slot);
}

bool Membership::IsMember(int slot) const { return RankOf(slot) >= 0; }

int Membership::RankOf(int slot) const {
  auto it = std::find(members_.begin(), members_.end(), slot);
  return it == members_.end() ? -1 : static_cast<int>(it - members_.begin());
}

hptrain::v1::MembershipChange Membership::Begin(const std::string& reason, int slot,
                                                const std::string& detail, double now_unix) {
  hptrain::v1::MembershipChange change;
  change.set_epoch(++epoch_);
  change.set_reason(reason);
  change.add_slots(slot);
  for (int member : members_) change.add_members(member);
  change.set_unix_seconds(now_unix);
  change.set_detail(detail);
  changes_.push_back(change);
  return change;
}

hptrain::v1::MembershipChange Membership::Join(int slot, double now_unix) {
  members_.push_back(slot);
  seen_.erase(slot);  // the joiner's own heartbeats start the clock again
  return Begin("joined", slot, "registered", now_unix);
}

hptrain::v1::MembershipChange Membership::Leave(int slot, const std::string& reason,
                                                const std::string& detail, double now_unix) {
  members_.erase(std::remove(members_.begin(), members_.end(), slot), members_.end());
  seen_.erase(slot);
  return Begin(reason, slot, detail, now_unix);
}

void Membership::SetEffectiveStep(int64_t epoch, int64_t step) {
  for (auto& change : changes_) {
    if (change.epoch() == epoch) change.set_effective_step(step);
  }
}

void Membership::Seen(int slot, Clock::time_point now) { seen_[slot] = now; }

std::vector<int> Membership::Silent(Clock::time_point now) const {
  std::vector<int> silent;
  for (int slot : members_) {
    auto it = seen_.find(slot);
    if (it != seen_.end() && now - it->second > heartbeat_timeout_) silent.push_back(slot);
  }
  return silent;
}

bool Membership::LostSince(int64_t epoch) const { return LastLoss() > epoch; }

int64_t Membership::LastLoss() const {
  int64_t last = 0;
  for (const auto& change : changes_) {
    if (change.reason() == "lost") last = change.epoch();
  }
  return last;
}

}  // namespace hptrain::ps
