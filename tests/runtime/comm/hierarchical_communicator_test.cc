// Topology and the hierarchical communicator (docs/algorithms.md §0, §2b (iv), §2c).
#include "runtime/comm/hierarchical_communicator.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/chunk_codec.h"
#include "runtime/comm/gloo/gloo_transport.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/comm/topology.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::comm {
namespace {

using testing::Spawn;

int Sum(const std::vector<int>& v) {
  int s = 0;
  for (int x : v) s += x;
  return s;
}

float Input(int rank, size_t i) {
  return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(rank)) * 3.0f +
         0.001f * static_cast<float>(rank);
}

// Keeps the upper 16 bits of each float (bfloat16 by truncation), 2 bytes per element.
class TruncatingCodec : public ChunkCodec {
 public:
  size_t EncodedBytes(size_t count) const override { return 2 * count; }
  absl::Status Encode(const float* data, size_t count, size_t, uint64_t, uint8_t* out) override {
    ++encodes_;
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &data[i], 4);
      const uint16_t top = static_cast<uint16_t>(bits >> 16);
      std::memcpy(out + 2 * i, &top, 2);
    }
    return absl::OkStatus();
  }
  absl::Status Decode(const uint8_t* in, size_t, size_t count, float* out) override {
    for (size_t i = 0; i < count; ++i) out[i] = Widen(in, i);
    return absl::OkStatus();
  }
  absl::Status DecodeAccumulate(const uint8_t* in, size_t, size_t count, float* acc) override {
    for (size_t i = 0; i < count; ++i) acc[i] += Widen(in, i);
    return absl::OkStatus();
  }
  int encodes() const { return encodes_; }

 private:
  static float Widen(const uint8_t* in, size_t i) {
    uint16_t top;
    std::memcpy(&top, in + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(top) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  int encodes_ = 0;
};

TEST(TopologyTest, NodeSizesGroupConsecutiveRanks) {
  auto t = Topology::FromNodeSizes({2, 3, 1}, 6, "spec.topology.nodes");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_nodes(), 3);
  EXPECT_EQ(t->ranks_of(1), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(t->leaders(), (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(t->node_of(4), 1);
  EXPECT_EQ(t->local_rank(4), 2);
  EXPECT_TRUE(t->is_leader(5));
  EXPECT_FALSE(t->is_leader(3));
  EXPECT_EQ(t->ToString(), "[0 1] [2 3 4] [5]");
}

TEST(TopologyTest, RejectsAnEmptyNodeAndSizesThatMissRanks) {
  auto empty = Topology::FromNodeSizes({2, 0, 2}, 4, "spec.topology.nodes");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("spec.topology.nodes[1]"), std::string::npos)
      << empty.status();
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  auto short_of = Topology::FromNodeSizes({2, 1}, 4, "spec.topology.nodes");
  ASSERT_FALSE(short_of.ok());
  EXPECT_NE(short_of.status().message().find("hold 3 workers, but the job has 4"),
            std::string::npos)
      << short_of.status();
  EXPECT_FALSE(Topology::FromNodeSizes({3, 3}, 4, "x").ok());
}

TEST(TopologyTest, NodeNamesGroupRanksAndOrderNodesByLeader) {
  auto t = Topology::FromNodeNames({"b", "a", "b", "c", "a"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToString(), "[0 2] [1 4] [3]");
  EXPECT_EQ(t->leaders(), (std::vector<int>{0, 1, 3}));
  EXPECT_FALSE(Topology::FromNodeNames({"a", ""}).ok());
}

TEST(TopologyTest, NamesPublishedInTheStoreGiveTheSameGroupingOnEveryRank) {
  InMemoryStore store;
  const std::vector<std::string> names = {"n1", "n1", "n0", "n0", "n1"};
  std::vector<std::string> seen(names.size());
  Spawn(static_cast<int>(names.size()), [&](int r) {
    ASSERT_TRUE(PublishNodeName(store, r, names[r]).ok());
    auto t = TopologyFromStore(store, static_cast<int>(names.size()), std::chrono::seconds(10));
    ASSERT_TRUE(t.ok()) << t.status();
    seen[r] = t->ToString();
  });
  for (const std::string& s : seen) EXPECT_EQ(s, "[0 1 4] [2 3]");
  // A rank that never publishes: the others time out naming its key.
  InMemoryStore partial;
  ASSERT_TRUE(PublishNodeName(partial, 0, "a").ok());
  auto missing = TopologyFromStore(partial, 2, std::chrono::milliseconds(50));
  EXPECT_FALSE(missing.ok());
}

struct RunResult {
  std::vector<std::vector<float>> out;  // per rank
  std::vector<int64_t> sent, received, inter_sent, inter_received;
  std::vector<int64_t> inter_collectives;
  std::vector<int> encodes;
};

// One all-reduce of Input(rank, ·) over `sizes` nodes, flat or hierarchical, on the loopback.
RunResult AllReduceOnce(const std::vector<int>& sizes, size_t count, bool hierarchical,
                        bool compressed = false, bool inter_only = false) {
  const int world = Sum(sizes);
  auto hub = std::make_shared<LoopbackHub>(world);
  RunResult result;
  result.out.resize(world);
  result.sent.resize(world);
  result.received.resize(world);
  result.inter_sent.resize(world);
  result.inter_received.resize(world);
  result.inter_collectives.resize(world);
  result.encodes.resize(world);
  Spawn(world, [&](int r) {
    auto topology = Topology::FromNodeSizes(sizes, world, "sizes");
    ASSERT_TRUE(topology.ok());
    HierarchicalCommunicator::Options options;
    options.hierarchical = hierarchical;
    options.compress_inter_node_only = inter_only;
    HierarchicalCommunicator comm(std::make_unique<LoopbackTransport>(hub, r), *topology, options);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Input(r, i);
    TruncatingCodec codec;
    absl::Status status = compressed ? comm.AllReduceSumCompressed(data.data(), count, codec)
                                     : comm.AllReduceSum(data.data(), count);
    ASSERT_TRUE(status.ok()) << status;
    result.out[r] = data;
    result.sent[r] = comm.bytes_sent();
    result.received[r] = comm.bytes_received();
    result.inter_sent[r] = comm.inter_node_bytes_sent();
    result.inter_received[r] = comm.inter_node_bytes_received();
    result.inter_collectives[r] = comm.inter_node_collectives();
    result.encodes[r] = codec.encodes();
  });
  return result;
}

// The flat ring's result over the same ranks (TransportCommunicator).
std::vector<float> FlatRing(int world, size_t count) {
  auto hub = std::make_shared<LoopbackHub>(world);
  std::vector<float> out;
  Spawn(world, [&](int r) {
    TransportCommunicator comm(std::make_unique<LoopbackTransport>(hub, r));
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Input(r, i);
    ASSERT_TRUE(comm.AllReduceSum(data.data(), count).ok());
    if (r == 0) out = data;
  });
  return out;
}

void ExpectIdenticalRanks(const RunResult& result) {
  for (size_t r = 1; r < result.out.size(); ++r) {
    ASSERT_EQ(result.out[r].size(), result.out[0].size());
    EXPECT_EQ(std::memcmp(result.out[r].data(), result.out[0].data(),
                          result.out[0].size() * sizeof(float)),
              0)
        << "rank " << r << " differs from rank 0";
  }
}

TEST(HierarchicalAllReduceTest, OneNodeIsTheFlatRingBitForBit) {
  const size_t count = 1001;
  for (int world : {1, 2, 3, 4}) {
    const std::vector<float> flat = FlatRing(world, count);
    RunResult h = AllReduceOnce({world}, count, true);
    ExpectIdenticalRanks(h);
    ASSERT_EQ(h.out[0].size(), count);
    EXPECT_EQ(std::memcmp(h.out[0].data(), flat.data(), count * sizeof(float)), 0)
        << "world " << world;
    EXPECT_EQ(h.inter_sent[0], 0);
    EXPECT_EQ(h.inter_collectives[0], 0);
  }
}

TEST(HierarchicalAllReduceTest, EqualsTheFlatRingForOneTwoAndThreeNodesOfUnequalSizes) {
  const size_t count = 2333;  // not a multiple of any group size: uneven chunks
  for (const std::vector<int>& sizes :
       std::vector<std::vector<int>>{{3}, {1, 3}, {3, 2}, {2, 1, 3}, {1, 1, 1}, {4, 1, 2}}) {
    const int world = Sum(sizes);
    const std::vector<float> flat = FlatRing(world, count);
    RunResult h = AllReduceOnce(sizes, count, true);
    ExpectIdenticalRanks(h);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_NEAR(h.out[0][i], flat[i], 1e-5f * (1.0f + std::fabs(flat[i])))
          << "nodes " << sizes.size() << " element " << i;
    }
    EXPECT_EQ(h.inter_collectives[0], sizes.size() > 1 ? 1 : 0);
  }
}

TEST(HierarchicalAllReduceTest, OnlyLeadersCrossNodesAndInterNodeBytesPerNodeMatchSection2c) {
  // 2 nodes × 2 workers, S = 4·1200 bytes (divisible by every chunk count used).
  const size_t count = 1200;
  const int64_t s = 4 * count;
  RunResult flat = AllReduceOnce({2, 2}, count, false);
  RunResult hier = AllReduceOnce({2, 2}, count, true);
  // Flat ring 0→1→2→3→0: rank 1 and rank 3 send across, 2(N−1)/N·S each, so per node
  // 2(N−1)/N·S = 1.5 S; hierarchical: each leader 2(M−1)/M·S = S.
  auto per_node = [](const RunResult& r, int a, int b) {
    return r.inter_sent[a] + r.inter_sent[b];
  };
  EXPECT_EQ(per_node(flat, 0, 1), 3 * s / 2);
  EXPECT_EQ(per_node(flat, 2, 3), 3 * s / 2);
  EXPECT_EQ(per_node(hier, 0, 1), s);
  EXPECT_EQ(per_node(hier, 2, 3), s);
  EXPECT_EQ(hier.inter_sent[1], 0);  // not a leader
  EXPECT_EQ(hier.inter_sent[3], 0);
  EXPECT_EQ(hier.inter_received[0], s);
  // The intra-node part: ring all-reduce among 2 (S) plus the broadcast from the leader (S).
  EXPECT_EQ(hier.sent[0] - hier.inter_sent[0], 2 * s);
  EXPECT_EQ(hier.sent[1] - hier.inter_sent[1], s);
  // Every byte is counted once on each side.
  int64_t sent = 0, received = 0;
  for (int r = 0; r < 4; ++r) {
    sent += hier.sent[r];
    received += hier.received[r];
  }
  EXPECT_EQ(sent, received);

  // 3 nodes of 2: leaders' ring of 3 sends 2(M−1)/M·S = 4/3 S per node; the flat ring 2(N−1)/N·S.
  const size_t count3 = 1800;
  const int64_t s3 = 4 * count3;
  RunResult flat3 = AllReduceOnce({2, 2, 2}, count3, false);
  RunResult hier3 = AllReduceOnce({2, 2, 2}, count3, true);
  for (int node = 0; node < 3; ++node) {
    EXPECT_EQ(flat3.inter_sent[2 * node] + flat3.inter_sent[2 * node + 1], 2 * 5 * s3 / 6);
    EXPECT_EQ(hier3.inter_sent[2 * node] + hier3.inter_sent[2 * node + 1], 4 * s3 / 3);
  }
}

TEST(HierarchicalAllReduceTest, CompressionOnTheInterNodeStageOnly) {
  const size_t count = 1200;
  const int64_t s = 4 * count;
  RunResult all = AllReduceOnce({2, 2}, count, true, /*compressed=*/true, /*inter_only=*/false);
  RunResult inter = AllReduceOnce({2, 2}, count, true, /*compressed=*/true, /*inter_only=*/true);
  ExpectIdenticalRanks(all);
  ExpectIdenticalRanks(inter);
  // The codec halves the network's bytes either way.
  EXPECT_EQ(inter.inter_sent[0], s / 2);
  EXPECT_EQ(all.inter_sent[0], s / 2);
  // Inside the node, the non-leader's ring of 2 (2(R−1)/R·S; the last of the broadcast chain
  // sends nothing): fp32 with compressInterNodeOnly, 2 bytes per element without.
  EXPECT_EQ(inter.sent[1] - inter.inter_sent[1], s);
  EXPECT_EQ(all.sent[1] - all.inter_sent[1], s / 2);
  EXPECT_EQ(inter.encodes[1], 0);  // a non-leader never encodes when only stage 2 is encoded
  EXPECT_GT(all.encodes[1], 0);
  const std::vector<float> flat = FlatRing(4, count);
  for (size_t i = 0; i < count; ++i) {
    // bf16 truncation: 3 significant digits per hop.
    EXPECT_NEAR(inter.out[0][i], flat[i], 0.05f * (1.0f + std::fabs(flat[i])));
  }
}

TEST(HierarchicalAllReduceTest, NodeCommunicatorReducesInsideTheNode) {
  const std::vector<int> sizes = {2, 3};
  const int world = 5;
  auto hub = std::make_shared<LoopbackHub>(world);
  std::vector<float> got(world);
  std::vector<int64_t> inter(world);
  Spawn(world, [&](int r) {
    auto topology = Topology::FromNodeSizes(sizes, world, "sizes");
    ASSERT_TRUE(topology.ok());
    HierarchicalCommunicator comm(std::make_unique<LoopbackTransport>(hub, r), *topology, {});
    Communicator* node = comm.node_communicator();
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->size(), r < 2 ? 2 : 3);
    EXPECT_EQ(node->rank(), r < 2 ? r : r - 2);
    float x = static_cast<float>(r + 1);
    ASSERT_TRUE(node->AllReduceSum(&x, 1).ok());
    // A job-wide collective after it keeps working (separate tags).
    float y = 1.0f;
    ASSERT_TRUE(comm.AllReduceSum(&y, 1).ok());
    EXPECT_EQ(y, 5.0f);
    got[r] = x;
    inter[r] = node->bytes_sent();
  });
  EXPECT_EQ(got[0], 3.0f);
  EXPECT_EQ(got[1], 3.0f);
  for (int r = 2; r < 5; ++r) EXPECT_EQ(got[r], 12.0f);
}

TEST(HierarchicalAllReduceTest, OverGlooTcp) {
  const std::vector<int> sizes = {2, 1};
  const int world = 3;
  const size_t count = 777;
  const std::vector<float> flat = FlatRing(world, count);
  InMemoryStore store;
  GlooOptions gloo;
  gloo.timeout = std::chrono::seconds(20);
  std::vector<std::vector<float>> out(world);
  Spawn(world, [&](int r) {
    auto transport = GlooTransport::Connect(store, r, world, gloo);
    ASSERT_TRUE(transport.ok()) << transport.status();
    auto topology = Topology::FromNodeSizes(sizes, world, "sizes");
    ASSERT_TRUE(topology.ok());
    HierarchicalCommunicator comm(std::move(*transport), *topology, {});
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Input(r, i);
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<float> copy = data;
      ASSERT_TRUE(comm.AllReduceSum(copy.data(), count).ok());
      out[r] = copy;
    }
  });
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < count; ++i) {
      ASSERT_NEAR(out[r][i], flat[i], 1e-5f * (1.0f + std::fabs(flat[i])));
    }
  }
}

}  // namespace
}  // namespace hptrain::comm
