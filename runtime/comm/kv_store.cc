#include "runtime/comm/kv_store.h"

#include "absl/strings/str_cat.h"

namespace hptrain::comm {

absl::Status InMemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryStore::Get(const std::string& key,
                                               std::chrono::milliseconds timeout) {
  absl::Status waited = Wait({key}, timeout);
  if (!waited.ok()) return waited;
  std::lock_guard<std::mutex> lock(mu_);
  return data_.at(key);
}

absl::Status InMemoryStore::Wait(const std::vector<std::string>& keys,
                                 std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    if (!cv_.wait_until(lock, deadline, [&] { return data_.count(key) > 0; })) {
      return absl::DeadlineExceededError(
          absl::StrCat("key \"", key, "\" did not appear within ", timeout.count(), " ms"));
    }
  }
  return absl::OkStatus();
}

}  // namespace hptrain::comm
