#include "runtime/sync/gossip_async_protocol.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::sync {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

bool AsyncGossipProtocol::Queued(int rank) const {
  return std::find(queue_.begin(), queue_.end(), rank) != queue_.end();
}

void AsyncGossipProtocol::Unqueue(int rank) {
  queue_.erase(std::remove(queue_.begin(), queue_.end(), rank), queue_.end());
}

absl::Status AsyncGossipProtocol::Take(const comm::P2pMessage& message) {
  switch (message.kind) {
    case kRequest:
      if (!Queued(message.from)) queue_.push_back(message.from);
      return absl::OkStatus();
    case kQuiesce:
      ++quiesced_[message.from];
      return absl::OkStatus();
    case comm::P2pMessage::kGone:
      gone_[message.from] = true;
      return absl::OkStatus();
    case kAccept:
      return absl::InternalError(absl::StrCat("rank ", channel_->rank(),
                                              ": an answer from rank ", message.from,
                                              " to a request it did not make"));
    default:
      return absl::InvalidArgumentError(absl::StrCat("rank ", channel_->rank(),
                                                     ": unknown message kind ", message.kind,
                                                     " from rank ", message.from));
  }
}

absl::Status AsyncGossipProtocol::Serve(int requester, const Exchange& exchange) {
  if (gone_[requester]) return channel_->failure(requester);
  HPTRAIN_RETURN_IF_ERROR(channel_->Post(requester, kAccept, 0));
  HPTRAIN_RETURN_IF_ERROR(exchange(requester, /*initiator=*/false));
  partners_.push_back(requester);
  return absl::OkStatus();
}

absl::Status AsyncGossipProtocol::ServeQueue(size_t count, const Exchange& exchange) {
  for (; count > 0 && !queue_.empty(); --count) {
    const int requester = queue_.front();
    queue_.pop_front();
    HPTRAIN_RETURN_IF_ERROR(Serve(requester, exchange));
  }
  return absl::OkStatus();
}

absl::Status AsyncGossipProtocol::Boundary(const Pick& pick, const Exchange& exchange) {
  partners_.clear();
  while (auto message = channel_->Next(milliseconds(0))) {
    HPTRAIN_RETURN_IF_ERROR(Take(*message));
  }
  HPTRAIN_RETURN_IF_ERROR(ServeQueue(serve_all_ ? queue_.size() : 1, exchange));
  if (!partners_.empty()) return absl::OkStatus();
  const int target = pick();
  if (target < 0) return absl::OkStatus();
  if (Queued(target)) {  // its request to this worker is the same exchange
    Unqueue(target);
    return Serve(target, exchange);
  }
  if (gone_[target]) return channel_->failure(target);
  HPTRAIN_RETURN_IF_ERROR(channel_->Post(target, kRequest, 0));
  return Wait(target, exchange);
}

absl::Status AsyncGossipProtocol::Wait(int target, const Exchange& exchange) {
  const int me = channel_->rank();
  // Lower ranks asking this worker may be waiting on it in turn: serve them (oldest first).
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (*it < me) {
      const int requester = *it;
      it = queue_.erase(it);
      HPTRAIN_RETURN_IF_ERROR(Serve(requester, exchange));
      it = queue_.begin();
    } else {
      ++it;
    }
  }
  const milliseconds limit = channel_->timeout();
  const Clock::time_point deadline = Clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= milliseconds(0)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", me, ": no answer from rank ", target, " to an exchange request within ",
          limit.count() / 1000.0, " s"));
    }
    const std::optional<comm::P2pMessage> next = channel_->Next(left);
    if (!next.has_value()) continue;
    const comm::P2pMessage& message = *next;
    if (message.kind == comm::P2pMessage::kGone && message.from == target) {
      return channel_->failure(target);
    }
    if (message.kind == kAccept && message.from == target) {
      Unqueue(target);  // a crossing request of the target's is answered by this exchange
      HPTRAIN_RETURN_IF_ERROR(exchange(target, /*initiator=*/true));
      partners_.push_back(target);
      return absl::OkStatus();
    }
    if (message.kind == kRequest && message.from == target) {
      // Crossing requests: the higher rank serves, the lower one's request stands.
      if (me > target) return Serve(target, exchange);
      continue;
    }
    if (message.kind == kRequest && message.from < me) {
      HPTRAIN_RETURN_IF_ERROR(Serve(message.from, exchange));
      continue;
    }
    HPTRAIN_RETURN_IF_ERROR(Take(message));
  }
}

absl::Status AsyncGossipProtocol::Quiesce(const Exchange& exchange) {
  partners_.clear();
  const int me = channel_->rank();
  const int n = channel_->size();
  ++round_;
  for (int peer = 0; peer < n; ++peer) {
    if (peer != me) HPTRAIN_RETURN_IF_ERROR(channel_->Post(peer, kQuiesce, round_));
  }
  for (;;) {
    HPTRAIN_RETURN_IF_ERROR(ServeQueue(queue_.size(), exchange));
    bool everyone = true;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me || quiesced_[peer] > 0) continue;
      if (gone_[peer]) return channel_->failure(peer);
      everyone = false;
    }
    if (everyone) break;
    // No time limit: a slow peer may be far behind.
    if (auto next = channel_->Next(std::chrono::hours(1))) HPTRAIN_RETURN_IF_ERROR(Take(*next));
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer != me) --quiesced_[peer];
  }
  return absl::OkStatus();
}

}  // namespace hptrain::sync
