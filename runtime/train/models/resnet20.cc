// ResNet-20 for CIFAR (He et al. 2016, section 4.2): conv 3x3 16, then 3 stages of 3 basic blocks
// with 16, 32, 64 channels (stride 2 at the first block of stages 2 and 3), global average pool,
// linear. Shortcuts are option A, as in the paper's CIFAR experiments: identity, and where the
// shape changes, stride-2 subsampling plus zero-padding of the new channels. Option A adds no
// parameters: 269,722 in all for 3x32x32 / 10 classes (the paper's 0.27M).
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train::internal {
namespace {

namespace nn = torch::nn;

nn::Conv2d Conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

class BasicBlock final : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : stride_(stride), pad_front_((out - in) / 2), pad_back_(out - in - (out - in) / 2) {
    conv1_ = register_module("conv1", Conv3x3(in, out, stride));
    bn1_ = register_module("bn1", nn::BatchNorm2d(out));
    conv2_ = register_module("conv2", Conv3x3(out, out, 1));
    bn2_ = register_module("bn2", nn::BatchNorm2d(out));
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor out = torch::relu(bn1_->forward(conv1_->forward(x)));
    out = bn2_->forward(conv2_->forward(out));
    torch::Tensor shortcut = x;
    if (stride_ != 1) {
      shortcut =
          shortcut.slice(2, 0, shortcut.size(2), stride_).slice(3, 0, shortcut.size(3), stride_);
    }
    if (pad_front_ + pad_back_ > 0) {
      shortcut = torch::constant_pad_nd(shortcut, {0, 0, 0, 0, pad_front_, pad_back_}, 0);
    }
    return torch::relu(out + shortcut);
  }

 private:
  int64_t stride_;
  int64_t pad_front_;
  int64_t pad_back_;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  nn::Conv2d conv2_{nullptr};
  nn::BatchNorm2d bn2_{nullptr};
};

class ResNet20 final : public ZooNet {
 public:
  explicit ResNet20(const ModelShape& s) {
    conv1_ = register_module("conv1", Conv3x3(s.channels, 16, 1));
    bn1_ = register_module("bn1", nn::BatchNorm2d(16));
    int64_t in = 16;
    const int64_t widths[] = {16, 32, 64};
    for (int stage = 0; stage < 3; ++stage) {
      nn::Sequential layer;
      for (int block = 0; block < 3; ++block) {
        const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
        layer->push_back(std::make_shared<BasicBlock>(in, widths[stage], stride));
        in = widths[stage];
      }
      stages_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc_ = register_module("fc", nn::Linear(64, s.num_classes));
    torch::NoGradGuard no_grad;
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<nn::Conv2d>()) nn::init::kaiming_normal_(conv->weight);
      if (auto* linear = module->as<nn::Linear>()) nn::init::kaiming_normal_(linear->weight);
    }
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn1_->forward(conv1_->forward(x)));
    for (nn::Sequential& stage : stages_) x = stage->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_->forward(x);
  }

 private:
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<nn::Sequential> stages_;
  nn::Linear fc_{nullptr};
};

}  // namespace

absl::StatusOr<std::shared_ptr<ZooNet>> NewResNet20(const job::ModelSpec&, const ModelShape& s) {
  return std::make_shared<ResNet20>(s);
}

}  // namespace hptrain::train::internal
