#include "runtime/comm/p2p_channel.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::comm {

P2pChannel::P2pChannel(Transport* transport)
    : transport_(transport), sequence_(static_cast<size_t>(transport->size()), 0) {}

P2pChannel::~P2pChannel() {
  if (inbox_threads_.empty()) return;
  transport_->AbortUntimedRecvs();
  for (std::thread& t : inbox_threads_) t.join();
}

absl::Status P2pChannel::Pair(int peer, const void* send, size_t send_bytes, void* recv,
                              size_t recv_bytes, const char* what) {
  if (peer < 0 || peer >= size() || peer == rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank(), ": no ", what, " with rank ", peer, " (", size(), " ranks)"));
  }
  const uint64_t tag = kTagBase | sequence_[peer]++;
  absl::Status status =
      transport_->SendRecv(peer, send_bytes > 0 ? send : nullptr, send_bytes, peer,
                           recv_bytes > 0 ? recv : nullptr, recv_bytes, tag);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("rank ", rank(), ": ", what, " with rank ",
                                                    peer, " failed: ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status P2pChannel::Transfer(int peer, const void* send, size_t send_bytes, void* recv,
                                  size_t recv_bytes) {
  HPTRAIN_RETURN_IF_ERROR(Pair(peer, send, send_bytes, recv, recv_bytes, "model exchange"));
  counters_.payload_sent.fetch_add(static_cast<int64_t>(send_bytes));
  counters_.payload_received.fetch_add(static_cast<int64_t>(recv_bytes));
  return absl::OkStatus();
}

absl::Status P2pChannel::Ask(int peer, int64_t word, int64_t* answer) {
  HPTRAIN_RETURN_IF_ERROR(
      Pair(peer, &word, sizeof(word), answer, sizeof(*answer), "request exchange"));
  counters_.control_sent.fetch_add(sizeof(word));
  counters_.control_received.fetch_add(sizeof(*answer));
  return absl::OkStatus();
}

absl::Status P2pChannel::ExchangeWords(absl::Span<const int64_t> words,
                                       absl::Span<int64_t> received) {
  const int n = size();
  if (static_cast<int>(words.size()) != n || static_cast<int>(received.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank(), ": ExchangeWords needs ", n,
                                                   " words, got ", words.size(), " and ",
                                                   received.size()));
  }
  // Own pairs in ascending order of the partner: the globally smallest unfinished pair (a, b)
  // is always the next pair of both a and b, so some pair always completes.
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank()) continue;
    HPTRAIN_RETURN_IF_ERROR(Ask(peer, words[peer], &received[peer]));
  }
  return absl::OkStatus();
}

void P2pChannel::StartInbox() {
  if (!inbox_threads_.empty()) return;
  wire_.assign(static_cast<size_t>(size()), {0, 0});
  failures_.assign(static_cast<size_t>(size()), absl::OkStatus());
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank()) inbox_threads_.emplace_back([this, peer] { ReceiveLoop(peer); });
  }
}

void P2pChannel::ReceiveLoop(int peer) {
  std::array<int64_t, 2>& wire = wire_[peer];
  for (;;) {
    absl::Status status = transport_->UntimedRecv(peer, wire.data(), sizeof(wire), kMessageTag);
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (!status.ok()) {
      if (absl::IsCancelled(status)) return;  // the channel closing
      failures_[peer] = absl::Status(
          status.code(), absl::StrCat("lost rank ", peer, " (", status.message(), ")"));
      inbox_.push_back({peer, P2pMessage::kGone, 0});
      inbox_cv_.notify_all();
      return;
    }
    counters_.control_received.fetch_add(sizeof(wire));
    inbox_.push_back({peer, wire[0], wire[1]});
    inbox_cv_.notify_all();
  }
}

absl::Status P2pChannel::Post(int peer, int64_t kind, int64_t value) {
  if (peer < 0 || peer >= size() || peer == rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank(), ": no message to rank ", peer, " (", size(), " ranks)"));
  }
  const int64_t wire[2] = {kind, value};
  absl::Status status =
      transport_->SendRecv(peer, &wire, sizeof(wire), peer, nullptr, 0, kMessageTag);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("rank ", rank(), ": message to rank ", peer,
                                                    " failed: ", status.message()));
  }
  counters_.control_sent.fetch_add(sizeof(wire));
  return absl::OkStatus();
}

std::optional<P2pMessage> P2pChannel::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(inbox_mu_);
  if (!inbox_cv_.wait_for(lock, timeout, [&] { return !inbox_.empty(); })) return std::nullopt;
  P2pMessage message = inbox_.front();
  inbox_.pop_front();
  return message;
}

absl::Status P2pChannel::failure(int peer) {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  if (peer < 0 || peer >= static_cast<int>(failures_.size()) || failures_[peer].ok()) {
    return absl::UnavailableError(absl::StrCat("rank ", peer, " is gone"));
  }
  return failures_[peer];
}

}  // namespace hptrain::comm
