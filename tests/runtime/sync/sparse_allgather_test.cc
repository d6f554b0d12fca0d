// The sparse all-gather of topk and dgc in both encodings, over the loopback transport: the same
// entries give the same sums as pairs (SPARSE) and compact (SPARSE_COMPACT) when their values are
// exact in fp16, across several 65536-element blocks; each rank's block has the size the byte
// formulas say; a rank that sends the other encoding is an error; RoundForWire rounds and clamps.
#include "runtime/sync/sparse_allgather.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/sync/strategy_options_check.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::sync {
namespace {

constexpr int kWorld = 4;
constexpr int64_t kElements = 3 * 65536 + 100;  // four blocks, the last one of 100 elements

// Rank r's entries: every (7 + r)-th element from r, plus the first and the last element, with
// values that are multiples of 2^-8 below 1 in magnitude (exact in fp16).
void Entries(int rank, std::vector<int32_t>* indices, std::vector<float>* values) {
  indices->clear();
  values->clear();
  for (int64_t i = 0; i < kElements; ++i) {
    if (i != 0 && i != kElements - 1 && (i - rank) % (7 + rank) != 0) continue;
    indices->push_back(static_cast<int32_t>(i));
    values->push_back(static_cast<float>((i * 31 + rank * 17) % 255 - 127) / 256.0f);
  }
}

struct RankResult {
  std::vector<float> dense;
  size_t wire_bytes = 0;
  absl::Status status;
};

// Runs SparseAllGatherSum on every rank, rank r with wire[r].
std::vector<RankResult> Gather(const std::vector<SparseWire>& wire) {
  auto hub = std::make_shared<comm::LoopbackHub>(kWorld);
  std::vector<RankResult> results(kWorld);
  comm::testing::Spawn(kWorld, [&](int rank) {
    comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, rank));
    std::vector<int32_t> indices;
    std::vector<float> values;
    Entries(rank, &indices, &values);
    RankResult& r = results[rank];
    r.dense.assign(kElements, -1.0f);
    r.status = SparseAllGatherSum(comm, wire[rank], indices, values, kElements, r.dense.data(),
                                  &r.wire_bytes);
  });
  return results;
}

TEST(SparseAllGather, CompactSumsAsPairsOnFp16ExactValues) {
  const std::vector<RankResult> pairs = Gather(std::vector<SparseWire>(kWorld, SparseWire::kPairs));
  const std::vector<RankResult> compact =
      Gather(std::vector<SparseWire>(kWorld, SparseWire::kCompact));
  std::vector<float> want(kElements, 0.0f);
  for (int rank = 0; rank < kWorld; ++rank) {
    std::vector<int32_t> indices;
    std::vector<float> values;
    Entries(rank, &indices, &values);
    for (size_t j = 0; j < indices.size(); ++j) want[indices[j]] += values[j];
    const int64_t k = static_cast<int64_t>(indices.size());
    ASSERT_TRUE(pairs[rank].status.ok()) << pairs[rank].status;
    ASSERT_TRUE(compact[rank].status.ok()) << compact[rank].status;
    EXPECT_EQ(pairs[rank].wire_bytes, static_cast<size_t>(32 + 8 * k));
    EXPECT_EQ(compact[rank].wire_bytes, static_cast<size_t>(32 + 4 * 4 + 4 * k));
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(std::memcmp(pairs[rank].dense.data(), want.data(), kElements * sizeof(float)), 0)
        << "pairs, rank " << rank;
    EXPECT_EQ(std::memcmp(compact[rank].dense.data(), want.data(), kElements * sizeof(float)), 0)
        << "compact, rank " << rank;
  }
  EXPECT_NE(want[kElements - 1], 0.0f);  // the short last block's last element was summed
}

TEST(SparseAllGather, ARankSendingTheOtherEncodingIsAnError) {
  std::vector<SparseWire> wire(kWorld, SparseWire::kPairs);
  wire[2] = SparseWire::kCompact;
  const std::vector<RankResult> results = Gather(wire);
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(results[0].status.message().find("rank 2 sent SPARSE_COMPACT, expected SPARSE"),
            std::string::npos)
      << results[0].status;
  EXPECT_NE(results[2].status.message().find("rank 0 sent SPARSE, expected SPARSE_COMPACT"),
            std::string::npos)
      << results[2].status;
}

TEST(RoundForWire, PairsKeepValuesAndCompactRoundsToFp16WithinItsRangeKeepingTheRests) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {0.1f, -3.0f, 1e6f, -1e6f, 65519.0f, 1e-9f, inf, -inf};
  std::vector<float> pairs = in;
  std::vector<float> rests = {7.0f};  // overwritten
  RoundForWire(SparseWire::kPairs, &pairs, &rests);
  EXPECT_EQ(std::memcmp(pairs.data(), in.data(), in.size() * sizeof(float)), 0);
  EXPECT_EQ(rests, std::vector<float>(in.size(), 0.0f));

  std::vector<float> compact = in;
  compact.push_back(std::nanf(""));
  RoundForWire(SparseWire::kCompact, &compact, &rests);
  ASSERT_EQ(rests.size(), compact.size());
  EXPECT_EQ(compact[0], 0.0999755859375f);  // the nearest fp16 to 0.1
  EXPECT_EQ(compact[1], -3.0f);
  EXPECT_EQ(compact[2], 65504.0f);  // clamped, not infinite
  EXPECT_EQ(compact[3], -65504.0f);
  EXPECT_EQ(compact[4], 65504.0f);
  EXPECT_EQ(compact[5], 0.0f);  // below fp16's smallest subnormal
  EXPECT_EQ(compact[6], inf);
  EXPECT_EQ(compact[7], -inf);
  EXPECT_TRUE(std::isnan(compact[8]));
  for (size_t j = 0; j < 6; ++j) EXPECT_EQ(rests[j], in[j] - compact[j]) << j;  // clamp included
  EXPECT_EQ(rests[2], 1e6f - 65504.0f);
  EXPECT_EQ(rests[6], 0.0f);  // inf and NaN leave nothing behind
  EXPECT_EQ(rests[7], 0.0f);
  EXPECT_EQ(rests[8], 0.0f);
}

TEST(SparseWireOf, ReadsTheJobsSparseEncoding) {
  job::JobSpec spec;
  spec.strategy.type = "topk";
  EXPECT_EQ(SparseWireOf(spec.strategy), SparseWire::kPairs);
  spec.strategy.Set("sparseEncoding", "pairs");
  EXPECT_EQ(SparseWireOf(spec.strategy), SparseWire::kPairs);
  spec.strategy.Set("sparseEncoding", "compact");
  EXPECT_EQ(SparseWireOf(spec.strategy), SparseWire::kCompact);
  // Another value never reaches SparseWireOf: the descriptor refuses it.
  spec.strategy.Set("sparseEncoding", "dense");
  EXPECT_EQ(CheckStrategyOptions(spec.strategy, "spec.strategy").message(),
            "spec.strategy.sparseEncoding: unknown sparse encoding \"dense\" (expected one of "
            "pairs, compact)");
}

}  // namespace
}  // namespace hptrain::sync
