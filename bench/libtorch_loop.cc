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

#include "runtime/job/job_parser.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/data/sampler.h"
#include "runtime/train/models/model.h"

using namespace hptrain;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hptrain-libtorch-loop JOB.yaml [--epochs N] [--threads T]\n");
    return 2;
  }
  std::vector<std::string> overrides;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--epochs") overrides.push_back(std::string("spec.epochs=") + argv[i + 1]);
    if (flag == "--threads") threads = std::stoi(argv[i + 1]);
  }
  auto spec = job::ParseJobFile(argv[1], overrides);
  if (!spec.ok()) {
    std::fprintf(stderr, "hptrain-libtorch-loop: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
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
