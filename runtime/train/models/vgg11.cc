// VGG-11 with BatchNorm, CIFAR variant (configuration "A" of Simonyan & Zisserman 2015 with
// BN after every conv, the 4096-wide classifier replaced by one linear layer 512 -> classes,
// as in the common CIFAR reference implementations). Max pools use ceil mode so that 28x28
// inputs reach 1x1 after the five pools just like 32x32 ones.
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train::internal {
namespace {

namespace nn = torch::nn;

constexpr int kPool = 0;
constexpr int kConfig[] = {64,  kPool, 128,   kPool, 256, 256,  kPool,
                           512, 512,   kPool, 512,   512, kPool};

class Vgg11 final : public ZooNet {
 public:
  explicit Vgg11(const ModelShape& s) {
    nn::Sequential features;
    int64_t in = s.channels;
    int64_t h = s.height;
    int64_t w = s.width;
    for (int out : kConfig) {
      if (out == kPool) {
        features->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2).ceil_mode(true)));
        h = (h + 1) / 2;
        w = (w + 1) / 2;
        continue;
      }
      features->push_back(nn::Conv2d(nn::Conv2dOptions(in, out, 3).padding(1)));
      features->push_back(nn::BatchNorm2d(out));
      features->push_back(nn::ReLU());
      in = out;
    }
    features_ = register_module("features", features);
    classifier_ = register_module("classifier", nn::Linear(in * h * w, s.num_classes));
  }

  torch::Tensor forward(torch::Tensor x) override {
    return classifier_->forward(features_->forward(x).flatten(1));
  }

 private:
  nn::Sequential features_{nullptr};
  nn::Linear classifier_{nullptr};
};

}  // namespace

absl::StatusOr<std::shared_ptr<ZooNet>> NewVgg11(const job::ModelSpec&, const ModelShape& s) {
  return std::make_shared<Vgg11>(s);
}

}  // namespace hptrain::train::internal
