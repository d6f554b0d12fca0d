// KeyValueStore: the rendezvous store that communicator back ends bootstrap from.
//
// In a job it is the coordinator's KV service (runtime/ps/coordinator_client.h); in tests it is an
// in-memory map. Values are opaque bytes. Every call is thread-safe and bounded by a timeout.
#ifndef HPTRAIN_RUNTIME_COMM_KV_STORE_H_
#define HPTRAIN_RUNTIME_COMM_KV_STORE_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hptrain::comm {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  // Stores `value` under `key`, replacing any previous value.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;

  // Returns the value of `key`, waiting up to `timeout` for it to appear; DeadlineExceeded if it
  // does not.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          std::chrono::milliseconds timeout) = 0;

  // Blocks until every key exists; DeadlineExceeded naming the first missing key otherwise.
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) = 0;
};

// An in-process store for tests and single-process runs.
class InMemoryStore : public KeyValueStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_KV_STORE_H_
