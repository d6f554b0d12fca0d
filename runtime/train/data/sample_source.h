// SampleSource: one split of a data set as a reader sees it, by index, before normalization and
// augmentation. Each file format implements it (npy_source.cc, image_folder_source.cc,
// file_list_source.cc, webdataset_source.cc; the built-in sets through in_memory_source.cc);
// Dataset (dataset.h) turns its samples into batches: pixels to [0, 1], augmentation, then
// normalization.
//
// Random access by index is what the global permutation, the exact allocation and resume need:
// a sample's content depends on its index alone, never on the order it is read in.
//
// Pixels are read as float values in [0, 1]; a uint8 source maps v to v / 255.0f exactly (the
// same float the built-in sets' lookup table gives), so a data set converted to another format
// trains bit for bit like the original.
//
// Errors: ReadPixels and ReadTarget return DataLoss "FILE: sample I: what is wrong" for a corrupt
// or unreadable sample (Dataset drops it from the batch under spec.dataset.skipCorrupt, and fails
// the step otherwise). Opening a source checks what it can without decoding every sample.
//
// Thread-safety: after construction every method may be called from several threads at once.
// No libtorch in here.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_SAMPLE_SOURCE_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_SAMPLE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"

namespace hptrain::train {

enum class Split { kTrain, kTest };

// Returns "train" or "test".
const char* SplitName(Split split);

// Shape of one sample.
struct SampleShape {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t numel() const { return channels * height * width; }
};

// What a sample's target is.
//   kClass   one class index in [0, num_classes): int64 targets [n]
//   kVector  `dim` floats: regression targets or a multi-hot row: float32 targets [n, dim]
enum class TargetKind { kClass, kVector };

struct TargetInfo {
  TargetKind kind = TargetKind::kClass;
  int num_classes = 0;  // kClass
  int dim = 0;          // kVector
  // The model's output width: num_classes for kClass, dim for kVector.
  int outputs() const { return kind == TargetKind::kClass ? num_classes : dim; }
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;

  // e.g. "my-images/train", for messages.
  virtual const std::string& name() const = 0;
  virtual int64_t size() const = 0;
  // Every sample's shape as read (after spec.dataset.imageSize for decoded formats).
  virtual SampleShape shape() const = 0;
  virtual TargetInfo targets() const = 0;

  // Sample i's pixels, C x H x W, as floats in [0, 1], into out[0 .. shape().numel()).
  virtual absl::Status ReadPixels(int64_t i, float* out) const = 0;
  // Sample i's target: *cls for kClass, vec[0 .. dim) for kVector.
  virtual absl::Status ReadTarget(int64_t i, int64_t* cls, float* vec) const = 0;

  // A hint: these samples are read next. Decoding sources start on them in their thread pool, so
  // the next step's slice is decoded while this step trains. The default does nothing.
  virtual void Prefetch(const std::vector<int64_t>& indices) const { (void)indices; }
};

// The sources of the user-data formats, by spec.dataset.format. Each reads spec.path (the
// layout docs/data.md describes) for `split`, checks what it can without decoding every sample and
// returns NotFound or DataLoss naming the file otherwise.
absl::StatusOr<std::unique_ptr<SampleSource>> OpenNpySource(const job::DatasetSpec& spec,
                                                            Split split);  // npy_source.cc
absl::StatusOr<std::unique_ptr<SampleSource>> OpenImageFolderSource(
    const job::DatasetSpec& spec, Split split);  // image_folder_source.cc
absl::StatusOr<std::unique_ptr<SampleSource>> OpenFileListSource(
    const job::DatasetSpec& spec, Split split);  // file_list_source.cc
absl::StatusOr<std::unique_ptr<SampleSource>> OpenWebDatasetSource(
    const job::DatasetSpec& spec, Split split);  // webdataset_source.cc

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_SAMPLE_SOURCE_H_
