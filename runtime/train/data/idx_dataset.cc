// IDX reader for MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/): big-endian
// headers, magic 0x00000803 for images (count, rows, cols, then count*rows*cols bytes) and
// 0x00000801 for labels (count, then count bytes). Files may be gzip-compressed or plain.
#include <array>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train::internal {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// Far above any real IDX image (28 x 28); guards the size arithmetic against a corrupt header.
constexpr uint32_t kMaxSide = 4096;

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// File names to try for one part ("train-images"): the canonical names, gzipped or not, and the
// dotted spelling some mirrors use ("train-images.idx3-ubyte").
std::vector<std::string> Candidates(const std::string& prefix, const std::string& part,
                                    const std::string& kind) {
  const std::string canonical = absl::StrCat(prefix, "-", part, "-", kind, "-ubyte");
  const std::string dotted = absl::StrCat(prefix, "-", part, ".", kind, "-ubyte");
  return {canonical, canonical + ".gz", dotted, dotted + ".gz"};
}

absl::Status ReadImages(const std::string& path, DatasetData* data) {
  HPTRAIN_ASSIGN_OR_RETURN(auto file, GzFile::Open(path));
  std::array<uint8_t, 16> header{};
  HPTRAIN_RETURN_IF_ERROR(file->ReadExactly(header.data(), header.size(), "header"));
  const uint32_t magic = BigEndian32(&header[0]);
  if (magic != kImagesMagic) {
    return absl::DataLossError(absl::StrCat(path, ": bad magic number 0x", absl::Hex(magic),
                                            ", expected 0x", absl::Hex(kImagesMagic),
                                            " (IDX unsigned-byte images)"));
  }
  const uint32_t count = BigEndian32(&header[4]);
  const uint32_t rows = BigEndian32(&header[8]);
  const uint32_t cols = BigEndian32(&header[12]);
  if (rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide) {
    return absl::DataLossError(absl::StrCat(path, ": bad image dimensions ", rows, "x", cols));
  }
  if (count == 0) return absl::DataLossError(absl::StrCat(path, ": no images"));
  data->shape = SampleShape{1, rows, cols};
  const size_t bytes = size_t{count} * rows * cols;
  data->pixels.resize(bytes);
  return file->ReadExactly(data->pixels.data(), bytes, "image data");
}

absl::Status ReadLabels(const std::string& path, int num_classes, DatasetData* data) {
  HPTRAIN_ASSIGN_OR_RETURN(auto file, GzFile::Open(path));
  std::array<uint8_t, 8> header{};
  HPTRAIN_RETURN_IF_ERROR(file->ReadExactly(header.data(), header.size(), "header"));
  const uint32_t magic = BigEndian32(&header[0]);
  if (magic != kLabelsMagic) {
    return absl::DataLossError(absl::StrCat(path, ": bad magic number 0x", absl::Hex(magic),
                                            ", expected 0x", absl::Hex(kLabelsMagic),
                                            " (IDX unsigned-byte labels)"));
  }
  const uint32_t count = BigEndian32(&header[4]);
  const size_t images = data->pixels.size() / static_cast<size_t>(data->shape.numel());
  if (count != images) {
    return absl::DataLossError(absl::StrCat(path, ": ", count, " labels for ", images, " images"));
  }
  std::vector<uint8_t> raw(count);
  HPTRAIN_RETURN_IF_ERROR(file->ReadExactly(raw.data(), raw.size(), "label data"));
  data->labels.resize(count);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] >= num_classes) {
      return absl::DataLossError(absl::StrCat(path, ": label ", raw[i], " of sample ", i,
                                              " is outside [0, ", num_classes, ")"));
    }
    data->labels[i] = raw[i];
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DatasetData> ReadIdx(const ReaderArgs& args) {
  HPTRAIN_RETURN_IF_ERROR(CheckDirectory(args.dir));
  const std::string prefix = args.split == Split::kTrain ? "train" : "t10k";
  HPTRAIN_ASSIGN_OR_RETURN(const std::string images,
                           FindFile(args.dir, Candidates(prefix, "images", "idx3")));
  HPTRAIN_ASSIGN_OR_RETURN(const std::string labels,
                           FindFile(args.dir, Candidates(prefix, "labels", "idx1")));
  DatasetData data;
  data.name = absl::StrCat(args.info.name, "/", SplitName(args.split));
  data.num_classes = args.info.num_classes;
  data.mean = args.info.mean;
  data.std = args.info.std;
  HPTRAIN_RETURN_IF_ERROR(ReadImages(images, &data));
  HPTRAIN_RETURN_IF_ERROR(ReadLabels(labels, data.num_classes, &data));
  return data;
}

}  // namespace hptrain::train::internal
