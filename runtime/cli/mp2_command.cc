// hptrain mp2: MP²'s offline tools (docs/algorithms.md §1b).
//   collect  record a snapshot dataset from a training run (runtime/ps/mp2/dataset.h);
//   train    train predictor candidates on the datasets' traces and keep the one whose predictions
//            cost the least test accuracy on a held-out dataset's windows;
//   eval     replay a held-out dataset's windows with a predictor, the zero change and linear
//            extrapolation and compare their errors and accuracies.
// Every bad input (flags, a missing or corrupt file, a dataset of another model or history) is one
// line on stderr and exit code 2; outputs are written atomically and only on success.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/base/exit_codes.h"
#include "runtime/base/files.h"
#include "runtime/base/status.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/flags.h"
#include "runtime/job/job_parser.h"
#include "runtime/ps/mp2/dataset.h"
#include "runtime/ps/mp2/predictor.h"
#include "runtime/train/mp2/model_evaluator.h"
#include "runtime/train/mp2/predictor_training.h"
#include "runtime/train/mp2/window_replay.h"

namespace hptrain::cli {
namespace {

using json = nlohmann::json;
using ps::mp2::SnapshotDataset;
using train::mp2::ReplayMethod;

constexpr char kUsage[] =
    "usage: hptrain mp2 <collect|train|eval> [flags]\n"
    "\n"
    "subcommands:\n"
    "  collect   record a snapshot dataset (.mp2d) from a training run\n"
    "  train     train predictor candidates on snapshot datasets, select one, write a .mp2p\n"
    "  eval      replay a held-out dataset with a predictor, the zero change and linear\n"
    "            extrapolation; compare errors and test accuracies\n"
    "\n"
    "`hptrain mp2 <subcommand> --help` lists its flags.\n";

// The command as typed, for the predictor's metadata: argv from "mp2" on, shell-quoted where
// needed so it can be pasted back.
std::string CommandLine(int argc, char** argv) {
  std::vector<std::string> words = {"hptrain"};
  for (int i = 0; i < argc; ++i) {
    std::string word = argv[i];
    if (word.empty() || word.find_first_of(" \t'\"$\\") != std::string::npos) {
      std::string quoted = "'";
      for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      word = quoted + "'";
    }
    words.push_back(word);
  }
  return absl::StrJoin(words, " ");
}

json Number(double x) { return std::isnan(x) ? json(nullptr) : json(x); }

// A table cell: "-" for what was not measured. `format` is a printf format for one double.
std::string Cell(double x, const char* format) {
  if (std::isnan(x)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, x);
  return buffer;
}

// The job's mp2 options (its strategy's values where it is mp2), read with mp2's defaults.
sync::StrategyOptions Mp2Options(const job::JobSpec* spec) {
  sync::StrategyOptions options;
  if (spec != nullptr && spec->strategy.type == "mp2") options = spec->strategy;
  options.type = "mp2";
  return options;
}

// --push-ratio: empty takes the job's spec.strategy.pushRatio, else 0.1.
absl::StatusOr<double> PushRatio(const std::string& text, const job::JobSpec* spec) {
  if (text.empty()) {
    return Mp2Options(spec).Number("pushRatio");
  }
  double ratio = 0;
  if (!absl::SimpleAtod(text, &ratio) || !(ratio > 0 && ratio <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--push-ratio: expected a number in (0, 1], got \"", text, "\""));
  }
  return ratio;
}

absl::StatusOr<std::vector<int>> Widths(const std::string& text) {
  std::vector<int> widths;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--channels: expected comma-separated positive widths, got \"", text, "\""));
    }
    widths.push_back(width);
  }
  return widths;
}

