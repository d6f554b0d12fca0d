#include "runtime/ps/progress_sender.h"

#include <condition_variable>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::ps {
namespace {

hptrain::v1::ProgressReport AtStep(int64_t step) {
  hptrain::v1::ProgressReport r;
  r.set_step(step);
  return r;
}

TEST(ProgressSender, OfferReturnsWhileASendIsStuckAndTheNewestReportIsSentNext) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<int64_t> received;
  ProgressSender sender([&](const hptrain::v1::ProgressReport& r) {
    std::unique_lock<std::mutex> lock(mu);
    received.push_back(r.step());
    cv.notify_all();
    if (r.step() == 1) cv.wait(lock, [&] { return release; });  // a slow coordinator
    return absl::OkStatus();
  });
  sender.Offer(AtStep(1));
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !received.empty(); });
  }
  // Steps 2..5 are offered while step 1 is in flight; each replaces the one before.
  for (int64_t s = 2; s <= 5; ++s) sender.Offer(AtStep(s));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  sender.Flush();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(received, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(sender.sent(), 2);
  EXPECT_EQ(sender.replaced(), 3);
}

TEST(ProgressSender, FailedSendsAreDroppedAndWhatWaitsIsSentBeforeDestruction) {
  std::vector<int64_t> received;
  {
    ProgressSender sender([&](const hptrain::v1::ProgressReport& r) {
      received.push_back(r.step());
      return r.step() == 1 ? absl::UnavailableError("down") : absl::OkStatus();
    });
    sender.Offer(AtStep(1));
    sender.Flush();
    sender.Offer(AtStep(2));
  }
  EXPECT_EQ(received, (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace hptrain::ps
