#include "controller/reconcile/metrics_warnings.h"

#include <iterator>

#include "absl/strings/str_cat.h"

namespace hptrain::reconcile {

void MetricsWarnings::Succeeded(const std::string& key) { episodes_.erase(key); }

std::optional<Event> MetricsWarnings::Failed(const std::string& key, absl::Time now,
                                             absl::string_view source, absl::string_view error) {
  Episode& episode = episodes_.try_emplace(key, Episode{now, std::nullopt}).first->second;
  if (now - episode.since < policy_.after) return std::nullopt;
  if (episode.warned.has_value() && now - *episode.warned < policy_.repeat) return std::nullopt;
  episode.warned = now;
  return Event{kEventWarning, kReasonMetricsUnavailable,
               absl::StrCat("worker metrics unavailable from ", source, ": ", error,
                            "; status.step, status.samplesPerSecond and rebalancing wait for "
                            "them")};
}

void MetricsWarnings::Retain(const std::set<std::string>& keys) {
  for (auto it = episodes_.begin(); it != episodes_.end();) {
    it = keys.count(it->first) > 0 ? std::next(it) : episodes_.erase(it);
  }
}

}  // namespace hptrain::reconcile
