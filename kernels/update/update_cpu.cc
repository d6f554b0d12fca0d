// CPU reference of update.h. The loops are simple enough for GCC to vectorise at -O2/-O3 (the
// branches on nesterov/first_step are loop-invariant and get unswitched).
#include <cmath>

#include "kernels/update/update.h"
#include "kernels/update/update_common.h"

namespace hptrain::kernels {

void SgdStep(float* params, const float* grads, float* momentum_buf, size_t n,
             const SgdParams& p) {
  for (size_t i = 0; i < n; ++i) {
    float unused = 0.0f;
    float& buf = p.momentum != 0.0f ? momentum_buf[i] : unused;
    SgdElement(params[i], grads[i], buf, p.lr, p.momentum, p.weight_decay, p.nesterov,
               p.first_step);
  }
}

void AdamStep(float* params, const float* grads, float* m, float* v, size_t n,
              const AdamParams& p) {
  const float bc1 = 1.0f - std::pow(p.beta1, static_cast<float>(p.step));
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(p.beta2, static_cast<float>(p.step)));
  for (size_t i = 0; i < n; ++i) {
    AdamElement(params[i], grads[i], m[i], v[i], p.lr, p.beta1, p.beta2, p.eps, p.weight_decay,
                bc1, bc2_sqrt);
  }
}

void Scale(float* data, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i) data[i] *= factor;
}

void AddAndClear(float* residual, float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    x[i] += residual[i];
    residual[i] = 0.0f;
  }
}

}  // namespace hptrain::kernels
