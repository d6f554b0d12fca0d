// The model's buffers (BatchNorm running statistics) as one flat float vector, and their average
// over the workers. Parameters travel through the strategies; buffers are averaged here at every
// evaluation, and after every step at which a strategy synchronised the models
// (docs/algorithms.md §3b, §1b).
#ifndef HPTRAIN_RUNTIME_TRAIN_MODEL_BUFFERS_H_
#define HPTRAIN_RUNTIME_TRAIN_MODEL_BUFFERS_H_

#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

// Total number of floats in the model's buffers.
size_t BufferElements(const Model& model);

// The model's buffers, in model.buffers() order, copied (to the host, as float) into `*flat`.
void FlattenBuffers(const Model& model, std::vector<float>* flat);

// Writes `flat` (FlattenBuffers' layout, BufferElements(model) floats) times `scale` back into
// the model's buffers, on whatever device they live. Internal on a libtorch error.
absl::Status RestoreBuffers(Model& model, const std::vector<float>& flat, float scale);

// Every worker's buffers replaced by their mean over `comm` (one all-reduce). Nothing to do for a
// model without buffers or a single worker. Every rank must call it at the same point.
absl::Status AverageBuffers(Model& model, comm::Communicator& comm);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_MODEL_BUFFERS_H_
