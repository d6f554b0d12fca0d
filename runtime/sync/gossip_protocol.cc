#include "runtime/sync/gossip_protocol.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::sync {

GossipMatcher::GossipMatcher(int size) : pending_(size, -1), queues_(size) {}

int GossipMatcher::outstanding() const {
  int n = 0;
  for (int p : pending_) n += p >= 0 ? 1 : 0;
  return n;
}

std::vector<GossipPairing> GossipMatcher::Step(absl::Span<const int64_t> targets) {
  const int n = static_cast<int>(pending_.size());
  for (int i = 0; i < n; ++i) {
    const int64_t t = targets[i];
    if (t < 0 || t >= n || t == i || pending_[i] >= 0) continue;
    const int j = static_cast<int>(t);
    pending_[i] = j;
    if (pending_[j] == i) {
      // Crossing: one exchange, initiated by the lower rank; the higher rank's request is
      // cancelled (it keeps waiting for this exchange).
      if (i < j) {
        std::deque<int>& q = queues_[i];
        q.erase(std::find(q.begin(), q.end(), j));
        queues_[j].push_back(i);
      }
      continue;
    }
    queues_[j].push_back(i);
  }
  std::vector<GossipPairing> pairing(n);
  for (int j = 0; j < n; ++j) {
    if (pairing[j].partner >= 0 || queues_[j].empty()) continue;
    const int i = queues_[j].front();
    if (pairing[i].partner >= 0) continue;  // FIFO: the front waits for a later step
    queues_[j].pop_front();
    pairing[i] = {j, true};
    pairing[j] = {i, false};
    pending_[i] = -1;
    if (pending_[j] == i) pending_[j] = -1;  // its crossing request, cancelled
  }
  return pairing;
}

absl::StatusOr<GossipPairing> GossipProtocol::Round(int target) {
  const int n = channel_->size();
  const int me = channel_->rank();
  if (waiting()) target = -1;
  std::vector<int64_t> words(n, target);
  requests_.assign(n, -1);
  HPTRAIN_RETURN_IF_ERROR(channel_->ExchangeWords(words, absl::MakeSpan(requests_)),
                          "gossip requests");
  requests_[me] = target;
  return matcher_.Step(requests_)[me];
}

}  // namespace hptrain::sync
