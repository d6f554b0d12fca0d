// GPU gauges from NVML (runtime/metrics/gpu_metrics.h), against a fake NVML; the real driver's
// library is tried last, where the host has one.
#include "runtime/metrics/gpu_metrics.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/metrics/exposition.h"
#include "runtime/metrics/registry.h"

namespace hptrain::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A fake NVML with two devices; index 1 is also "GPU-b". Plain functions, so state is global.
struct FakeNvml {
  int init_result = 0;
  int utilization_result = 0;
  int inits = 0;
  int shutdowns = 0;
  int reads = 0;
  unsigned int percent[2] = {37, 81};
  unsigned long long used[2] = {3ull << 30, 5ull << 30};
  unsigned long long total[2] = {80ull << 30, 40ull << 30};
};
FakeNvml fake;

NvmlApi::Device DeviceAt(int i) { return reinterpret_cast<NvmlApi::Device>(0x1000 + i); }
int IndexOf(NvmlApi::Device d) { return static_cast<int>(reinterpret_cast<intptr_t>(d) - 0x1000); }

NvmlApi FakeApi() {
  NvmlApi api;
  api.init = [] {
    ++fake.inits;
    return fake.init_result;
  };
  api.shutdown = [] {
    ++fake.shutdowns;
    return 0;
  };
  api.device_by_index = [](unsigned int index, NvmlApi::Device* d) {
    if (index > 1) return 2;  // NVML_ERROR_INVALID_ARGUMENT
    *d = DeviceAt(static_cast<int>(index));
    return 0;
  };
  api.device_by_uuid = [](const char* uuid, NvmlApi::Device* d) {
    if (std::string(uuid) != "GPU-b") return 6;  // NVML_ERROR_NOT_FOUND
    *d = DeviceAt(1);
    return 0;
  };
  api.utilization = [](NvmlApi::Device d, NvmlApi::Utilization* out) {
    ++fake.reads;
    if (fake.utilization_result != 0) return fake.utilization_result;
    out->gpu = fake.percent[IndexOf(d)];
    out->memory = 0;
    return 0;
  };
  api.memory = [](NvmlApi::Device d, NvmlApi::Memory* out) {
    out->total = fake.total[IndexOf(d)];
    out->used = fake.used[IndexOf(d)];
    out->free = out->total - out->used;
    return 0;
  };
  api.error_string = [](int result) -> const char* {
    switch (result) {
      case 2:
        return "Invalid Argument";
      case 6:
        return "Not Found";
      case 9:
        return "Driver Not Loaded";
      case 15:
        return "GPU is lost";
      default:
        return "Unknown Error";
    }
  };
  return api;
}

class GpuMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override { fake = FakeNvml(); }
};

TEST_F(GpuMetricsTest, ExportsUtilizationAndMemoryOfTheDevice) {
  Registry registry({{"trainingjob", "mnist"}, {"role", "worker"}, {"rank", "2"}});
  absl::StatusOr<std::unique_ptr<GpuMetrics>> gpu =
      GpuMetrics::Create(registry, 1, FakeApi(), /*visible=*/nullptr);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const std::string text = TextExposition(registry);
  EXPECT_THAT(text, HasSubstr("# TYPE hptrain_gpu_utilization_ratio gauge\n"
                              "hptrain_gpu_utilization_ratio{trainingjob=\"mnist\",role=\"worker\","
                              "rank=\"2\"} 0.81\n"));
  EXPECT_THAT(text, HasSubstr("hptrain_gpu_memory_used_bytes{trainingjob=\"mnist\",role=\"worker\","
                              "rank=\"2\"} 5368709120\n"));
  EXPECT_THAT(text, HasSubstr("hptrain_gpu_memory_total_bytes{trainingjob=\"mnist\","
                              "role=\"worker\",rank=\"2\"} 42949672960\n"));
  EXPECT_EQ(fake.inits, 1);
  gpu->reset();
  EXPECT_EQ(fake.shutdowns, 1);
}

TEST_F(GpuMetricsTest, RefreshReadsAgainAndRefreshIfDueAtMostOnceASecond) {
  Registry registry;
  absl::StatusOr<std::unique_ptr<GpuMetrics>> gpu = GpuMetrics::Create(registry, 0, FakeApi(), "");
  // "" makes no device visible to CUDA.
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().message(),
            "CUDA device 0: CUDA_VISIBLE_DEVICES=\"\" makes 0 devices visible");

  gpu = GpuMetrics::Create(registry, 0, FakeApi(), /*visible=*/nullptr);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_THAT(TextExposition(registry), HasSubstr("\nhptrain_gpu_utilization_ratio 0.37\n"));
  fake.percent[0] = 100;
  fake.used[0] = 7;
  ASSERT_TRUE((*gpu)->Refresh().ok());
  EXPECT_THAT(TextExposition(registry), HasSubstr("\nhptrain_gpu_utilization_ratio 1\n"));
  EXPECT_THAT(TextExposition(registry), HasSubstr("\nhptrain_gpu_memory_used_bytes 7\n"));

  // Times relative to a read at t: the creation's read was before t.
  const auto t = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const int reads = fake.reads;
  ASSERT_TRUE((*gpu)->RefreshIfDue(t).ok());
  EXPECT_EQ(fake.reads, reads + 1);
  ASSERT_TRUE((*gpu)->RefreshIfDue(t + std::chrono::milliseconds(500)).ok());
  EXPECT_EQ(fake.reads, reads + 1);
  ASSERT_TRUE((*gpu)->RefreshIfDue(t + std::chrono::milliseconds(1000)).ok());
  EXPECT_EQ(fake.reads, reads + 2);

  // A failed read keeps the last values and says why.
  fake.utilization_result = 15;
  fake.percent[0] = 0;
  absl::Status lost = (*gpu)->Refresh();
  EXPECT_EQ(lost.message(), "NVML nvmlDeviceGetUtilizationRates failed: GPU is lost");
  EXPECT_THAT(TextExposition(registry), HasSubstr("\nhptrain_gpu_utilization_ratio 1\n"));
}

