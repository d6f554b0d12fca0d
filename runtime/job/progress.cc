#include "runtime/job/progress.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hptrain::job {
namespace {

// Carriage return + "erase entire line" (ANSI EL2): the bar is rewritten in place.
constexpr char kClearLine[] = "\r\033[2K";

int64_t TotalSteps(const ProgressState& s) {
  if (s.total_steps > 0) return s.total_steps;
  return static_cast<int64_t>(s.epochs) * s.steps_per_epoch;
}

std::string FormatLoss(double loss) {
  return std::isfinite(loss) ? absl::StrFormat("%.4f", loss) : "--";
}

std::string FormatPercent(double fraction) {
  return std::isfinite(fraction) ? absl::StrFormat("%.2f%%", 100.0 * fraction) : "--";
}

// Accuracies are fractions shown as percentages; other metrics are shown as they are.
std::string FormatValue(const std::string& metric, double value) {
  if (absl::EndsWith(metric, "accuracy")) return FormatPercent(value);
  return FormatLoss(value);
}

// " worker_accuracy min 80.10% mean 82.00% max 84.00%", or "" without values.
std::string FormatWorkerAccuracies(const std::vector<double>& values,
                                   const std::string& metric = "accuracy") {
  if (values.empty()) return "";
  const AccuracySpread spread = SpreadOf(values);
  return absl::StrCat(" worker_", metric, " min ", FormatValue(metric, spread.min), " mean ",
                      FormatValue(metric, spread.mean), " max ", FormatValue(metric, spread.max));
}

std::string EpochOf(int epoch, int epochs) {
  return epochs > 0 ? absl::StrCat(epoch, "/", epochs) : absl::StrCat(epoch);
}

std::string StepOf(const ProgressState& s) {
  const int64_t total = TotalSteps(s);
  return total > 0 ? absl::StrCat(s.step, "/", total) : absl::StrCat(s.step);
}

std::string Eta(const ProgressState& s) {
  const std::optional<double> eta = EstimateRemainingSeconds(s);
  return eta ? FormatDuration(*eta) : "--";
}

// A table with a header row; each column right-aligned unless listed in `left`.
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& left) {
  std::vector<size_t> width(left.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - row[c].size(), ' ');
      line += left[c] ? row[c] + pad : pad + row[c];
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace

std::string FormatMetric(const std::string& metric, double value) {
  return absl::StrCat(" test_", metric, " ", FormatValue(metric, value));
}

std::optional<double> FractionDone(const ProgressState& state) {
  const int64_t total = TotalSteps(state);
  if (total <= 0) return std::nullopt;
  return std::clamp(static_cast<double>(state.step) / static_cast<double>(total), 0.0, 1.0);
}

std::optional<double> EstimateRemainingSeconds(const ProgressState& state) {
  const std::optional<double> fraction = FractionDone(state);
  if (!fraction || *fraction <= 0.0 || !std::isfinite(state.elapsed_seconds) ||
      state.elapsed_seconds < 0.0) {
    return std::nullopt;
  }
  return state.elapsed_seconds * (1.0 - *fraction) / *fraction;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0) return "--";
  const int64_t s = std::llround(seconds);
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 0) return "--";
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  // Three significant digits whatever the magnitude.
  const int decimals = value < 10.0 ? 2 : value < 100.0 ? 1 : 0;
  return absl::StrFormat("%.*f %s", decimals, value, kUnits[unit]);
}

ProgressDisplay::ProgressDisplay(std::ostream& out, bool is_tty, ProgressOptions options)
    : out_(out), is_tty_(is_tty), options_(options) {}

void ProgressDisplay::Update(const ProgressState& state) {
  epochs_ = state.epochs;
  const int64_t total = TotalSteps(state);
  const bool last_step = total > 0 && state.step >= total && state.step != last_shown_step_;
  const double interval = is_tty_ ? options_.min_redraw_seconds : options_.log_interval_seconds;
  // A clock that went backwards (a new run's state) shows at once rather than freezing the output.
  const bool due = !last_shown_at_ || state.elapsed_seconds < *last_shown_at_ ||
                   state.elapsed_seconds - *last_shown_at_ >= interval;
  const bool epoch_boundary = !is_tty_ && state.steps_per_epoch > 0 && state.step > 0 &&
                              state.step % state.steps_per_epoch == 0 &&
                              state.step != last_shown_step_;
  if (!due && !last_step && !epoch_boundary) return;
  last_shown_at_ = state.elapsed_seconds;
  last_shown_step_ = state.step;
  if (is_tty_) {
    DrawBar(state);
  } else {
    WriteLogLine(state);
  }
}

namespace {
// " members 3" for an elastic job's state, "" otherwise.
std::string Members(const ProgressState& state) {
  return state.members > 0 ? absl::StrCat(" members ", state.members) : "";
}
}  // namespace

void ProgressDisplay::DrawBar(const ProgressState& state) {
  const double fraction = FractionDone(state).value_or(0.0);
  const int width = std::max(options_.bar_width, 1);
  const int filled = std::clamp(static_cast<int>(fraction * width), 0, width);
  out_ << kClearLine << '[' << std::string(filled, '#') << std::string(width - filled, '.') << "] "
       << absl::StrFormat("%3d%%", static_cast<int>(fraction * 100.0)) << " epoch "
       << EpochOf(state.epoch, state.epochs) << " step " << StepOf(state) << " loss "
       << FormatLoss(state.loss) << Members(state) << ' '
       << absl::StrFormat("%.0f", state.samples_per_second) << " samples/s ETA " << Eta(state);
  out_.flush();
  bar_visible_ = true;
}

