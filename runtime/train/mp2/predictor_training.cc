#include "runtime/train/mp2/predictor_training.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/normalize.h"
#include "runtime/train/mp2/predictor_net.h"

namespace hptrain::train::mp2 {
namespace {

using Clock = std::chrono::steady_clock;

// tanh never reaches ±1; a target there would pull the output layer's weights without bound.
constexpr float kMaxTarget = 0.999f;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Distinct seeds per width and epoch from one user seed (splitmix64's finaliser).
uint64_t Mix(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (a + 1) + 0xbf58476d1ce4e5b9ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

absl::Status TraceExamples::Add(const ps::mp2::SnapshotDataset& data) {
  const int64_t width = data.TraceWidth();
  if (static_cast<int64_t>(data.traces.size()) != data.rounds * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "traces hold ", data.traces.size(), " values, not ", data.rounds, " rounds × ", width));
  }
  if (offsets_.empty()) offsets_.push_back(0);
  const int64_t rounds = std::max<int64_t>(0, data.rounds - history_);
  datasets_.push_back(&data);
  offsets_.push_back(offsets_.back() + rounds * width);
  return absl::OkStatus();
}

void TraceExamples::Locate(int64_t i, const float** first, int64_t* stride) const {
  const size_t d = std::upper_bound(offsets_.begin(), offsets_.end(), i) - offsets_.begin() - 1;
  const ps::mp2::SnapshotDataset& data = *datasets_[d];
  const int64_t width = data.TraceWidth();
  const int64_t local = i - offsets_[d];
  // Example (t, e) with t = K−1 + local / width: its history starts at round t − K + 1.
  const int64_t start_round = local / width;
  const int64_t element = local % width;
  *first = data.traces.data() + start_round * width + element;
  *stride = width;
}

void TraceExamples::Fill(const int64_t* indices, int64_t n, float* inputs, float* targets) const {
  const int K = history_;
  for (int64_t i = 0; i < n; ++i) {
    const float* first;
    int64_t stride;
    Locate(indices[i], &first, &stride);
    float* values = inputs + i * 2 * K;
    const ps::mp2::Normalisation norm =
        ps::mp2::Normalise(first, static_cast<int>(stride), K, values, values + K);
    const float last = first[(K - 1) * stride];
    const float next = first[K * stride];
    targets[i] = std::clamp((next - last) / norm.scale, -kMaxTarget, kMaxTarget);
  }
}

void TraceExamples::Raw(int64_t i, float* history, float* next) const {
  const float* first;
  int64_t stride;
  Locate(i, &first, &stride);
  for (int k = 0; k < history_; ++k) history[k] = first[k * stride];
  *next = first[history_ * stride];
}

std::vector<int64_t> TraceExamples::Sample(int64_t max_examples, uint64_t seed) const {
  const int64_t total = size();
  const int64_t n = max_examples > 0 ? std::min(max_examples, total) : total;
  std::mt19937_64 rng(seed);
  std::vector<int64_t> indices;
  if (2 * n >= total) {
    indices.resize(static_cast<size_t>(total));
    std::iota(indices.begin(), indices.end(), int64_t{0});
    std::shuffle(indices.begin(), indices.end(), rng);
    indices.resize(static_cast<size_t>(n));
    return indices;
  }
  // Few of many: rejection keeps memory proportional to n, not to the examples.
  std::unordered_set<int64_t> seen;
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  indices.reserve(static_cast<size_t>(n));
  while (static_cast<int64_t>(indices.size()) < n) {
    const int64_t i = pick(rng);
    if (seen.insert(i).second) indices.push_back(i);
  }
  return indices;
}

RegressionErrors MeasureRegression(const TraceExamples& examples,
                                   const std::vector<int64_t>& indices,
                                   const ps::mp2::PredictorRunner* predictor) {
  const int K = examples.history();
  RegressionErrors errors;
  if (indices.empty()) return errors;
  std::vector<float> input(2 * K);
  double predictor_sum = 0, zero_sum = 0, linear_sum = 0;
  for (int64_t i : indices) {
    float target;
    examples.Fill(&i, 1, input.data(), &target);
    zero_sum += double{target} * target;
    const double linear = double{input[2 * K - 1]} - target;
    linear_sum += linear * linear;
    if (predictor != nullptr) {
      const double d = double{predictor->Forward(input.data(), input.data() + K)} - target;
      predictor_sum += d * d;
    }
  }
  const double n = static_cast<double>(indices.size());
  errors.examples = static_cast<int64_t>(indices.size());
  errors.zero = zero_sum / n;
  errors.linear = linear_sum / n;
  if (predictor != nullptr) errors.predictor = predictor_sum / n;
  return errors;
}

absl::StatusOr<std::vector<Candidate>> TrainCandidates(
    const TraceExamples& examples, const TrainingOptions& options,
    const std::function<void(const EpochReport&)>& on_epoch) {
  if (options.channels.empty()) return absl::InvalidArgumentError("no candidate widths");
  if (options.epochs < 1 || options.batch_size < 1 || options.learning_rate <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("epochs ", options.epochs, ", batch size ",
                                                   options.batch_size, " and learning rate ",
                                                   options.learning_rate, " must be positive"));
  }
  if (examples.history() != options.history) {
    return absl::InvalidArgumentError(absl::StrCat(
        "examples are cut for history ", examples.history(), ", training for ", options.history));
  }
  if (examples.size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no training examples: every dataset needs traces and at least ",
                     options.history + 1, " recorded rounds"));
  }
  const int K = options.history;
  std::vector<Candidate> candidates;
  std::vector<float> inputs, targets;
  for (size_t w = 0; w < options.channels.size(); ++w) {
    const int channels = options.channels[w];
    // Every width starts from weights of its own seed, whatever other widths were asked for.
    torch::manual_seed(Mix(options.seed, channels, 0));
    HPTRAIN_ASSIGN_OR_RETURN(PredictorNet net, NewPredictorNet(K, channels, options.reduction));
    try {
      torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(options.learning_rate));
      for (int epoch = 1; epoch <= options.epochs; ++epoch) {
        const auto start = Clock::now();
        const std::vector<int64_t> indices =
            examples.Sample(options.examples_per_epoch, Mix(options.seed, channels, epoch));
        const int64_t n = static_cast<int64_t>(indices.size());
        inputs.resize(static_cast<size_t>(n * 2 * K));
        targets.resize(static_cast<size_t>(n));
        examples.Fill(indices.data(), n, inputs.data(), targets.data());
        torch::Tensor x = torch::from_blob(inputs.data(), {n, 2, K}, torch::kFloat32);
        torch::Tensor y = torch::from_blob(targets.data(), {n}, torch::kFloat32);
        double loss_sum = 0;
        net->train();
        for (int64_t b = 0; b < n; b += options.batch_size) {
          const int64_t len = std::min<int64_t>(options.batch_size, n - b);
          adam.zero_grad();
          torch::Tensor loss =
              torch::mse_loss(net->forward(x.narrow(0, b, len)), y.narrow(0, b, len));
          loss.backward();
          adam.step();
          loss_sum += loss.item<double>() * static_cast<double>(len);
        }
        EpochReport report;
        report.channels = channels;
        report.epoch = epoch;
        report.examples = n;
        report.train_mse = loss_sum / static_cast<double>(n);
        report.zero_mse = y.square().mean().item<double>();
        report.seconds = Since(start);
        Candidate candidate;
        candidate.channels = channels;
        candidate.epoch = epoch;
        candidate.train_mse = report.train_mse;
        candidate.predictor = ToPredictor(net);
        candidates.push_back(std::move(candidate));
        if (on_epoch) on_epoch(report);
      }
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("training the predictor of width ", channels, ": ", e.what()));
    }
  }
  return candidates;
}

