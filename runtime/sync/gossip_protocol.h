// GossipProtocol: the request handshake of gossip (docs/algorithms.md §4b, "protocol"), at the
// step boundary of every worker.
//
// Every step, each worker tells every other one (P2pChannel::ExchangeWords, 8 bytes per pair and
// direction) whom it requests now, or nobody (-1). Every worker thus sees the same requests in
// the same order and keeps the same replica of the handshake's state (GossipMatcher), so all
// agree on the step's pairs without a coordinator, and the outcome depends on the requests
// only, never on timing:
//   - a request joins the target's FIFO queue; its sender waits (issues no new request) until
//     it is served;
//   - crossing requests (a asks b while b's request to a is outstanding) are one exchange: the
//     lower rank initiates, the higher rank's request is cancelled;
//   - the targets serve in rank order, each at most one request per step (the front of its
//     queue, when neither it nor the requester already has an exchange this step); a served
//     request ends the requester's wait.
// Deadlock-free: the lowest rank with a non-empty queue is always free to serve its front, so
// while any request is outstanding at least one is served per step (cyclic requests included).
#ifndef HPTRAIN_RUNTIME_SYNC_GOSSIP_PROTOCOL_H_
#define HPTRAIN_RUNTIME_SYNC_GOSSIP_PROTOCOL_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/comm/p2p_channel.h"

namespace hptrain::sync {

// One worker's exchange in a step.
struct GossipPairing {
  int partner = -1;        // -1: no exchange this step
  bool initiator = false;  // this worker's request was served (the partner is the target)
};

// The replicated state of the handshake; the same on every worker.
class GossipMatcher {
 public:
  explicit GossipMatcher(int size);

  // targets[i]: rank i's new request this step (-1: none). A rank that is waiting() sends
  // none (a request from it is ignored). Returns every rank's pairing for the step.
  std::vector<GossipPairing> Step(absl::Span<const int64_t> targets);

  // The rank has a request not yet served.
  bool waiting(int rank) const { return pending_[rank] >= 0; }
  int outstanding() const;  // requests not yet served, over all ranks

 private:
  std::vector<int> pending_;             // per rank: the target of its outstanding request, or -1
  std::vector<std::deque<int>> queues_;  // per target: requesters in arrival order
};

class GossipProtocol {
 public:
  // `channel` is owned by the caller and outlives the protocol.
  explicit GossipProtocol(comm::P2pChannel* channel)
      : channel_(channel), matcher_(channel->size()) {}

  // This worker's request this step (-1: none; ignored while waiting()), then the step's
  // pairing of this worker.
  absl::StatusOr<GossipPairing> Round(int target);

  // The requests of every rank in the last Round (-1: none).
  const std::vector<int64_t>& last_requests() const { return requests_; }

  bool waiting() const { return matcher_.waiting(channel_->rank()); }
  const GossipMatcher& matcher() const { return matcher_; }

 private:
  comm::P2pChannel* channel_;
  GossipMatcher matcher_;
  std::vector<int64_t> requests_;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_GOSSIP_PROTOCOL_H_
