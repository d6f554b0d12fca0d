// Names and order matter more than anything else here: predictor.h's file order is torch's
// registration order, so each module is registered in the order the flat layout lists it.
#include "runtime/train/mp2/predictor_net.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::train::mp2 {

namespace nn = torch::nn;

SqueezeExcitationImpl::SqueezeExcitationImpl(int64_t channels, int64_t reduction) {
  fc_a_ = register_module("fc_a", nn::Linear(channels, channels / reduction));
  fc_b_ = register_module("fc_b", nn::Linear(channels / reduction, channels));
}

torch::Tensor SqueezeExcitationImpl::forward(const torch::Tensor& x) {
  torch::Tensor s = x.mean(2);
  torch::Tensor a = torch::sigmoid(fc_b_->forward(torch::relu(fc_a_->forward(s))));
  return x * a.unsqueeze(2);
}

PredictorNetImpl::PredictorNetImpl(int history, int channels, int reduction)
    : history_(history), channels_(channels), reduction_(reduction) {
  conv1_ = register_module("conv1", nn::Conv1d(nn::Conv1dOptions(2, channels, 3).padding(1)));
  se1_ = register_module("se1", SqueezeExcitation(channels, reduction));
  conv2_ =
      register_module("conv2", nn::Conv1d(nn::Conv1dOptions(channels, channels, 3).padding(1)));
  se2_ = register_module("se2", SqueezeExcitation(channels, reduction));
  fc1_ = register_module("fc1", nn::Linear(int64_t{channels} * (history / 2), channels));
  fc2_ = register_module("fc2", nn::Linear(channels, 1));
}

torch::Tensor PredictorNetImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = se1_->forward(torch::relu(conv1_->forward(x)));
  h = se2_->forward(torch::relu(conv2_->forward(h)));
  // Floor mode, as predictor.h's flat pooling: an odd K drops the last position.
  h = torch::max_pool1d(h, 2).flatten(1);
  h = torch::relu(fc1_->forward(h));
  return torch::tanh(fc2_->forward(h)).squeeze(1);
}

absl::StatusOr<PredictorNet> NewPredictorNet(int history, int channels, int reduction) {
  // ValidatePredictor holds the architecture's rules; an empty predictor of the same shape
  // checks them in one place.
  HPTRAIN_RETURN_IF_ERROR(
      ps::mp2::ValidatePredictor(ps::mp2::EmptyPredictor(history, channels, reduction)));
  try {
    return PredictorNet(history, channels, reduction);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("predictor network: ", e.what()));
  }
}

ps::mp2::Predictor ToPredictor(const PredictorNet& net) {
  ps::mp2::Predictor predictor =
      ps::mp2::EmptyPredictor(net->history(), net->channels(), net->reduction());
  torch::NoGradGuard no_grad;
  auto params = net->named_parameters(/*recurse=*/true);
  for (ps::mp2::PredictorTensor& t : predictor.tensors) {
    // The constructor registers every name of PredictorShapes, so the lookup cannot miss.
    torch::Tensor p = params[t.name].detach().to(torch::kCPU, torch::kFloat32).contiguous();
    std::memcpy(t.values.data(), p.data_ptr<float>(), t.values.size() * sizeof(float));
  }
  return predictor;
}

absl::StatusOr<PredictorNet> FromPredictor(const ps::mp2::Predictor& predictor) {
  HPTRAIN_RETURN_IF_ERROR(ps::mp2::ValidatePredictor(predictor));
  HPTRAIN_ASSIGN_OR_RETURN(PredictorNet net, NewPredictorNet(predictor.history, predictor.channels,
                                                             predictor.reduction));
  try {
    torch::NoGradGuard no_grad;
    auto params = net->named_parameters(/*recurse=*/true);
    for (const ps::mp2::PredictorTensor& t : predictor.tensors) {
      torch::Tensor* p = params.find(t.name);
      if (p == nullptr || p->numel() != static_cast<int64_t>(t.values.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("predictor tensor ", t.name, " does not fit the network"));
      }
      torch::Tensor src =
          torch::from_blob(const_cast<float*>(t.values.data()), p->sizes(), torch::kFloat32);
      p->copy_(src);
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("loading predictor weights: ", e.what()));
  }
  return net;
}

}  // namespace hptrain::train::mp2
