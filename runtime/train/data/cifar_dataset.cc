// CIFAR binary reader (https://www.cs.toronto.edu/~kriz/cifar.html). Records have no file header:
//   CIFAR-10:  <1 label byte><3072 pixel bytes>, data_batch_1..5.bin (train), test_batch.bin
//   CIFAR-100: <coarse label><fine label><3072 pixel bytes>, train.bin, test.bin; we use fine.
// Pixels are 1024 red, then 1024 green, then 1024 blue bytes, row-major: already C x H x W.
// The record count comes from the file length (the official files hold 10,000 or 50,000), so
// small files in the same format work too; a partial last record is reported as truncation.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train::internal {
namespace {

constexpr int64_t kSide = 32;
constexpr int64_t kPixels = 3 * kSide * kSide;

struct Layout {
  size_t label_bytes;  // bytes before the pixels
  size_t label_index;  // which of them is the label we use
  std::vector<std::string> train_files;
  std::string test_file;
  std::string subdir;  // the folder the official archive unpacks to
};

Layout LayoutFor(int num_classes) {
  if (num_classes == 100) return {2, 1, {"train.bin"}, "test.bin", "cifar-100-binary"};
  return {1,
          0,
          {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
           "data_batch_5.bin"},
          "test_batch.bin",
          "cifar-10-batches-bin"};
}

absl::Status ReadRecords(const std::string& path, const Layout& layout, int num_classes,
                         DatasetData* data) {
  HPTRAIN_ASSIGN_OR_RETURN(auto file, GzFile::Open(path));
  HPTRAIN_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, file->ReadAll());
  const size_t record = layout.label_bytes + kPixels;
  const size_t records = bytes.size() / record;
  if (bytes.size() % record != 0 || records == 0) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: expected ", (records + 1) * record,
                                            " bytes of record data, got ", bytes.size(),
                                            " (records are ", record, " bytes)"));
  }
  const size_t first = data->labels.size();
  data->labels.resize(first + records);
  data->pixels.resize((first + records) * kPixels);
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* rec = bytes.data() + r * record;
    const int label = rec[layout.label_index];
    if (label >= num_classes) {
      return absl::DataLossError(absl::StrCat(path, ": label ", label, " of record ", r,
                                              " is outside [0, ", num_classes, ")"));
    }
    data->labels[first + r] = label;
    std::copy(rec + layout.label_bytes, rec + record, data->pixels.begin() + (first + r) * kPixels);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DatasetData> ReadCifar(const ReaderArgs& args) {
  HPTRAIN_RETURN_IF_ERROR(CheckDirectory(args.dir));
  const Layout layout = LayoutFor(args.info.num_classes);
  // Accept both the folder that holds the .bin files and its parent where the archive was
  // unpacked.
  std::string dir = args.dir;
  if (CheckDirectory(absl::StrCat(dir, "/", layout.subdir)).ok()) {
    dir = absl::StrCat(dir, "/", layout.subdir);
  }
  DatasetData data;
  data.name = absl::StrCat(args.info.name, "/", SplitName(args.split));
  data.shape = SampleShape{3, kSide, kSide};
  data.num_classes = args.info.num_classes;
  data.mean = args.info.mean;
  data.std = args.info.std;
  const std::vector<std::string> files =
      args.split == Split::kTrain ? layout.train_files : std::vector<std::string>{layout.test_file};
  for (const std::string& name : files) {
    HPTRAIN_ASSIGN_OR_RETURN(const std::string path, FindFile(dir, {name}));
    HPTRAIN_RETURN_IF_ERROR(ReadRecords(path, layout, data.num_classes, &data));
  }
  return data;
}

}  // namespace hptrain::train::internal
