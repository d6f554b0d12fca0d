// The device codecs against their host originals, byte for byte, alone and inside the NCCL
// back end's compressed ring at world size 1. The GPU tests skip without a CUDA device.
#include "runtime/sync/codecs/device_codecs.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/base/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/sync/codecs/half_codec.h"
#include "runtime/sync/codecs/quantize_codec.h"
#include "tests/cuda_test_util.h"
#include "tests/runtime/comm/spawn.h"

namespace hptrain::sync {
namespace {

using cuda_test::DeviceBuffer;

std::vector<float> Gradients(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  return g;
}

TEST(DeviceCodecs, CreateWithoutADeviceReturnsAnError) {
  if (cuda_test::NoCudaDeviceReason().empty()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(DeviceQuantizeCodec::Create(8, 512, 1000, 1, 0).ok());
  EXPECT_FALSE(DeviceHalfCodec::Create(1000).ok());
}

// Two steps with error feedback: the second encoding depends on the first's residual, so equal
// bytes at step 2 mean equal residuals too.
template <typename Host, typename Device>
void ExpectSameEncodings(Host& host, Device& device, size_t count, size_t offset) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> g = Gradients(count, 11 + step);
    const size_t bytes = host.EncodedBytes(count);
    ASSERT_EQ(device.EncodedBytes(count), bytes);
    std::vector<uint8_t> expect(bytes);
    ASSERT_TRUE(host.Encode(g.data(), count, offset, step, expect.data()).ok());
    std::vector<float> decoded(count, 1.0f), expect_decoded(count, 1.0f);
    ASSERT_TRUE(host.DecodeAccumulate(expect.data(), bytes, count, expect_decoded.data()).ok());

    DeviceBuffer<float> d_g(g), d_decoded(decoded);
    DeviceBuffer<uint8_t> d_out(bytes);
    ASSERT_TRUE(device.BeginDevice(stream, 1).ok());
    ASSERT_TRUE(device.Encode(d_g.get(), count, offset, step, d_out.get()).ok());
    ASSERT_TRUE(device.DecodeAccumulate(d_out.get(), bytes, count, d_decoded.get()).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_TRUE(device.FinishDevice().ok());
    EXPECT_EQ(d_out.Download(), expect) << "step " << step;
    EXPECT_EQ(d_decoded.Download(), expect_decoded) << "step " << step;
  }
  cudaStreamDestroy(stream);
}

TEST(DeviceCodecs, QuantizeCodecTwinWritesTheSameBytes) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (int bits : {2, 4, 8}) {
    QuantizeCodec host(bits, 512, 20000, 7, 3);
    auto device = DeviceQuantizeCodec::Create(bits, 512, 20000, 7, 3);
    ASSERT_TRUE(device.ok()) << device.status();
    host.set_step(5);
    (*device)->set_step(5);
    ExpectSameEncodings(host, **device, 12345, 1000);
  }
}

TEST(DeviceCodecs, HalfCodecTwinWritesTheSameBytes) {
  SKIP_WITHOUT_CUDA_DEVICE();
  HalfCodec host(20000);
  auto device = DeviceHalfCodec::Create(20000);
  ASSERT_TRUE(device.ok()) << device.status();
  ExpectSameEncodings(host, **device, 12345, 1000);
}

TEST(DeviceCodecs, SizesAreCheckedBeforeDecoding) {
  SKIP_WITHOUT_CUDA_DEVICE();
  auto device = DeviceHalfCodec::Create(0);
  ASSERT_TRUE(device.ok()) << device.status();
  DeviceBuffer<uint8_t> in(10);
  DeviceBuffer<float> out(10);
  EXPECT_EQ((*device)->Decode(in.get(), 10, 10, out.get()).code(), absl::StatusCode::kDataLoss);
}

// The NCCL ring at world size 1 is the CPU ring's: encode, then decode, with the same codec.
TEST(DeviceCodecs, NcclCompressedAllReduceAtWorldOneMatchesTheHostCodec) {
  SKIP_WITHOUT_CUDA_DEVICE();
  comm::InMemoryStore store;
  auto comm = comm::NcclCommunicator::Create(store, 0, 1, 0, std::chrono::seconds(30), "codecs");
  ASSERT_TRUE(comm.ok()) << comm.status();
  const size_t count = 50000;
  const std::vector<float> g = Gradients(count, 3);

  QuantizeCodec host_q(8, 512, count, 9, 0);
  auto device_q = DeviceQuantizeCodec::Create(8, 512, count, 9, 0);
  ASSERT_TRUE(device_q.ok()) << device_q.status();
  std::vector<uint8_t> wire(host_q.EncodedBytes(count));
  std::vector<float> expect(count);
  ASSERT_TRUE(host_q.Encode(g.data(), count, 0, 0, wire.data()).ok());
  ASSERT_TRUE(host_q.Decode(wire.data(), wire.size(), count, expect.data()).ok());
  DeviceBuffer<float> data(g);
  ASSERT_TRUE((*comm)->AllReduceSumCompressed(data.get(), count, **device_q).ok());
  EXPECT_EQ(data.Download(), expect);
  EXPECT_EQ((*comm)->bytes_sent(), 0);

  HalfCodec host_h(count);
  auto device_h = DeviceHalfCodec::Create(count);
  ASSERT_TRUE(device_h.ok()) << device_h.status();
  std::vector<uint8_t> halves(host_h.EncodedBytes(count));
  ASSERT_TRUE(host_h.Encode(g.data(), count, 0, 0, halves.data()).ok());
  ASSERT_TRUE(host_h.Decode(halves.data(), halves.size(), count, expect.data()).ok());
  DeviceBuffer<float> data_h(g);
  ASSERT_TRUE((*comm)->AllReduceSumCompressed(data_h.get(), count, **device_h).ok());
  EXPECT_EQ(data_h.Download(), expect);

  // A host codec is refused; a NaN is reported and leaves the communicator usable.
  EXPECT_EQ((*comm)->AllReduceSumCompressed(data_h.get(), count, host_h).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> bad = g;
  bad[count / 3] = std::nanf("");
  DeviceBuffer<float> d_bad(bad);
  absl::Status nan = (*comm)->AllReduceSumCompressed(d_bad.get(), count, **device_h);
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument) << nan;
  EXPECT_TRUE((*comm)->AllReduceSum(data_h.get(), count).ok());
}

// Two ranks (GPU r mod the GPUs present; NCCL refuses two ranks on one GPU, so this needs two):
// the NCCL ring with device codecs gives, bit for bit, what the CPU ring gives with the host
// codecs, over two steps of error feedback, and counts the same bytes.
TEST(DeviceCodecs, TwoRankNcclRingMatchesTheCpuRing) {
  SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int kRanks = 2;
  constexpr size_t kCount = 10007;  // chunks of unequal size
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < kRanks) GTEST_SKIP() << "needs " << kRanks << " GPUs, found " << devices;
  std::vector<std::vector<float>> inputs[2];  // [step][rank]
  for (int step = 0; step < 2; ++step) {
    for (int r = 0; r < kRanks; ++r) inputs[step].push_back(Gradients(kCount, 100 * step + r));
  }

