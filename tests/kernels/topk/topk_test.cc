#include "kernels/topk/topk.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/topk/topk_common.h"

namespace hptrain::kernels {
namespace {

// Sort-based oracle: indices of the k largest AbsKey, ties by lower index, returned ascending.
std::vector<int32_t> OracleTopK(const std::vector<float>& x, int64_t k) {
  std::vector<int32_t> order(x.size());
  for (size_t i = 0; i < x.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const uint32_t ka = AbsKey(x[a]), kb = AbsKey(x[b]);
    return ka != kb ? ka > kb : a < b;
  });
  order.resize(static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(x.size()))));
  std::sort(order.begin(), order.end());
  return order;
}

void ExpectTopKMatchesOracle(const std::vector<float>& x, int64_t k) {
  const std::vector<int32_t> expect = OracleTopK(x, k);
  std::vector<int32_t> indices(expect.size() + 1, -7);
  std::vector<float> values(expect.size() + 1, -7.0f);
  TopKExact(x.data(), static_cast<int64_t>(x.size()), k, indices.data(), values.data());
  for (size_t i = 0; i < expect.size(); ++i) {
    ASSERT_EQ(indices[i], expect[i]) << "position " << i << " k " << k;
    ASSERT_EQ(std::memcmp(&values[i], &x[expect[i]], sizeof(float)), 0) << "position " << i;
  }
  EXPECT_EQ(indices[expect.size()], -7) << "wrote past k";
  EXPECT_EQ(values[expect.size()], -7.0f) << "wrote past k";
}

std::vector<float> RandomNormal(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

TEST(TopKExact, MatchesSortOracleOnRandomData) {
  const std::vector<float> x = RandomNormal(100000, 1);
  for (int64_t k : {1, 2, 10, 100, 1000, 12345, 99999, 100000}) ExpectTopKMatchesOracle(x, k);
}

TEST(TopKExact, MatchesSortOracleWithManyTies) {
  // Few distinct magnitudes, both signs: the radix select must cap the ties by index.
  std::mt19937 rng(2);
  std::vector<float> x(50000);
  for (auto& v : x) v = static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.5f;
  for (int64_t k : {1, 7, 100, 5000, 20000, 49999}) ExpectTopKMatchesOracle(x, k);
}

TEST(TopKExact, BreaksTiesByLowerIndex) {
  std::vector<float> x(10, 1.0f);
  x[3] = -1.0f;  // same magnitude
  std::vector<int32_t> indices(4);
  std::vector<float> values(4);
  TopKExact(x.data(), 10, 4, indices.data(), values.data());
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(values[3], -1.0f);
}

TEST(TopKExact, HandlesEdgeSizesSpecialValuesAndSmallInputs) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, nan, 1e-45f, -3.0f, 2.0f, 0.0f};
  for (int64_t k = 0; k <= 9; ++k) ExpectTopKMatchesOracle(x, k);
  // NaN ranks first, then the infinities.
  std::vector<int32_t> indices(3);
  std::vector<float> values(3);
  TopKExact(x.data(), 9, 3, indices.data(), values.data());
  EXPECT_EQ(indices, (std::vector<int32_t>{2, 3, 4}));
  // k larger than n is clamped; k <= 0 writes nothing.
  ExpectTopKMatchesOracle(x, 100);
  int32_t untouched = -1;
  TopKExact(x.data(), 9, -5, &untouched, nullptr);
  EXPECT_EQ(untouched, -1);
  TopKExact(nullptr, 0, 3, &untouched, nullptr);
  EXPECT_EQ(untouched, -1);
}

TEST(TopKExact, IsDeterministic) {
  const std::vector<float> x = RandomNormal(20000, 3);
  std::vector<int32_t> a(500), b(500);
  std::vector<float> va(500), vb(500);
  TopKExact(x.data(), 20000, 500, a.data(), va.data());
  TopKExact(x.data(), 20000, 500, b.data(), vb.data());
  EXPECT_EQ(a, b);
}

TEST(DgcTargetCount, IsCeilingClampedToOneAndN) {
  EXPECT_EQ(DgcTargetCount(1000000, 0.001), 1000);
  EXPECT_EQ(DgcTargetCount(1000000, 0.01), 10000);
  EXPECT_EQ(DgcTargetCount(1000000, 0.1), 100000);
  EXPECT_EQ(DgcTargetCount(1001, 0.001), 2);  // 1.001 -> 2
  EXPECT_EQ(DgcTargetCount(10, 0.0), 1);
  EXPECT_EQ(DgcTargetCount(10, 2.0), 10);
  EXPECT_EQ(DgcTargetCount(0, 0.5), 0);
}

TEST(CountAboveThreshold, CountsMagnitudesAtOrAboveThreshold) {
  const std::vector<float> x = {0.5f, -1.0f, 1.0f, 2.0f, -0.25f, 0.0f};
  EXPECT_EQ(CountAboveThreshold(x.data(), 6, 1.0f), 3);
  EXPECT_EQ(CountAboveThreshold(x.data(), 6, 1.5f), 1);
  EXPECT_EQ(CountAboveThreshold(x.data(), 6, 0.0f), 6);
  EXPECT_EQ(CountAboveThreshold(x.data(), 6, -1.0f), 6);
  EXPECT_EQ(CountAboveThreshold(x.data(), 6, std::numeric_limits<float>::infinity()), 0);
}

