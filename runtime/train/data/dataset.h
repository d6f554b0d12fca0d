// Dataset: an in-memory, read-only image classification data set.
//
// Samples are stored compactly as uint8 pixels in C x H x W order (what MNIST, Fashion-MNIST and
// CIFAR store on disk) with one integer label each. Gather() converts the requested samples to a
// float32 batch at the time of the call, mapping a pixel v of channel c to
//   (v / 255 - mean[c]) / std[c]          (normalize = true: the data set's own constants)
//   v / 255                               (normalize = false)
// so a 60,000-sample Fashion-MNIST costs 47 MB rather than 188 MB, and every worker gathers only
// its slice of each step (see sampler.h).
//
// Data sets are opened by name through OpenDataset(); the readers behind it:
//   fashion-mnist, mnist  format "idx"           idx_dataset.cc
//   cifar10, cifar100     format "cifar-binary"  cifar_dataset.cc
//   synthetic             format "synthetic"     synthetic_dataset.cc
// Errors follow one rule for every file format: a missing directory or file is NotFound naming
// the path; a short file is DataLoss "PATH: truncated: expected N bytes of ... data, got M";
// a bad header, dimension or label is DataLoss naming the path and the value.
//
// Thread-safety: a Dataset is immutable after construction; Gather() may be called concurrently.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/data/sample_source.h"

namespace hptrain::train {

// A gathered batch, on the CPU. inputs: float32 [n, C, H, W]; targets: int64 [n].
struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

// The raw content of a data set, as a reader produces it. No libtorch in here.
struct DatasetData {
  std::string name;  // e.g. "fashion-mnist/train", for messages
  SampleShape shape;
  int num_classes = 0;
  std::vector<uint8_t> pixels;  // size() * shape.numel() bytes, sample-major, C x H x W
  std::vector<int32_t> labels;  // one per sample, in [0, num_classes)
  std::vector<float> mean;      // per channel (size C), or one value for all channels
  std::vector<float> std;       // idem; all > 0
};

class Dataset {
 public:
  // Validates `data` (pixel count matches labels x shape, labels in range, mean/std sizes, std > 0)
  // and takes it. normalize = false ignores mean/std. Returns InvalidArgument on a mismatch.
  static absl::StatusOr<std::unique_ptr<Dataset>> FromData(DatasetData data, bool normalize);

  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& name() const { return data_.name; }
  int64_t size() const { return static_cast<int64_t>(data_.labels.size()); }
  const SampleShape& shape() const { return data_.shape; }
  int num_classes() const { return data_.num_classes; }
  // Label of sample i, 0 <= i < size().
  int label(int64_t i) const { return data_.labels[static_cast<size_t>(i)]; }

  // The normalization Gather applies, per channel (size C): a pixel v of channel c becomes
  // (v / 255 - mean()[c]) / std()[c]; mean 0 and std 1 when normalization is off. What an
  // exported model's user must apply to its inputs (`hptrain export`).
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& std() const { return std_; }

  // Returns the samples `indices` (in that order; repeats allowed) as a CPU batch.
  // OutOfRange if an index is outside [0, size()); Internal if libtorch fails to allocate.
  // An empty `indices` gives tensors with a leading dimension of 0.
  absl::StatusOr<Batch> Gather(const std::vector<int64_t>& indices) const;

 private:
  Dataset(DatasetData data, bool normalize);

  DatasetData data_;
  // lut_[c * 256 + v]: the float value of pixel v in channel c.
  std::vector<float> lut_;
  std::vector<float> mean_;  // per channel, in force
  std::vector<float> std_;
};

// Names OpenDataset() knows, in registry order.
std::vector<std::string> DatasetNames();

// Opens a data set by spec.name for `split`. spec.path and spec.format default per name
// (fashion-mnist: /usr/share/datasets/fashion-mnist, idx; mnist: /usr/share/datasets/mnist, idx;
// cifar10: /usr/share/datasets/cifar-10-batches-bin, cifar-binary; cifar100:
// /usr/share/datasets/cifar-100-binary, cifar-binary; synthetic: no path, synthetic).
// `seed` matters only for synthetic data. Blocks while reading the files.
// Returns InvalidArgument for an unknown name or a format that does not fit the name, and the
// reader's errors (NotFound, DataLoss) otherwise.
absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const job::DatasetSpec& spec, Split split,
                                                     uint64_t seed);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_H_
