// PredictorNet against the flat predictor, the trace examples, candidate training on synthetic
// traces and the window replay of the linear and zero-change methods.
#include <torch/torch.h>

#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "gtest/gtest.h"
#include "runtime/ps/mp2/normalize.h"
#include "runtime/train/models/model.h"
#include "runtime/train/mp2/model_evaluator.h"
#include "runtime/train/mp2/predictor_net.h"
#include "runtime/train/mp2/predictor_training.h"
#include "runtime/train/mp2/window_replay.h"

namespace hptrain::train::mp2 {
namespace {

using ps::mp2::Predictor;
using ps::mp2::PredictorRunner;
using ps::mp2::SnapshotDataset;

class PredictorNetTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(PredictorNetTest, NamedParametersArePredictorShapes) {
  const auto [K, C, r] = GetParam();
  auto net = NewPredictorNet(K, C, r);
  ASSERT_TRUE(net.ok()) << net.status();
  auto named = (*net)->named_parameters();
  const auto shapes = ps::mp2::PredictorShapes(K, C, r);
  ASSERT_EQ(named.size(), shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(named[i].key(), shapes[i].first);
    EXPECT_EQ(named[i].value().sizes().vec(), shapes[i].second) << shapes[i].first;
  }
}

TEST_P(PredictorNetTest, ForwardEqualsFlatRunnerOnRandomWeights) {
  const auto [K, C, r] = GetParam();
  // Weights far from libtorch's small initial ones, so every layer (and tanh) matters.
  Predictor predictor = ps::mp2::EmptyPredictor(K, C, r);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.6f);
  for (auto& t : predictor.tensors) {
    for (float& v : t.values) v = normal(rng);
  }
  auto net = FromPredictor(predictor);
  ASSERT_TRUE(net.ok()) << net.status();
  // The round trip keeps every weight bit for bit.
  const Predictor back = ToPredictor(*net);
  ASSERT_EQ(back.tensors.size(), predictor.tensors.size());
  for (size_t i = 0; i < back.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, predictor.tensors[i].name);
    EXPECT_EQ(back.tensors[i].values, predictor.tensors[i].values) << back.tensors[i].name;
  }

  const int n = 64;
  std::vector<float> histories(n * K);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : histories) v = uniform(rng);
  std::vector<float> inputs(n * 2 * K);
  for (int e = 0; e < n; ++e) {
    float* in = inputs.data() + e * 2 * K;
    ps::mp2::Normalise(histories.data() + e * K, 1, K, in, in + K);
  }
  torch::NoGradGuard no_grad;
  torch::Tensor out = (*net)->forward(torch::from_blob(inputs.data(), {n, 2, K}, torch::kFloat32));
  ASSERT_EQ(out.sizes().vec(), std::vector<int64_t>{n});
  PredictorRunner runner(predictor);
  double spread = 0;
  for (int e = 0; e < n; ++e) {
    const float* in = inputs.data() + e * 2 * K;
    const float flat = runner.Forward(in, in + K);
    EXPECT_NEAR(out[e].item<float>(), flat, 1e-5) << "element " << e;
    spread += std::fabs(flat);
  }
  EXPECT_GT(spread / n, 1e-3);  // not a degenerate all-zero comparison
}

INSTANTIATE_TEST_SUITE_P(Architectures, PredictorNetTest,
                         ::testing::Values(std::make_tuple(5, 32, 4), std::make_tuple(4, 8, 2),
                                           std::make_tuple(2, 4, 1)));

TEST(PredictorNetTest, RefusesABadArchitecture) {
  EXPECT_FALSE(NewPredictorNet(1, 32, 4).ok());
  EXPECT_FALSE(NewPredictorNet(5, 30, 4).ok());
  Predictor wrong = ps::mp2::EmptyPredictor(5, 8, 2);
  wrong.tensors[0].values.pop_back();
  EXPECT_FALSE(FromPredictor(wrong).ok());
}

