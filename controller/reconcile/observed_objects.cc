#include "controller/reconcile/observed_objects.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/reconcile/labels.h"

namespace hptrain::reconcile {
namespace {

int64_t ParseCount(const std::string& text) {
  int64_t value = -1;
  if (!absl::SimpleAtoi(text, &value) || value < 0) return -1;
  return value;
}

bool IsReady(const Json& pod) {
  const Json* conditions = Find(pod, {"status", "conditions"});
  if (conditions == nullptr || !conditions->is_array()) return false;
  for (const Json& c : *conditions) {
    if (StringAt(c, {"type"}) == "Ready") return StringAt(c, {"status"}) == "True";
  }
  return false;
}

}  // namespace

bool ObservedPods::IsTaken(absl::string_view name) const {
  return std::binary_search(taken.begin(), taken.end(), name);
}

const PodView* ObservedPods::Owned(absl::string_view name) const {
  auto it = std::lower_bound(owned.begin(), owned.end(), name,
                             [](const PodView& p, absl::string_view n) { return p.name < n; });
  return it != owned.end() && it->name == name ? &*it : nullptr;
}

ObservedPods ObservePods(const std::vector<Json>& pods, const Json& job) {
  ObservedPods out;
  for (const Json& pod : pods) {
    std::string name = Name(pod);
    if (name.empty()) continue;
    out.taken.push_back(name);
    if (!IsControlledBy(pod, job)) continue;
    PodView view;
    view.object = &pod;
    view.name = std::move(name);
    view.uid = Uid(pod);
    view.role = Label(pod, kRoleLabel);
    view.rank = static_cast<int>(std::min<int64_t>(ParseCount(Label(pod, kRankLabel)), 1 << 30));
    view.phase = StringAt(pod, {"status", "phase"});
    view.terminating = IsTerminating(pod);
    view.ready = IsReady(pod);
    view.node = StringAt(pod, {"spec", "nodeName"});
    view.restart_generation = ParseCount(Annotation(pod, kRestartGenerationAnnotation));
    view.spec_hash = Annotation(pod, kSpecHashAnnotation);
    out.owned.push_back(std::move(view));
  }
  std::sort(out.taken.begin(), out.taken.end());
  out.taken.erase(std::unique(out.taken.begin(), out.taken.end()), out.taken.end());
  // An API server never holds two pods of one name; should a cache, keep one, chosen by uid so
  // that the choice does not depend on the input's order.
  std::sort(out.owned.begin(), out.owned.end(), [](const PodView& a, const PodView& b) {
    return a.name != b.name ? a.name < b.name : a.uid < b.uid;
  });
  out.owned.erase(std::unique(out.owned.begin(), out.owned.end(),
                              [](const PodView& a, const PodView& b) { return a.name == b.name; }),
                  out.owned.end());
  return out;
}

NameState LookupName(const std::vector<Json>& objects, absl::string_view name, const Json& job,
                     const Json** found) {
  for (const Json& object : objects) {
    if (Name(object) != name) continue;
    if (found != nullptr) *found = &object;
    if (!IsControlledBy(object, job)) return NameState::kForeign;
    return IsTerminating(object) ? NameState::kOwnedTerminating : NameState::kOwned;
  }
  if (found != nullptr) *found = nullptr;
  return NameState::kFree;
}

namespace {

// The first container status (init containers first) whose container terminated with a non-zero
// exit code, with that termination; nulls when none did.
std::pair<const Json*, const Json*> FirstFailedContainer(const Json& pod) {
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    const Json* statuses = Find(pod, {"status", list});
    if (statuses == nullptr || !statuses->is_array()) continue;
    for (const Json& s : *statuses) {
      const Json* terminated = Find(s, {"state", "terminated"});
      if (terminated == nullptr || !terminated->is_object()) continue;
      if (IntAt(*terminated, {"exitCode"}, 0) != 0) return {&s, terminated};
    }
  }
  return {nullptr, nullptr};
}

}  // namespace

int64_t FailedExitCode(const Json& pod) {
  const Json* terminated = FirstFailedContainer(pod).second;
  return terminated == nullptr ? -1 : IntAt(*terminated, {"exitCode"}, 0);
}

std::string FailureSummary(const Json& pod) {
  if (const auto [status, terminated] = FirstFailedContainer(pod); terminated != nullptr) {
    std::string reason = StringAt(*terminated, {"reason"});
    return absl::StrCat("container ", StringAt(*status, {"name"}), ": ",
                        reason.empty() ? "" : reason + ", ", "exit code ",
                        IntAt(*terminated, {"exitCode"}, 0));
  }
  std::string reason = StringAt(pod, {"status", "reason"});
  std::string message = StringAt(pod, {"status", "message"});
  if (!reason.empty() && !message.empty()) return absl::StrCat(reason, ": ", message);
  return reason.empty() ? message : reason;
}

}  // namespace hptrain::reconcile