absl::StatusOr<int> SelectCandidate(
    const std::vector<Candidate>& candidates, const SelectionOptions& options, WindowJudge& judge,
    std::vector<CandidateScore>* scores,
    const std::function<void(int, const CandidateScore&)>& on_scored) {
  if (candidates.empty()) return absl::InvalidArgumentError("no candidates to select from");
  scores->assign(candidates.size(), CandidateScore{});
  int best = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    const bool last_of_width =
        i + 1 == candidates.size() || candidates[i + 1].channels != c.channels;
    if (!options.every_epoch && !last_of_width) continue;
    if (c.predictor.history != judge.options().history) {
      return absl::InvalidArgumentError(absl::StrCat("candidate history ", c.predictor.history,
                                                     ", held-out replay history ",
                                                     judge.options().history));
    }
    ps::mp2::PredictorRunner runner(c.predictor);
    HPTRAIN_ASSIGN_OR_RETURN(WindowScore score, judge.Score(ReplayMethod::kPredictor, &runner));
    CandidateScore& s = (*scores)[i];
    s.judged = true;
    s.heldout_mse = score.mse;
    s.accuracy = score.accuracy;
    s.accuracy_true = score.accuracy_true;
    s.accuracy_drop = score.accuracy_true - score.accuracy;
    s.inference_seconds = score.inference_seconds;
    if (on_scored) on_scored(static_cast<int>(i), s);
    // Without an accuracy function every drop is NaN and the MSE alone decides.
    const auto key = [](const CandidateScore& x) {
      return std::make_pair(std::isnan(x.accuracy_drop) ? 0.0 : x.accuracy_drop, x.heldout_mse);
    };
    if (best < 0 || key(s) < key((*scores)[best])) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace hptrain::train::mp2