// One predicted tensor of `size` elements, `samples` of them traced, following
// x_{t+1} = x_t + v·q^t from random x_0, v and decay q ∈ [0.75, 0.98] per element. (With one q
// for all, every normalised history would be the same up to sign.)
SnapshotDataset GeometricTraces(int64_t size, int samples, int rounds, uint64_t seed) {
  SnapshotDataset data;
  data.parameters = size;
  data.samples = samples;
  data.rounds = rounds;
  ps::mp2::DatasetTensor tensor;
  tensor.offset = 0;
  tensor.size = size;
  for (int i = 0; i < samples; ++i) tensor.sample.push_back(static_cast<int32_t>(i * 3));
  data.tensors.push_back(tensor);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.75f, 0.98f);
  std::vector<float> x(samples), v(samples), q(samples);
  for (int e = 0; e < samples; ++e) {
    x[e] = normal(rng);
    v[e] = 0.1f * normal(rng);
    q[e] = uniform(rng);
  }
  for (int t = 0; t < rounds; ++t) {
    for (int e = 0; e < samples; ++e) {
      data.traces.push_back(x[e]);
      x[e] += v[e] * std::pow(q[e], static_cast<float>(t));
    }
  }
  return data;
}

TEST(TraceExamplesTest, CutsEveryRoundWithAFullHistoryAndANextValue) {
  const SnapshotDataset data = GeometricTraces(8192, 16, 12, 1);
  ASSERT_EQ(data.TraceWidth(), 16);
  TraceExamples examples(5);
  ASSERT_TRUE(examples.Add(data).ok());
  EXPECT_EQ(examples.size(), 16 * (12 - 5));
  // Example (t = 4 + 2, element 3): history rounds 2..6, next round 7.
  const int64_t i = 2 * 16 + 3;
  float history[5], next;
  examples.Raw(i, history, &next);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(history[k], data.traces[(2 + k) * 16 + 3]);
  EXPECT_EQ(next, data.traces[7 * 16 + 3]);
  float input[10], target;
  examples.Fill(&i, 1, input, &target);
  float lo = history[0], hi = history[0];
  for (float h : history) lo = std::min(lo, h), hi = std::max(hi, h);
  EXPECT_NEAR(target, (next - history[4]) / (2 * (hi - lo) + 1e-8f), 1e-6);
  // A second dataset's examples follow the first's.
  const SnapshotDataset short_data = GeometricTraces(8192, 16, 5, 2);
  ASSERT_TRUE(examples.Add(short_data).ok());
  EXPECT_EQ(examples.size(), 16 * 7);  // 5 rounds leave no next value after a history of 5
  const auto sample = examples.Sample(50, 3);
  EXPECT_EQ(sample.size(), 50u);
  EXPECT_EQ(examples.Sample(0, 3).size(), static_cast<size_t>(examples.size()));
}

TEST(PredictorTrainingTest, TrainingBeatsTheZeroChange) {
  torch::set_num_threads(1);
  const SnapshotDataset train_data = GeometricTraces(8192, 512, 30, 11);
  const SnapshotDataset heldout = GeometricTraces(8192, 512, 30, 12);
  TraceExamples train(5), test(5);
  ASSERT_TRUE(train.Add(train_data).ok());
  ASSERT_TRUE(test.Add(heldout).ok());
  TrainingOptions options;
  options.channels = {8};
  options.epochs = 6;
  options.examples_per_epoch = 8000;
  options.batch_size = 128;
  options.learning_rate = 3e-3;
  options.seed = 5;
  int epochs_seen = 0;
  auto candidates = TrainCandidates(train, options, [&](const EpochReport& report) {
    ++epochs_seen;
    EXPECT_EQ(report.examples, 8000);
    EXPECT_GT(report.zero_mse, 0);
  });
  ASSERT_TRUE(candidates.ok()) << candidates.status();
  ASSERT_EQ(candidates->size(), 6u);
  EXPECT_EQ(epochs_seen, 6);
  EXPECT_LT(candidates->back().train_mse, candidates->front().train_mse);
  PredictorRunner runner(candidates->back().predictor);
  const RegressionErrors errors = MeasureRegression(test, test.Sample(4000, 1), &runner);
  EXPECT_LT(errors.predictor, 0.1 * errors.zero)
      << "predictor " << errors.predictor << ", zero " << errors.zero;
}

