// Asynchronous collectives of the host communicator (communicator.h, work.h): results equal the
// blocking ones bit for bit, Works report the bytes the counters gained, blocking and
// asynchronous collectives keep their issue order, and a failure fails what is queued behind it.
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/comm/work.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

using std::chrono::milliseconds;
using testing::Spawn;

std::vector<float> Values(int rank, size_t count, float scale) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = scale * static_cast<float>(rank + 1) + 0.001f * i;
  return v;
}

TEST(AsyncCommunicator, AsyncAllReducesEqualBlockingOnesAndCountTheirBytes) {
  constexpr int kRanks = 3;
  const std::vector<size_t> counts = {1000, 7, 4097};
  auto hub_async = std::make_shared<LoopbackHub>(kRanks);
  auto hub_blocking = std::make_shared<LoopbackHub>(kRanks);
  // [rank][call]
  std::vector<std::vector<std::vector<float>>> async(kRanks), blocking(kRanks);
  std::vector<std::vector<int64_t>> work_sent(kRanks), work_received(kRanks);
  std::vector<int64_t> counted_sent(kRanks), counted_received(kRanks);
  Spawn(kRanks, [&](int r) {
    TransportCommunicator a(std::make_unique<LoopbackTransport>(hub_async, r));
    TransportCommunicator b(std::make_unique<LoopbackTransport>(hub_blocking, r));
    for (size_t c = 0; c < counts.size(); ++c) {
      async[r].push_back(Values(r, counts[c], 0.5f + c));
      blocking[r].push_back(Values(r, counts[c], 0.5f + c));
    }
    // All three in flight before any is waited for, then a blocking collective behind them.
    std::vector<std::shared_ptr<Work>> works;
    for (size_t c = 0; c < counts.size(); ++c) {
      works.push_back(a.AllReduceSumAsync(BufferRef::Host(async[r][c].data(), counts[c])));
    }
    std::vector<float> last = Values(r, 10, 3.0f);
    ASSERT_TRUE(a.AllReduceSum(last.data(), last.size()).ok());
    for (const auto& work : works) {
      // Issued before the blocking one, so complete when it returned.
      EXPECT_TRUE(work->IsCompleted());
      ASSERT_TRUE(work->Wait().ok());
      work_sent[r].push_back(work->bytes_sent());
      work_received[r].push_back(work->bytes_received());
    }
    int64_t last_sent = 0, last_received = 0;
    RingAllReduceBytes(last.size(), kRanks, r, &last_sent, &last_received);
    counted_sent[r] = a.bytes_sent() - last_sent;
    counted_received[r] = a.bytes_received() - last_received;
    for (size_t c = 0; c < counts.size(); ++c) {
      ASSERT_TRUE(b.AllReduceSum(blocking[r][c].data(), counts[c]).ok());
    }
  });
  for (int r = 0; r < kRanks; ++r) {
    int64_t sent = 0, received = 0;
    for (size_t c = 0; c < counts.size(); ++c) {
      ASSERT_EQ(async[r][c].size(), blocking[r][c].size());
      EXPECT_EQ(std::memcmp(async[r][c].data(), blocking[r][c].data(),
                            counts[c] * sizeof(float)),
                0)
          << "rank " << r << ", call " << c;
      EXPECT_GT(work_sent[r][c], 0);
      sent += work_sent[r][c];
      received += work_received[r][c];
    }
    // The Works' bytes are what the transport counted for them.
    EXPECT_EQ(sent, counted_sent[r]) << "rank " << r;
    EXPECT_EQ(received, counted_received[r]) << "rank " << r;
  }
}

TEST(AsyncCommunicator, RingAllReduceBytesFollowTheChunks) {
  // 10 floats on 3 ranks: chunks of 4, 3, 3. Rank 0 sends chunks 0, 2 (reduce-scatter) and
  // 1, 0 (all-gather); receives 2, 1 and 0, 2.
  int64_t sent = 0, received = 0;
  RingAllReduceBytes(10, 3, 0, &sent, &received);
  EXPECT_EQ(sent, (4 + 3 + 3 + 4) * 4);
  EXPECT_EQ(received, (3 + 3 + 4 + 3) * 4);
  RingAllReduceBytes(10, 1, 0, &sent, &received);
  EXPECT_EQ(sent, 0);
  EXPECT_EQ(received, 0);
}

