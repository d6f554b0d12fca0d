// Per-element optimizer math shared by the CPU kernels and their CUDA twins, so both compute the
// same floating-point operations in the same order (PyTorch's torch.optim semantics).
#ifndef HPTRAIN_KERNELS_UPDATE_UPDATE_COMMON_H_
#define HPTRAIN_KERNELS_UPDATE_UPDATE_COMMON_H_

#include <cmath>

#include "kernels/common/host_device.h"

namespace hptrain::kernels {

// SGD with momentum, weight decay and optional Nesterov, as torch.optim.SGD (dampening 0):
//   d = g + wd·p;  buf = first ? d : momentum·buf + d;  d = nesterov ? d + momentum·buf : buf;
//   p -= lr·d
HPTRAIN_HOST_DEVICE void SgdElement(float& p, float g, float& buf, float lr, float momentum,
                                    float weight_decay, bool nesterov, bool first_step) {
  float d = g + weight_decay * p;
  if (momentum != 0.0f) {
    buf = first_step ? d : momentum * buf + d;
    d = nesterov ? d + momentum * buf : buf;
  }
  p = p - lr * d;
}

// Adam as torch.optim.Adam (L2 weight decay added to the gradient, bias-corrected moments).
HPTRAIN_HOST_DEVICE void AdamElement(float& p, float g, float& m, float& v, float lr, float beta1,
                                     float beta2, float eps, float weight_decay,
                                     float bias_correction1, float bias_correction2_sqrt) {
  g = g + weight_decay * p;
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  float denom = sqrtf(v) / bias_correction2_sqrt + eps;
  p = p - (lr / bias_correction1) * (m / denom);
}

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_UPDATE_UPDATE_COMMON_H_
