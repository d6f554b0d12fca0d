// Private to runtime/train/data: the readers behind OpenDataset() and the file helpers they share.
// Each reader turns files (or a seed) into a DatasetData; dataset.cc picks one by format name.
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