// Refuses an output whose directory does not exist before any work is done.
absl::Status CheckOutputDirectory(const std::string& flag, const std::string& path) {
  const std::string dir = ParentDirectory(path);
  if (!dir.empty() && !IsDirectory(dir)) {
    return absl::NotFoundError(
        absl::StrCat(flag, " ", path, ": directory ", dir, " does not exist"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(const char* flag, int64_t value, int64_t minimum) {
  if (value >= minimum) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", value, " is below ", minimum));
}

// The held-out windows must be snapshots of the job's model: same tensors in the same order.
absl::Status CheckDatasetFitsModel(const std::string& path, const SnapshotDataset& data,
                                   const job::JobSpec& spec,
                                   const train::mp2::ModelEvaluator& evaluator) {
  if (!data.model.empty() && !spec.model.name.empty() && data.model != spec.model.name) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": recorded from model ", data.model,
                                                   ", the job's model is ", spec.model.name));
  }
  std::vector<int64_t> sizes;
  for (const auto& t : data.tensors) sizes.push_back(t.size);
  if (sizes != evaluator.tensor_sizes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": its ", sizes.size(), " tensors (", data.parameters,
                     " parameters) are not the job's model's ", evaluator.tensor_sizes().size(),
                     " (", evaluator.num_parameters(), " parameters)"));
  }
  return absl::OkStatus();
}

// --damping: empty takes the job's spec.strategy.damping, else 0.25.
absl::StatusOr<double> Damping(const std::string& text, const job::JobSpec* spec) {
  if (text.empty()) {
    return Mp2Options(spec).Number("damping");
  }
  double damping = 0;
  if (!absl::SimpleAtod(text, &damping) || !(damping > 0 && damping <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--damping: expected a number in (0, 1], got \"", text, "\""));
  }
  return damping;
}

json DatasetJson(const std::string& path, const SnapshotDataset& data) {
  return json{{"path", path},
              {"model", data.model},
              {"dataset", data.dataset},
              {"seed", data.seed},
              {"rounds", data.rounds},
              {"traced", data.TraceWidth()},
              {"windows", data.windows.size()}};
}

json ScoreJson(const train::mp2::WindowScore& score) {
  return json{{"mse", Number(score.mse)},
              {"accuracy", Number(score.accuracy)},
              {"accuracy_true", Number(score.accuracy_true)},
              {"accuracy_drop", Number(score.accuracy_true - score.accuracy)},
              {"inference_seconds", score.inference_seconds}};
}

// ---------------------------------------------------------------------------------------------
// hptrain mp2 train

struct TrainFlags {
  std::string job_file;
  std::vector<std::string> overrides;
  std::vector<std::string> data;
  std::string heldout;
  std::string out;
  int epochs = 10;
  int examples = 200000;
  std::string channels = "32";
  int history = 0;
  std::string push_ratio;
  bool calibration = false;
  std::string damping;
  int seed = 0;
  int eval_samples = 2000;
  bool select_every_epoch = false;
  int threads = 0;
};

