// MP²'s snapshot dataset (docs/algorithms.md §1b "DATASET", layer-wise): parameter histories recorded
// from an ordinary training run (`hptrain mp2 collect`, rank 0 after every step), from which
// `hptrain mp2 train` draws (K past values → next value) examples and on which it evaluates
// candidate predictors.
//
// Two kinds of records, both at the cadence `every` (T_h steps):
//   traces   for every predicted tensor (more than kMaxDenseElements elements), a fixed random
//            sample of `samples` of its elements (all of them when it is smaller), recorded at
//            every recorded round: the regression examples;
//   windows  every `window_every` recorded rounds, `window_length` consecutive full snapshots of
//            every parameter: the models on which candidates are judged by the accuracy of the
//            network that uses their predictions (prediction-result-based selection).
//
// File (little-endian), version 1:
//   "HPMP2DAT" (8 bytes), u32 version = 1, u32 length + JSON header (model, dataset, seed,
//   parameters, history, every, samples, window_length, window_every, tensors: [{offset, size}],
//   rounds, windows: [first_round]), then the sample indices of every tensor (i32, tensors in
//   order, possibly none), then the traces (rounds × Σ samples floats, round-major, tensors in
//   order), then the windows (window_length × parameters floats each), then u32 CRC-32 (zlib) of
//   every byte before it.
// Loading validates the magic, version, header fields against each other, the lengths and the
// CRC: a truncated, corrupt or foreign file is refused with one line naming the file and the
// problem. Saving is atomic (runtime/base/atomic_file.h).
#ifndef HPTRAIN_RUNTIME_PS_MP2_DATASET_H_
#define HPTRAIN_RUNTIME_PS_MP2_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::ps::mp2 {

struct DatasetTensor {
  int64_t offset = 0;           // in the flat parameters
  int64_t size = 0;
  std::vector<int32_t> sample;  // sorted element indices traced; empty for dense tensors
};

struct SnapshotWindow {
  int64_t first_round = 0;                   // recorded-round index of snapshots[0]
  std::vector<std::vector<float>> snapshots;  // window_length consecutive, each `parameters`
};

struct SnapshotDataset {
  std::string model;    // spec.model.name
  std::string dataset;  // spec.dataset.name
  uint64_t seed = 0;    // spec.seed of the run recorded
  int64_t parameters = 0;
  int history = 5;       // K the examples are cut for (a reader may cut others)
  int every = 1;         // steps between recorded rounds (T_h)
  int samples = 1024;    // per predicted tensor
  int window_length = 15;
  int window_every = 200;
  std::vector<DatasetTensor> tensors;  // every model tensor, in flat order
  int64_t rounds = 0;
  std::vector<float> traces;  // rounds × TraceWidth(), round-major
  std::vector<SnapshotWindow> windows;

  // Σ sample sizes: the values per recorded round.
  int64_t TraceWidth() const;
};

absl::StatusOr<SnapshotDataset> LoadSnapshotDataset(const std::string& path);
absl::Status SaveSnapshotDataset(const std::string& path, const SnapshotDataset& dataset);

struct RecorderOptions {
  std::string path;
  std::string model;
  std::string dataset;
  uint64_t seed = 0;
  int history = 5;
  int every = 1;
  int samples = 1024;
  int window_length = 15;
  int window_every = 200;
};

// Records a run into a SnapshotDataset. Record() is called after every step with the flat
// parameters; Save() writes what was recorded so far (atomically: a reader, or a run killed while
// saving, never sees half a file), and may be called as often as wanted.
class SnapshotRecorder {
 public:
  // tensor_sizes: the model tensors in flat order. The traced samples are drawn from `seed`.
  SnapshotRecorder(RecorderOptions options, const std::vector<int64_t>& tensor_sizes);
  // `steps_done` ≥ 1: the global steps completed; records when steps_done % every == 0.
  void Record(int64_t steps_done, const float* parameters);
  absl::Status Save() const;
  const SnapshotDataset& dataset() const { return data_; }

 private:
  RecorderOptions options_;
  SnapshotDataset data_;
  int64_t open_window_ = -1;  // index into data_.windows of the window being filled
};

}  // namespace hptrain::ps::mp2

#endif  // HPTRAIN_RUNTIME_PS_MP2_DATASET_H_