TEST(AsyncCommunicator, ADeviceBufferIsRefusedOnAHostCommunicator) {
  auto hub = std::make_shared<LoopbackHub>(1);
  TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, 0));
  float x = 1;
  std::shared_ptr<Work> work = comm.AllReduceSumAsync(BufferRef::Device(&x, 1, nullptr));
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_EQ(work->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(work->bytes_sent(), 0);
}

TEST(AsyncCommunicator, AFailureFailsTheCollectivesQueuedBehindIt) {
  // Rank 1 never takes part: the first all-reduce fails on the missing peer (its transfer times
  // out), the second does not run, and a collective issued after the queue drained runs again
  // (and fails on its own).
  auto hub = std::make_shared<LoopbackHub>(2, milliseconds(100));
  TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, 0));
  std::vector<float> a(8, 1.0f), b(8, 2.0f);
  std::shared_ptr<Work> first = comm.AllReduceSumAsync(BufferRef::Host(a.data(), a.size()));
  std::shared_ptr<Work> second = comm.AllReduceSumAsync(BufferRef::Host(b.data(), b.size()));
  const absl::Status failed = first->Wait();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.code(), absl::StatusCode::kAborted) << failed;
  const absl::Status skipped = second->Wait();
  EXPECT_EQ(skipped.code(), absl::StatusCode::kAborted) << skipped;
  EXPECT_NE(skipped.message().find(failed.message()), absl::string_view::npos) << skipped;
  EXPECT_EQ(second->bytes_sent(), 0);
  const absl::Status later = comm.AllReduceSum(b.data(), b.size());
  EXPECT_NE(later.code(), absl::StatusCode::kAborted) << later;
}

TEST(Work, DoneWorkIsCompleteWithItsStatusAndBytes) {
  std::shared_ptr<Work> ok = Work::Done(absl::OkStatus(), 12, 34);
  EXPECT_TRUE(ok->IsCompleted());
  EXPECT_TRUE(ok->Wait().ok());
  EXPECT_EQ(ok->bytes_sent(), 12);
  EXPECT_EQ(ok->bytes_received(), 34);
  std::shared_ptr<Work> failed = Work::Done(absl::UnavailableError("gone"), 12, 34);
  EXPECT_EQ(failed->Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed->bytes_sent(), 0);  // a failed collective reports no bytes
}

TEST(Work, ThenRunsOnceAfterTheInnerWorkSucceededAndKeepsItsBytes) {
  auto inner = std::make_shared<HostWork>(milliseconds(10));
  int runs = 0;
  std::shared_ptr<Work> then = Work::Then(inner, [&] {
    ++runs;
    return absl::OkStatus();
  });
  EXPECT_FALSE(then->IsCompleted());
  EXPECT_EQ(then->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(runs, 0);  // not before the inner Work completed
  inner->Complete(absl::OkStatus(), 40, 24, 0.25);
  EXPECT_TRUE(then->IsCompleted());
  EXPECT_TRUE(then->Wait().ok());
  EXPECT_TRUE(then->Wait().ok());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(then->bytes_sent(), 40);
  EXPECT_EQ(then->bytes_received(), 24);
  EXPECT_EQ(then->seconds(), 0.25);
}

TEST(Work, ThenPassesTheInnerErrorOnAndOwnErrorsOut) {
  int runs = 0;
  std::shared_ptr<Work> after_failure =
      Work::Then(Work::Done(absl::UnavailableError("peer gone")), [&] {
        ++runs;
        return absl::OkStatus();
      });
  EXPECT_EQ(after_failure->Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(runs, 0);
  std::shared_ptr<Work> failing = Work::Then(Work::Done(absl::OkStatus(), 4, 4),
                                             [] { return absl::InternalError("scaling failed"); });
  EXPECT_EQ(failing->Wait().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failing->Wait().code(), absl::StatusCode::kInternal);  // the same on every Wait
}

TEST(Work, AHostWaitThatTimesOutSaysSoAndTheWorkCompletesLater) {
  auto work = std::make_shared<HostWork>(milliseconds(10));
  EXPECT_FALSE(work->IsCompleted());
  EXPECT_EQ(work->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  work->Complete(absl::OkStatus(), 8, 8, 0.5);
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_TRUE(work->Wait(milliseconds(0)).ok());
  EXPECT_EQ(work->bytes_sent(), 8);
  EXPECT_EQ(work->seconds(), 0.5);
}

}  // namespace
}  // namespace hptrain::comm