absl::Status RunTrain(const TrainFlags& flags, const std::string& command_line) {
  if (flags.data.empty()) return absl::InvalidArgumentError("--data is required");
  if (flags.out.empty()) return absl::InvalidArgumentError("--out is required");
  if (!flags.heldout.empty() && flags.job_file.empty()) {
    return absl::InvalidArgumentError("--heldout needs --job (the model to measure accuracy on)");
  }
  HPTRAIN_RETURN_IF_ERROR(CheckPositive("--epochs", flags.epochs, 1));
  HPTRAIN_RETURN_IF_ERROR(CheckPositive("--examples", flags.examples, 1));
  HPTRAIN_RETURN_IF_ERROR(CheckPositive("--eval-samples", flags.eval_samples, 0));
  HPTRAIN_RETURN_IF_ERROR(CheckOutputDirectory("--out", flags.out));
  HPTRAIN_ASSIGN_OR_RETURN(std::vector<int> widths, Widths(flags.channels));
  train::mp2::SetTorchThreads(flags.threads);

  std::unique_ptr<job::JobSpec> spec;
  if (!flags.job_file.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(job::JobSpec parsed,
                             job::ParseJobFile(flags.job_file, flags.overrides));
    spec = std::make_unique<job::JobSpec>(std::move(parsed));
  }
  HPTRAIN_ASSIGN_OR_RETURN(const double push_ratio, PushRatio(flags.push_ratio, spec.get()));

  // Every dataset is loaded before training so that a bad one fails in seconds, not hours.
  std::vector<SnapshotDataset> datasets;
  datasets.reserve(flags.data.size());  // TraceExamples keeps pointers into it
  for (const std::string& path : flags.data) {
    HPTRAIN_ASSIGN_OR_RETURN(SnapshotDataset data, ps::mp2::LoadSnapshotDataset(path));
    datasets.push_back(std::move(data));
  }
  const int K = flags.history > 0 ? flags.history : datasets[0].history;
  for (int width : widths) {
    HPTRAIN_RETURN_IF_ERROR(
        ps::mp2::ValidatePredictor(ps::mp2::EmptyPredictor(K, width, ps::mp2::kDefaultReduction)),
        "--channels ", width, " with history ", K);
  }
  train::mp2::TraceExamples examples(K);
  json datasets_json = json::array();
  for (size_t d = 0; d < datasets.size(); ++d) {
    const int64_t before = examples.size();
    HPTRAIN_RETURN_IF_ERROR(examples.Add(datasets[d]), flags.data[d]);
    datasets_json.push_back(DatasetJson(flags.data[d], datasets[d]));
    datasets_json.back()["examples"] = examples.size() - before;
  }

  SnapshotDataset heldout;
  std::unique_ptr<train::mp2::ModelEvaluator> evaluator;
  std::unique_ptr<train::mp2::WindowJudge> judge;
  train::mp2::ReplayOptions replay;
  replay.push_ratio = push_ratio;
  replay.calibration = flags.calibration;
  HPTRAIN_ASSIGN_OR_RETURN(replay.damping, Damping(flags.damping, spec.get()));
  replay.history = K;
  replay.threads = std::max(1, flags.threads);
  if (!flags.heldout.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(heldout, ps::mp2::LoadSnapshotDataset(flags.heldout));
    HPTRAIN_ASSIGN_OR_RETURN(evaluator, train::mp2::ModelEvaluator::Create(*spec));
    HPTRAIN_RETURN_IF_ERROR(CheckDatasetFitsModel(flags.heldout, heldout, *spec, *evaluator));
    replay.seed = spec->seed;
    train::mp2::ModelEvaluator* model = evaluator.get();
    const int64_t samples = flags.eval_samples;
    train::mp2::AccuracyFn accuracy;
    if (samples > 0) {
      accuracy = [model, samples](const std::vector<float>& params) {
        return model->Accuracy(params, samples);
      };
    }
    judge = std::make_unique<train::mp2::WindowJudge>(heldout, replay, accuracy);
    if (judge->windows() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flags.heldout, ": none of its ", heldout.windows.size(), " windows has the ",
                       K + 1, " snapshots a replay with history ", K, " needs"));
    }
  }

  std::fprintf(stderr,
               "hptrain mp2 train: %lld examples from %zu dataset(s), history %d, widths %s\n",
               static_cast<long long>(examples.size()), datasets.size(), K,
               absl::StrJoin(widths, ",").c_str());
  train::mp2::TrainingOptions options;
  options.history = K;
  options.channels = widths;
  options.epochs = flags.epochs;
  options.examples_per_epoch = flags.examples;
  options.seed = static_cast<uint64_t>(flags.seed);
  HPTRAIN_ASSIGN_OR_RETURN(
      std::vector<train::mp2::Candidate> candidates,
      train::mp2::TrainCandidates(examples, options, [&](const train::mp2::EpochReport& r) {
        std::fprintf(stderr,
                     "width %d epoch %d/%d: loss %.6g (zero change %.6g) on %lld examples, "
                     "%.1f s\n",
                     r.channels, r.epoch, flags.epochs, r.train_mse, r.zero_mse,
                     static_cast<long long>(r.examples), r.seconds);
      }));

  std::vector<train::mp2::CandidateScore> scores(candidates.size());
  int chosen = 0;
  json baselines = nullptr;
  std::string rule;
  if (judge != nullptr) {
    rule = "smallest mean accuracy drop over the held-out replays (ties: lower replay MSE)";
    std::fprintf(stderr, "judging candidates on %d held-out window(s), %d test images each\n",
                 judge->windows(), flags.eval_samples);
    baselines = json::object();
    for (const auto& [name, method] :
         {std::pair{"zero", ReplayMethod::kZero}, std::pair{"linear", ReplayMethod::kLinear}}) {
      HPTRAIN_ASSIGN_OR_RETURN(train::mp2::WindowScore score, judge->Score(method, nullptr));
      baselines[name] = ScoreJson(score);
      std::fprintf(stderr, "  %-6s replay MSE %.6g, accuracy %.4f (true %.4f)\n", name, score.mse,
                   score.accuracy, score.accuracy_true);
    }
    train::mp2::SelectionOptions selection;
    selection.every_epoch = flags.select_every_epoch;
    HPTRAIN_ASSIGN_OR_RETURN(
        chosen, train::mp2::SelectCandidate(
                    candidates, selection, *judge, &scores,
                    [&](int i, const train::mp2::CandidateScore& s) {
                      std::fprintf(stderr,
                                   "  width %d epoch %d: replay MSE %.6g, accuracy %.4f (true "
                                   "%.4f, drop %.4f)\n",
                                   candidates[i].channels, candidates[i].epoch, s.heldout_mse,
                                   s.accuracy, s.accuracy_true, s.accuracy_drop);
                    }));
  } else {
    rule = "lowest final-epoch training MSE (no held-out dataset)";
    chosen = flags.epochs - 1;  // candidates come width by width, epochs ascending
    for (size_t i = chosen; i < candidates.size(); i += flags.epochs) {
      if (candidates[i].train_mse < candidates[chosen].train_mse) chosen = static_cast<int>(i);
    }
  }

  // The one-step error on the held-out traces: cheap, and a second view beside the replay.
  std::vector<double> regression(candidates.size(), std::nan(""));
  if (!flags.heldout.empty()) {
    train::mp2::TraceExamples heldout_examples(K);
    HPTRAIN_RETURN_IF_ERROR(heldout_examples.Add(heldout), flags.heldout);
    const std::vector<int64_t> sample = heldout_examples.Sample(flags.examples, 1);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!scores[i].judged) continue;
      ps::mp2::PredictorRunner runner(candidates[i].predictor);
      regression[i] = train::mp2::MeasureRegression(heldout_examples, sample, &runner).predictor;
    }
  }

  json table = json::array();
  std::printf("%-6s %-6s %-12s %-12s %-12s %-9s %-9s %s\n", "width", "epoch", "train MSE",
              "replay MSE", "one-step", "accuracy", "drop", "");
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    const auto& s = scores[i];
    table.push_back(json{{"width", c.channels},
                         {"epoch", c.epoch},
                         {"train_mse", c.train_mse},
                         {"judged", s.judged},
                         {"heldout_mse", Number(s.heldout_mse)},
                         {"heldout_regression_mse", Number(regression[i])},
                         {"accuracy", Number(s.accuracy)},
                         {"accuracy_true", Number(s.accuracy_true)},
                         {"accuracy_drop", Number(s.accuracy_drop)},
                         {"selected", static_cast<int>(i) == chosen}});
    if (judge != nullptr && !s.judged) continue;
    std::printf("%-6d %-6d %-12s %-12s %-12s %-9s %-9s %s\n", c.channels, c.epoch,
                Cell(c.train_mse, "%.6g").c_str(), Cell(s.heldout_mse, "%.6g").c_str(),
                Cell(regression[i], "%.6g").c_str(), Cell(s.accuracy, "%.4f").c_str(),
                Cell(s.accuracy_drop, "%.4f").c_str(),
                static_cast<int>(i) == chosen ? "selected" : "");
  }

  ps::mp2::Predictor predictor = candidates[chosen].predictor;
  json metadata = {
      {"made_by", "hptrain mp2 train"},
      {"command", command_line},
      {"history", K},
      {"channels", predictor.channels},
      {"reduction", predictor.reduction},
      {"training",
       {{"epochs", flags.epochs},
        {"examples_per_epoch", flags.examples},
        {"batch_size", options.batch_size},
        {"learning_rate", options.learning_rate},
        {"loss", "mse"},
        {"optimizer", "adam"},
        {"seed", flags.seed},
        {"widths", widths}}},
      {"datasets", datasets_json},
      {"heldout", flags.heldout.empty() ? json(nullptr)
                                        : json{{"path", flags.heldout},
                                               {"job", flags.job_file},
                                               {"windows_replayed", judge->windows()},
                                               {"push_ratio", push_ratio},
                                               {"calibration", flags.calibration},
                                               {"damping", replay.damping},
                                               {"eval_samples", flags.eval_samples},
                                               {"baselines", baselines}}},
      {"selection", rule},
      {"candidates", table},
      {"selected", {{"width", candidates[chosen].channels}, {"epoch", candidates[chosen].epoch}}}};
  predictor.metadata = metadata.dump();
  HPTRAIN_RETURN_IF_ERROR(ps::mp2::SavePredictor(flags.out, predictor), "--out");
  std::printf("selected width %d epoch %d (%s); wrote %s\n", candidates[chosen].channels,
              candidates[chosen].epoch, rule.c_str(), flags.out.c_str());
  return absl::OkStatus();
}

