// AlexNet adapted to 32x32 inputs (Krizhevsky et al. 2012 layout: five conv layers with
// 64-192-384-256-256 channels, three max pools, three FC layers with dropout), with 3x3 kernels,
// stride 1 and 2x2 pools in place of the 224x224 network's 11x11/stride-4 first layer; the
// classifier narrows to 4096 -> 1024 -> 512 -> classes. Pools use ceil mode so 28x28 inputs also
// end at 4x4. Dropout makes the training-mode forward random.
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train::internal {
namespace {

namespace nn = torch::nn;

nn::MaxPool2d Pool() { return nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2).ceil_mode(true)); }
nn::Conv2d Conv(int64_t in, int64_t out) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).padding(1));
}

class AlexNet final : public ZooNet {
 public:
  explicit AlexNet(const ModelShape& s) {
    // Three ceil-mode pools: 32 -> 16 -> 8 -> 4, 28 -> 14 -> 7 -> 4.
    const int64_t h = (((s.height + 1) / 2 + 1) / 2 + 1) / 2;
    const int64_t w = (((s.width + 1) / 2 + 1) / 2 + 1) / 2;
    features_ = register_module(
        "features", nn::Sequential(Conv(s.channels, 64), nn::ReLU(), Pool(), Conv(64, 192),
                                   nn::ReLU(), Pool(), Conv(192, 384), nn::ReLU(), Conv(384, 256),
                                   nn::ReLU(), Conv(256, 256), nn::ReLU(), Pool()));
    classifier_ = register_module(
        "classifier", nn::Sequential(nn::Dropout(0.5), nn::Linear(256 * h * w, 1024), nn::ReLU(),
                                     nn::Dropout(0.5), nn::Linear(1024, 512), nn::ReLU(),
                                     nn::Linear(512, s.num_classes)));
  }

  torch::Tensor forward(torch::Tensor x) override {
    return classifier_->forward(features_->forward(x).flatten(1));
  }

 private:
  nn::Sequential features_{nullptr};
  nn::Sequential classifier_{nullptr};
};

}  // namespace

absl::StatusOr<std::shared_ptr<ZooNet>> NewAlexNet(const job::ModelSpec&, const ModelShape& s) {
  return std::make_shared<AlexNet>(s);
}

}  // namespace hptrain::train::internal
