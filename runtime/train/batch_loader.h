// BatchLoader: this worker's batch of each step, gathered from the training set and moved to the
// training device (flat_model.h: from pinned memory, asynchronously, on a GPU). On the device path
// the trainer loads the next step's batch while the GPU still runs this step's backward; a
// prefetched batch is used only by the step and the indices it was loaded for (an allocation
// that changed in between drops it). Hint() passes the next step's indices to the data set's
// source before this step computes, so a decoding source works ahead on every path.
#ifndef HPTRAIN_RUNTIME_TRAIN_BATCH_LOADER_H_
#define HPTRAIN_RUNTIME_TRAIN_BATCH_LOADER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/flat_model.h"

namespace hptrain::train {

class BatchLoader {
 public:
  // Neither pointer is owned; both must outlive the loader.
  BatchLoader(const Dataset* data, const FlatModel* flat) : data_(data), flat_(flat) {}

  // The samples `indices` as the batch of global step `step` in `epoch` (augmentation draws from
  // the epoch). Fewer rows than indices under spec.dataset.skipCorrupt (Batch::dropped).
  absl::StatusOr<Batch> Load(int64_t step, int64_t epoch, const std::vector<int64_t>& indices);
  // Loads `indices` now for global step `step`. Best effort: an error leaves it to Load.
  void Prefetch(int64_t step, int64_t epoch, std::vector<int64_t> indices);
  // A hint that `indices` are loaded next (Dataset::Prefetch); returns at once.
  void Hint(const std::vector<int64_t>& indices) const { data_->Prefetch(indices); }

 private:
  const Dataset* data_;
  const FlatModel* flat_;
  int64_t prefetched_step_ = -1;  // none
  std::vector<int64_t> prefetched_indices_;
  Batch prefetched_;
};

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_BATCH_LOADER_H_
