#include "runtime/metrics/gpu_metrics.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hptrain::metrics {
namespace {

constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";
constexpr int kNvmlSuccess = 0;

// NVML's text for `result`, or its number when the API has no nvmlErrorString.
std::string NvmlError(const NvmlApi& nvml, int result) {
  const char* text = nvml.error_string != nullptr ? nvml.error_string(result) : nullptr;
  if (text == nullptr || *text == '\0') return absl::StrCat("NVML error ", result);
  return text;
}

absl::Status NvmlFailed(const NvmlApi& nvml, absl::string_view call, int result) {
  return absl::FailedPreconditionError(
      absl::StrCat("NVML ", call, " failed: ", NvmlError(nvml, result)));
}

absl::Status ReadDevice(const NvmlApi& nvml, NvmlApi::Device device,
                        NvmlApi::Utilization* utilization, NvmlApi::Memory* memory) {
  if (int r = nvml.utilization(device, utilization); r != kNvmlSuccess) {
    return NvmlFailed(nvml, "nvmlDeviceGetUtilizationRates", r);
  }
  if (int r = nvml.memory(device, memory); r != kNvmlSuccess) {
    return NvmlFailed(nvml, "nvmlDeviceGetMemoryInfo", r);
  }
  return absl::OkStatus();
}

// Resolves `name` in `library`, into `*out` (a function pointer of the matching type).
template <typename Fn>
bool Resolve(void* library, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

absl::StatusOr<NvmlApi> LoadNvmlOnce() {
  // Never closed: the NVML functions stay callable for the process's lifetime.
  void* library = dlopen(kNvmlLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", kNvmlLibrary, " (no NVIDIA driver libraries on this host): ",
                     reason != nullptr ? reason : "unknown reason"));
  }
  NvmlApi nvml;
  std::string missing;
  Resolve(library, "nvmlInit_v2", &nvml.init, &missing);
  Resolve(library, "nvmlShutdown", &nvml.shutdown, &missing);
  Resolve(library, "nvmlDeviceGetHandleByIndex_v2", &nvml.device_by_index, &missing);
  Resolve(library, "nvmlDeviceGetHandleByUUID", &nvml.device_by_uuid, &missing);
  Resolve(library, "nvmlDeviceGetUtilizationRates", &nvml.utilization, &missing);
  Resolve(library, "nvmlDeviceGetMemoryInfo", &nvml.memory, &missing);
  Resolve(library, "nvmlErrorString", &nvml.error_string, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kNvmlLibrary, " has no ", missing, " (driver too old)"));
  }
  return nvml;
}

}  // namespace

absl::StatusOr<NvmlApi> LoadNvml() {
  static const absl::StatusOr<NvmlApi>* const nvml = new absl::StatusOr<NvmlApi>(LoadNvmlOnce());
  return *nvml;
}

absl::StatusOr<NvmlDeviceRef> ResolveCudaOrdinal(int ordinal, const char* visible) {
  if (ordinal < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", ordinal, ": must be >= 0"));
  }
  NvmlDeviceRef ref;
  if (visible == nullptr) {
    ref.index = static_cast<unsigned int>(ordinal);
    return ref;
  }
  std::vector<std::string> entries;
  if (!absl::StripAsciiWhitespace(visible).empty()) {
    entries = absl::StrSplit(visible, ',');
  }
  if (static_cast<size_t>(ordinal) >= entries.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", ordinal, ": CUDA_VISIBLE_DEVICES=\"", visible, "\" makes ",
                     entries.size(), " device", entries.size() == 1 ? "" : "s", " visible"));
  }
  const std::string entry(absl::StripAsciiWhitespace(entries[static_cast<size_t>(ordinal)]));
  uint32_t index = 0;
  if (absl::SimpleAtoi(entry, &index)) {
    ref.index = index;
  } else {
    ref.by_uuid = true;
    ref.uuid = entry;  // GPU-... or MIG-...
  }
  return ref;
}

