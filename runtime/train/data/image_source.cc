#include "runtime/train/data/image_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/files.h"
#include "runtime/train/data/augment.h"
#include "runtime/train/data/decode_pool.h"

namespace hptrain::train::internal {
namespace {

// Enough for any PNG header and a JPEG's header behind ordinary metadata.
constexpr int64_t kHeaderPrefix = 64 * 1024;
// Per-thread decode buffers larger than this are released after use.
constexpr size_t kKeepFloats = size_t{16} << 20;
// The decode cache's budget per source.
constexpr int64_t kCacheBytes = int64_t{256} << 20;

absl::Status ErrnoError(int err, const std::string& path) {
  const std::string message = absl::StrCat(path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::DataLossError(message);
}

// Reads up to `size` bytes from `offset` (fewer only at the end of the file) into `out`.
absl::Status ReadUpTo(const std::string& path, int64_t offset, int64_t size, std::string* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path);
  if (size < 0) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int err = errno;
      close(fd);
      return ErrnoError(err, path);
    }
    size = std::max<int64_t>(0, st.st_size - offset);
  }
  out->resize(static_cast<size_t>(size));
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, out->data() + done, static_cast<size_t>(size - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoError(err, path);
    }
    if (n == 0) break;
    done += n;
  }
  close(fd);
  out->resize(static_cast<size_t>(done));
  return absl::OkStatus();
}

const float* ByteToFloat() {
  static const float* const kTable = [] {
    auto* t = new float[256];
    for (int v = 0; v < 256; ++v) t[v] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return kTable;
}

class ImageSource final : public SampleSource {
 public:
  ImageSource(std::string name, std::vector<ImageRecord> records, SampleShape shape,
              int num_classes, bool resize, std::string first)
      : name_(std::move(name)),
        records_(std::move(records)),
        shape_(shape),
        num_classes_(num_classes),
        resize_(resize),
        first_(std::move(first)) {
    const int64_t bytes = std::max<int64_t>(1, shape_.numel() * int64_t{sizeof(float)});
    pool_ = std::make_unique<DecodePool>(
        [this](int64_t i, float* out) { return Decode(i, out); }, shape_.numel(), 0,
        std::clamp<int64_t>(kCacheBytes / bytes, 64, 1 << 16));
  }

  const std::string& name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  SampleShape shape() const override { return shape_; }
  TargetInfo targets() const override {
    TargetInfo t;
    t.kind = TargetKind::kClass;
    t.num_classes = num_classes_;
    return t;
  }

  absl::Status ReadPixels(int64_t i, float* out) const override {
    if (i < 0 || i >= size()) {
      return absl::OutOfRangeError(
          absl::StrCat(name_, ": sample ", i, " is outside [0, ", size(), ")"));
    }
    return pool_->Read(i, out);
  }

  absl::Status ReadTarget(int64_t i, int64_t* cls, float* vec) const override {
    (void)vec;
    if (i < 0 || i >= size()) {
      return absl::OutOfRangeError(
          absl::StrCat(name_, ": sample ", i, " is outside [0, ", size(), ")"));
    }
    *cls = records_[static_cast<size_t>(i)].label;
    return absl::OkStatus();
  }

  void Prefetch(const std::vector<int64_t>& indices) const override {
    std::vector<int64_t> valid;
    valid.reserve(indices.size());
    for (int64_t i : indices) {
      if (i >= 0 && i < size()) valid.push_back(i);
    }
    pool_->Prefetch(valid);
  }

 private:
  absl::Status Decode(int64_t i, float* out) const {
    const ImageRecord& r = records_[static_cast<size_t>(i)];
    thread_local std::string bytes;
    thread_local std::vector<uint8_t> pixels;
    thread_local std::vector<float> planes;
    absl::Status read = ReadUpTo(r.file, r.offset, r.size, &bytes);
    if (read.ok() && r.size >= 0 && static_cast<int64_t>(bytes.size()) != r.size) {
      read = absl::DataLossError(absl::StrCat("truncated: expected ", r.size, " bytes, got ",
                                              bytes.size()));
    }
    if (!read.ok()) {
      return absl::DataLossError(
          absl::StrCat(RecordName(r), ": sample ", i, ": cannot read: ", read.message()));
    }
    auto info = DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                            static_cast<int>(shape_.channels), &pixels,
                            resize_ ? static_cast<int>(shape_.height) : 0,
                            resize_ ? static_cast<int>(shape_.width) : 0);
    if (!info.ok()) {
      return absl::DataLossError(
          absl::StrCat(RecordName(r), ": sample ", i, ": ", info.status().message()));
    }
    const int64_t c = shape_.channels, h = info->height, w = info->width;
    const bool resize = h != shape_.height || w != shape_.width;
    if (resize && !resize_) {  // the file changed since the open checked its header
      return absl::DataLossError(absl::StrCat(
          RecordName(r), ": sample ", i, ": image is ", h, "x", w, ", but the first training image (",
          first_, ") is ", shape_.height, "x", shape_.width,
          "; set spec.dataset.imageSize to resize every image to one size"));
    }
    float* dst = out;
    if (resize) {
      planes.resize(static_cast<size_t>(c * h * w));
      dst = planes.data();
    }
    // H x W x C bytes -> C x H x W floats.
    const float* table = ByteToFloat();
    const uint8_t* src = pixels.data();
    const int64_t plane = h * w;
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t ch = 0; ch < c; ++ch) dst[ch * plane + p] = table[src[p * c + ch]];
    }
    if (resize) {
      ResizeBilinear(SampleShape{c, h, w}, planes.data(), CropBox{0, 0, h, w}, shape_, out);
    }
    // One huge image must not pin its buffers in every thread for the rest of the run.
    if (planes.capacity() > kKeepFloats) std::vector<float>().swap(planes);
    if (pixels.capacity() > kKeepFloats) std::vector<uint8_t>().swap(pixels);
    if (bytes.capacity() > kKeepFloats) std::string().swap(bytes);
    return absl::OkStatus();
  }

  const std::string name_;
  const std::vector<ImageRecord> records_;
  const SampleShape shape_;
  const int num_classes_;
  const bool resize_;  // spec.dataset.imageSize is set
  const std::string first_;
  std::unique_ptr<DecodePool> pool_;
};

