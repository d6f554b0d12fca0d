// Elastic jobs (spec.elastic, docs/elastic.md) as the reconciler sees them: the coordinator's
// membership (read by the controller loop, never by the reconciler), the membership changes a
// Plan asks the coordinator for, and the words of the events about them.
//
// Pure; thread-safe.
#ifndef HPTRAIN_CONTROLLER_RECONCILE_ELASTIC_H_
#define HPTRAIN_CONTROLLER_RECONCILE_ELASTIC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hptrain::reconcile {

// One membership epoch as the coordinator began it (JobStatus.membership_changes).
struct MembershipChangeView {
  int64_t epoch = 0;
  std::string reason;       // "joined", "removed", "lost"
  std::vector<int> slots;   // the slots that joined or left
  std::string detail;       // "scaled down", "exit 137", "heartbeat missing for 30 s", ...
};

// What the job's coordinator said about its members (GetJobStatus).
struct CoordinatorMembership {
  int64_t epoch = 0;
  std::vector<int> members;  // slots, in rank order
  std::vector<MembershipChangeView> changes;

  bool IsMember(int slot) const;
};

// A ChangeMembership call the Plan asks for (best effort: the controller loop logs a failure
// and goes on; the next pass asks again while the reason holds).
struct MembershipRequest {
  enum class Kind { kRemove, kLost };
  Kind kind = Kind::kRemove;
  int slot = 0;
  std::string reason;  // MembershipChangeRequest.reason

  bool operator==(const MembershipRequest& other) const {
    return kind == other.kind && slot == other.slot && reason == other.reason;
  }
};

// "REMOVE" or "LOST".
const char* KindName(MembershipRequest::Kind kind);

// The MembershipChanged event's message for `change`, whose epoch ended with `members` when the
// change is the newest one, e.g. "epoch 3: slot 2 lost; members 0,1,3",
// "epoch 4: slots 4,5 joined; members 0,1,3,4,5". `members` may be empty when unknown (an older
// epoch than the newest: the change's own members are not kept), then "; members" is left out.
std::string MembershipEventMessage(const MembershipChangeView& change,
                                   const std::vector<int>& members);

}  // namespace hptrain::reconcile

#endif  // HPTRAIN_CONTROLLER_RECONCILE_ELASTIC_H_
