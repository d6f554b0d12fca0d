#include "runtime/job/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

WorkerGroupSpec Group(const std::string& name, int replicas, int batch_size = 0) {
  WorkerGroupSpec group;
  group.name = name;
  group.replicas = replicas;
  group.batch_size = batch_size;
  return group;
}

TEST(JobSpecTest, WorldSizeSumsReplicas) {
  JobSpec spec;
  EXPECT_EQ(spec.WorldSize(), 0);
  spec.worker_groups = {Group("a", 2), Group("b", 3)};
  EXPECT_EQ(spec.WorldSize(), 5);
}

TEST(JobSpecTest, RankGroupsFollowDocumentOrder) {
  JobSpec spec;
  spec.worker_groups = {Group("a100", 2), Group("t4", 1)};
  EXPECT_THAT(spec.RankGroups(), ElementsAre("a100", "a100", "t4"));
}

TEST(JobSpecTest, EqualSplitGivesTheRemainderToLowerRanks) {
  JobSpec spec;
  spec.global_batch_size = 130;
  spec.worker_groups = {Group("cpu", 4)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(33, 33, 32, 32));
}

TEST(JobSpecTest, EqualSplitCrossesGroups) {
  JobSpec spec;
  spec.global_batch_size = 11;
  spec.worker_groups = {Group("a", 1), Group("b", 3)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(3, 3, 3, 2));
}

TEST(JobSpecTest, ExactSplit) {
  JobSpec spec;
  spec.global_batch_size = 128;
  spec.worker_groups = {Group("cpu", 4)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(32, 32, 32, 32));
}

TEST(JobSpecTest, GroupBatchSizesAreUsedAsGiven) {
  JobSpec spec;
  spec.global_batch_size = 64;
  spec.worker_groups = {Group("t4", 2, 8), Group("a100", 2, 24)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(8, 8, 24, 24));
}

TEST(JobSpecTest, MixedGroupsSplitWhatIsLeft) {
  // Not a valid job (validation rejects it) but the helper stays total.
  JobSpec spec;
  spec.global_batch_size = 21;
  spec.worker_groups = {Group("fixed", 1, 10), Group("free", 2)};
  EXPECT_THAT(spec.InitialAllocation(), ElementsAre(10, 6, 5));
}

TEST(JobSpecTest, NoGroupsNoAllocation) {
  JobSpec spec;
  spec.global_batch_size = 64;
  EXPECT_THAT(spec.InitialAllocation(), IsEmpty());
  EXPECT_THAT(spec.RankGroups(), IsEmpty());
}

TEST(ResolveDeviceTest, DefaultIsAuto) {
  JobSpec spec;
  EXPECT_EQ(spec.device, "auto");
  EXPECT_EQ(ResolveDevice(spec, /*gpu_visible=*/true), "cuda");
  EXPECT_EQ(ResolveDevice(spec, /*gpu_visible=*/false), "cpu");
}

TEST(ResolveDeviceTest, ExplicitDevicesAreTakenAsWritten) {
  JobSpec spec;
  spec.device = "cpu";
  EXPECT_EQ(ResolveDevice(spec, true), "cpu");
  EXPECT_EQ(ResolveDevice(spec, false), "cpu");
  spec.device = "cuda";  // without a GPU the trainer fails rather than train on the CPU
  EXPECT_EQ(ResolveDevice(spec, true), "cuda");
  EXPECT_EQ(ResolveDevice(spec, false), "cuda");
}

TEST(ResolveDeviceTest, AutoStaysOnCpuWithThePriorityScheduler) {
  JobSpec spec;
  spec.scheduler.type = "priority";
  EXPECT_EQ(ResolveDevice(spec, true), "cpu");
}

StrategySpec Strategy(const std::string& type, const std::string& bits = "") {
  StrategySpec s;
  s.type = type;
  if (!bits.empty()) s.Set("bits", bits);
  return s;
}

TEST(ExchangesOnDeviceTest, GradientCompressorsButNotTheCompactSparseEncoding) {
  for (const StrategySpec& s :
       {Strategy("ssgd"), Strategy("fp16"), Strategy("quantized"), Strategy("quantized", "4"),
        Strategy("quantized", "32"), Strategy("quantized", "dynamic"), Strategy("topk"),
        Strategy("dgc")}) {
    EXPECT_TRUE(ExchangesOnDevice(s)) << s.type << " " << s.String("bits");
    EXPECT_EQ(HostOnlyReason(s), "") << s.type;
  }
  for (const char* type : {"topk", "dgc"}) {
    StrategySpec s = Strategy(type);
    s.Set("sparseEncoding", "pairs");
    EXPECT_TRUE(ExchangesOnDevice(s)) << type;
    s.Set("sparseEncoding", "compact");
    EXPECT_FALSE(ExchangesOnDevice(s)) << type;
    EXPECT_EQ(HostOnlyReason(s), " (sparseEncoding: compact)") << type;
  }
  for (const char* type : {"localsgd", "multistep", "hierarchical", "gossip", "ps", "hps", "mp2",
                           ""}) {
    EXPECT_FALSE(ExchangesOnDevice(Strategy(type))) << type;
  }
}

