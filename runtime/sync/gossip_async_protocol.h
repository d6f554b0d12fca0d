// AsyncGossipProtocol: gossip's request handshake without a per-step synchronisation
// (docs/algorithms.md §4b "protocol"): a worker talks only to the peer it asks and to those who
// ask it, so a slow worker holds up only its partners, and simply exchanges less often.
//
// Messages (P2pChannel::Post, 16 bytes each): REQUEST (i asks j for an exchange), ACCEPT (j
// serves i's request: the model transfer follows at once) and QUIESCE (the sender reached the
// next collective of all ranks: an evaluation or checkpoint).
//
// At its step boundary (Boundary) a worker
//   1. takes in the messages that arrived; requests join its FIFO queue;
//   2. serves the oldest queued request (every queued one with serve_all: the easgd center):
//      ACCEPT, then the exchange;
//   3. if it wants an exchange now (its trigger fired and step 2 made none), it asks the peer:
//      if that peer's own request is already queued here, serving it is the exchange (crossing
//      requests are one exchange); otherwise it sends REQUEST and waits for the ACCEPT, serving
//      meanwhile only requests from lower ranks and queueing the others. A REQUEST from the
//      peer it waits on is the crossing: the higher rank serves it (its own request is thereby
//      answered), the lower one drops it and keeps waiting for the ACCEPT.
// Deadlock-free: a waiting worker blocks in a transfer only with a lower rank that waits on it,
// so chains of transfers descend in rank and end; in a cycle of waiting requests the highest
// rank serves its lower requester, so some request is always served.
//
// Before every collective of all ranks (Quiesce) a worker sends QUIESCE to every other and
// serves every request until it has QUIESCE from all: no request is left unanswered, and
// nobody sits in the collective while a peer waits for it. All ranks call Quiesce after the
// same step. Waits for an ACCEPT fail after the transport's timeout, naming the peer; a wait in
// Quiesce has no limit (peers may be far behind); a peer whose connection closes fails every
// wait for it at once, naming it.
#ifndef HPTRAIN_RUNTIME_SYNC_GOSSIP_ASYNC_PROTOCOL_H_
#define HPTRAIN_RUNTIME_SYNC_GOSSIP_ASYNC_PROTOCOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/p2p_channel.h"

namespace hptrain::sync {

class AsyncGossipProtocol {
 public:
  enum Kind : int64_t { kRequest = 1, kAccept = 2, kQuiesce = 3 };

  // One exchange with `partner`; `initiator`: it was this worker's request. Both partners run
  // it at once (the model transfer) and must make the same calls on their channel.
  using Exchange = std::function<absl::Status(int partner, bool initiator)>;
  // Whom to ask now, or -1 (called once per Boundary, after the serving step; not called when
  // an exchange was served there).
  using Pick = std::function<int()>;

  // `channel` is owned by the caller, outlives the protocol and has its inbox started.
  AsyncGossipProtocol(comm::P2pChannel* channel, bool serve_all)
      : channel_(channel),
        serve_all_(serve_all),
        quiesced_(channel->size(), 0),
        gone_(channel->size(), false) {}

  absl::Status Boundary(const Pick& pick, const Exchange& exchange);
  absl::Status Quiesce(const Exchange& exchange);

  // The partners of the last Boundary's exchanges, in order.
  const std::vector<int>& partners() const { return partners_; }
  size_t queued() const { return queue_.size(); }

 private:
  // Takes a message in: REQUEST joins the queue (or is the crossing, see Wait), QUIESCE counts.
  absl::Status Take(const comm::P2pMessage& message);
  absl::Status Serve(int requester, const Exchange& exchange);
  // Serves the oldest `count` queued requests (fewer when the queue is shorter).
  absl::Status ServeQueue(size_t count, const Exchange& exchange);
  absl::Status Wait(int target, const Exchange& exchange);
  bool Queued(int rank) const;
  void Unqueue(int rank);

  comm::P2pChannel* channel_;
  bool serve_all_;
  std::deque<int> queue_;      // requesters, oldest first
  std::vector<int> quiesced_;  // per rank: QUIESCE messages taken in this round
  std::vector<bool> gone_;     // per rank: its connection closed (P2pMessage::kGone)
  std::vector<int> partners_;
  int64_t round_ = 0;          // Quiesce calls so far
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_GOSSIP_ASYNC_PROTOCOL_H_