TEST_F(GpuMetricsTest, CudaVisibleDevicesPicksTheNvmlDevice) {
  Registry registry;
  // CUDA ordinal 1 is the second entry: NVML index 0.
  absl::StatusOr<std::unique_ptr<GpuMetrics>> gpu =
      GpuMetrics::Create(registry, 1, FakeApi(), "1, 0");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_THAT(TextExposition(registry), HasSubstr("\nhptrain_gpu_utilization_ratio 0.37\n"));

  Registry by_uuid;
  gpu = GpuMetrics::Create(by_uuid, 0, FakeApi(), "GPU-b");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_THAT(TextExposition(by_uuid), HasSubstr("\nhptrain_gpu_utilization_ratio 0.81\n"));

  absl::StatusOr<NvmlDeviceRef> ref = ResolveCudaOrdinal(2, "0,1");
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(ref.status().message(),
            "CUDA device 2: CUDA_VISIBLE_DEVICES=\"0,1\" makes 2 devices visible");
  EXPECT_FALSE(ResolveCudaOrdinal(-1, nullptr).ok());
  ref = ResolveCudaOrdinal(3, nullptr);
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(ref->by_uuid);
  EXPECT_EQ(ref->index, 3u);
}

// Every failure registers nothing, says which NVML call failed and why, and leaves NVML shut
// down as often as it was started.
TEST_F(GpuMetricsTest, FailuresExportNothing) {
  struct Case {
    int ordinal;
    const char* visible;
    int init_result;
    int utilization_result;
    const char* message;
  };
  for (const Case& c : {
           Case{0, nullptr, 9, 0, "NVML nvmlInit_v2 failed: Driver Not Loaded"},
           Case{4, nullptr, 0, 0, "NVML nvmlDeviceGetHandleByIndex_v2(4) failed: Invalid Argument"},
           Case{0, "GPU-zz", 0, 0, "NVML nvmlDeviceGetHandleByUUID(GPU-zz) failed: Not Found"},
           Case{0, nullptr, 0, 3, "NVML nvmlDeviceGetUtilizationRates failed: Unknown Error"},
       }) {
    fake = FakeNvml();
    fake.init_result = c.init_result;
    fake.utilization_result = c.utilization_result;
    Registry registry;
    absl::StatusOr<std::unique_ptr<GpuMetrics>> gpu =
        GpuMetrics::Create(registry, c.ordinal, FakeApi(), c.visible);
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().message(), c.message);
    EXPECT_EQ(TextExposition(registry), "") << c.message;
    EXPECT_EQ(fake.shutdowns, c.init_result == 0 ? 1 : 0) << c.message;
  }
  Registry registry;
  EXPECT_FALSE(GpuMetrics::Create(registry, 0, NvmlApi(), nullptr).ok());
}

std::pair<int, std::string> RunPromtool(const std::string& text) {
  const std::string path = ::testing::TempDir() + "gpu_metrics_promtool.txt";
  std::ofstream(path) << text;
  FILE* pipe = popen(("promtool check metrics < '" + path + "' 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST_F(GpuMetricsTest, ExpositionPassesPromtool) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not on PATH (Debian package prometheus)";
  }
  Registry registry({{"trainingjob", "mnist"}, {"role", "worker"}, {"rank", "0"}});
  absl::StatusOr<std::unique_ptr<GpuMetrics>> gpu =
      GpuMetrics::Create(registry, 0, FakeApi(), nullptr);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto [code, output] = RunPromtool(TextExposition(registry));
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output, "") << "promtool reported problems";
}

// The driver's own library: absent on most build hosts (then the reason must name it), read for
// real where the host has an NVIDIA GPU.
TEST(GpuMetricsRealNvmlTest, LoadsOrSaysWhy) {
  absl::StatusOr<NvmlApi> nvml = LoadNvml();
  if (!nvml.ok()) {
    EXPECT_THAT(nvml.status().message(), HasSubstr("libnvidia-ml.so.1"));
    GTEST_SKIP() << "no NVML on this host: " << nvml.status().message();
  }
  Registry registry;
  absl::StatusOr<std::unique_ptr<GpuMetrics>> gpu = GpuMetrics::Create(registry, 0, *nvml);
  if (!gpu.ok()) GTEST_SKIP() << "NVML loaded but no usable GPU 0: " << gpu.status().message();
  ASSERT_TRUE((*gpu)->Refresh().ok());
  const std::string text = TextExposition(registry);
  std::printf("%s", text.c_str());
  double ratio = -1, used = -1, total = -1;
  for (const auto& family : registry.Collect()) {
    ASSERT_EQ(family.children.size(), 1u);
    const double v = family.children[0].value;
    if (family.name == "hptrain_gpu_utilization_ratio") ratio = v;
    if (family.name == "hptrain_gpu_memory_used_bytes") used = v;
    if (family.name == "hptrain_gpu_memory_total_bytes") total = v;
  }
  EXPECT_GE(ratio, 0.0);
  EXPECT_LE(ratio, 1.0);
  EXPECT_GT(total, 0.0);
  EXPECT_GE(used, 0.0);
  EXPECT_LE(used, total);
  EXPECT_THAT(text, Not(HasSubstr("NaN")));
}

}  // namespace
}  // namespace hptrain::metrics