// ResolveBackend's result, "error: <message>" when it fails (InvalidArgument, on one line).
std::string Backend(const JobSpec& spec, const std::string& device, bool nccl_built = true,
                    bool one_gpu_per_worker = true) {
  absl::StatusOr<std::string> backend =
      ResolveBackend(spec, device, nccl_built, one_gpu_per_worker);
  if (backend.ok()) return *backend;
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument) << backend.status();
  EXPECT_THAT(std::string(backend.status().message()), Not(HasSubstr("\n")));
  return absl::StrCat("error: ", backend.status().message());
}

TEST(ResolveBackendTest, AutoPicksNcclOnlyWhenEverythingAllows) {
  JobSpec spec;  // ssgd, backend auto
  EXPECT_EQ(spec.communicator.backend, "auto");
  EXPECT_EQ(Backend(spec, "cuda"), "nccl");
  EXPECT_EQ(Backend(spec, "cpu"), "gloo");
  EXPECT_EQ(Backend(spec, "cuda", /*nccl_built=*/false), "gloo");
  EXPECT_EQ(Backend(spec, "cuda", true, /*one_gpu_per_worker=*/false), "gloo");
  spec.communicator.hierarchical = true;
  EXPECT_EQ(Backend(spec, "cuda"), "gloo");
  spec.communicator.hierarchical = false;
  for (const char* type : {"fp16", "quantized", "topk", "dgc", "auto"}) {
    spec.strategy.type = type;
    EXPECT_EQ(Backend(spec, "cuda"), "nccl") << type;
  }
  spec.strategy.type = "quantized";
  spec.strategy.Set("bits", "dynamic");
  EXPECT_EQ(Backend(spec, "cuda"), "nccl");
  spec.strategy.Clear("bits");
  spec.strategy.type = "topk";
  spec.strategy.Set("sparseEncoding", "compact");
  EXPECT_EQ(Backend(spec, "cuda"), "gloo");
  spec.strategy.Clear("sparseEncoding");
  for (const char* type : {"localsgd", "ps", "hps", "gossip"}) {
    spec.strategy.type = type;
    EXPECT_EQ(Backend(spec, "cuda"), "gloo") << type;
  }
}

TEST(ResolveBackendTest, GlooIsAlwaysGloo) {
  JobSpec spec;
  spec.communicator.backend = "gloo";
  EXPECT_EQ(Backend(spec, "cuda"), "gloo");
  EXPECT_EQ(Backend(spec, "cpu"), "gloo");
  EXPECT_EQ(Backend(spec, "cuda", false, false), "gloo");
}

TEST(ResolveBackendTest, ExplicitNcclWhenItCanRun) {
  JobSpec spec;
  spec.communicator.backend = "nccl";
  EXPECT_EQ(Backend(spec, "cuda"), "nccl");
}

TEST(ResolveBackendTest, ExplicitNcclErrorsNameTheField) {
  JobSpec spec;
  spec.communicator.backend = "nccl";
  const std::string prefix = "error: spec.communicator.backend: ";
  EXPECT_THAT(Backend(spec, "cpu"),
              StartsWith(prefix + "nccl needs the workers on cuda, but they run on cpu "
                                  "(spec.device: auto)"));
  EXPECT_THAT(Backend(spec, "cuda", /*nccl_built=*/false),
              StartsWith(prefix + "nccl is not available: this build has no NCCL"));
  EXPECT_THAT(Backend(spec, "cuda", true, /*one_gpu_per_worker=*/false),
              StartsWith(prefix + "nccl needs a GPU of its own for every worker, but workers "
                                  "share a GPU"));
  spec.strategy.type = "dgc";
  spec.strategy.Set("sparseEncoding", "compact");
  EXPECT_THAT(Backend(spec, "cuda"),
              StartsWith(prefix + "nccl does not carry strategy dgc (sparseEncoding: compact), "
                                  "which exchanges through host memory"));
  spec.strategy.type = "localsgd";
  EXPECT_THAT(Backend(spec, "cuda"),
              StartsWith(prefix + "nccl does not carry strategy localsgd, which exchanges "
                                  "through host memory"));
  spec.strategy.Clear("sparseEncoding");
  spec.strategy.type = "ssgd";
  spec.communicator.hierarchical = true;
  EXPECT_THAT(Backend(spec, "cuda"),
              StartsWith(prefix + "nccl cannot run spec.communicator.hierarchical"));
  spec.communicator.backend = "mpi";
  EXPECT_THAT(Backend(spec, "cuda"), StartsWith(prefix + "unknown backend \"mpi\""));
}

}  // namespace
}  // namespace hptrain::job
