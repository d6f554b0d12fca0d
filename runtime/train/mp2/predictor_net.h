// PredictorNet: MP²'s predictor network (docs/algorithms.md §1b) as a libtorch module, for training.
// The architecture, the submodule names and the registration order are exactly those of
// runtime/ps/mp2/predictor.h, so named_parameters() lists PredictorShapes() in order and a trained
// net converts to the flat Predictor that the parameter server runs (and back) without renaming:
//   conv1 → ReLU → se1 (fc_a, fc_b) → conv2 → ReLU → se2 (fc_a, fc_b) → MaxPool1d(2) → flatten
//   → fc1 → ReLU → fc2 → tanh.
// forward() takes a batch [n, 2, K] (the normalised values, then their first differences,
// normalize.h) and returns the normalised changes [n]. On the same weights it agrees with
// PredictorRunner::Forward to float rounding.
//
// Thread-safety: a module is not thread-safe; nothing here throws except libtorch itself inside
// forward() (callers catch at their boundary).
#ifndef HPTRAIN_RUNTIME_TRAIN_MP2_PREDICTOR_NET_H_
#define HPTRAIN_RUNTIME_TRAIN_MP2_PREDICTOR_NET_H_

#include <torch/torch.h>

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/ps/mp2/predictor.h"

namespace hptrain::train::mp2 {

// Squeeze-and-excitation over the channels of [n, C, L]: the per-channel mean over L goes through
// fc_a (C → C/r) → ReLU → fc_b (C/r → C) → sigmoid and scales its channel.
class SqueezeExcitationImpl : public torch::nn::Module {
 public:
  SqueezeExcitationImpl(int64_t channels, int64_t reduction);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear fc_a_{nullptr};
  torch::nn::Linear fc_b_{nullptr};
};
TORCH_MODULE(SqueezeExcitation);

class PredictorNetImpl : public torch::nn::Module {
 public:
  // history K ≥ 2, channels C ≥ 1, reduction r ≥ 1 dividing C (ValidatePredictor's rules);
  // weights initialised by libtorch's defaults from its global generator.
  PredictorNetImpl(int history, int channels, int reduction);

  // x: [n, 2, K] float32 → [n] normalised changes in (−1, 1).
  torch::Tensor forward(const torch::Tensor& x);

  int history() const { return history_; }
  int channels() const { return channels_; }
  int reduction() const { return reduction_; }

 private:
  int history_;
  int channels_;
  int reduction_;
  torch::nn::Conv1d conv1_{nullptr};
  SqueezeExcitation se1_{nullptr};
  torch::nn::Conv1d conv2_{nullptr};
  SqueezeExcitation se2_{nullptr};
  torch::nn::Linear fc1_{nullptr};
  torch::nn::Linear fc2_{nullptr};
};
TORCH_MODULE(PredictorNet);

// A new net for the architecture; InvalidArgument for K < 2, C < 1, r < 1 or r not dividing C.
absl::StatusOr<PredictorNet> NewPredictorNet(int history, int channels, int reduction);

// The net's weights as a flat Predictor (copied to the CPU; metadata empty). Always valid.
ps::mp2::Predictor ToPredictor(const PredictorNet& net);

// A new CPU net holding `predictor`'s weights. InvalidArgument when the predictor is not valid
// (ValidatePredictor) or libtorch refuses a copy.
absl::StatusOr<PredictorNet> FromPredictor(const ps::mp2::Predictor& predictor);

}  // namespace hptrain::train::mp2

#endif  // HPTRAIN_RUNTIME_TRAIN_MP2_PREDICTOR_NET_H_
