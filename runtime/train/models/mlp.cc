// Multi-layer perceptron. Layers live in a ModuleList named "layers" (parameter names
// "layers.0.weight", ...), as in examples/export_torchscript.py.
#include "absl/strings/str_cat.h"
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train::internal {
namespace {

namespace nn = torch::nn;

class Mlp final : public ZooNet {
 public:
  Mlp(const ModelShape& s, const std::vector<int>& hidden) {
    layers_ = register_module("layers", nn::ModuleList());
    int64_t in = s.channels * s.height * s.width;
    for (int width : hidden) {
      linears_.push_back(nn::Linear(in, width));
      in = width;
    }
    linears_.push_back(nn::Linear(in, s.num_classes));
    for (const nn::Linear& l : linears_) layers_->push_back(l);
  }

  bool gates_forward() const override { return true; }

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    for (size_t i = 0; i < linears_.size(); ++i) {
      Gate(static_cast<int>(i));
      x = linears_[i]->forward(x);
      if (i + 1 < linears_.size()) x = torch::relu(x);
    }
    return x;
  }

 private:
  nn::ModuleList layers_{nullptr};
  std::vector<nn::Linear> linears_;  // the same modules as layers_, typed
};

}  // namespace

absl::StatusOr<std::shared_ptr<ZooNet>> NewMlp(const job::ModelSpec& spec, const ModelShape& s) {
  const std::vector<int> hidden = spec.hidden.empty() ? std::vector<int>{256, 128} : spec.hidden;
  for (int width : hidden) {
    if (width <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("hidden width ", width, " is not positive"));
    }
  }
  return std::make_shared<Mlp>(s, hidden);
}

}  // namespace hptrain::train::internal
