// The TorchScript source of each zoo model's forward in evaluation mode (BatchNorm with its
// running statistics, dropout off), for `hptrain export` (model_export.h). Each function computes
// what the C++ network in runtime/train/models/<name>.cc computes, with the same libtorch
// operators in the same order, so the two agree bit for bit on the CPU
// (tests/runtime/train/export/model_export_test.cc holds them to it; a change to a network's
// forward must be made here too).
//
// The source is one `def forward(self, x: Tensor) -> Tensor` method of a module whose parameters
// and buffers sit under the C++ model's dotted names ("layer1.0.bn1.running_mean" is the buffer
// running_mean of submodule "bn1" of submodule "0" of submodule "layer1"); a numeric name is
// reached as getattr(module, "0"), as TorchScript writes nn.Sequential's children.
//
// Pure string building; thread-safe.
#ifndef HPTRAIN_RUNTIME_TRAIN_EXPORT_ZOO_SCRIPT_H_
#define HPTRAIN_RUNTIME_TRAIN_EXPORT_ZOO_SCRIPT_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

// The forward method of zoo model spec.name built for `shape`. InvalidArgument for a name that
// is not a zoo model (or a TorchScript model: its own forward is kept).
absl::StatusOr<std::string> ZooForwardScript(const job::ModelSpec& spec, const ModelShape& shape);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_EXPORT_ZOO_SCRIPT_H_
