// Model: the network a worker trains, behind one interface whether it comes from the built-in zoo
// (libtorch C++ frontend modules) or from a TorchScript file exported from Python.
//
// Zoo (spec.name):
//   lenet5    LeNet-5 (LeCun et al. 1998) as in the PyTorch tutorials: 61,706 parameters for
//             1x28x28 inputs and 10 classes. Inputs smaller than 32x32 are zero-padded in conv1
//             so the flattened features are always 16x5x5 for 28x28 and 32x32 inputs.
//   mlp       flatten -> spec.hidden widths (default {256, 128}) with ReLU -> classes.
//   resnet20  He et al. 2016 CIFAR ResNet: 3 stages x 3 basic blocks, 16/32/64 channels, BN,
//             option-A shortcuts (parameter-free: stride-2 subsampling + zero channel padding),
//             Kaiming-normal init; 269,722 parameters for 3x32x32 / 10 classes.
//   vgg11     VGG-11 with BatchNorm, CIFAR variant: 8 conv layers, classifier 512 -> classes.
//   alexnet   AlexNet adapted to 32x32: 5 conv layers (3x3), 3 FC layers (4096-1024-512-classes)
//             with dropout 0.5: its forward in training mode is random.
// Pools use ceil mode in vgg11 and alexnet so 28x28 inputs work as well as 32x32.
//
// Parameter and buffer order is the module's registration order (depth-first), the same in every
// process and the same as PyTorch's named_parameters() for the equivalent Python module; the
// communicator and checkpoints rely on it.
//
// Errors: nothing here throws. Every libtorch call that can throw is caught and returned as a
// Status. Thread-safety: a Model is not thread-safe; use one per thread.
#ifndef HPTRAIN_RUNTIME_TRAIN_MODELS_MODEL_H_
#define HPTRAIN_RUNTIME_TRAIN_MODELS_MODEL_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"

namespace hptrain::train {

// The inputs a model is built for: one sample is channels x height x width.
struct ModelShape {
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int num_classes = 10;
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // "lenet5", ... for zoo models; the file path for TorchScript models.
  const std::string& name() const { return name_; }

  // Returns the logits [n, num_classes] for inputs [n, C, H, W] on the model's device, recording
  // autograd history when grad mode is on. InvalidArgument (with libtorch's message) if the
  // module rejects the input.
  virtual absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input) = 0;

  // Trainable parameters in registration order; the tensors are the model's own (handles, not
  // copies), so their .grad() and in-place updates act on the model. Stay valid across to().
  virtual std::vector<torch::Tensor> parameters() const = 0;
  // Dotted names of parameters(), same order ("conv1.weight", "layer1.0.bn1.bias", ...).
  virtual std::vector<std::string> parameter_names() const = 0;

  // Floating-point buffers (BatchNorm running_mean / running_var) in registration order, names
  // beside them. Integer buffers (BatchNorm's num_batches_tracked) are left out: they are
  // bookkeeping that no strategy averages.
  virtual std::vector<torch::Tensor> buffers() const = 0;
  virtual std::vector<std::string> buffer_names() const = 0;

  // Training mode (BatchNorm batch statistics, dropout) or evaluation mode.
  virtual void train(bool on) = 0;
  virtual bool is_training() const = 0;

  // Moves parameters and buffers to `device` in place. Internal on a libtorch error (e.g. no
  // CUDA); the model is unchanged then.
  virtual absl::Status to(const torch::Device& device) = 0;

  // Total number of parameter elements.
  int64_t num_parameters() const;

  // The layer of each parameter, for the priority scheduler: the parameters of one module (the
  // name up to its last dot: "conv1", "layer1.0.bn1") form one layer, numbered from 0 in
  // registration order, which is forward order for the zoo models.
  std::vector<int> parameter_layers() const;

  // Models whose forward calls the gate before each layer (numbered as in parameter_layers())
  // return true here; the trainer then lets each layer wait only for its own update (the
  // priority scheduler). Others get no calls, and the trainer waits for the whole update first.
  virtual bool gates_forward() const { return false; }
  virtual void set_forward_gate(std::function<void(int layer)> gate) { (void)gate; }

  // TorchScript models: whether the module has a method `name` besides forward (a task's loss or
  // metric, task.h). Zoo models have none.
  virtual bool HasMethod(const std::string& name) const {
    (void)name;
    return false;
  }
  // Calls that method with `args` (autograd history recorded when grad mode is on) and returns
  // its tensor. NotFound for a model without it; InvalidArgument (with libtorch's message) when
  // the call fails or returns something else than a tensor.
  virtual absl::StatusOr<torch::Tensor> CallMethod(const std::string& name,
                                                   const std::vector<torch::Tensor>& args) {
    (void)args;
    return absl::NotFoundError(name_ + " has no method " + name);
  }

 protected:
  explicit Model(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// Names of the zoo models, in registry order.
std::vector<std::string> ZooModelNames();

// Builds the model the spec names, on the CPU, in training mode.
//   spec.torchscript set: loads that file (spec.name must be empty); NotFound if it does not
//     exist, InvalidArgument "PATH: not a TorchScript module: ..." if it cannot be loaded.
//   spec.name set: builds the zoo model for `shape` after torch::manual_seed(seed), so every
//     process with the same seed gets identical initial weights. InvalidArgument for an unknown
//     name or a shape the model cannot take.
// Either way the model is checked with one forward pass on a zero batch of `shape` (evaluation
// mode, no grad) and must return [1, shape.num_classes] logits, else InvalidArgument.
// Construction re-seeds libtorch's global CPU generator; concurrent CreateModel calls are
// serialized, but other threads drawing random numbers meanwhile would make weights differ.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(const job::ModelSpec& spec,
                                                   const ModelShape& shape, uint64_t seed);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_MODELS_MODEL_H_
