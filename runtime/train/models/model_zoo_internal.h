// Private to runtime/train/models: the base class of the C++ zoo networks and each network's
// factory. model.cc holds the registry that maps names to these factories (an explicit table:
// self-registering statics would be dropped by the linker from a static library).
#ifndef HPTRAIN_RUNTIME_TRAIN_MODELS_MODEL_ZOO_INTERNAL_H_
#define HPTRAIN_RUNTIME_TRAIN_MODELS_MODEL_ZOO_INTERNAL_H_

#include <torch/torch.h>

#include <memory>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/models/model.h"

namespace hptrain::train::internal {

// A zoo network: a C++ frontend module with a single-tensor forward.
class ZooNet : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;

  // Networks that call Gate(layer) before each layer of Model::parameter_layers() in forward.
  virtual bool gates_forward() const { return false; }
  void set_gate(std::function<void(int)> gate) { gate_ = std::move(gate); }

 protected:
  void Gate(int layer) const {
    if (gate_) gate_(layer);
  }

 private:
  std::function<void(int)> gate_;
};

// Builds a network for `shape`; may throw c10::Error (CreateModel catches it). InvalidArgument
// for options or shapes the network cannot take.
using ZooFactory = absl::StatusOr<std::shared_ptr<ZooNet>> (*)(const job::ModelSpec& spec,
                                                               const ModelShape& shape);

absl::StatusOr<std::shared_ptr<ZooNet>> NewLeNet5(const job::ModelSpec&, const ModelShape&);
absl::StatusOr<std::shared_ptr<ZooNet>> NewMlp(const job::ModelSpec&, const ModelShape&);
absl::StatusOr<std::shared_ptr<ZooNet>> NewResNet20(const job::ModelSpec&, const ModelShape&);
absl::StatusOr<std::shared_ptr<ZooNet>> NewVgg11(const job::ModelSpec&, const ModelShape&);
absl::StatusOr<std::shared_ptr<ZooNet>> NewAlexNet(const job::ModelSpec&, const ModelShape&);

// Wraps a zoo network as a Model.
std::unique_ptr<Model> WrapZooNet(std::string name, std::shared_ptr<ZooNet> net);

// Loads a TorchScript module (torchscript_model.cc).
absl::StatusOr<std::unique_ptr<Model>> LoadTorchScript(const std::string& path);

// The one line of a caught exception's message that says what went wrong, without libtorch's
// backtrace, dispatch-key lists or TorchScript traceback.
std::string ExceptionMessage(const std::exception& e);

}  // namespace hptrain::train::internal

#endif  // HPTRAIN_RUNTIME_TRAIN_MODELS_MODEL_ZOO_INTERNAL_H_