std::string Dims(int64_t height, int64_t width) { return absl::StrCat(height, "x", width); }

// Every record's header (known ones as given), read in a few threads; statuses per record.
void ReadHeaders(const std::vector<ImageRecord>& records, std::vector<ImageInfo>* infos,
                 std::vector<absl::Status>* statuses) {
  infos->assign(records.size(), ImageInfo{});
  statuses->assign(records.size(), absl::OkStatus());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < records.size(); i = next++) {
      const ImageRecord& r = records[i];
      if (r.height > 0) {
        (*infos)[i] = ImageInfo{ImageFormat::kJpeg, r.height, r.width, r.channels};
        continue;
      }
      auto info = ReadImageInfoAt(r.file, r.offset, r.size);
      if (info.ok()) {
        (*infos)[i] = *info;
      } else {
        (*statuses)[i] = info.status();
      }
    }
  };
  const int threads = std::max(1, DefaultDecodeThreads());
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && static_cast<size_t>(t) * 256 < records.size(); ++t) {
    pool.emplace_back(work);
  }
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace

const char* SplitLabel(Split split) { return split == Split::kTrain ? "train" : "test"; }

std::string RecordName(const ImageRecord& record) {
  return record.member.empty() ? record.file : absl::StrCat(record.file, ":", record.member);
}

absl::StatusOr<std::string> ReadFileRange(const std::string& path, int64_t offset, int64_t size) {
  std::string out;
  absl::Status s = ReadUpTo(path, offset, size, &out);
  if (!s.ok()) return s;
  if (size >= 0 && static_cast<int64_t>(out.size()) != size) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: expected ", size,
                                            " bytes at offset ", offset, ", got ", out.size()));
  }
  return out;
}

