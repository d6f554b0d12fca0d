// device_optimizer.h in a build without CUDA: no DeviceOptimizer can be made, so none of the
// other members is ever reached.
#include "runtime/optim/device_optimizer.h"

namespace hptrain::optim {
namespace {

absl::Status NoCuda() {
  return absl::UnimplementedError("device optimizer: this build of hptrain has no CUDA");
}

}  // namespace

DeviceOptimizer::DeviceOptimizer(const OptimizerOptions& options, size_t num_parameters, int device)
    : options_(options), n_(num_parameters), device_(device) {}

absl::StatusOr<std::unique_ptr<DeviceOptimizer>> DeviceOptimizer::Create(const OptimizerOptions&,
                                                                         size_t, int) {
  return NoCuda();
}
DeviceOptimizer::~DeviceOptimizer() = default;
absl::Status DeviceOptimizer::Step(float*, const float*, double, void*) { return NoCuda(); }
absl::Status DeviceOptimizer::CopyStateTo(Optimizer&, void*) const { return NoCuda(); }
absl::Status DeviceOptimizer::CopyStateFrom(Optimizer&, void*) { return NoCuda(); }

}  // namespace hptrain::optim
