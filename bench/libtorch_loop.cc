// The single-process baseline: a plain libtorch training loop (torch::optim::SGD, mean loss) on
// the same data set, model and hyper-parameters as a job file, with no communication at all.
//
//   build/bin/hptrain-libtorch-loop examples/fashion-mnist.yaml [--epochs N] [--threads T]
//
// Prints one JSON line: {"system": "libtorch-single-process", "samples_per_second", ...}.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "runtime/base/exit_codes.h"
#include "runtime/cli/flags.h"
#include "runtime/job/job_parser.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/data/sampler.h"
#include "runtime/train/models/model.h"

using namespace hptrain;

int main(int argc, char** argv) {
  constexpr char kProgram[] = "hptrain-libtorch-loop";
  int epochs = 0;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  auto flags = cli::FlagSet::ForProgram(kProgram, "JOB.yaml [--epochs N] [--threads T]");
  flags.Int("epochs", &epochs, "", "epochs to train (default: the job's spec.epochs)");
  flags.Int("threads", &threads, "", "libtorch intra-op threads (default: every core)");
  if (int code = 0; !flags.ParseOrExit(argc, argv, &code)) return code;
  if (flags.positional().size() != 1 || epochs < 0 || threads < 1) {
    return ReportErrorAs(kProgram, absl::InvalidArgumentError(
                                       "expected one job file, --epochs >= 0 and --threads >= 1 "
                                       "(see hptrain-libtorch-loop --help)"));
  }
  std::vector<std::string> overrides;
  if (epochs > 0) overrides.push_back("spec.epochs=" + std::to_string(epochs));
  auto spec = job::ParseJobFile(flags.positional()[0], overrides);
  if (!spec.ok()) return ReportErrorAs(kProgram, spec.status());
  torch::set_num_threads(threads);
  auto train = train::OpenDataset(spec->dataset, train::Split::kTrain, spec->seed);
  auto test = train::OpenDataset(spec->dataset, train::Split::kTest, spec->seed);
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "hptrain-libtorch-loop: cannot open the data set\n");
    return 2;
  }
  train::ModelShape shape{(*train)->shape().channels, (*train)->shape().height,
                          (*train)->shape().width, (*train)->num_classes()};
  auto model = train::CreateModel(spec->model, shape, spec->seed);
  if (!model.ok()) return 2;
  torch::optim::SGD optimizer((*model)->parameters(),
                              torch::optim::SGDOptions(spec->optimizer.lr)
                                  .momentum(spec->optimizer.momentum)
                                  .weight_decay(spec->optimizer.weight_decay));
  const int batch = spec->global_batch_size;
  const int64_t steps = train::StepsPerEpoch((*train)->size(), batch);
  double train_seconds = 0;
  std::string per_epoch;
  for (int epoch = 0; epoch < spec->epochs; ++epoch) {
    auto perm = train::EpochPermutation((*train)->size(), spec->seed, epoch);
    auto start = std::chrono::steady_clock::now();
    (*model)->train(true);
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int64_t> idx(perm.begin() + s * batch, perm.begin() + (s + 1) * batch);
      auto b = (*train)->Gather(idx);
      optimizer.zero_grad();
      auto logits = (*model)->Forward(b->inputs);
      torch::Tensor loss = torch::nn::functional::cross_entropy(*logits, b->targets);
      loss.backward();
      optimizer.step();
    }
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    torch::NoGradGuard no_grad;
    (*model)->train(false);
    std::vector<int64_t> all((*test)->size());
    for (int64_t i = 0; i < (*test)->size(); ++i) all[i] = i;
    auto t = (*test)->Gather(all);
    double accuracy = (*(*model)->Forward(t->inputs)).argmax(1).eq(t->targets).to(torch::kFloat)
                          .mean().item<double>();
    per_epoch += (epoch ? "," : "") + std::string("{\"epoch\":") + std::to_string(epoch + 1) +
                 ",\"test_accuracy\":" + std::to_string(accuracy) + "}";
  }
  std::printf("{\"system\":\"libtorch-single-process\",\"threads\":%d,\"steps\":%ld,"
              "\"train_seconds\":%.3f,\"samples_per_second\":%.1f,\"per_epoch\":[%s]}\n",
              threads, static_cast<long>(steps * spec->epochs), train_seconds,
              steps * spec->epochs * batch / train_seconds, per_epoch.c_str());
  return 0;
}
