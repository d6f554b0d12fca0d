#include "runtime/train/data/decode_pool.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace hptrain::train {
namespace {

// Sample i is 3 floats: i, i + 0.5, -i; sample 13 fails.
absl::Status Fake(int64_t i, float* out, std::atomic<int>* calls) {
  ++*calls;
  if (i == 13) return absl::DataLossError(absl::StrCat("sample ", i, ": corrupt"));
  out[0] = static_cast<float>(i);
  out[1] = static_cast<float>(i) + 0.5f;
  out[2] = -static_cast<float>(i);
  return absl::OkStatus();
}

TEST(DecodePool, PrefetchedSamplesComeFromTheCache) {
  std::atomic<int> calls{0};
  DecodePool pool([&](int64_t i, float* out) { return Fake(i, out, &calls); }, 3, 2, 100);
  pool.Prefetch({4, 5, 6, 13});
  float out[3];
  for (int64_t i : {4, 5, 6}) {
    ASSERT_TRUE(pool.Read(i, out).ok());
    EXPECT_EQ(out[0], static_cast<float>(i));
    EXPECT_EQ(out[1], static_cast<float>(i) + 0.5f);
    EXPECT_EQ(out[2], -static_cast<float>(i));
  }
  absl::Status bad = pool.Read(13, out);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.message(), "sample 13: corrupt");
  // Every prefetched sample was decoded once, by the pool or by Read taking it over.
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(pool.hits() + pool.misses(), 4);
  // Not prefetched: decoded inline.
  ASSERT_TRUE(pool.Read(99, out).ok());
  EXPECT_EQ(out[0], 99.0f);
  EXPECT_EQ(calls.load(), 5);
}

TEST(DecodePool, ReadingTwiceDecodesTwiceAndWaitsForARunningDecode) {
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  DecodePool pool(
      [&](int64_t i, float* out) {
        while (!release.load()) std::this_thread::yield();
        return Fake(i, out, &calls);
      },
      3, 1, 100);
  pool.Prefetch({7});
  std::thread reader([&] {
    float out[3];
    EXPECT_TRUE(pool.Read(7, out).ok());
    EXPECT_EQ(out[0], 7.0f);
  });
  release.store(true);
  reader.join();
  float out[3];
  ASSERT_TRUE(pool.Read(7, out).ok());
  EXPECT_EQ(out[1], 7.5f);
  EXPECT_EQ(calls.load(), 2);
}

TEST(DecodePool, CapacityEvictsTheOldestAndReadsStillAnswer) {
  std::atomic<int> calls{0};
  DecodePool pool([&](int64_t i, float* out) { return Fake(i, out, &calls); }, 3, 2, 4);
  std::vector<int64_t> many;
  for (int64_t i = 0; i < 50; ++i) many.push_back(i);
  pool.Prefetch(many);
  float out[3];
  for (int64_t i = 0; i < 50; ++i) {
    if (i == 13) continue;
    ASSERT_TRUE(pool.Read(i, out).ok()) << i;
    EXPECT_EQ(out[2], -static_cast<float>(i));
  }
}

TEST(DecodePool, ConcurrentReadersGetTheirOwnSamples) {
  std::atomic<int> calls{0};
  DecodePool pool([&](int64_t i, float* out) { return Fake(i, out, &calls); }, 3, 3, 64);
  std::vector<int64_t> all;
  for (int64_t i = 100; i < 400; ++i) all.push_back(i);
  pool.Prefetch(all);
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      float out[3];
      for (int64_t i = 100 + t; i < 400; i += 4) {
        if (!pool.Read(i, out).ok() || out[0] != static_cast<float>(i)) ++wrong;
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace hptrain::train
