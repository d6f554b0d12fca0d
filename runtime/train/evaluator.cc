#include "runtime/train/evaluator.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/base/status.h"
#include "runtime/train/torch_call.h"

namespace hptrain::train {

Evaluator::Evaluator(const Dataset* test, Model* model, comm::Communicator* comm, int rank,
                     ToDevice to_device)
    : test_(test), model_(model), comm_(comm), rank_(rank), to_device_(std::move(to_device)) {}

absl::Status Evaluator::EvaluateRange(int64_t begin, int64_t end, double* correct_out,
                                      double* loss_out) {
  double correct = 0, loss_sum = 0;
  model_->train(false);
  absl::Status status = TorchCall("evaluation", [&] {
    torch::NoGradGuard no_grad;
    for (int64_t start = begin; start < end; start += 1000) {
      std::vector<int64_t> indices;
      for (int64_t i = start; i < std::min(end, start + 1000); ++i) indices.push_back(i);
      auto batch = test_->Gather(indices);
      if (!batch.ok()) throw std::runtime_error(std::string(batch.status().message()));
      batch->inputs = to_device_(batch->inputs);
      batch->targets = to_device_(batch->targets);
      auto logits = model_->Forward(batch->inputs);
      if (!logits.ok()) throw std::runtime_error(std::string(logits.status().message()));
      loss_sum += torch::nn::functional::cross_entropy(
                      *logits, batch->targets,
                      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                      .item<double>();
      correct += logits->argmax(1).eq(batch->targets).sum().item<double>();
    }
  });
  model_->train(true);
  HPTRAIN_RETURN_IF_ERROR(status);
  *correct_out = correct;
  *loss_out = loss_sum;
  return absl::OkStatus();
}

absl::Status Evaluator::Evaluate(double* accuracy, double* loss) {
  const int64_t n = test_->size();
  const int world = comm_->size();
  const int64_t begin = n * rank_ / world;
  const int64_t end = n * (rank_ + 1) / world;
  double correct = 0, loss_sum = 0;
  // Samples skipped as corrupt (spec.dataset.skipCorrupt) are not in the denominator.
  const int64_t corrupt_before = test_->corrupt_samples();
  HPTRAIN_RETURN_IF_ERROR(EvaluateRange(begin, end, &correct, &loss_sum));
  const int64_t evaluated = end - begin - (test_->corrupt_samples() - corrupt_before);
  float totals[3] = {static_cast<float>(correct), static_cast<float>(loss_sum),
                     static_cast<float>(evaluated)};
  HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSum(totals, 3), "evaluation all-reduce");
  *accuracy = totals[2] > 0 ? totals[0] / totals[2] : 0.0;
  *loss = totals[2] > 0 ? totals[1] / totals[2] : 0.0;
  return absl::OkStatus();
}

absl::Status Evaluator::EvaluateOwnModel(double* accuracy) {
  const int64_t n = test_->size();
  double correct = 0, loss_sum = 0;
  const int64_t corrupt_before = test_->corrupt_samples();
  HPTRAIN_RETURN_IF_ERROR(EvaluateRange(0, n, &correct, &loss_sum), "this worker's own model");
  const int64_t evaluated = n - (test_->corrupt_samples() - corrupt_before);
  *accuracy = evaluated > 0 ? correct / static_cast<double>(evaluated) : 0.0;
  return absl::OkStatus();
}

absl::Status Evaluator::GatherAccuracies(double own, std::vector<double>* all) {
  all->assign(static_cast<size_t>(comm_->size()), 0.0);
  return Annotate(comm_->AllGather(&own, all->data(), sizeof(double)),
                  "gathering the workers' own accuracies");
}

}  // namespace hptrain::train