int TrainCommand(int argc, char** argv, const std::string& command_line) {
  TrainFlags flags;
  FlagSet set("mp2 train",
              "--data D.mp2d [--data ...] --out P.mp2p [--job JOB.yaml --heldout H.mp2d] [flags]");
  set.Repeated("data", &flags.data,
               "a snapshot dataset whose traces give training examples (repeatable)");
  set.String("out", &flags.out, "", "the predictor file to write (atomically, on success)");
  set.String("job", &flags.job_file, "",
             "the TrainingJob whose model and test split judge candidates (with --heldout)");
  set.Repeated("set", &flags.overrides, "override a job field, e.g. --set spec.seed=1");
  set.String("heldout", &flags.heldout, "",
             "a snapshot dataset of the job's model whose windows judge the candidates; "
             "without it the lowest training loss wins");
  set.Int("epochs", &flags.epochs, "", "training epochs per width (10); each is a candidate");
  set.Int("examples", &flags.examples, "",
          "examples drawn per epoch, and the cap of the held-out one-step sample (200000)");
  set.String("channels", &flags.channels, "", "candidate widths C, comma-separated (32)");
  set.Int("history", &flags.history, "", "K, values the predictor reads (the first dataset's)");
  set.String("push-ratio", &flags.push_ratio, "",
             "ρ of the held-out replays (the job's spec.strategy.pushRatio, else 0.1)");
  set.Bool("calibration", &flags.calibration,
           "per-tensor calibration in the replays (default false, as spec.strategy.calibration)");
  set.String("damping", &flags.damping, "",
             "share of the predicted change applied in the replays (the job's "
             "spec.strategy.damping, else 0.25)");
  set.Int("seed", &flags.seed, "", "seed of initial weights and example sampling (0)");
  set.Int("eval-samples", &flags.eval_samples, "",
          "test images per accuracy measurement (2000; 0: judge by replay MSE only)");
  set.Bool("select-every-epoch", &flags.select_every_epoch,
           "judge every epoch's candidate, not only each width's last");
  set.Int("threads", &flags.threads, "", "libtorch and inference threads (0: all cores)");
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (!set.positional().empty()) {
    return ReportError("mp2 train", absl::InvalidArgumentError(absl::StrCat(
                                        "unexpected argument \"", set.positional()[0], "\"")));
  }
  absl::Status status = RunTrain(flags, command_line);
  return status.ok() ? kExitOk : ReportError("mp2 train", status);
}

