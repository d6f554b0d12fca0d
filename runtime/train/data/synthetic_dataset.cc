// Synthetic data: a learnable task that needs no files and is identical in every process that
// uses the same seed.
//
// Each sample is x = quantize(127.5 + 48 * A z), z uniform in [-1, 1)^16, A a fixed random
// D x 16 matrix (D = C*H*W): pixels live near a 16-dimensional subspace, so a model generalizes
// from a few thousand samples. Its label is argmax_k (W (x/255 - 0.5))_k for a fixed random
// teacher W (classes x D): a linear rule, so the task is learnable to ~100 %. A, W and the train
// and test samples come from separate splitmix64 streams derived from the seed; arithmetic is
// plain double loops (no BLAS), so results do not depend on thread count or library.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/base/splitmix64.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train::internal {
namespace {

constexpr int kLatent = 16;
// (A z)_d has variance 16 / 9 (sum of 16 products of two U(-1, 1)); 48 x 4/3 = 64 = 0.25 x 255.
constexpr double kScale = 48.0;

using ::hptrain::SplitMix64;

// Independent stream `tag` of `seed`.
SplitMix64 Stream(uint64_t seed, uint64_t tag) {
  SplitMix64 mixer(seed ^ (tag * 0xD1B54A32D192ED03ULL));
  return SplitMix64(mixer.Next());
}

std::vector<double> RandomMatrix(SplitMix64 rng, size_t n) {
  std::vector<double> m(n);
  for (double& v : m) v = rng.Symmetric();
  return m;
}

}  // namespace

absl::StatusOr<DatasetData> MakeSynthetic(const ReaderArgs& args) {
  const job::SyntheticSpec& spec = args.spec.synthetic;
  if (spec.shape.size() != 3 || spec.shape[0] <= 0 || spec.shape[1] <= 0 || spec.shape[2] <= 0) {
    return absl::InvalidArgumentError("synthetic: shape must be three positive sizes C, H, W");
  }
  if (spec.classes < 2 || spec.classes > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic: classes must be in [2, 100000], got ", spec.classes));
  }
  const int64_t count = args.split == Split::kTrain ? spec.samples : spec.test_samples;
  if (count <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic: ", SplitName(args.split),
                                                   " sample count must be positive, got ", count));
  }
  DatasetData data;
  data.name = absl::StrCat("synthetic/", SplitName(args.split));
  data.shape = SampleShape{spec.shape[0], spec.shape[1], spec.shape[2]};
  data.num_classes = spec.classes;
  // Pixels are 127.5 + 48 * N(0, 16/9) roughly: mean 0.5, std ~0.25 of full scale.
  data.mean = {0.5f};
  data.std = {0.25f};

  const auto dim = static_cast<size_t>(data.shape.numel());
  const auto classes = static_cast<size_t>(spec.classes);
  const std::vector<double> basis = RandomMatrix(Stream(args.seed, 1), dim * kLatent);
  const std::vector<double> teacher = RandomMatrix(Stream(args.seed, 2), classes * dim);
  SplitMix64 rng = Stream(args.seed, args.split == Split::kTrain ? 3 : 4);

  data.pixels.resize(static_cast<size_t>(count) * dim);
  data.labels.resize(static_cast<size_t>(count));
  std::vector<double> centered(dim);
  for (int64_t s = 0; s < count; ++s) {
    double z[kLatent];
    for (double& v : z) v = rng.Symmetric();
    uint8_t* px = data.pixels.data() + static_cast<size_t>(s) * dim;
    for (size_t d = 0; d < dim; ++d) {
      double v = 0.0;
      for (int j = 0; j < kLatent; ++j) v += basis[d * kLatent + j] * z[j];
      const double p = std::clamp(std::round(127.5 + kScale * v), 0.0, 255.0);
      px[d] = static_cast<uint8_t>(p);
      centered[d] = p / 255.0 - 0.5;
    }
    size_t best = 0;
    double best_score = -INFINITY;
    for (size_t k = 0; k < classes; ++k) {
      double score = 0.0;
      const double* w = teacher.data() + k * dim;
      for (size_t d = 0; d < dim; ++d) score += w[d] * centered[d];
      if (score > best_score) best_score = score, best = k;
    }
    data.labels[static_cast<size_t>(s)] = static_cast<int32_t>(best);
  }
  return data;
}

}  // namespace hptrain::train::internal
