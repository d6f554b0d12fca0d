// What a worker checks before it trains: the device it was given, and (Preflight, for the
// launcher before any process starts) everything a worker would fail on at start.
#ifndef HPTRAIN_RUNTIME_TRAIN_PREFLIGHT_H_
#define HPTRAIN_RUNTIME_TRAIN_PREFLIGHT_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

// The number of CUDA devices libtorch sees in this process (0 without a GPU, a driver, or a CUDA
// build of libtorch).
int VisibleCudaDevices();

// Whether this build's libtorch has CUDA at all (its CUDA device support is loaded), GPU or not:
// false for a CPU-only libtorch, where no GPU can ever be seen.
bool CudaBuilt();

// What a job on `device` ("cpu", "cuda" or "cuda:N") needs of this process and this build.
absl::Status CheckDevice(const job::JobSpec& spec, const std::string& device);

// The input and output shape a model trained on `data` has.
ModelShape ModelShapeFor(const Dataset& data);

// Checks what a worker would fail on at start, without training: the device, the strategy is in
// this build, the model can be built and the data sets open and are well formed (and mp2's
// predictor loads), and the checkpoint's directory exists. With spec.trainer (the user's program) only the device, the strategy, the
// data set's training split when the job names one, and mp2's predictor. Used by the launcher
// before it starts any process.
absl::Status Preflight(const job::JobSpec& spec);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_PREFLIGHT_H_