// A dataset with one window of full snapshots in which every parameter moves linearly.
SnapshotDataset LinearWindow(int64_t size, int length) {
  SnapshotDataset data;
  data.parameters = size + 10;
  data.window_length = length;
  data.tensors.push_back({0, size, {}});
  data.tensors.push_back({size, 10, {}});  // dense: pushed whole every round
  ps::mp2::SnapshotWindow window;
  window.first_round = 3;
  for (int t = 0; t < length; ++t) {
    std::vector<float> s(static_cast<size_t>(data.parameters));
    for (int64_t e = 0; e < data.parameters; ++e) {
      s[e] = 0.01f * static_cast<float>(e % 97) + 0.001f * static_cast<float>((e % 13) * t);
    }
    window.snapshots.push_back(std::move(s));
  }
  data.windows.push_back(std::move(window));
  return data;
}

TEST(WindowReplayTest, LinearIsExactOnLinearTrajectoriesAndZeroIsNot) {
  const SnapshotDataset data = LinearWindow(5000, 12);
  ReplayOptions options;
  options.calibration = false;
  options.push_ratio = 0.25;  // C = 4 rounds
  auto linear = ReplayWindow(data, data.windows[0], options, ReplayMethod::kLinear, nullptr);
  ASSERT_TRUE(linear.ok()) << linear.status();
  // Every round the window holds after the history: 12 − 5.
  EXPECT_EQ(linear->rounds, 7);
  EXPECT_EQ(linear->truth, 5 + 7 - 1);
  EXPECT_EQ(linear->predicted, 5000 - 1250);
  EXPECT_LT(linear->mse, 1e-9);
  auto zero = ReplayWindow(data, data.windows[0], options, ReplayMethod::kZero, nullptr);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_GT(zero->mse, 1e-6);
  // The dense tensor is always the true one.
  for (int64_t e = 5000; e < 5010; ++e) {
    EXPECT_EQ(zero->params[e], data.windows[0].snapshots[zero->truth][e]);
  }

  WindowJudge judge(data, options, [](const std::vector<float>& p) -> absl::StatusOr<double> {
    return static_cast<double>(p[0] >= 0);
  });
  ASSERT_EQ(judge.windows(), 1);
  auto score = judge.Score(ReplayMethod::kLinear, nullptr);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(score->windows, 1);
  EXPECT_DOUBLE_EQ(score->accuracy, 1.0);
  EXPECT_DOUBLE_EQ(score->accuracy_true, 1.0);

  ReplayOptions too_long = options;
  too_long.history = 12;
  EXPECT_FALSE(ReplayWindow(data, data.windows[0], too_long, ReplayMethod::kZero, nullptr).ok());
}

// A BatchNorm model (batch statistics) and one without buffers (evaluation mode) on synthetic data.
TEST(ModelEvaluatorTest, AccuracyIsRepeatableAndChecksTheParameterCount) {
  torch::set_num_threads(1);
  for (const char* name : {"resnet20", "mlp"}) {
    job::JobSpec spec;
    spec.model.name = name;
    spec.dataset.name = "synthetic";
    spec.dataset.synthetic.samples = 64;
    spec.dataset.synthetic.test_samples = 96;
    spec.dataset.synthetic.shape = {3, 32, 32};
    spec.seed = 3;
    auto evaluator = ModelEvaluator::Create(spec, /*batch_size=*/40);
    ASSERT_TRUE(evaluator.ok()) << evaluator.status();
    auto model = CreateModel(spec.model, ModelShape{3, 32, 32, 10}, spec.seed);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*evaluator)->num_parameters(), (*model)->num_parameters()) << name;
    std::vector<float> flat;
    for (const torch::Tensor& p : (*model)->parameters()) {
      torch::Tensor c = p.detach().contiguous();
      flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    auto first = (*evaluator)->Accuracy(flat, 80);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_GE(*first, 0.0);
    EXPECT_LE(*first, 1.0);
    auto again = (*evaluator)->Accuracy(flat, 80);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*first, *again) << name;
    flat.pop_back();
    EXPECT_FALSE((*evaluator)->Accuracy(flat, 80).ok());
  }
}

}  // namespace
}  // namespace hptrain::train::mp2
