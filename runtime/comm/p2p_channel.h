// P2pChannel: exchanges between two workers (no collective of all ranks), over the job's
// point-to-point Transport: Gloo's TCP pairs in jobs (GlooTransport's unbound buffers on the
// communicator's Gloo context), the in-process loopback in tests. Used by the gossip strategy
// (docs/algorithms.md §4b, §4f) for its requests and its model transfers.
//
// Two kinds of traffic, counted apart: control (request words of 8 bytes, messages of 16) and
// payload (models). Every byte also counts in the Transport's counters, so the run summary's
// bytes_sent / bytes_received include them.
//
// Ordering: each pair of ranks numbers its transfers (one sequence per peer); both ends of a pair
// must make the same calls with each other in the same order. The tags live in their own range,
// apart from the collectives' (which count up from 1), so collectives and point-to-point
// transfers on the same Transport never match each other.
//
// Timeouts: a transfer that does not complete within the Transport's timeout (LoopbackHub's,
// GlooOptions::timeout) fails, and so does one whose peer went away (Gloo: its connection
// closed); the error names the peer: "exchange with rank 3: ...".
//
// Messages (the asynchronous handshake): after StartInbox, one background thread per peer
// receives the small messages that peer Posts to this rank, with no time limit (a quiet peer is
// no failure); Next hands out the messages of all peers in arrival order (the order of one
// sender's messages is kept). When a peer's connection closes, its last message is one of kind
// P2pMessage::kGone (after all it sent), and failure(peer) says why: whether that is an error
// depends on what the receiver still expects from it. Messages travel under their own tag; no
// peer may Post to a rank whose channel is gone (its receive buffers are).
//
// Thread-safety: one call at a time (the trainer thread), besides the inbox's own thread; the
// counters may be read from any thread.
#ifndef HPTRAIN_RUNTIME_COMM_P2P_CHANNEL_H_
#define HPTRAIN_RUNTIME_COMM_P2P_CHANNEL_H_

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/comm/transport.h"

namespace hptrain::comm {

struct P2pCounters {
  std::atomic<int64_t> payload_sent{0};
  std::atomic<int64_t> payload_received{0};
  std::atomic<int64_t> control_sent{0};
  std::atomic<int64_t> control_received{0};
};

// A message between two ranks: what it is (`kind`) and one number.
struct P2pMessage {
  static constexpr int64_t kGone = -1;  // the sender's connection closed (see failure())
  int from = -1;
  int64_t kind = 0;
  int64_t value = 0;
};

class P2pChannel {
 public:
  // Tags of point-to-point transfers: kTagBase | (sequence number of the pair).
  static constexpr uint64_t kTagBase = uint64_t{1} << 62;
  // The tag of Posted messages.
  static constexpr uint64_t kMessageTag = kTagBase - 1;

  // `transport` is owned by the caller and outlives the channel.
  explicit P2pChannel(Transport* transport);
  // Stops the inbox's threads.
  ~P2pChannel();

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }

  // Payload transfer with `peer`: sends `send_bytes` from `send` and receives exactly
  // `recv_bytes` into `recv`, concurrently. Either side may be empty (a one-way push); the peer
  // makes the mirror call (its recv_bytes = our send_bytes).
  absl::Status Transfer(int peer, const void* send, size_t send_bytes, void* recv,
                        size_t recv_bytes);

  // Request and answer with `peer`: sends `word` and returns the peer's word.
  absl::Status Ask(int peer, int64_t word, int64_t* answer);

  // One control word to every other rank and one from each: words[p] goes to rank p and
  // received[p] comes from rank p (both size() long; the own entries are untouched). The pairs
  // are visited in ascending order of (lower rank, higher rank), so the calls of all ranks
  // complete without a cycle of waits.
  absl::Status ExchangeWords(absl::Span<const int64_t> words, absl::Span<int64_t> received);

  // Starts the inbox's threads (once).
  void StartInbox();
  // Sends a message to `peer`'s inbox (16 bytes, control).
  absl::Status Post(int peer, int64_t kind, int64_t value);
  // The oldest message not yet handed out, waiting up to `timeout` for one (zero: only what has
  // arrived); nullopt when none came.
  std::optional<P2pMessage> Next(std::chrono::milliseconds timeout);
  // Why `peer`'s messages ended (after its kGone message), naming it.
  absl::Status failure(int peer);
  // The transport's timeout, the bound of a wait for a peer.
  std::chrono::milliseconds timeout() const { return transport_->timeout(); }

  const P2pCounters& counters() const { return counters_; }

 private:
  void ReceiveLoop(int peer);

  absl::Status Pair(int peer, const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                    const char* what);

  Transport* transport_;
  std::vector<uint64_t> sequence_;  // per peer: transfers made with it
  P2pCounters counters_;

  // Per peer, the message being received (kind, value), written by that peer's inbox thread
  // only; after it stopped, the transport may still hold it.
  std::vector<std::array<int64_t, 2>> wire_;
  std::vector<std::thread> inbox_threads_;
  std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::deque<P2pMessage> inbox_;        // guarded by inbox_mu_
  std::vector<absl::Status> failures_;  // guarded by inbox_mu_: per peer, why it is gone
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_P2P_CHANNEL_H_
