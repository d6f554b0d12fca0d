// Dataset: one split of a data set as the trainer reads it, in batches, whatever its file format.
//
// A Dataset wraps a SampleSource (sample_source.h: random access to a sample's pixels in [0, 1]
// and its target) and turns the samples a step asks for into a float32 batch:
//   1. the pixels as the source reads them (C x H x W, floats in [0, 1]);
//   2. the training split with spec.dataset.augment set: DrawAugment / ApplyAugment (augment.h),
//      every draw a function of (seed, epoch, sample index); the test split with a crop set:
//      CenterCrop to the same output size;
//   3. normalization x -> (x - mean[c]) / std[c], or nothing (normalize: false).
// Nothing is materialized beyond the batch: a built-in set keeps its uint8 pixels (47 MB for
// Fashion-MNIST rather than 188 MB of floats), an npy set stays in its memory-mapped files.
//
// Sources by spec.dataset.format:
//   idx (fashion-mnist, mnist), cifar-binary (cifar10, cifar100), synthetic
//       read into memory (idx_dataset.cc, cifar_dataset.cc, synthetic_dataset.cc) and served by
//       in_memory_source.cc; normalized with the set's own constants
//   npy                                   npy_source.cc
//   imagefolder, filelist, webdataset     image_folder_source.cc, file_list_source.cc,
//                                         webdataset_source.cc
// The user formats are normalized with spec.dataset.mean/std when given, else (normalize: true)
// with the per-channel mean and std of the training split's pixels in [0, 1], computed once per
// process on first use, logged on one line ("data: NAME: normalization mean [..] std [..] from N
// training samples") and, for the decoded formats, kept in a file beside the data
// (channel_stats.cc). The test split uses the training split's.
//
// Errors follow one rule for every file format: a missing directory or file is NotFound naming
// the path; a short file is DataLoss "PATH: truncated: ..."; a bad header, dimension or label is
// DataLoss naming the path and the value. A sample that cannot be read fails Gather with the
// source's DataLoss, or, under spec.dataset.skipCorrupt, is left out of the batch, counted
// (corrupt_samples()) and logged on one line.
//
// Thread-safety: Gather(), Prefetch() and the accessors may be called concurrently.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_H_

#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/data/sample_source.h"

namespace hptrain::train {
namespace internal {
class InMemorySource;
}  // namespace internal

// A gathered batch, on the CPU. inputs: float32 [n, C, H, W]; targets: int64 [n] for
// TargetKind::kClass, float32 [n, dim] for kVector. n is the number of indices asked for, less
// `dropped` corrupt samples under spec.dataset.skipCorrupt.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  int64_t dropped = 0;
};

struct GatherOptions {
  int64_t epoch = 0;  // the epoch the batch belongs to: augmentation draws from it
};

// Per-channel normalization x -> (x - mean[c]) / std[c]; both empty: none.
struct Normalization {
  std::vector<float> mean;  // one per channel
  std::vector<float> std;
  bool none() const { return mean.empty(); }
};

