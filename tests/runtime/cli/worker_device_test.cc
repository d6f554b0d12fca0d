// Where a worker trains and over what: every branch of ChooseWorkerDevice, and the start-up check
// that the workers of a job agree (over the in-memory store, as over the coordinator's).
#include "runtime/cli/worker_device.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::cli {
namespace {

job::JobSpec Spec(const std::string& device, const std::string& backend = "auto") {
  job::JobSpec spec;
  spec.device = device;
  spec.communicator.backend = backend;
  spec.strategy.type = "ssgd";
  return spec;
}

TEST(ChooseWorkerDevice, AutoWithoutAGpuIsCpuOverGloo) {
  auto chosen = ChooseWorkerDevice(Spec("auto"), 0, 1, 0, true);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->kind, "cpu");
  EXPECT_EQ(chosen->device, "cpu");
  EXPECT_EQ(chosen->cuda_index, -1);
  EXPECT_EQ(chosen->backend, "gloo");
}

TEST(ChooseWorkerDevice, WorkersSpreadOverTheHostsGpus) {
  // 4 workers on a host with 2 GPUs: local ranks 0..3 take GPUs 0, 1, 0, 1, and share them, so
  // NCCL (one rank per GPU) is out and auto falls back to Gloo staging.
  for (int local = 0; local < 4; ++local) {
    auto chosen = ChooseWorkerDevice(Spec("auto"), local, 4, 2, true);
    ASSERT_TRUE(chosen.ok()) << chosen.status();
    EXPECT_EQ(chosen->device, "cuda:" + std::to_string(local % 2));
    EXPECT_EQ(chosen->backend, "gloo");
  }
}

TEST(ChooseWorkerDevice, OneGpuPerWorkerPicksNcclForSsgd) {
  auto chosen = ChooseWorkerDevice(Spec("cuda"), 1, 2, 2, true);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->device, "cuda:1");
  EXPECT_EQ(chosen->backend, "nccl");
  // Without NCCL in the build, auto stays on Gloo; an explicit nccl is an error.
  chosen = ChooseWorkerDevice(Spec("cuda"), 1, 2, 2, false);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->backend, "gloo");
  EXPECT_FALSE(ChooseWorkerDevice(Spec("cuda", "nccl"), 1, 2, 2, false).ok());
}

TEST(ChooseWorkerDevice, ExplicitCudaWithoutAGpuFails) {
  auto chosen = ChooseWorkerDevice(Spec("cuda"), 0, 1, 0, true);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(chosen.status().message().find("sees no GPU"), std::string::npos);
}

TEST(ChooseWorkerDevice, ExplicitCudaOnABuildWithoutCudaSaysSo) {
  auto chosen = ChooseWorkerDevice(Spec("cuda"), 0, 1, 0, true, /*cuda_built=*/false);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(chosen.status().message().find("this hptrain build has no CUDA"), std::string::npos)
      << chosen.status();
  // auto on such a build is simply the CPU.
  chosen = ChooseWorkerDevice(Spec("auto"), 0, 1, 0, true, false);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->kind, "cpu");
}

// Runs CheckSameDevice for every rank at once, each with its own choice.
std::vector<absl::Status> CheckAll(const std::vector<WorkerDevice>& devices) {
  comm::InMemoryStore store;
  std::vector<absl::Status> results(devices.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < devices.size(); ++r) {
    threads.emplace_back([&, r] {
      results[r] = CheckSameDevice(store, static_cast<int>(r), static_cast<int>(devices.size()),
                                   devices[r], std::chrono::seconds(5));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(CheckSameDevice, AgreeingWorkersPass) {
  WorkerDevice gpu{"cuda", "cuda:0", 0, "gloo"};
  for (const absl::Status& s : CheckAll({gpu, gpu, gpu})) EXPECT_TRUE(s.ok()) << s;
}

TEST(CheckSameDevice, AMixOfGpuAndCpuWorkersFailsNamingTheRanks) {
  WorkerDevice gpu{"cuda", "cuda:0", 0, "gloo"};
  WorkerDevice cpu;
  for (const absl::Status& s : CheckAll({gpu, cpu, gpu})) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("cpu/gloo on rank 1"), std::string::npos) << s;
    EXPECT_NE(s.message().find("cuda/gloo on ranks 0,2"), std::string::npos) << s;
  }
}

TEST(CheckSameDevice, AMissingWorkerTimesOutNamingIt) {
  comm::InMemoryStore store;
  WorkerDevice cpu;
  absl::Status s = CheckSameDevice(store, 0, 2, cpu, std::chrono::milliseconds(50));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s;
}

}  // namespace
}  // namespace hptrain::cli
