// GPU utilisation and memory of one device, read from NVML and exported as gauges:
//   hptrain_gpu_utilization_ratio    share of the last sample period in which a kernel ran
//                                    (nvmlDeviceGetUtilizationRates gpu / 100), 0..1
//   hptrain_gpu_memory_used_bytes    device memory in use, by any process
//                                    (nvmlDeviceGetMemoryInfo used)
//   hptrain_gpu_memory_total_bytes   device memory in all (nvmlDeviceGetMemoryInfo total)
// They carry the registry's constant labels only (job, role, rank), like the worker's other
// metrics: a worker trains on one GPU.
//
// NVML comes with the NVIDIA driver, not with CUDA, and is reached through
// dlopen("libnvidia-ml.so.1") at run time: the runtime links no NVIDIA library, and the same binary
// runs on hosts without a GPU. The few NVML functions and types used are declared below
// (NvmlApi) after nvml.h's ABI (stable since NVML 4; the _v2 entry points since driver 325).
//
// Which GPU: the worker's CUDA device ordinal. NVML numbers every GPU of the host and ignores
// CUDA_VISIBLE_DEVICES, so the ordinal is looked up in that variable first: the k-th entry is an
// NVML index or a GPU UUID ("GPU-..."). Without the variable, CUDA and NVML agree on the order
// when the host's GPUs are all of one model (CUDA orders by speed, then PCI bus; NVML by PCI
// bus). In a Kubernetes pod the device plugin exposes only the pod's GPU: ordinal 0, NVML index 0.
//
// NvmlApi holds the function pointers, so tests inject a fake NVML.
#ifndef HPTRAIN_RUNTIME_METRICS_GPU_METRICS_H_
#define HPTRAIN_RUNTIME_METRICS_GPU_METRICS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/metrics/registry.h"

namespace hptrain::metrics {

// The NVML entry points GpuMetrics calls. Return values are nvmlReturn_t (0 = NVML_SUCCESS).
struct NvmlApi {
  using Device = struct NvmlDevice*;  // nvmlDevice_t, opaque
  struct Utilization {                // nvmlUtilization_t
    unsigned int gpu;                 // percent of time a kernel ran
    unsigned int memory;              // percent of time memory was read or written
  };
  struct Memory {  // nvmlMemory_t
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
  };

  int (*init)() = nullptr;                                               // nvmlInit_v2
  int (*shutdown)() = nullptr;                                           // nvmlShutdown
  int (*device_by_index)(unsigned int index, Device* device) = nullptr;  // ..GetHandleByIndex_v2
  int (*device_by_uuid)(const char* uuid, Device* device) = nullptr;     // ..GetHandleByUUID
  int (*utilization)(Device device, Utilization* out) = nullptr;         // ..GetUtilizationRates
  int (*memory)(Device device, Memory* out) = nullptr;                   // ..GetMemoryInfo
  const char* (*error_string)(int result) = nullptr;                     // nvmlErrorString
};

// NVML from the driver's libnvidia-ml.so.1, loaded once per process and never unloaded.
// FailedPrecondition with the loader's reason when the library or one of the functions is
// missing (no NVIDIA driver on this host, or a container without the driver's libraries).
absl::StatusOr<NvmlApi> LoadNvml();

// The NVML device for CUDA device `ordinal` (see above): "index <n>" or "uuid <GPU-...>" as it
// would be looked up, given CUDA_VISIBLE_DEVICES' value (`visible`; nullptr when unset).
// InvalidArgument when `ordinal` is negative or past the variable's entries.
struct NvmlDeviceRef {
  bool by_uuid = false;
  unsigned int index = 0;
  std::string uuid;
};
absl::StatusOr<NvmlDeviceRef> ResolveCudaOrdinal(int ordinal, const char* visible);

class GpuMetrics {
 public:
  // At most one NVML read per this interval from RefreshIfDue: a read costs tens of microseconds
  // in the driver, and the GPU's own utilisation sample period is longer than that anyway.
  static constexpr std::chrono::milliseconds kMinRefreshInterval{1000};

  // Starts NVML through `nvml`, finds the device of CUDA ordinal `ordinal` (CUDA_VISIBLE_DEVICES
  // from the environment unless `visible` is given) and reads it once; only then registers the
  // three gauges in `registry`, with that first reading. On any failure registers nothing and
  // returns FailedPrecondition (InvalidArgument for a bad ordinal) saying which step failed and
  // NVML's reason, in one line. `registry` must outlive the result.
  static absl::StatusOr<std::unique_ptr<GpuMetrics>> Create(Registry& registry, int ordinal,
                                                            const NvmlApi& nvml);
  static absl::StatusOr<std::unique_ptr<GpuMetrics>> Create(Registry& registry, int ordinal,
                                                            const NvmlApi& nvml,
                                                            const char* visible);
  ~GpuMetrics();  // nvmlShutdown (NVML counts its inits)
  GpuMetrics(const GpuMetrics&) = delete;
  GpuMetrics& operator=(const GpuMetrics&) = delete;

  // Reads the device now and sets the gauges. A failed read (the GPU fell off the bus) keeps the
  // last values and is returned; the caller decides whether to say so.
  absl::Status Refresh();
  // Refresh() when kMinRefreshInterval has passed since the last read (Create's included);
  // OK without reading otherwise. Cheap enough to call every training step.
  absl::Status RefreshIfDue(std::chrono::steady_clock::time_point now);

 private:
  GpuMetrics(const NvmlApi& nvml, NvmlApi::Device device);

  const NvmlApi nvml_;
  const NvmlApi::Device device_;
  std::chrono::steady_clock::time_point last_read_{};
  Gauge* utilization_ = nullptr;
  Gauge* memory_used_ = nullptr;
  Gauge* memory_total_ = nullptr;
};

}  // namespace hptrain::metrics

#endif  // HPTRAIN_RUNTIME_METRICS_GPU_METRICS_H_