// ---------------------------------------------------------------------------------------------
// hptrain mp2 eval

struct EvalFlags {
  std::string job_file;
  std::vector<std::string> overrides;
  std::string predictor;
  std::string data;
  std::string push_ratio;
  bool calibration = false;
  std::string damping;
  int eval_samples = 2000;
  int examples = 200000;
  std::string output_json;
  int threads = 0;
};

absl::Status RunEval(const EvalFlags& flags) {
  if (flags.job_file.empty()) return absl::InvalidArgumentError("--job is required");
  if (flags.predictor.empty()) return absl::InvalidArgumentError("--predictor is required");
  if (flags.data.empty()) return absl::InvalidArgumentError("--data is required");
  HPTRAIN_RETURN_IF_ERROR(CheckPositive("--eval-samples", flags.eval_samples, 0));
  HPTRAIN_RETURN_IF_ERROR(CheckPositive("--examples", flags.examples, 1));
  if (!flags.output_json.empty()) {
    HPTRAIN_RETURN_IF_ERROR(CheckOutputDirectory("--output-json", flags.output_json));
  }
  train::mp2::SetTorchThreads(flags.threads);
  HPTRAIN_ASSIGN_OR_RETURN(job::JobSpec spec, job::ParseJobFile(flags.job_file, flags.overrides));
  HPTRAIN_ASSIGN_OR_RETURN(const double push_ratio, PushRatio(flags.push_ratio, &spec));
  HPTRAIN_ASSIGN_OR_RETURN(ps::mp2::Predictor predictor, ps::mp2::LoadPredictor(flags.predictor));
  HPTRAIN_ASSIGN_OR_RETURN(SnapshotDataset data, ps::mp2::LoadSnapshotDataset(flags.data));
  if (predictor.history != data.history) {
    return absl::InvalidArgumentError(absl::StrCat(flags.predictor, " reads a history of ",
                                                   predictor.history, " values; ", flags.data,
                                                   " was cut for ", data.history));
  }
  HPTRAIN_ASSIGN_OR_RETURN(auto evaluator, train::mp2::ModelEvaluator::Create(spec));
  HPTRAIN_RETURN_IF_ERROR(CheckDatasetFitsModel(flags.data, data, spec, *evaluator));

  const int K = predictor.history;
  train::mp2::ReplayOptions replay;
  replay.push_ratio = push_ratio;
  replay.calibration = flags.calibration;
  HPTRAIN_ASSIGN_OR_RETURN(replay.damping, Damping(flags.damping, &spec));
  replay.history = K;
  replay.seed = spec.seed;
  replay.threads = std::max(1, flags.threads);
  train::mp2::AccuracyFn accuracy;
  if (flags.eval_samples > 0) {
    train::mp2::ModelEvaluator* model = evaluator.get();
    const int64_t samples = flags.eval_samples;
    accuracy = [model, samples](const std::vector<float>& params) {
      return model->Accuracy(params, samples);
    };
  }
  train::mp2::WindowJudge judge(data, replay, accuracy);
  if (judge.windows() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.data, ": none of its ", data.windows.size(), " windows has the ", K + 1,
                     " snapshots a replay with history ", K, " needs"));
  }
  std::fprintf(
      stderr, "hptrain mp2 eval: %d window(s), push ratio %g, %s\n", judge.windows(), push_ratio,
      flags.eval_samples > 0 ? absl::StrCat(flags.eval_samples, " test images per accuracy").c_str()
                             : "errors only");

  const ps::mp2::PredictorRunner runner(predictor);
  train::mp2::TraceExamples examples(K);
  HPTRAIN_RETURN_IF_ERROR(examples.Add(data), flags.data);
  const std::vector<int64_t> sample = examples.Sample(flags.examples, 1);
  const train::mp2::RegressionErrors regression =
      train::mp2::MeasureRegression(examples, sample, &runner);

  struct Row {
    const char* name;
    ReplayMethod method;
    double regression;
    train::mp2::WindowScore score;
  };
  std::vector<Row> rows = {{"predictor", ReplayMethod::kPredictor, regression.predictor, {}},
                           {"zero", ReplayMethod::kZero, regression.zero, {}},
                           {"linear", ReplayMethod::kLinear, regression.linear, {}}};
  json methods = json::object();
  for (Row& row : rows) {
    HPTRAIN_ASSIGN_OR_RETURN(row.score, judge.Score(row.method, &runner));
    methods[row.name] = ScoreJson(row.score);
    methods[row.name]["regression_mse"] = Number(row.regression);
  }
  methods["predictor"]["path"] = flags.predictor;

  std::printf("%-10s %-12s %-9s %-9s %-9s %-12s %s\n", "method", "replay MSE", "accuracy",
              "true acc", "drop", "one-step", "inference s");
  for (const Row& row : rows) {
    const auto& s = row.score;
    std::printf("%-10s %-12s %-9s %-9s %-9s %-12s %.3f\n", row.name, Cell(s.mse, "%.6g").c_str(),
                Cell(s.accuracy, "%.4f").c_str(), Cell(s.accuracy_true, "%.4f").c_str(),
                Cell(s.accuracy_true - s.accuracy, "%.4f").c_str(),
                Cell(row.regression, "%.6g").c_str(), s.inference_seconds);
  }
  std::printf("%d window(s), %lld one-step examples\n", judge.windows(),
              static_cast<long long>(regression.examples));

  if (!flags.output_json.empty()) {
    json out = {{"job", flags.job_file},
                {"predictor", flags.predictor},
                {"dataset", DatasetJson(flags.data, data)},
                {"history", K},
                {"push_ratio", push_ratio},
                {"calibration", flags.calibration},
                {"damping", replay.damping},
                {"eval_samples", flags.eval_samples},
                {"windows", judge.windows()},
                {"regression_examples", regression.examples},
                {"inference_seconds", rows[0].score.inference_seconds},
                {"predictors", methods}};
    HPTRAIN_RETURN_IF_ERROR(WriteFileAtomically(flags.output_json, out.dump(2) + "\n"),
                            "--output-json");
  }
  return absl::OkStatus();
}

