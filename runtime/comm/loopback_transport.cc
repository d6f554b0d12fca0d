#include "runtime/comm/loopback_transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace hptrain::comm {

absl::Status LoopbackTransport::DoSendRecv(int to, const void* send, size_t send_bytes, int from,
                                           void* recv, size_t recv_bytes, uint64_t tag) {
  std::unique_lock<std::mutex> lock(hub_->mu_);
  if (send != nullptr) {
    hub_->mailbox_[{rank_, to, tag}].emplace_back(static_cast<const char*>(send), send_bytes);
    hub_->cv_.notify_all();
  }
  if (recv == nullptr) return absl::OkStatus();
  LoopbackHub::Key key{from, rank_, tag};
  bool arrived = hub_->cv_.wait_for(lock, hub_->timeout_, [&] {
    auto it = hub_->mailbox_.find(key);
    return it != hub_->mailbox_.end() && !it->second.empty();
  });
  if (!arrived) {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank_, ": nothing from rank ", from, " (tag ", tag, ")"));
  }
  return TakeMessage(key, recv, recv_bytes);
}

absl::Status LoopbackTransport::TakeMessage(const LoopbackHub::Key& key, void* recv,
                                            size_t bytes) {
  auto it = hub_->mailbox_.find(key);
  std::string message = std::move(it->second.front());
  it->second.erase(it->second.begin());
  if (it->second.empty()) hub_->mailbox_.erase(it);
  if (message.size() != bytes) {
    return absl::InternalError(absl::StrCat("rank ", rank_, ": expected ", bytes,
                                            " bytes from rank ", std::get<0>(key), ", got ",
                                            message.size()));
  }
  std::memcpy(recv, message.data(), bytes);
  return absl::OkStatus();
}

LoopbackTransport::~LoopbackTransport() {
  std::lock_guard<std::mutex> lock(hub_->mu_);
  hub_->gone_[rank_] = true;
  hub_->cv_.notify_all();
}

absl::Status LoopbackTransport::DoUntimedRecv(int from, void* recv, size_t bytes, uint64_t tag) {
  std::unique_lock<std::mutex> lock(hub_->mu_);
  const LoopbackHub::Key key{from, rank_, tag};
  auto arrived = [&] {
    auto it = hub_->mailbox_.find(key);
    return it != hub_->mailbox_.end() && !it->second.empty();
  };
  hub_->cv_.wait(lock, [&] { return arrived() || hub_->gone_[from] || untimed_aborted_; });
  if (!arrived()) {
    if (untimed_aborted_) {
      return absl::CancelledError(
          absl::StrCat("rank ", rank_, ": receive from rank ", from, " aborted"));
    }
    return absl::UnavailableError(absl::StrCat("connection closed by rank ", from));
  }
  return TakeMessage(key, recv, bytes);
}

void LoopbackTransport::AbortUntimedRecvs() {
  std::lock_guard<std::mutex> lock(hub_->mu_);
  untimed_aborted_ = true;
  hub_->cv_.notify_all();
}

}  // namespace hptrain::comm