TEST(PackAboveThreshold, PacksInAscendingIndexOrder) {
  const std::vector<float> x = RandomNormal(30001, 4);  // not a multiple of the block length
  const float thr = 2.0f;
  const int64_t expect = CountAboveThreshold(x.data(), 30001, thr);
  ASSERT_GT(expect, 100);
  std::vector<int32_t> indices(expect);
  std::vector<float> values(expect);
  ASSERT_EQ(PackAboveThreshold(x.data(), 30001, thr, indices.data(), values.data(), expect),
            expect);
  int64_t j = 0;
  for (int64_t i = 0; i < 30001; ++i) {
    if (std::fabs(x[i]) >= thr) {
      ASSERT_EQ(indices[j], i);
      ASSERT_EQ(values[j], x[i]);
      ++j;
    }
  }
  EXPECT_EQ(j, expect);
}

TEST(PackAboveThreshold, ReturnsMinusOneWithoutWritingPastCapacity) {
  const std::vector<float> x = RandomNormal(10000, 5);
  const int64_t total = CountAboveThreshold(x.data(), 10000, 1.0f);
  const int64_t capacity = total / 2;
  std::vector<int32_t> indices(total, -9);
  std::vector<float> values(total, -9.0f);
  EXPECT_EQ(PackAboveThreshold(x.data(), 10000, 1.0f, indices.data(), values.data(), capacity), -1);
  std::vector<int32_t> full(total);
  std::vector<float> full_values(total);
  PackAboveThreshold(x.data(), 10000, 1.0f, full.data(), full_values.data(), total);
  for (int64_t i = 0; i < capacity; ++i) ASSERT_EQ(indices[i], full[i]);  // the first ones
  for (int64_t i = capacity; i < total; ++i) {
    ASSERT_EQ(indices[i], -9);
    ASSERT_EQ(values[i], -9.0f);
  }
  EXPECT_EQ(PackAboveThreshold(x.data(), 10000, 1.0f, nullptr, nullptr, 0), -1);
  EXPECT_EQ(PackAboveThreshold(x.data(), 10000, 1e30f, nullptr, nullptr, 0), 0);
}

TEST(PackSelection, CapsTiesInIndexOrder) {
  const std::vector<float> x = {3.0f, 1.0f, -1.0f, 0.5f, 1.0f, 2.0f, 1.0f};
  ThresholdSelection sel;
  sel.threshold = 1.0f;
  sel.equal_limit = 2;
  std::vector<int32_t> indices(7);
  std::vector<float> values(7);
  ASSERT_EQ(PackSelection(x.data(), 7, sel, indices.data(), values.data(), 7), 4);
  indices.resize(4);
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 2, 5}));
  sel.equal_limit = -1;
  EXPECT_EQ(PackSelection(x.data(), 7, sel, indices.data(), values.data(), 7), 6);
}

TEST(PackAndScatterAdd, RoundTripRestoresTheDenseBuffer) {
  std::mt19937 rng(6);
  std::vector<float> dense = RandomNormal(100003, 6);
  for (auto& v : dense) {
    if (rng() % 10 != 0) v = 0.0f;  // ~10 % non-zeros
  }
  dense[0] = std::numeric_limits<float>::denorm_min();  // the smallest non-zero is packed too
  dense[1] = -std::numeric_limits<float>::denorm_min();
  const int64_t n = static_cast<int64_t>(dense.size());
  // The smallest positive threshold selects exactly the non-zeros.
  const float thr = std::numeric_limits<float>::denorm_min();
  const int64_t nnz = CountAboveThreshold(dense.data(), n, thr);
  std::vector<int32_t> indices(nnz);
  std::vector<float> values(nnz);
  ASSERT_EQ(PackAboveThreshold(dense.data(), n, thr, indices.data(), values.data(), nnz), nnz);
  std::vector<float> back(dense.size(), 0.0f);
  ScatterAdd(indices.data(), values.data(), nnz, back.data(), n);
  ASSERT_EQ(std::memcmp(back.data(), dense.data(), dense.size() * sizeof(float)), 0);
  std::vector<float> checked(dense.size(), 0.0f);
  ASSERT_TRUE(ScatterAddChecked(indices.data(), values.data(), nnz, checked.data(), n).ok());
  ASSERT_EQ(std::memcmp(checked.data(), dense.data(), dense.size() * sizeof(float)), 0);
}

TEST(ScatterAdd, AddsDuplicatesInOrder) {
  std::vector<float> dense = {1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> indices = {2, 0, 2};
  const std::vector<float> values = {0.5f, -1.0f, 0.25f};
  ScatterAdd(indices.data(), values.data(), 3, dense.data(), 3);
  EXPECT_EQ(dense, (std::vector<float>{0.0f, 1.0f, 1.75f}));
}

TEST(ScatterAddChecked, RejectsOutOfRangeIndicesAndLeavesDenseUntouched) {
  const std::vector<float> values = {1.0f, 2.0f, 3.0f};
  for (const std::vector<int32_t>& bad :
       {std::vector<int32_t>{0, 5, 1}, std::vector<int32_t>{0, 1, -1},
        std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 0, 0}}) {
    std::vector<float> dense(5, 7.0f);
    const absl::Status status = ScatterAddChecked(bad.data(), values.data(), 3, dense.data(), 5);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(dense, std::vector<float>(5, 7.0f));
  }
  std::vector<float> dense(5, 0.0f);
  const std::vector<int32_t> bad = {0, 5, 1};
  const absl::Status status = ScatterAddChecked(bad.data(), values.data(), 3, dense.data(), 5);
  EXPECT_NE(status.message().find("entry 1 of 3 has index 5 outside [0, 5)"),
            absl::string_view::npos)
      << status;
  EXPECT_EQ(ScatterAddChecked(bad.data(), values.data(), -1, dense.data(), 5).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ScatterAddChecked(nullptr, nullptr, 0, dense.data(), 5).ok());
}

}  // namespace
}  // namespace hptrain::kernels
