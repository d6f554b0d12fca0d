// The MP² predictor network (docs/algorithms.md §1b) as flat weights, its inference on plain float
// buffers and its file. The PS and, in mode B, every worker run this same code on the same inputs,
// so their predictions are bit-identical: each element's forward pass is a fixed sequence of float
// operations, independent of batching and threads. Training is in runtime/train/mp2 (libtorch),
// which reads and writes these weights.
//
// Network, for one element (input: 2 channels × K, the normalised values and their first
// differences, normalize.h):
//   conv1  Conv1d(2→C, k=3, pad=1) → ReLU → se1 SE(C, r)
//   conv2  Conv1d(C→C, k=3, pad=1) → ReLU → se2 SE(C, r)
//   MaxPool1d(2) (floor: K/2 positions) → flatten (channel-major, as torch) → fc1 FC(C·⌊K/2⌋→C)
//   → ReLU → fc2 FC(C→1) → tanh: the normalised change.
//   SE(C, r): s = mean over length; a = sigmoid(fc_b(ReLU(fc_a(s)))), fc_a: C→C/r, fc_b: C/r→C;
//   output = input · a, per channel.
// Weights are named and shaped as torch::nn modules store them (row-major):
//   conv1.weight [C,2,3]  conv1.bias [C]   se1.fc_a.weight [C/r,C] se1.fc_a.bias [C/r]
//   se1.fc_b.weight [C,C/r] se1.fc_b.bias [C]   conv2.weight [C,C,3] conv2.bias [C]
//   se2.fc_a.weight ... se2.fc_b.bias (as se1)   fc1.weight [C,C·⌊K/2⌋] fc1.bias [C]
//   fc2.weight [1,C] fc2.bias [1]
//
// File (little-endian), version 1:
//   "HPMP2PRD" (8 bytes), u32 version = 1, u32 history K, u32 channels C, u32 reduction r,
//   u32 metadata length m, m bytes of metadata (UTF-8 JSON: how the predictor was made),
//   u32 tensor count, then per tensor in the order above: u32 name length, name, u32 rank,
//   rank × u32 dims, the float32 values; then u32 CRC-32 (zlib) of every byte before it.
// Loading checks all of it against the architecture the header declares, and a file for another
// architecture (K, C, r, names or shapes) or a truncated, corrupt or foreign file is refused
// with one line naming the file and the problem.
#ifndef HPTRAIN_RUNTIME_PS_MP2_PREDICTOR_H_
#define HPTRAIN_RUNTIME_PS_MP2_PREDICTOR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::ps::mp2 {

inline constexpr int kDefaultHistory = 5;
inline constexpr int kDefaultChannels = 32;
inline constexpr int kDefaultReduction = 4;

struct PredictorTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // product of shape
};

struct Predictor {
  int history = kDefaultHistory;      // K ≥ 2
  int channels = kDefaultChannels;    // C ≥ 1
  int reduction = kDefaultReduction;  // r ≥ 1, divides C
  std::string metadata;               // JSON text; free-form
  std::vector<PredictorTensor> tensors;  // exactly PredictorShapes(...) in that order
};

// The tensors' names and shapes, in file order, for an architecture.
std::vector<std::pair<std::string, std::vector<int64_t>>> PredictorShapes(int history,
                                                                          int channels,
                                                                          int reduction);

// A predictor with every tensor present and zero-filled (for training code to fill in).
Predictor EmptyPredictor(int history, int channels, int reduction);

// InvalidArgument when K, C, r or a tensor's name, shape or value count disagree.
absl::Status ValidatePredictor(const Predictor& predictor);

absl::StatusOr<Predictor> LoadPredictor(const std::string& path);
// Written atomically (runtime/base/atomic_file.h): an existing file is replaced whole or kept.
absl::Status SavePredictor(const std::string& path, const Predictor& predictor);

// Inference over n elements. `histories` holds n sequences of K raw values, element-major
// (histories[e·K + k], oldest first); out[e] = the predicted next value x̂ (normalize.h).
// Deterministic: out[e] depends only on element e's history and the weights. Uses up to
// `threads` threads (1: the calling thread only).
// Predict is virtual so that tests can stand in a slow or gated predictor.
class PredictorRunner {
 public:
  explicit PredictorRunner(const Predictor& predictor);  // must be valid
  virtual ~PredictorRunner() = default;
  int history() const;
  virtual void Predict(const float* histories, int64_t n, float* out, int threads = 1) const;
  // The normalised change for one element's 2×K input (values then diffs); for tests.
  float Forward(const float* values, const float* diffs) const;

 private:
  Predictor p_;
  // Pointers into p_'s tensors, in the order of PredictorShapes.
  std::vector<const float*> w_;
};

}  // namespace hptrain::ps::mp2

#endif  // HPTRAIN_RUNTIME_PS_MP2_PREDICTOR_H_
