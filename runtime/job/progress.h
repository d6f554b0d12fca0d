// Progress display for `hptrain run`: what a person watching a local run sees.
//
// On a terminal, ProgressDisplay keeps one line redrawn in place (carriage return + clear line):
//
//   [#####...............]  25% epoch 2/4 step 250/1000 loss 0.4321 1234 samples/s ETA 1m30s
//
// (an elastic job's lines add "members 3" after the loss: the coordinator's member count).
//
// When the output is a file or a pipe (CI logs, `kubectl logs`), redrawing would leave hundreds of
// lines of escape codes, so it writes a plain line at most every `log_interval_seconds` and at each
// epoch boundary instead:
//
//   epoch 2/4 step 250/1000 (25.0%) loss 0.4321 1234.5 samples/s elapsed 30s ETA 1m30s
//
// Epoch results are plain lines in both modes. At the end of a run FormatSummaryTable() renders
// the RunSummary (run_summary.h) as an aligned table.
//
// Threading: a ProgressDisplay is not thread-safe; one thread (the launcher's Supervisor::Wait
// callback) calls it. It writes only to the stream it was given, which must outlive it.
#ifndef HPTRAIN_RUNTIME_JOB_PROGRESS_H_
#define HPTRAIN_RUNTIME_JOB_PROGRESS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/job/run_summary.h"

namespace hptrain::job {

// A snapshot of the run, as the launcher assembles it from the workers' reports.
struct ProgressState {
  int epoch = 0;            // current epoch, 1-based; 0 before the first
  int epochs = 0;           // total epochs
  int64_t step = 0;         // global steps completed
  int64_t total_steps = 0;  // 0: derived as epochs * steps_per_epoch
  int64_t steps_per_epoch = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();  // latest training loss; NaN = none yet
  double samples_per_second = 0.0;
  int members = 0;  // elastic jobs: the members now, shown as "members N"; 0 = not shown
  // Seconds since the run started. It is also the display's clock for throttling, which keeps the
  // output a pure function of the states it is given (and testable without sleeping).
  double elapsed_seconds = 0.0;
};

struct ProgressOptions {
  double min_redraw_seconds = 0.1;     // terminal: at most 10 redraws per second
  double log_interval_seconds = 10.0;  // plain output: at most one progress line per interval
  int bar_width = 20;                  // characters between the brackets
};

class ProgressDisplay {
 public:
  // `out` is borrowed. `is_tty` picks the mode; callers pass isatty(fileno(stream)).
  ProgressDisplay(std::ostream& out, bool is_tty, ProgressOptions options = {});
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  // Shows `state` if the mode's throttle allows; otherwise only remembers it. The first update,
  // the last step and (plain mode) the last step of each epoch are always shown.
  void Update(const ProgressState& state);

  // Writes "epoch 2/4 done in 12.3s: train_loss 0.4012 test_loss 0.3561 test_accuracy 87.12%" on a
  // line of its own (clearing the bar first on a terminal; the next Update() redraws it), the
  // last figure the task's primary metric `metric` (runtime/train/task.h) and its `value`:
  // accuracies, fractions in [0, 1], print as percentages, other metrics with four decimals
  // ("test_rmse 0.1234"). NaN values print as "--". With `worker_values` (each worker's own
  // model's metric, by rank; gossip) the line goes on with
  // " worker_accuracy min 80.10% mean 82.00% max 84.00%".
  void EpochEnd(int epoch, const std::string& metric, double value, double test_loss,
                double train_loss, double wall_seconds,
                const std::vector<double>& worker_values = {});
  // The classification task's line: metric "accuracy".
  void EpochEnd(int epoch, double test_accuracy, double test_loss, double train_loss,
                double wall_seconds, const std::vector<double>& worker_test_accuracy = {}) {
    EpochEnd(epoch, "accuracy", test_accuracy, test_loss, train_loss, wall_seconds,
             worker_test_accuracy);
  }

  // Writes "step 250 (epoch 1.25): test_loss 0.3561 test_accuracy 87.12%" on a line of its own:
  // an evaluation within an epoch (spec.evalEverySteps). Otherwise as EpochEnd().
  void Evaluation(int64_t step, double epochs_done, const std::string& metric, double value,
                  double test_loss, const std::vector<double>& worker_values = {});
  void Evaluation(int64_t step, double epochs_done, double test_accuracy, double test_loss,
                  const std::vector<double>& worker_test_accuracy = {}) {
    Evaluation(step, epochs_done, "accuracy", test_accuracy, test_loss, worker_test_accuracy);
  }

  // Clears the bar on a terminal so that what follows starts on a clean line. Idempotent; no-op in
  // plain mode.
  void Finish();

 private:
  void StartResultLine();  // clears the bar: a result line follows
  void DrawBar(const ProgressState& state);
  void WriteLogLine(const ProgressState& state);

  std::ostream& out_;
  const bool is_tty_;
  const ProgressOptions options_;
  int epochs_ = 0;                       // from the last Update(), for EpochEnd()
  bool bar_visible_ = false;             // terminal: a bar is on the current line
  std::optional<double> last_shown_at_;  // elapsed_seconds of the last line drawn or written
  int64_t last_shown_step_ = -1;
};

// Fraction of the run done in [0, 1] (steps over total steps); nullopt when the total is unknown.
std::optional<double> FractionDone(const ProgressState& state);

// Seconds left, extrapolating the elapsed time linearly over the steps left:
// elapsed * (1 - f) / f for f = FractionDone(). nullopt before the first step or without a total.
std::optional<double> EstimateRemainingSeconds(const ProgressState& state);

// "0s", "45s", "3m07s", "1h02m", "2d03h"; "--" for a negative or non-finite value.
std::string FormatDuration(double seconds);

// "0 B", "512 B", "1.50 KiB", "300 MiB", "12.5 GiB": binary units, three significant digits;
// "--" for negative values.
std::string FormatBytes(int64_t bytes);

// " test_accuracy 87.12%", " test_rmse 0.1234": a metric as the result lines print it.
std::string FormatMetric(const std::string& metric, double value);

// The end-of-run report: the run's totals (job, strategy, workers, epochs, steps, wall time,
// samples/s, the task's final primary metric and losses, bytes moved, compute and comm time) over an aligned table
// with one row per rank (rank, group, batch, sent, received, compute s, comm s). Ends with '\n'.
std::string FormatSummaryTable(const RunSummary& summary);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_PROGRESS_H_
