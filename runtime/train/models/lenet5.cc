// LeNet-5 as in the PyTorch tutorials (and examples/export_torchscript.py, which must stay in
// step: same layers, same names, same padding rule).
#include "absl/strings/str_cat.h"
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train::internal {
namespace {

namespace nn = torch::nn;

class LeNet5 final : public ZooNet {
 public:
  // conv1 pads inputs smaller than 32x32 up to 32 (28x28 -> padding 2), so the classic
  // 16x5x5 feature map comes out for MNIST-sized and CIFAR-sized inputs alike.
  explicit LeNet5(const ModelShape& s) {
    const int64_t side = std::min(s.height, s.width);
    const int64_t pad = side < 32 ? (32 - side + 1) / 2 : 0;
    const int64_t h = ((s.height + 2 * pad - 4) / 2 - 4) / 2;
    const int64_t w = ((s.width + 2 * pad - 4) / 2 - 4) / 2;
    conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(s.channels, 6, 5).padding(pad)));
    conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(6, 16, 5)));
    fc1_ = register_module("fc1", nn::Linear(16 * h * w, 120));
    fc2_ = register_module("fc2", nn::Linear(120, 84));
    fc3_ = register_module("fc3", nn::Linear(84, s.num_classes));
  }

  bool gates_forward() const override { return true; }

  torch::Tensor forward(torch::Tensor x) override {
    Gate(0);
    x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
    Gate(1);
    x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);
    x = x.flatten(1);
    Gate(2);
    x = torch::relu(fc1_->forward(x));
    Gate(3);
    x = torch::relu(fc2_->forward(x));
    Gate(4);
    return fc3_->forward(x);
  }

 private:
  nn::Conv2d conv1_{nullptr};
  nn::Conv2d conv2_{nullptr};
  nn::Linear fc1_{nullptr};
  nn::Linear fc2_{nullptr};
  nn::Linear fc3_{nullptr};
};

}  // namespace

absl::StatusOr<std::shared_ptr<ZooNet>> NewLeNet5(const job::ModelSpec&, const ModelShape& s) {
  return std::make_shared<LeNet5>(s);
}

}  // namespace hptrain::train::internal
