#include "runtime/sync/gradient_reducer.h"

#include "kernels/update/update.h"
#include "runtime/sync/device/device_scale.h"

namespace hptrain::sync {

std::shared_ptr<comm::Work> SummingReducer::Reduce(const StepInfo& step, int bucket,
                                                   const comm::BufferRef& gradients) {
  return comm::Work::Then(ReduceSumAsync(step, bucket, gradients),
                          [step, gradients] { return DivideByGlobalBatch(step, gradients); });
}

std::shared_ptr<comm::Work> SummingReducer::ReduceSumAsync(const StepInfo& step, int bucket,
                                                           const comm::BufferRef& gradients) {
  return comm::Work::Done(
      ReduceSum(step, bucket, absl::MakeSpan(gradients.floats(), gradients.count)));
}

absl::Status DivideByGlobalBatch(const StepInfo& step, const comm::BufferRef& gradients) {
  const float inverse = 1.0f / static_cast<float>(step.global_batch);
  if (gradients.location == comm::Location::kDevice) {
    return ScaleOnDevice(gradients.floats(), gradients.count, inverse, gradients.stream);
  }
  kernels::Scale(gradients.floats(), gradients.count, inverse);
  return absl::OkStatus();
}

}  // namespace hptrain::sync
