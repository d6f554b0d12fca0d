// The per-element normalisation of MP²'s predictor input (docs/algorithms.md §1b, as WNN does it).
//
// A history x_1 .. x_K of one element (oldest first) becomes, with first = x_1 and
// scale = 2·(max − min) + 1e-8, the 2-channel signal the predictor reads:
//   values[k] = (x_k − first) / scale,   diffs[0] = 0, diffs[k] = values[k] − values[k − 1];
// the predictor returns a normalised change c ∈ (−1, 1) and the prediction is
//   x̂_{K+1} = x_K + c·scale.
// A constant history has scale 1e-8: every value is 0 and a prediction stays within 1e-8 of it.
#ifndef HPTRAIN_RUNTIME_PS_MP2_NORMALIZE_H_
#define HPTRAIN_RUNTIME_PS_MP2_NORMALIZE_H_

#include <algorithm>

namespace hptrain::ps::mp2 {

inline constexpr float kNormalisationEpsilon = 1e-8f;

struct Normalisation {
  float first = 0;
  float scale = kNormalisationEpsilon;
};

// Reads history[k · stride] for k < K; writes values[0, K) and diffs[0, K).
inline Normalisation Normalise(const float* history, int stride, int K, float* values,
                               float* diffs) {
  float lo = history[0], hi = history[0];
  for (int k = 1; k < K; ++k) {
    lo = std::min(lo, history[k * stride]);
    hi = std::max(hi, history[k * stride]);
  }
  Normalisation n{history[0], 2.0f * (hi - lo) + kNormalisationEpsilon};
  const float inverse = 1.0f / n.scale;
  for (int k = 0; k < K; ++k) {
    values[k] = (history[k * stride] - n.first) * inverse;
    diffs[k] = k == 0 ? 0.0f : values[k] - values[k - 1];
  }
  return n;
}

// The value a normalised quantity v stands for.
inline float Denormalise(const Normalisation& n, float v) { return n.first + v * n.scale; }

}  // namespace hptrain::ps::mp2

#endif  // HPTRAIN_RUNTIME_PS_MP2_NORMALIZE_H_
