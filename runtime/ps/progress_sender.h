// ProgressSender: sends a worker's progress reports to the coordinator from a background thread.
//
// Progress is advisory, and a report's round trip (about a millisecond, far longer while the
// machine is busy) must not delay the training step that produced it. Offer() hands the newest
// report over and returns at once; the thread sends it. A report offered while another is still
// being sent replaces any report waiting behind it, so the coordinator always gets the newest
// and the worker never queues. Failed sends are dropped, as a lost report must not fail
// training. Flush() waits until the report offered last has been sent (or dropped).
//
// Thread-safety: all methods may be called from any thread.
#ifndef HPTRAIN_RUNTIME_PS_PROGRESS_SENDER_H_
#define HPTRAIN_RUNTIME_PS_PROGRESS_SENDER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "proto/hptrain/v1/coordinator.pb.h"

namespace hptrain::ps {

class ProgressSender {
 public:
  using Send = std::function<absl::Status(const hptrain::v1::ProgressReport&)>;

  explicit ProgressSender(Send send);
  ~ProgressSender();  // sends what is waiting, then stops
  ProgressSender(const ProgressSender&) = delete;
  ProgressSender& operator=(const ProgressSender&) = delete;

  void Offer(const hptrain::v1::ProgressReport& report);
  void Flush();

  // Reports sent (successfully or not) and reports replaced before they were sent.
  int64_t sent() const;
  int64_t replaced() const;

 private:
  void Loop();

  Send send_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<hptrain::v1::ProgressReport> waiting_;
  bool sending_ = false;
  bool stop_ = false;
  int64_t sent_ = 0;
  int64_t replaced_ = 0;
  std::thread thread_;
};

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PROGRESS_SENDER_H_