void ProgressDisplay::WriteLogLine(const ProgressState& state) {
  const std::optional<double> fraction = FractionDone(state);
  out_ << "epoch " << EpochOf(state.epoch, state.epochs) << " step " << StepOf(state);
  if (fraction) out_ << absl::StrFormat(" (%.1f%%)", 100.0 * *fraction);
  out_ << " loss " << FormatLoss(state.loss) << Members(state) << ' '
       << absl::StrFormat("%.1f", state.samples_per_second) << " samples/s elapsed "
       << FormatDuration(state.elapsed_seconds) << " ETA " << Eta(state) << '\n';
  out_.flush();
}

void ProgressDisplay::StartResultLine() {
  if (bar_visible_) out_ << kClearLine;
  bar_visible_ = false;
  // Redraw the bar at the next Update() rather than leave the terminal without one until the
  // throttle allows.
  if (is_tty_) last_shown_at_.reset();
}

void ProgressDisplay::EpochEnd(int epoch, const std::string& metric, double value,
                               double test_loss, double train_loss, double wall_seconds,
                               const std::vector<double>& worker_values) {
  StartResultLine();
  out_ << "epoch " << EpochOf(epoch, epochs_) << " done in "
       << (std::isfinite(wall_seconds) ? absl::StrFormat("%.1fs", wall_seconds) : "--")
       << ": train_loss " << FormatLoss(train_loss) << " test_loss " << FormatLoss(test_loss)
       << FormatMetric(metric, value) << FormatWorkerAccuracies(worker_values, metric) << '\n';
  out_.flush();
}

void ProgressDisplay::Evaluation(int64_t step, double epochs_done, const std::string& metric,
                                 double value, double test_loss,
                                 const std::vector<double>& worker_values) {
  StartResultLine();
  out_ << "step " << step << " (epoch " << absl::StrFormat("%.2f", epochs_done) << "): test_loss "
       << FormatLoss(test_loss) << FormatMetric(metric, value)
       << FormatWorkerAccuracies(worker_values, metric) << '\n';
  out_.flush();
}

void ProgressDisplay::Finish() {
  if (!bar_visible_) return;
  out_ << kClearLine;
  out_.flush();
  bar_visible_ = false;
}

std::string FormatSummaryTable(const RunSummary& s) {
  int64_t sent = 0;
  int64_t received = 0;
  double compute = 0.0;
  double comm = 0.0;
  for (const RankSummary& r : s.ranks) {
    sent += r.bytes_sent;
    received += r.bytes_received;
    compute += r.compute_seconds;
    comm += r.comm_seconds;
  }
  std::string out = absl::StrCat("job ", s.job, "  strategy ", s.strategy, "  workers ", s.workers,
                                 "  epochs ", s.epochs, "  steps ", s.steps, "\n");
  if (!s.strategy_decision.empty()) {
    absl::StrAppend(&out, "strategy ", s.strategy, " ", s.strategy_decision, "\n");
  }
  absl::StrAppend(&out, "wall ", FormatDuration(s.wall_seconds), "  throughput ",
                  absl::StrFormat("%.1f", s.samples_per_second), " samples/s\n");
  // Summaries from before tasks have no metrics: their accuracy is test_accuracy.
  const double final_value = s.final.metrics.empty() && s.metric == "accuracy"
                                 ? s.final.test_accuracy
                                 : MetricValue(s.final.metrics, s.metric);
  absl::StrAppend(&out, "final", FormatMetric(s.metric, final_value), "  test_loss ",
                  FormatLoss(s.final.test_loss), "  train_loss ", FormatLoss(s.final.train_loss),
                  s.final.worker_test_accuracy.empty() ? "" : " ",
                  FormatWorkerAccuracies(s.final.worker_test_accuracy, s.metric), "\n");
  absl::StrAppend(&out, "total sent ", FormatBytes(sent), "  received ", FormatBytes(received),
                  "  compute ", absl::StrFormat("%.1fs", compute), "  comm ",
                  absl::StrFormat("%.1fs", comm), "\n");
  if (s.ranks.empty()) return out;

  // gossip: the model exchanges each worker took part in (a slow worker takes part in fewer).
  const bool gossip = s.strategy == "gossip";
  std::vector<std::vector<std::string>> rows = {
      {"rank", "group", "batch", "sent", "received", "compute s", "comm s"}};
  if (gossip) rows[0].push_back("exchanges");
  for (const RankSummary& r : s.ranks) {
    rows.push_back({absl::StrCat(r.rank), r.group, absl::StrCat(r.batch_size),
                    FormatBytes(r.bytes_sent), FormatBytes(r.bytes_received),
                    absl::StrFormat("%.2f", r.compute_seconds),
                    absl::StrFormat("%.2f", r.comm_seconds)});
    if (gossip) rows.back().push_back(absl::StrCat(r.exchanges));
  }
  std::vector<bool> left(rows[0].size(), false);
  left[1] = true;
  absl::StrAppend(&out, "\n", AlignColumns(rows, left));
  return out;
}

}  // namespace hptrain::job
