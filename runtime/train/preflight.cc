#include "runtime/train/preflight.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/files.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/job_options.h"
#include "runtime/sync/registry.h"
#include "runtime/train/data/sampler.h"

namespace hptrain::train {

int VisibleCudaDevices() {
  try {
    return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

bool CudaBuilt() { return c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA); }

absl::Status CheckDevice(const job::JobSpec& spec, const std::string& device) {
  if (device == "cpu" && spec.precision == "fp16") {
    // spec.device cpu is refused by validation; this is spec.device auto finding no GPU.
    return absl::InvalidArgumentError(
        "spec.precision: fp16 needs a GPU, but this worker trains on the CPU (no GPU visible); "
        "use bf16 or fp32");
  }
  if (device == "cpu") return absl::OkStatus();
  if (device.rfind("cuda", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device \"", device, "\""));
  }
  const int visible = VisibleCudaDevices();
  if (visible == 0 && !CudaBuilt()) {
    return absl::FailedPreconditionError(
        "spec.device: cuda, but this hptrain build has no CUDA (its libtorch is CPU-only); run GPU "
        "workers with the runtime-cuda image");
  }
  if (visible == 0) {
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    return absl::FailedPreconditionError(
        absl::StrCat("spec.device: cuda, but this process sees no GPU (",
                     env == nullptr ? std::string("no CUDA device or driver")
                                    : absl::StrCat("CUDA_VISIBLE_DEVICES=\"", env, "\""),
                     "; a libtorch built with CUDA is needed too)"));
  }
  if (spec.scheduler.type == "priority") {
    return absl::InvalidArgumentError(
        "spec.scheduler.type: priority is not supported on cuda yet (use none)");
  }
  return absl::OkStatus();
}

ModelShape ModelShapeFor(const Dataset& data) {
  ModelShape shape;
  shape.channels = data.shape().channels;
  shape.height = data.shape().height;
  shape.width = data.shape().width;
  // The model's output width: classes, or the target vector's length.
  shape.num_classes = data.targets().outputs();
  return shape;
}

absl::Status Preflight(const job::JobSpec& spec) {
  HPTRAIN_RETURN_IF_ERROR(CheckDevice(spec, job::ResolveDevice(spec, VisibleCudaDevices() > 0)));
  const std::vector<std::string> strategies = sync::RegisteredStrategies();
  if (std::find(strategies.begin(), strategies.end(), spec.strategy.type) == strategies.end()) {
    return absl::UnimplementedError(absl::StrCat(
        "spec.strategy.type: strategy \"", spec.strategy.type,
        "\" is not available in this build (available: ", absl::StrJoin(strategies, ", "), ")"));
  }
  if (spec.trainer.set()) {
    // The user's program builds its own model and may read no data set, or this one in its own
    // way: only that a data set it names opens is checked.
    if (!spec.dataset.name.empty()) {
      HPTRAIN_ASSIGN_OR_RETURN(auto train, OpenDataset(spec.dataset, Split::kTrain, spec.seed));
      (void)train;
    }
  } else {
    HPTRAIN_ASSIGN_OR_RETURN(auto train, OpenDataset(spec.dataset, Split::kTrain, spec.seed));
    HPTRAIN_ASSIGN_OR_RETURN(auto test, OpenDataset(spec.dataset, Split::kTest, spec.seed));
    if (StepsPerEpoch(train->size(), spec.global_batch_size) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("spec.globalBatchSize: ",
                                                     spec.global_batch_size, " is larger than the ",
                                                     train->size(), " training samples"));
    }
    HPTRAIN_ASSIGN_OR_RETURN(auto model,
                             CreateModel(spec.model, ModelShapeFor(*train), spec.seed));
    (void)test;
    (void)model;
  }
  if (!spec.checkpoint.path.empty()) {
    // Rank 0 writes it at the first interval or the end: a missing directory would fail the run
    // only then, after every worker trained up to it.
    const std::string dir = ParentDirectory(spec.checkpoint.path);
    if (!dir.empty() && !IsDirectory(dir)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.checkpoint.path: directory ", dir, " does not exist (create it, or put the ",
          "checkpoint in an existing directory), got \"", spec.checkpoint.path, "\""));
    }
  }
  if (spec.strategy.type == "mp2") {
    // The ps (and, in mode B, every worker) loads it at start: refuse a missing or foreign file
    // before any process starts.
    HPTRAIN_ASSIGN_OR_RETURN(auto predictor, ps::mp2::OpenPredictor(spec));
    (void)predictor;
  }
  return absl::OkStatus();
}

}  // namespace hptrain::train