  // The CPU ring.
  std::vector<std::vector<float>> cpu(kRanks);
  std::vector<int64_t> cpu_sent(kRanks);
  auto hub = std::make_shared<comm::LoopbackHub>(kRanks);
  comm::testing::Spawn(kRanks, [&](int r) {
    comm::TransportCommunicator comm(std::make_unique<comm::LoopbackTransport>(hub, r));
    QuantizeCodec codec(4, 512, kCount, 21, r);
    for (int step = 0; step < 2; ++step) {
      codec.set_step(step);
      cpu[r] = inputs[step][r];
      ASSERT_TRUE(comm.AllReduceSumCompressed(cpu[r].data(), kCount, codec).ok());
    }
    cpu_sent[r] = comm.bytes_sent();
  });

  // The NCCL ring.
  comm::InMemoryStore store;
  std::vector<std::vector<float>> gpu(kRanks);
  std::vector<absl::Status> status(kRanks);
  std::vector<int64_t> gpu_sent(kRanks);
  comm::testing::Spawn(kRanks, [&](int r) {
    status[r] = [&]() -> absl::Status {
      if (cudaSetDevice(r % devices) != cudaSuccess) return absl::InternalError("cudaSetDevice");
      HPTRAIN_ASSIGN_OR_RETURN(auto codec, DeviceQuantizeCodec::Create(4, 512, kCount, 21, r));
      HPTRAIN_ASSIGN_OR_RETURN(auto comm, comm::NcclCommunicator::Create(
                                              store, r, kRanks, r % devices,
                                              std::chrono::seconds(60), "two_rank_ring"));
      for (int step = 0; step < 2; ++step) {
        codec->set_step(step);
        DeviceBuffer<float> data(inputs[step][r]);
        HPTRAIN_RETURN_IF_ERROR(comm->AllReduceSumCompressed(data.get(), kCount, *codec));
        gpu[r] = data.Download();
      }
      gpu_sent[r] = comm->bytes_sent();
      return absl::OkStatus();
    }();
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    EXPECT_EQ(gpu[r], cpu[r]) << "rank " << r;
    EXPECT_EQ(gpu_sent[r], cpu_sent[r]) << "rank " << r;
  }
  EXPECT_EQ(gpu[0], gpu[1]);
}

}  // namespace
}  // namespace hptrain::sync
