#include "runtime/train/evaluator.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/base/status.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {

double EvaluationResult::value(const std::string& name) const {
  for (const auto& [metric, v] : metrics) {
    if (metric == name) return v;
  }
  return 0.0;
}

Evaluator::Evaluator(const Dataset* test, Model* model, const Task* task, comm::Communicator* comm,
                     int rank, ToDevice to_device)
    : test_(test),
      model_(model),
      task_(task),
      comm_(comm),
      rank_(rank),
      to_device_(std::move(to_device)) {}

absl::Status Evaluator::EvaluateRange(int64_t begin, int64_t end, MetricState* state) {
  *state = task_->EmptyState();
  model_->train(false);
  absl::Status task_status;
  absl::Status status = TorchCall("evaluation", [&] {
    torch::NoGradGuard no_grad;
    for (int64_t start = begin; start < end; start += 1000) {
      std::vector<int64_t> indices;
      for (int64_t i = start; i < std::min(end, start + 1000); ++i) indices.push_back(i);
      auto batch = test_->Gather(indices);
      if (!batch.ok()) throw std::runtime_error(std::string(batch.status().message()));
      batch->inputs = to_device_(batch->inputs);
      batch->targets = to_device_(batch->targets);
      auto outputs = model_->Forward(batch->inputs);
      if (!outputs.ok()) throw std::runtime_error(std::string(outputs.status().message()));
      task_status = task_->Accumulate(*outputs, batch->targets, state);
      if (!task_status.ok()) return;
    }
  });
  model_->train(true);
  HPTRAIN_RETURN_IF_ERROR(status);
  return Annotate(task_status, "evaluation");
}

absl::Status Evaluator::Evaluate(EvaluationResult* out) {
  const int64_t n = test_->size();
  const int world = comm_->size();
  const int64_t begin = n * rank_ / world;
  const int64_t end = n * (rank_ + 1) / world;
  MetricState state;
  HPTRAIN_RETURN_IF_ERROR(EvaluateRange(begin, end, &state));
  // The sums in double, added in rank order on every rank: the same figures everywhere.
  std::vector<double> mine = {state.count, state.loss_sum};
  mine.insert(mine.end(), state.sums.begin(), state.sums.end());
  std::vector<double> all(mine.size() * static_cast<size_t>(world));
  HPTRAIN_RETURN_IF_ERROR(comm_->AllGather(mine.data(), all.data(), mine.size() * sizeof(double)),
                          "evaluation sums");
  MetricState total = task_->EmptyState();
  for (int r = 0; r < world; ++r) {
    const double* block = all.data() + static_cast<size_t>(r) * mine.size();
    total.count += block[0];
    total.loss_sum += block[1];
    for (size_t i = 0; i < total.sums.size(); ++i) total.sums[i] += block[2 + i];
  }
  if (task_->row_width() > 0) {
    std::vector<std::string> blocks;
    HPTRAIN_RETURN_IF_ERROR(
        comm_->AllGatherV(state.rows.data(), state.rows.size() * sizeof(float), &blocks),
        "evaluation scores");
    for (const std::string& block : blocks) {
      const size_t floats = block.size() / sizeof(float);
      const size_t at = total.rows.size();
      total.rows.resize(at + floats);
      if (floats > 0) std::memcpy(total.rows.data() + at, block.data(), floats * sizeof(float));
    }
  }
  out->loss = total.count > 0 ? total.loss_sum / total.count : 0.0;
  out->metrics = task_->Metrics(total);
  return absl::OkStatus();
}

absl::Status Evaluator::Evaluate(double* accuracy, double* loss) {
  EvaluationResult evaluation;
  HPTRAIN_RETURN_IF_ERROR(Evaluate(&evaluation));
  *accuracy = evaluation.value("accuracy");
  *loss = evaluation.loss;
  return absl::OkStatus();
}

absl::Status Evaluator::EvaluateOwnModel(double* primary) {
  MetricState state;
  HPTRAIN_RETURN_IF_ERROR(EvaluateRange(0, test_->size(), &state), "this worker's own model");
  *primary = task_->Metrics(state).front().second;
  return absl::OkStatus();
}

absl::Status Evaluator::GatherAccuracies(double own, std::vector<double>* all) {
  all->assign(static_cast<size_t>(comm_->size()), 0.0);
  return Annotate(comm_->AllGather(&own, all->data(), sizeof(double)),
                  "gathering the workers' own accuracies");
}

}  // namespace hptrain::train
