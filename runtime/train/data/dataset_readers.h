// Private to runtime/train/data: the readers behind OpenDataset() and the file helpers they share.
// Each built-in reader turns files (or a seed) into a DatasetData, which InMemorySource serves;
// dataset.cc picks one by format name. The .npy header parser is here for its tests.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_READERS_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_READERS_H_

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/data/sample_source.h"

namespace hptrain::train::internal {

// What a data set name implies: its on-disk format, default directory, class count and the
// normalization constants measured on its training split.
struct DatasetInfo {
  std::string name;
  std::string format;
  std::string default_path;
  int num_classes = 0;
  std::vector<float> mean;  // per channel
  std::vector<float> std;
};

struct ReaderArgs {
  const DatasetInfo& info;
  const job::DatasetSpec& spec;
  std::string dir;  // spec.path or info.default_path
  Split split;
  uint64_t seed;
};

using ReaderFn = absl::StatusOr<DatasetData> (*)(const ReaderArgs& args);

absl::StatusOr<DatasetData> ReadIdx(const ReaderArgs& args);        // idx_dataset.cc
absl::StatusOr<DatasetData> ReadCifar(const ReaderArgs& args);      // cifar_dataset.cc
absl::StatusOr<DatasetData> MakeSynthetic(const ReaderArgs& args);  // synthetic_dataset.cc

// A built-in set's DatasetData as a SampleSource (in_memory_source.cc). Pixel v reads as
// v / 255.0f; pixels() gives the raw bytes for Dataset's lookup-table path.
class InMemorySource : public SampleSource {
 public:
  // `data` must have passed Dataset::FromData's checks.
  explicit InMemorySource(DatasetData data);

  const std::string& name() const override { return data_.name; }
  int64_t size() const override { return static_cast<int64_t>(data_.labels.size()); }
  SampleShape shape() const override { return data_.shape; }
  TargetInfo targets() const override;
  absl::Status ReadPixels(int64_t i, float* out) const override;
  absl::Status ReadTarget(int64_t i, int64_t* cls, float* vec) const override;

  // Sample i's shape().numel() bytes, C x H x W.
  const uint8_t* pixels(int64_t i) const {
    return data_.pixels.data() + static_cast<size_t>(i) * static_cast<size_t>(data_.shape.numel());
  }
  const DatasetData& data() const { return data_; }

 private:
  DatasetData data_;
};

// v / 255.0f for every byte v: what every uint8 source returns for a pixel.
const float* Uint8ToUnit();

// The source of a user format (npy, imagefolder, filelist, webdataset) for `split`, by
// spec.format (dataset.cc); InvalidArgument for another format.
absl::StatusOr<std::unique_ptr<SampleSource>> OpenUserSource(const job::DatasetSpec& spec,
                                                             Split split);

// channel_stats.cc: the per-channel mean and (population) standard deviation of every sample of
// `source`, in double; a channel whose std is 0 gets 1. *samples: how many were read (corrupt
// ones are skipped under skip_corrupt, an error otherwise).
absl::StatusOr<Normalization> ChannelStats(const SampleSource& source, bool skip_corrupt,
                                           int64_t* samples);

// The training statistics of spec, once per process: from memory, else from the cache file beside
// a decoded format's data (".hptrain-stats-train.json"), else computed on `train` (or, when null,
// on the training split opened from spec), logged on one line to stderr, and cached.
absl::StatusOr<Normalization> TrainingStats(const job::DatasetSpec& spec,
                                            const SampleSource* train);

// The header of a .npy file (NumPy NEP 1).
struct NpyHeader {
  int major = 0;               // format version 1, 2 or 3
  std::string descr;           // e.g. "|u1", "<f4"
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;      // bytes before the array data
};

// Parses the header at the start of `bytes` (the file's first `size` bytes or more). DataLoss
// "PATH: ..." for a bad magic, an unknown version, a header that runs past `size`, or a header
// dict without descr, fortran_order and shape.
absl::StatusOr<NpyHeader> ParseNpyHeader(const uint8_t* bytes, size_t size,
                                         const std::string& path);

// NotFound "DIR: data set directory not found" unless `dir` is a directory.
absl::Status CheckDirectory(const std::string& dir);

// Returns dir/name for the first name in `names` that exists; NotFound naming dir/names[0] and
// the alternatives tried otherwise.
absl::StatusOr<std::string> FindFile(const std::string& dir, const std::vector<std::string>& names);

// A file read through zlib, which reads gzip and plain files alike.
class GzFile {
 public:
  // NotFound if `path` does not exist; the errno status of gzopen otherwise.
  static absl::StatusOr<std::unique_ptr<GzFile>> Open(const std::string& path);
  ~GzFile();
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  const std::string& path() const { return path_; }

  // Reads up to n bytes into buf and returns how many were read; fewer than n only at the end of
  // the file (or of a truncated gzip stream). DataLoss "PATH: corrupt gzip data: ..." otherwise.
  absl::StatusOr<size_t> Read(uint8_t* buf, size_t n);

  // Reads exactly n bytes; a short read is DataLoss "PATH: truncated: expected N bytes of WHAT,
  // got M".
  absl::Status ReadExactly(uint8_t* buf, size_t n, const std::string& what);

  // Reads everything that is left.
  absl::StatusOr<std::vector<uint8_t>> ReadAll();

 private:
  GzFile(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  gzFile file_;
};

}  // namespace hptrain::train::internal

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_DATASET_READERS_H_
