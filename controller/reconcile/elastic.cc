#include "controller/reconcile/elastic.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hptrain::reconcile {

bool CoordinatorMembership::IsMember(int slot) const {
  return std::find(members.begin(), members.end(), slot) != members.end();
}

const char* KindName(MembershipRequest::Kind kind) {
  return kind == MembershipRequest::Kind::kLost ? "LOST" : "REMOVE";
}

std::string MembershipEventMessage(const MembershipChangeView& change,
                                   const std::vector<int>& members) {
  std::string out = absl::StrCat("epoch ", change.epoch);
  if (!change.slots.empty()) {
    absl::StrAppend(&out, ": ", change.slots.size() == 1 ? "slot " : "slots ",
                    absl::StrJoin(change.slots, ","), " ",
                    change.reason.empty() ? "changed" : change.reason);
  } else if (!change.reason.empty()) {
    absl::StrAppend(&out, ": ", change.reason);
  }
  if (!members.empty()) absl::StrAppend(&out, "; members ", absl::StrJoin(members, ","));
  return out;
}

}  // namespace hptrain::reconcile
