// MP²'s round-by-round model (runtime/ps/mp2/prediction_state.h): the subset takes the fresh
// values, the complement the prediction (or stays, for the zero change), calibration scales the
// predicted change by its fit on the subset, a wrong round changes nothing, two states fed
// the same rounds agree bit for bit, and the overlapped inference gives the inline one's results.
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "runtime/ps/mp2/prediction_state.h"

namespace hptrain::ps::mp2 {
namespace {

const std::vector<int64_t> kPieces = {150, 6000, 20, 9000};

// A predictor with small random weights (a deterministic stream).
Predictor RandomPredictor(uint32_t seed) {
  Predictor p = EmptyPredictor(kDefaultHistory, 8, 4);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (PredictorTensor& t : p.tensors) {
    for (float& v : t.values) v = normal(rng);
  }
  return p;
}

std::vector<float> Initial() {
  int64_t total = 0;
  for (int64_t n : kPieces) total += n;
  std::vector<float> w(static_cast<size_t>(total));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.01f * static_cast<float>(i));
  return w;
}

// The fresh values of round t when every element moves by `step(i, t)`: the subset of
// `target` for each piece.
std::vector<std::vector<float>> Fresh(const PredictionState& state, int64_t t,
                                      const std::vector<float>& target) {
  std::vector<std::vector<float>> fresh(state.pieces());
  for (int p = 0; p < state.pieces(); ++p) {
    fresh[p].resize(state.PushSize(p, t));
    state.schedule(p).Gather(t, target.data() + state.piece_offset(p), fresh[p].data());
  }
  return fresh;
}

std::vector<float> Moved(const std::vector<float>& w, int64_t t) {
  std::vector<float> out = w;
  for (size_t i = 0; i < out.size(); ++i) out[i] += 1e-3f * std::cos(0.001f * i + 0.1f * t);
  return out;
}

TEST(PredictionState, ZeroChangeKeepsTheComplementAndTakesTheSubset) {
  PredictionOptions options;
  PredictionState state(options, 0, kPieces, nullptr);
  const std::vector<float> w0 = Initial();
  ASSERT_TRUE(state.Reset(w0, 0).ok());
  const std::vector<float> target = Moved(w0, 0);
  RoundStats stats;
  ASSERT_TRUE(state.Apply(0, Fresh(state, 0, target), &stats).ok());
  EXPECT_EQ(state.round(), 1);
  EXPECT_EQ(stats.predicted, 0);
  const std::vector<float>& w = state.params();
  for (int p = 0; p < state.pieces(); ++p) {
    const SubsetSchedule& s = state.schedule(p);
    std::vector<char> in(s.size(), 0);
    for (int32_t i : s.Subset(0)) in[i] = 1;
    for (int64_t i = 0; i < s.size(); ++i) {
      const size_t at = state.piece_offset(p) + i;
      ASSERT_EQ(w[at], in[i] ? target[at] : w0[at]) << "piece " << p << " element " << i;
    }
    // The small pieces are pushed whole, the large ones a tenth.
    EXPECT_EQ(state.PushSize(p, 0), s.predicted() ? (s.size() + 9) / 10 : s.size());
  }
}

TEST(PredictionState, AWrongRoundOrSizeChangesNothing) {
  PredictionState state(PredictionOptions(), 0, kPieces, nullptr);
  ASSERT_TRUE(state.Reset(Initial(), 4).ok());
  const std::vector<float> before = state.params();
  auto fresh = Fresh(state, 4, Moved(before, 4));
  absl::Status wrong_round = state.Apply(5, fresh);
  EXPECT_EQ(wrong_round.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(wrong_round.message()).find("expects round 4"), std::string::npos);
  fresh[1].pop_back();
  EXPECT_EQ(state.Apply(4, fresh).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.params(), before);
  EXPECT_EQ(state.round(), 4);
}

TEST(PredictionState, TwoStatesFedTheSameRoundsAgreeBitForBit) {
  const Predictor predictor = RandomPredictor(1);
  PredictorRunner runner(predictor);
  PredictionOptions options;
  options.seed = 9;
  options.calibration = true;
  PredictionState a(options, 0, kPieces, &runner);
  options.threads = 3;  // threads must not change a bit
  PredictionState b(options, 0, kPieces, &runner);
  std::vector<float> w = Initial();
  ASSERT_TRUE(a.Reset(w, 0).ok());
  ASSERT_TRUE(b.Reset(w, 0).ok());
  for (int64_t t = 0; t < 12; ++t) {
    const std::vector<float> target = Moved(a.params(), t);
    RoundStats stats;
    ASSERT_TRUE(a.Apply(t, Fresh(a, t, target), &stats).ok());
    ASSERT_TRUE(b.Apply(t, Fresh(b, t, target)).ok());
    ASSERT_EQ(a.params(), b.params()) << "round " << t;
    EXPECT_EQ(stats.predicted, 5400 + 8100);
  }
}

// A constant history predicts (almost) no change; after rounds of movement the predictor moves
// the complement, and calibration scales the predicted change by the subset's fit.
TEST(PredictionState, CalibrationScalesThePredictedChangeByItsFitOnTheSubset) {
  const Predictor predictor = RandomPredictor(2);
  PredictorRunner runner(predictor);
  PredictionOptions options;
  options.calibration = true;
  PredictionState state(options, 0, kPieces, &runner);
  const std::vector<float> w0 = Initial();
  // A history with a trend: K snapshots moving by a constant step.
  std::vector<std::vector<float>> history;
  for (int k = 0; k < options.history; ++k) {
    std::vector<float> s = w0;
    for (size_t i = 0; i < s.size(); ++i) s[i] += 1e-3f * k * std::cos(0.003f * i);
    history.push_back(s);
  }
  ASSERT_TRUE(state.ResetHistory(history, 0).ok());
  // What the predictor says for every element of piece 1 (a predicted one).
  const int piece = 1;
  const int64_t n = kPieces[piece];
  const int K = options.history;
  std::vector<float> gathered(n * K), predicted(n);
  for (int k = 0; k < K; ++k) {
    for (int64_t e = 0; e < n; ++e) gathered[e * K + k] = history[k][state.piece_offset(piece) + e];
  }
  runner.Predict(gathered.data(), n, predicted.data());
  // Fresh values that moved exactly twice the predicted change: the fit is 2.
  std::vector<float> target = history.back();
  for (int64_t e = 0; e < n; ++e) {
    const size_t at = state.piece_offset(piece) + e;
    target[at] = history.back()[at] + 2.0f * (predicted[e] - history.back()[at]);
  }
  RoundStats stats;
  ASSERT_TRUE(state.Apply(0, Fresh(state, 0, target), &stats).ok());
  ASSERT_EQ(stats.calibration.size(), kPieces.size());
  EXPECT_NEAR(stats.calibration[piece], 2.0, 1e-3);
  for (int64_t e = 0; e < n; ++e) {
    const size_t at = state.piece_offset(piece) + e;
    ASSERT_NEAR(state.params()[at], target[at], 1e-6f) << e;
  }
  // Without calibration the complement takes the predicted change as it is.
  options.calibration = false;
  PredictionState plain(options, 0, kPieces, &runner);
  ASSERT_TRUE(plain.ResetHistory(history, 0).ok());
  ASSERT_TRUE(plain.Apply(0, Fresh(plain, 0, target), &stats).ok());
  std::vector<char> in(n, 0);
  for (int32_t i : plain.schedule(piece).Subset(0)) in[i] = 1;
  for (int64_t e = 0; e < n; ++e) {
    if (in[e]) continue;
    ASSERT_NEAR(plain.params()[state.piece_offset(piece) + e], predicted[e], 1e-6f) << e;
  }
}

TEST(PredictionState, AConstantHistoryPredictsNoChange) {
  const Predictor predictor = RandomPredictor(3);
  PredictorRunner runner(predictor);
  PredictionOptions options;
  options.calibration = false;
  PredictionState state(options, 0, kPieces, &runner);
  const std::vector<float> w0 = Initial();
  ASSERT_TRUE(state.Reset(w0, 0).ok());
  ASSERT_TRUE(state.Apply(0, Fresh(state, 0, w0)).ok());
  for (size_t i = 0; i < w0.size(); ++i) ASSERT_NEAR(state.params()[i], w0[i], 1e-6f) << i;
}

// Overlapped, round t's inference runs as soon as round t − 1 is applied; the rounds' results are
// those of the inline inference, bit for bit, with and without calibration.
TEST(PredictionState, TheOverlappedInferenceGivesTheInlineResults) {
  const Predictor predictor = RandomPredictor(4);
  PredictorRunner runner(predictor);
  for (bool calibration : {false, true}) {
    PredictionOptions options;
    options.calibration = calibration;
    options.damping = 0.25;
    PredictionState inline_state(options, 0, kPieces, &runner);
    options.overlapped = true;
    PredictionState overlapped(options, 0, kPieces, &runner);
    const std::vector<float> w = Initial();
    ASSERT_TRUE(inline_state.Reset(w, 3).ok());
    ASSERT_TRUE(overlapped.Reset(w, 3).ok());
    for (int64_t t = 3; t < 15; ++t) {
      const std::vector<float> target = Moved(inline_state.params(), t);
      RoundStats a, b;
      ASSERT_TRUE(inline_state.Apply(t, Fresh(inline_state, t, target), &a).ok());
      ASSERT_TRUE(overlapped.Apply(t, Fresh(overlapped, t, target), &b).ok());
      ASSERT_EQ(inline_state.params(), overlapped.params()) << "round " << t;
      EXPECT_EQ(a.predicted, b.predicted);
      EXPECT_EQ(a.calibration, b.calibration);
    }
    // The next round's inference is under way (or done) in the overlapped state only.
    EXPECT_TRUE(inline_state.PredictionReady());
    overlapped.PendingPrediction().wait();
    EXPECT_TRUE(overlapped.PredictionReady());
  }
}

}  // namespace
}  // namespace hptrain::ps::mp2