// The raw content of a built-in data set, as a reader produces it. No libtorch in here.
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
  // Opens spec for `split` (see OpenDataset below).
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(const job::DatasetSpec& spec, Split split,
                                                       uint64_t seed);

  // Validates `data` (pixel count matches labels x shape, labels in range, mean/std sizes, std > 0)
  // and takes it, without augmentation. normalize = false ignores mean/std. Returns
  // InvalidArgument on a mismatch.
  static absl::StatusOr<std::unique_ptr<Dataset>> FromData(DatasetData data, bool normalize);

  // `source` as split `split` of `spec` (its augment, normalize, mean/std, skipCorrupt; `seed`
  // keys augmentation). Without explicit mean/std and with normalize true, the statistics are
  // the training split's: `source`'s own for kTrain; for kTest, opened from spec on first use.
  // InvalidArgument if explicit mean/std do not fit the source's channels or the augmentation
  // does not fit its shape.
  static absl::StatusOr<std::unique_ptr<Dataset>> FromSource(std::unique_ptr<SampleSource> source,
                                                             const job::DatasetSpec& spec,
                                                             Split split, uint64_t seed);

  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& name() const { return source_->name(); }
  int64_t size() const { return size_; }
  // The shape of a gathered sample: after augmentation's crop (both splits).
  const SampleShape& shape() const { return shape_; }
  const TargetInfo& targets() const { return targets_; }
  // targets().num_classes: the class count of a kClass data set.
  int num_classes() const { return targets_.num_classes; }
  // Sample i's class (kClass data sets), or -1 if it cannot be read.
  int64_t label(int64_t i) const;
  // Samples left out of batches so far under spec.dataset.skipCorrupt.
  int64_t corrupt_samples() const { return corrupt_.load(std::memory_order_relaxed); }

  // A hint that `indices` are gathered next (SampleSource::Prefetch). Never blocks long.
  void Prefetch(const std::vector<int64_t>& indices) const { source_->Prefetch(indices); }

  // Returns the samples `indices` (in that order; repeats allowed) as a CPU batch.
  // OutOfRange if an index is outside [0, size()); the source's DataLoss for an unreadable sample
  // (unless skipCorrupt); the statistics' error on their first use; Internal if libtorch fails
  // to allocate. An empty `indices` gives tensors with a leading dimension of 0.
  absl::StatusOr<Batch> Gather(const std::vector<int64_t>& indices,
                               const GatherOptions& options = {}) const;

  // The normalization Gather applies (the training statistics are computed on first use): a
  // pixel v of channel c becomes (v / 255 - mean[c]) / std[c]; none() when it is off. What an
  // exported model's user must apply to its inputs (`hptrain export`).
  absl::StatusOr<Normalization> normalization() const;

 private:
  Dataset(std::unique_ptr<SampleSource> source, const job::DatasetSpec& spec, Split split,
          uint64_t seed);
  // Resolves the normalization once; builds the lookup table of the uint8 path.
  absl::Status Prepare() const;
  absl::StatusOr<Batch> GatherUint8(const std::vector<int64_t>& indices) const;
  absl::StatusOr<Batch> GatherGeneral(const std::vector<int64_t>& indices,
                                      const GatherOptions& options) const;

  std::unique_ptr<SampleSource> source_;
  job::DatasetSpec spec_;
  Split split_;
  uint64_t seed_;
  int64_t size_ = 0;
  SampleShape in_shape_;  // as the source reads it
  SampleShape shape_;     // as gathered
  TargetInfo targets_;
  bool augment_ = false;  // training split with spec.dataset.augment
  bool crop_ = false;     // test split whose shape the crop changes
  // A built-in set's source, for the lookup-table path (no augmentation, no crop); else null.
  const internal::InMemorySource* in_memory_ = nullptr;

  // Set once by Prepare(), read-only afterwards.
  mutable std::once_flag prepared_;
  mutable absl::Status prepare_status_;
  mutable Normalization normalization_;
  // Fixed at construction when known (built-in sets, explicit mean/std, normalize false).
  bool normalization_fixed_ = false;
  // lut_[c * 256 + v]: the float value of pixel v in channel c.
  mutable std::vector<float> lut_;

  mutable std::atomic<int64_t> corrupt_{0};
};

// Names OpenDataset() knows for the built-in formats, in registry order.
std::vector<std::string> DatasetNames();

// Opens spec for `split`. The built-in sets by spec.name; spec.path and spec.format default per
// name (fashion-mnist: /usr/share/datasets/fashion-mnist, idx; mnist: /usr/share/datasets/mnist,
// idx; cifar10: /usr/share/datasets/cifar-10-batches-bin, cifar-binary; cifar100:
// /usr/share/datasets/cifar-100-binary, cifar-binary; synthetic: no path, synthetic). The user
// formats (npy, imagefolder, filelist, webdataset) by spec.format, spec.name being a free label.
// `seed` makes the synthetic data and keys augmentation. Blocks while reading (or mapping) the
// files. Returns InvalidArgument for an unknown name or a format that does not fit the name, and
// the source's errors (NotFound, DataLoss) otherwise.
absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const job::DatasetSpec& spec, Split split,
                                                     uint64_t seed);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_H_
