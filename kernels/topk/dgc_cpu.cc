// CPU reference of dgc.h.
//
// Vectorisation (GCC 12, -O3, -fopt-info-vec-optimized): the loops of DgcMomentumCorrection,
// SquaredNorm (four independent double lanes, so no reassociation is needed) and the scaling in
// ClipToNorm are vectorised; DgcMaskSelected is a scatter and stays scalar.
#include <cmath>
#include <cstdint>

#include "kernels/topk/dgc.h"
#include "kernels/topk/topk_common.h"

namespace hptrain::kernels {
namespace {

// Sum of squares in double: lane j sums the elements i ≡ j (mod 4), then (l0 + l1) + (l2 + l3),
// then the tail. Each square of an fp32 is exact in double.
double SquaredNorm(const float* g, int64_t n) {
  double lanes[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      const double x = g[i + j];
      lanes[j] += x * x;
    }
  }
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
  return sum;
}

}  // namespace

void DgcMomentumCorrection(const float* grad, int64_t n, float momentum, float* u, float* v) {
  for (int64_t i = 0; i < n; ++i) DgcMomentumElement(grad[i], momentum, u[i], v[i]);
}

void DgcMaskSelected(const int32_t* indices, int64_t k, float* u, float* v) {
  for (int64_t i = 0; i < k; ++i) {
    if (u != nullptr) u[indices[i]] = 0.0f;
    v[indices[i]] = 0.0f;
  }
}

float ClipToNorm(float* g, int64_t n, float max_norm) {
  const double norm = std::sqrt(SquaredNorm(g, n));
  const float coef = ClipCoefficient(norm, max_norm);
  if (coef < 1.0f) {
    for (int64_t i = 0; i < n; ++i) g[i] *= coef;
  }
  return static_cast<float>(norm);
}

}  // namespace hptrain::kernels
