// runtime/optim against libtorch's torch::optim (SGD plain, with momentum, Nesterov and weight
// decay; Adam with and without weight decay) on random tensors over several steps at changing
// learning rates: the parameters and the optimizer state agree within 1e-6 relative. They cannot
// agree bit for bit: torch's vectorised kernels may fuse multiply-adds and compute Adam's bias
// corrections in double, where kernels/update rounds each operation in float.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/optimizer.h"

namespace hptrain::optim {
namespace {

constexpr double kRelative = 1e-6;  // of the values' scale (MaxRelativeDifference)
// Adam's second moment v alone: kernels/update rounds β2 to float and takes 1 − β2 (and the bias
// correction 1 − β2^t) from that, 9.9998713e-4 for β2 = 0.999, where torch rounds 1 − β2 computed
// in double (1e-3): v differs by 1.3e-5 relative, systematically, while v / (1 − β2^t), and with
// it every parameter, agrees within kRelative (both sides use the same rounded β2 in both).
constexpr double kAdamSecondMoment = 2e-5;
constexpr int kSteps = 8;
// Two tensors of a model, as the flat buffer holds them one after the other.
const std::vector<int64_t> kSizes = {3000, 517};

double LearningRateAt(int step) { return 0.05 * (1.0 + 0.25 * std::cos(step)); }

// max |a − b| / max |b| over the elements: the difference relative to the values' scale (an
// element near zero, where a step nearly cancels a parameter, keeps the rounding of the larger
// terms it came from, so element-wise ratios there measure the cancellation, not the update).
// `where` names the largest difference, for the failure message.
double MaxRelativeDifference(const std::vector<float>& a, const torch::Tensor& b_tensor,
                             std::string* where) {
  torch::Tensor b = b_tensor.contiguous();
  const float* bp = b.data_ptr<float>();
  double difference = 0, scale = 0;
  size_t worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - bp[i]);
    if (d > difference) {
      difference = d;
      worst = i;
    }
    scale = std::max(scale, std::abs(static_cast<double>(bp[i])));
  }
  std::ostringstream text;
  text << "max |difference| " << difference << " at element " << worst << " (ours " << a[worst]
       << ", torch " << bp[worst] << "), max |torch| " << scale;
  *where = text.str();
  return scale > 0 ? difference / scale : difference;
}

// torch's state of parameter `p` (keyed by its TensorImpl's address, as torch::optim does).
template <typename State>
State& TorchState(torch::optim::Optimizer& opt, const torch::Tensor& p) {
  std::ostringstream key;
  key << p.unsafeGetTensorImpl();
  auto it = opt.state().find(key.str());
  EXPECT_NE(it, opt.state().end()) << "no torch state for a parameter";
  return static_cast<State&>(*it->second);
}

// The flat concatenation of `tensors`.
torch::Tensor Flat(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().reshape({-1}));
  return torch::cat(flat);
}

struct Case {
  const char* name;
  OptimizerOptions options;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class AgainstTorch : public ::testing::TestWithParam<Case> {};

TEST_P(AgainstTorch, ParametersAndStateAgreeOverSteps) {
  const OptimizerOptions& o = GetParam().options;
  torch::manual_seed(42);
  std::vector<torch::Tensor> params;
  for (int64_t n : kSizes) params.push_back(torch::randn({n}).requires_grad_(true));
  std::unique_ptr<torch::optim::Optimizer> torch_opt;
  if (o.type == OptimizerType::kAdam) {
    torch_opt =
        std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(LearningRateAt(0))
                                                         .betas({o.beta1, o.beta2})
                                                         .eps(o.eps)
                                                         .weight_decay(o.weight_decay));
  } else {
    torch_opt =
        std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(LearningRateAt(0))
                                                        .momentum(o.momentum)
                                                        .nesterov(o.nesterov)
                                                        .weight_decay(o.weight_decay));
  }
  const torch::Tensor start = Flat(params);
  std::vector<float> flat(start.data_ptr<float>(), start.data_ptr<float>() + start.numel());
  Optimizer ours(o, flat.size());

  for (int step = 0; step < kSteps; ++step) {
    const double lr = LearningRateAt(step);
    std::vector<torch::Tensor> grads;
    for (int64_t n : kSizes) grads.push_back(torch::randn({n}) * (0.5 + step));
    for (size_t t = 0; t < params.size(); ++t) params[t].mutable_grad() = grads[t].clone();
    for (auto& group : torch_opt->param_groups()) group.options().set_lr(lr);
    torch_opt->step();
    const torch::Tensor g = Flat(grads);
    ours.Step(flat.data(), g.data_ptr<float>(), lr);
  }

  std::string where;
  EXPECT_LE(MaxRelativeDifference(flat, Flat(params), &where), kRelative)
      << "parameters: " << where;
  EXPECT_EQ(ours.steps(), kSteps);
  if (o.type == OptimizerType::kAdam) {
    std::vector<torch::Tensor> m, v;
    for (const auto& p : params) {
      auto& s = TorchState<torch::optim::AdamParamState>(*torch_opt, p);
      m.push_back(s.exp_avg());
      v.push_back(s.exp_avg_sq());
    }
    EXPECT_LE(MaxRelativeDifference(*ours.StateVector("adam.m"), Flat(m), &where), kRelative)
        << "adam.m: " << where;
    EXPECT_LE(MaxRelativeDifference(*ours.StateVector("adam.v"), Flat(v), &where),
              kAdamSecondMoment)
        << "adam.v: " << where;
  } else if (o.momentum != 0) {
    std::vector<torch::Tensor> buffers;
    for (const auto& p : params) {
      buffers.push_back(TorchState<torch::optim::SGDParamState>(*torch_opt, p).momentum_buffer());
    }
    EXPECT_LE(MaxRelativeDifference(*ours.StateVector("momentum"), Flat(buffers), &where),
              kRelative)
        << "momentum: " << where;
  } else {
    EXPECT_TRUE(ours.state().empty());
  }
}

constexpr auto Sgd = OptimizerOptions::Sgd;
constexpr auto Adam = OptimizerOptions::Adam;

INSTANTIATE_TEST_SUITE_P(
    Optimizers, AgainstTorch,
    ::testing::Values(Case{"SgdPlain", Sgd(0, false, 0)}, Case{"SgdMomentum", Sgd(0.9, false, 0)},
                      Case{"SgdNesterov", Sgd(0.9, true, 0)},
                      Case{"SgdWeightDecay", Sgd(0, false, 1e-2)},
                      Case{"SgdMomentumNesterovWeightDecay", Sgd(0.9, true, 5e-4)},
                      Case{"Adam", Adam(0)}, Case{"AdamWeightDecay", Adam(1e-2)}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hptrain::optim
