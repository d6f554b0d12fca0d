// device_optimizer.h with the CUDA twins of kernels/update.
#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/optim/device_optimizer.h"
#include "runtime/optim/update_params.h"

namespace hptrain::optim {
namespace {

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("device optimizer: ", what, ": ", cudaGetErrorName(err),
                                          " (", cudaGetErrorString(err), ")"));
}

// Makes `device` current for the scope (kernels and copies run on the device of their stream),
// and restores the previous one. -1 leaves the current device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (device < 0 || cudaGetDevice(&previous_) != cudaSuccess || previous_ == device) return;
    status_ = CudaStatus(cudaSetDevice(device), "cudaSetDevice");
    if (status_.ok()) restore_ = true;
  }
  ~DeviceScope() {
    if (restore_) cudaSetDevice(previous_);
  }
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;
  bool restore_ = false;
  absl::Status status_;
};

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

DeviceOptimizer::DeviceOptimizer(const OptimizerOptions& options, size_t num_parameters, int device)
    : options_(options), n_(num_parameters), device_(device) {}

absl::StatusOr<std::unique_ptr<DeviceOptimizer>> DeviceOptimizer::Create(
    const OptimizerOptions& options, size_t num_parameters, int device) {
  std::unique_ptr<DeviceOptimizer> opt(new DeviceOptimizer(options, num_parameters, device));
  DeviceScope scope(device);
  HPTRAIN_RETURN_IF_ERROR(scope.status());
  const size_t bytes = num_parameters * sizeof(float);
  std::vector<float**> buffers;
  if (options.type == OptimizerType::kAdam) {
    buffers = {&opt->m_, &opt->v_};
  } else if (options.momentum != 0.0) {
    buffers = {&opt->momentum_};
  }
  if (num_parameters == 0) return opt;  // no state, as Optimizer's empty vectors
  for (float** buffer : buffers) {
    HPTRAIN_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(reinterpret_cast<void**>(buffer), bytes), "cudaMalloc"),
        num_parameters, " floats of optimizer state");
    HPTRAIN_RETURN_IF_ERROR(CudaStatus(cudaMemset(*buffer, 0, bytes), "cudaMemset"));
  }
  return opt;
}

DeviceOptimizer::~DeviceOptimizer() {
  DeviceScope scope(device_);
  for (float* buffer : {momentum_, m_, v_}) {
    if (buffer != nullptr) cudaFree(buffer);
  }
}

absl::Status DeviceOptimizer::Step(float* params, const float* grads, double lr, void* stream) {
  DeviceScope scope(device_);
  HPTRAIN_RETURN_IF_ERROR(scope.status());
  ++steps_;
  if (n_ == 0) return absl::OkStatus();
  if (options_.type == OptimizerType::kAdam) {
    kernels::AdamStepCuda(params, grads, m_, v_, n_,
                          internal::AdamParamsFor(options_, lr, 1.0, steps_), stream);
  } else {
    kernels::SgdStepCuda(params, grads, momentum_, n_,
                         internal::SgdParamsFor(options_, lr, 1.0, steps_ == 1), stream);
  }
  return CudaStatus(cudaGetLastError(), "launching the update kernel");
}

namespace {

// Each device state buffer with the host vector of the same name; Internal when one is missing
// or of another size.
absl::StatusOr<std::vector<std::pair<float*, std::vector<float>*>>> PairState(float* momentum,
                                                                              float* m, float* v,
                                                                              size_t n,
                                                                              Optimizer& host) {
  std::vector<std::pair<float*, std::vector<float>*>> pairs;
  for (const auto& [name, buffer] :
       {std::pair<const char*, float*>{"momentum", momentum}, {"adam.m", m}, {"adam.v", v}}) {
    if (buffer == nullptr) continue;
    std::vector<float>* values = host.StateVector(name);
    if (values == nullptr || values->size() != n) {
      return absl::InternalError(absl::StrCat("optimizer state ", name, " does not match"));
    }
    pairs.emplace_back(buffer, values);
  }
  return pairs;
}

}  // namespace

absl::Status DeviceOptimizer::CopyStateTo(Optimizer& host, void* stream) const {
  HPTRAIN_ASSIGN_OR_RETURN(auto pairs, PairState(momentum_, m_, v_, n_, host));
  DeviceScope scope(device_);
  HPTRAIN_RETURN_IF_ERROR(scope.status());
  for (auto& [buffer, values] : pairs) {
    HPTRAIN_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(values->data(), buffer, n_ * sizeof(float),
                                                       cudaMemcpyDeviceToHost, AsStream(stream)),
                                       "copying the state to the host"));
  }
  HPTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaStreamSynchronize(AsStream(stream)), "cudaStreamSynchronize"));
  host.set_steps(steps_);
  return absl::OkStatus();
}

absl::Status DeviceOptimizer::CopyStateFrom(Optimizer& host, void* stream) {
  HPTRAIN_ASSIGN_OR_RETURN(auto pairs, PairState(momentum_, m_, v_, n_, host));
  DeviceScope scope(device_);
  HPTRAIN_RETURN_IF_ERROR(scope.status());
  for (auto& [buffer, values] : pairs) {
    HPTRAIN_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(buffer, values->data(), n_ * sizeof(float),
                                                       cudaMemcpyHostToDevice, AsStream(stream)),
                                       "copying the state to the device"));
  }
  HPTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaStreamSynchronize(AsStream(stream)), "cudaStreamSynchronize"));
  steps_ = host.steps();
  return absl::OkStatus();
}

}  // namespace hptrain::optim
