#include "runtime/train/batch_loader.h"

#include <utility>

#include "runtime/base/status.h"

namespace hptrain::train {

absl::StatusOr<Batch> BatchLoader::Load(int64_t step, int64_t epoch,
                                        const std::vector<int64_t>& indices) {
  if (prefetched_step_ == step && prefetched_indices_ == indices) {
    prefetched_step_ = -1;
    return std::move(prefetched_);
  }
  prefetched_step_ = -1;  // loaded for another allocation: dropped
  HPTRAIN_ASSIGN_OR_RETURN(Batch batch, data_->Gather(indices, GatherOptions{epoch}));
  batch.inputs = flat_->Load(batch.inputs);
  batch.targets = flat_->Load(batch.targets);
  return batch;
}

void BatchLoader::Prefetch(int64_t step, int64_t epoch, std::vector<int64_t> indices) {
  absl::StatusOr<Batch> batch = data_->Gather(indices, GatherOptions{epoch});
  if (!batch.ok()) return;
  batch->inputs = flat_->Load(batch->inputs);
  batch->targets = flat_->Load(batch->targets);
  prefetched_step_ = step;
  prefetched_indices_ = std::move(indices);
  prefetched_ = *std::move(batch);
}

}  // namespace hptrain::train
