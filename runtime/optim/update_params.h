// Internal to runtime/optim: the kernel parameters of one step, shared by the host route
// (optimizer.cc) and the device route (device_optimizer_cuda.cc) so that both hand the same
// values to the same kernels (kernels/update and its CUDA twins).
#ifndef HPTRAIN_RUNTIME_OPTIM_UPDATE_PARAMS_H_
#define HPTRAIN_RUNTIME_OPTIM_UPDATE_PARAMS_H_

#include <cstdint>

#include "kernels/update/update.h"
#include "runtime/optim/optimizer_options.h"

namespace hptrain::optim::internal {

// SGD at rate `lr` with weight decay weight_decay_scale·λ; `first_step`: the momentum buffer
// starts here (torch: buf = d).
kernels::SgdParams SgdParamsFor(const OptimizerOptions& options, double lr,
                                double weight_decay_scale, bool first_step);
// Adam at rate `lr`, step `step` (1-based, for the bias corrections).
kernels::AdamParams AdamParamsFor(const OptimizerOptions& options, double lr,
                                  double weight_decay_scale, int64_t step);

}  // namespace hptrain::optim::internal

#endif  // HPTRAIN_RUNTIME_OPTIM_UPDATE_PARAMS_H_