int EvalCommand(int argc, char** argv) {
  EvalFlags flags;
  FlagSet set("mp2 eval", "--job JOB.yaml --predictor P.mp2p --data H.mp2d [flags]");
  set.String("job", &flags.job_file, "", "the TrainingJob whose model and test split are used");
  set.Repeated("set", &flags.overrides, "override a job field, e.g. --set spec.seed=1");
  set.String("predictor", &flags.predictor, "", "the predictor file to evaluate");
  set.String("data", &flags.data, "", "a held-out snapshot dataset of the job's model");
  set.String("push-ratio", &flags.push_ratio, "",
             "ρ of the replays (the job's spec.strategy.pushRatio, else 0.1)");
  set.Bool("calibration", &flags.calibration,
           "per-tensor calibration in the replays (default false, as spec.strategy.calibration)");
  set.String("damping", &flags.damping, "",
             "share of the predicted change applied in the replays (the job's "
             "spec.strategy.damping, else 0.25)");
  set.Int("eval-samples", &flags.eval_samples, "",
          "test images per accuracy measurement (2000; 0: errors only)");
  set.Int("examples", &flags.examples, "", "cap of the one-step regression sample (200000)");
  set.String("output-json", &flags.output_json, "",
             "write the results here (atomically, on success)");
  set.Int("threads", &flags.threads, "", "libtorch and inference threads (0: all cores)");
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (!set.positional().empty()) {
    return ReportError("mp2 eval", absl::InvalidArgumentError(absl::StrCat(
                                       "unexpected argument \"", set.positional()[0], "\"")));
  }
  absl::Status status = RunEval(flags);
  return status.ok() ? kExitOk : ReportError("mp2 eval", status);
}

}  // namespace

int Mp2Command(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitBadInput;
  }
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (sub == "collect") return Mp2CollectCommand(argc - 1, argv + 1);
  if (sub == "train") return TrainCommand(argc - 1, argv + 1, CommandLine(argc, argv));
  if (sub == "eval") return EvalCommand(argc - 1, argv + 1);
  std::fprintf(stderr, "hptrain mp2: unknown subcommand \"%s\"\n%s", sub.c_str(), kUsage);
  return kExitBadInput;
}

}  // namespace hptrain::cli