GpuMetrics::GpuMetrics(const NvmlApi& nvml, NvmlApi::Device device)
    : nvml_(nvml), device_(device) {}

GpuMetrics::~GpuMetrics() {
  if (nvml_.shutdown != nullptr) nvml_.shutdown();
}

absl::StatusOr<std::unique_ptr<GpuMetrics>> GpuMetrics::Create(Registry& registry, int ordinal,
                                                               const NvmlApi& nvml) {
  return Create(registry, ordinal, nvml, std::getenv("CUDA_VISIBLE_DEVICES"));
}

absl::StatusOr<std::unique_ptr<GpuMetrics>> GpuMetrics::Create(Registry& registry, int ordinal,
                                                               const NvmlApi& nvml,
                                                               const char* visible) {
  if (nvml.init == nullptr || nvml.shutdown == nullptr || nvml.device_by_index == nullptr ||
      nvml.device_by_uuid == nullptr || nvml.utilization == nullptr || nvml.memory == nullptr) {
    return absl::FailedPreconditionError("NVML: incomplete function table");
  }
  absl::StatusOr<NvmlDeviceRef> ref = ResolveCudaOrdinal(ordinal, visible);
  if (!ref.ok()) return ref.status();
  if (int r = nvml.init(); r != kNvmlSuccess) return NvmlFailed(nvml, "nvmlInit_v2", r);
  NvmlApi::Device device = nullptr;
  const int found = ref->by_uuid ? nvml.device_by_uuid(ref->uuid.c_str(), &device)
                                 : nvml.device_by_index(ref->index, &device);
  if (found != kNvmlSuccess) {
    nvml.shutdown();
    return NvmlFailed(nvml,
                      ref->by_uuid
                          ? absl::StrCat("nvmlDeviceGetHandleByUUID(", ref->uuid, ")")
                          : absl::StrCat("nvmlDeviceGetHandleByIndex_v2(", ref->index, ")"),
                      found);
  }
  // From here the destructor shuts NVML down.
  std::unique_ptr<GpuMetrics> gpu(new GpuMetrics(nvml, device));
  NvmlApi::Utilization utilization{};
  NvmlApi::Memory memory{};
  if (absl::Status read = ReadDevice(nvml, device, &utilization, &memory); !read.ok()) {
    return read;
  }
  gpu->utilization_ = registry
                          .Gauge("hptrain_gpu_utilization_ratio",
                                 "Share of the last NVML sample period in which a kernel ran "
                                 "on this worker's GPU (0..1).")
                          ->Get();
  gpu->memory_used_ = registry
                          .Gauge("hptrain_gpu_memory_used_bytes",
                                 "Memory in use on this worker's GPU, by any process.")
                          ->Get();
  gpu->memory_total_ =
      registry.Gauge("hptrain_gpu_memory_total_bytes", "Memory of this worker's GPU in all.")
          ->Get();
  gpu->utilization_->Set(utilization.gpu / 100.0);
  gpu->memory_used_->Set(static_cast<double>(memory.used));
  gpu->memory_total_->Set(static_cast<double>(memory.total));
  gpu->last_read_ = std::chrono::steady_clock::now();
  return gpu;
}

absl::Status GpuMetrics::Refresh() {
  NvmlApi::Utilization utilization{};
  NvmlApi::Memory memory{};
  if (absl::Status read = ReadDevice(nvml_, device_, &utilization, &memory); !read.ok()) {
    return read;
  }
  utilization_->Set(utilization.gpu / 100.0);
  memory_used_->Set(static_cast<double>(memory.used));
  memory_total_->Set(static_cast<double>(memory.total));
  return absl::OkStatus();
}

absl::Status GpuMetrics::RefreshIfDue(std::chrono::steady_clock::time_point now) {
  if (now - last_read_ < kMinRefreshInterval) return absl::OkStatus();
  last_read_ = now;
  return Refresh();
}

}  // namespace hptrain::metrics
