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
  auto it = hub_->mailbox_.find(key);
  std::string message = std::move(it->second.front());
  it->second.erase(it->second.begin());
  if (it->second.empty()) hub_->mailbox_.erase(it);
  if (message.size() != recv_bytes) {
    return absl::InternalError(absl::StrCat("rank ", rank_, ": expected ", recv_bytes,
                                            " bytes from rank ", from, ", got ", message.size()));
  }
  std::memcpy(recv, message.data(), recv_bytes);
  return absl::OkStatus();
}

}  // namespace hptrain::comm