absl::StatusOr<ImageInfo> ReadImageInfoAt(const std::string& path, int64_t offset, int64_t size) {
  const int64_t prefix = size < 0 ? kHeaderPrefix : std::min(size, kHeaderPrefix);
  std::string bytes;
  absl::Status s = ReadUpTo(path, offset, prefix, &bytes);
  if (!s.ok()) return s;
  auto info = ReadImageInfo(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (info.ok() || static_cast<int64_t>(bytes.size()) < prefix || prefix == size) return info;
  s = ReadUpTo(path, offset, size, &bytes);
  if (!s.ok()) return s;
  return ReadImageInfo(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

absl::StatusOr<std::unique_ptr<SampleSource>> MakeImageSource(const job::DatasetSpec& spec,
                                                              Split split, ImageListing listing) {
  const std::string label = spec.name.empty() ? FileName(spec.path) : spec.name;
  const std::string name = absl::StrCat(label, "/", SplitLabel(split));
  std::vector<ImageRecord>& records = split == Split::kTrain ? listing.train : listing.test;
  for (Split s : {Split::kTrain, split}) {
    if ((s == Split::kTrain ? listing.train : listing.test).empty()) {
      return absl::NotFoundError(absl::StrCat(spec.path, ": no ", SplitLabel(s), " images (format ",
                                              listing.format, ", see docs/data.md)"));
    }
  }

  int num_classes = spec.classes;
  if (num_classes > 0) {
    for (const auto* list : {&listing.train, &listing.test}) {
      for (const ImageRecord& r : *list) {
        if (r.label >= num_classes) {
          return absl::InvalidArgumentError(
              absl::StrCat(RecordName(r), ": class ", r.label, " is outside [0, ", num_classes,
                           ") (spec.dataset.classes: ", num_classes, ")"));
        }
      }
    }
  } else if (listing.num_classes > 0) {
    num_classes = listing.num_classes;
  } else {
    int64_t top = -1;
    for (const auto* list : {&listing.train, &listing.test}) {
      for (const ImageRecord& r : *list) top = std::max(top, r.label);
    }
    num_classes = static_cast<int>(top + 1);
  }

  const ImageRecord& first = listing.train.front();
  ImageInfo first_info{ImageFormat::kJpeg, first.height, first.width, first.channels};
  if (first.height <= 0) {
    auto info = ReadImageInfoAt(first.file, first.offset, first.size);
    if (!info.ok()) {
      return absl::Status(info.status().code(),
                          absl::StrCat(RecordName(first), ": sample 0 of the ", listing.format,
                                       " training split: ", info.status().message()));
    }
    first_info = *info;
  }
  SampleShape shape{spec.channels != 0 ? spec.channels : first_info.channels, first_info.height,
                    first_info.width};
  if (!spec.image_size.empty()) {
    shape.height = spec.image_size[0];
    shape.width = spec.image_size.size() > 1 ? spec.image_size[1] : spec.image_size[0];
  } else {
    std::vector<ImageInfo> infos;
    std::vector<absl::Status> statuses;
    ReadHeaders(records, &infos, &statuses);
    for (size_t i = 0; i < records.size(); ++i) {
      if (!statuses[i].ok()) {
        if (spec.skip_corrupt) continue;  // the sample fails when read, and is dropped then
        return absl::DataLossError(absl::StrCat(RecordName(records[i]), ": sample ", i, ": ",
                                                statuses[i].message()));
      }
      if (infos[i].height != shape.height || infos[i].width != shape.width) {
        return absl::InvalidArgumentError(absl::StrCat(
            RecordName(records[i]), ": image is ", Dims(infos[i].height, infos[i].width),
            ", but the first training image (", RecordName(first), ") is ",
            Dims(shape.height, shape.width),
            "; set spec.dataset.imageSize to resize every image to one size"));
      }
    }
  }
  std::string first_name = RecordName(first);
  return std::unique_ptr<SampleSource>(new ImageSource(
      name, std::move(records), shape, num_classes, !spec.image_size.empty(), std::move(first_name)));
}

}  // namespace hptrain::train::internal
