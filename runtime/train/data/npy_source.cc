// The npy format: spec.path holds train-images.npy, train-labels.npy, test-images.npy and
// test-labels.npy (NumPy's NEP 1: "\x93NUMPY", a version, a header length and a Python dict with
// descr, fortran_order and shape, then the array in C order).
//
// The files are memory-mapped read-only and shared (MAP_SHARED): samples are read from the
// mapping, so the workers of one host share the page cache instead of each holding a copy.
// Opening either split maps and checks all four files (dtypes, shapes, lengths, label range), so
// a bad test split is reported before training starts.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train {
namespace internal {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// A minimal reader of the header dict: {'key': value, ...} where a value is a quoted string,
// True/False or a tuple of integers.
class DictParser {
 public:
  explicit DictParser(std::string_view text) : text_(text) {}

  absl::Status Parse(NpyHeader* header) {
    bool have_descr = false, have_order = false, have_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      if (!ParseString(&key)) return Error("expected a quoted key");
      SkipSpace();
      if (!Consume(':')) return Error(absl::StrCat("expected ':' after '", key, "'"));
      SkipSpace();
      if (key == "descr") {
        if (!ParseString(&header->descr)) return Error("descr is not a string");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (!ParseBool(&header->fortran_order)) return Error("fortran_order is not True/False");
        have_order = true;
      } else if (key == "shape") {
        if (!ParseTuple(&header->shape)) return Error("shape is not a tuple of integers");
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    if (!have_descr) return Error("no 'descr'");
    if (!have_order) return Error("no 'fortran_order'");
    if (!have_shape) return Error("no 'shape'");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::DataLossError(absl::StrCat("bad .npy header dict at offset ", pos_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ParseString(std::string* out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool ParseBool(bool* out) {
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true},
                                      std::pair<std::string_view, bool>{"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        *out = value;
        return true;
      }
    }
    return false;
  }
  bool ParseTuple(std::vector<int64_t>* out) {
    out->clear();
    if (!Consume('(')) return false;
    while (true) {
      SkipSpace();
      if (Consume(')')) return true;
      int64_t v = 0;
      const size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
        v = v * 10 + (text_[pos_++] - '0');
      }
      if (pos_ == start) return false;
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 longs
      out->push_back(v);
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) return true;
      return false;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t LittleEndian(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

absl::StatusOr<NpyHeader> ParseNpyHeader(const uint8_t* bytes, size_t size,
                                         const std::string& path) {
  if (size < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a .npy file (no \\x93NUMPY magic at its start)"));
  }
  NpyHeader header;
  header.major = bytes[6];
  const int minor = bytes[7];
  size_t length_bytes = 0;
  if (header.major == 1) {
    length_bytes = 2;
  } else if (header.major == 2 || header.major == 3) {
    length_bytes = 4;
  } else {
    return absl::DataLossError(absl::StrCat(path, ": unsupported .npy format version ",
                                            header.major, ".", minor, " (1.0, 2.0, 3.0 are read)"));
  }
  const size_t start = kMagicSize + 2 + length_bytes;
  if (size < start) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: the file ends inside the header"));
  }
  const size_t length = LittleEndian(bytes + kMagicSize + 2, static_cast<int>(length_bytes));
  if (size - start < length) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: expected a ", length,
                                            "-byte header, got ", size - start, " bytes"));
  }
  header.data_offset = start + length;
  const std::string_view text(reinterpret_cast<const char*>(bytes + start), length);
  if (absl::Status parsed = DictParser(text).Parse(&header); !parsed.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", parsed.message()));
  }
  return header;
}

}  // namespace internal

namespace {

using internal::NpyHeader;

// A whole file mapped read-only; unmapped on destruction.
class MappedFile {
 public:
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return absl::NotFoundError(absl::StrCat(path, ": not a regular file"));
    }
    auto file = std::shared_ptr<MappedFile>(new MappedFile(path, static_cast<size_t>(st.st_size)));
    if (file->size_ > 0) {
      void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return absl::ResourceExhaustedError(
            absl::StrCat(path, ": cannot map ", file->size_, " bytes: ", std::strerror(err)));
      }
      file->data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);  // the mapping keeps the file
    return file;
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(std::string path, size_t size) : path_(std::move(path)), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_;
};

// Far above any real class count; keeps a corrupt label from sizing the model's output.
constexpr int64_t kMaxClasses = 1 << 20;

enum class Dtype { kU1, kI4, kI8, kF4 };

struct DtypeName {
  const char* descr;
  Dtype dtype;
  size_t itemsize;
};

// The descr spellings read; "|u1" is what NumPy writes for uint8 ('<'/'>' make no difference to
// one byte).
constexpr DtypeName kDtypes[] = {{"|u1", Dtype::kU1, 1}, {"<u1", Dtype::kU1, 1},
                                 {">u1", Dtype::kU1, 1}, {"<i4", Dtype::kI4, 4},
                                 {"<i8", Dtype::kI8, 8}, {"<f4", Dtype::kF4, 4}};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), shape.size() == 1 ? ",)" : ")");
}

// One mapped array.
struct NpyArray {
  std::shared_ptr<MappedFile> file;
  NpyHeader header;
  Dtype dtype = Dtype::kU1;
  size_t itemsize = 1;
  const uint8_t* data() const { return file->data() + header.data_offset; }
  const std::string& path() const { return file->path(); }
};

// Maps `path` and checks its header: a dtype in `allowed` (named in `what`'s message), C order,
// little-endian, and as many bytes as the shape needs.
absl::StatusOr<NpyArray> OpenArray(const std::string& path, const std::vector<Dtype>& allowed,
                                   const std::string& allowed_text, const std::string& what) {
  NpyArray array;
  HPTRAIN_ASSIGN_OR_RETURN(array.file, MappedFile::Open(path));
  HPTRAIN_ASSIGN_OR_RETURN(array.header,
                           internal::ParseNpyHeader(array.file->data(), array.file->size(), path));
  const NpyHeader& h = array.header;
  if (h.fortran_order) {
    return absl::DataLossError(absl::StrCat(
        path, ": fortran_order True is not supported; save a C-ordered array "
              "(numpy.ascontiguousarray)"));
  }
  const DtypeName* found = nullptr;
  for (const DtypeName& d : kDtypes) {
    if (h.descr == d.descr) found = &d;
  }
  if (found == nullptr && !h.descr.empty() && h.descr[0] == '>') {
    return absl::DataLossError(absl::StrCat(path, ": big-endian dtype '", h.descr,
                                            "' is not supported; save it little-endian "
                                            "(array.astype('<", h.descr.substr(1), "'))"));
  }
  if (found == nullptr ||
      std::find(allowed.begin(), allowed.end(), found->dtype) == allowed.end()) {
    return absl::DataLossError(absl::StrCat(path, ": dtype '", h.descr, "' is not supported for ",
                                            what, " (use ", allowed_text, ")"));
  }
  array.dtype = found->dtype;
  array.itemsize = found->itemsize;
  size_t numel = 1;
  for (int64_t d : h.shape) {
    if (d > 0 && numel > std::numeric_limits<size_t>::max() / 16 / static_cast<size_t>(d)) {
      return absl::DataLossError(absl::StrCat(path, ": shape ", ShapeString(h.shape),
                                              " is too large"));
    }
    numel *= static_cast<size_t>(d);
  }
  const size_t needed = numel * array.itemsize;
  const size_t have = array.file->size() - h.data_offset;
  if (have < needed) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: expected ", needed,
                                            " bytes of data for shape ", ShapeString(h.shape),
                                            " '", h.descr, "', got ", have));
  }
  return array;
}

// One split's two arrays and what they hold.
struct NpySplit {
  NpyArray images;
  NpyArray labels;
  int64_t count = 0;
  SampleShape shape;
  bool nhwc = true;
  TargetInfo targets;     // num_classes not yet set
  int64_t max_label = -1;  // kClass
};

int64_t ReadLabel(const NpyArray& labels, int64_t i) {
  const uint8_t* p = labels.data() + static_cast<size_t>(i) * labels.itemsize;
  switch (labels.dtype) {
    case Dtype::kU1:
      return *p;
    case Dtype::kI4: {
      int32_t v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case Dtype::kI8: {
      int64_t v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case Dtype::kF4:
      break;
  }
  return -1;
}

absl::StatusOr<NpySplit> OpenSplit(const std::string& dir, Split split, const std::string& layout) {
  const std::string prefix = absl::StrCat(dir, "/", SplitName(split));
  NpySplit s;
  HPTRAIN_ASSIGN_OR_RETURN(s.images, OpenArray(prefix + "-images.npy", {Dtype::kU1, Dtype::kF4},
                                               "|u1 or <f4", "images"));
  HPTRAIN_ASSIGN_OR_RETURN(
      s.labels, OpenArray(prefix + "-labels.npy", {Dtype::kU1, Dtype::kI4, Dtype::kI8, Dtype::kF4},
                          "<i8, <i4 or |u1 for classes, <f4 for targets", "labels"));
  const std::vector<int64_t>& is = s.images.header.shape;
  s.nhwc = layout != "NCHW";
  if (is.size() == 3) {
    s.shape = SampleShape{1, is[1], is[2]};
  } else if (is.size() == 4) {
    s.shape = s.nhwc ? SampleShape{is[3], is[1], is[2]} : SampleShape{is[1], is[2], is[3]};
  } else {
    return absl::DataLossError(absl::StrCat(s.images.path(), ": images must be [N, H, W] or [N, ",
                                            s.nhwc ? "H, W, C" : "C, H, W",
                                            "] (spec.dataset.layout ",
                                            s.nhwc ? "NHWC" : "NCHW", "), got shape ",
                                            ShapeString(is)));
  }
  s.count = is[0];
  if (s.count <= 0 || s.shape.numel() <= 0) {
    return absl::DataLossError(
        absl::StrCat(s.images.path(), ": no images (shape ", ShapeString(is), ")"));
  }
  const std::vector<int64_t>& ls = s.labels.header.shape;
  if (ls.empty() || ls[0] != s.count) {
    return absl::DataLossError(absl::StrCat(s.labels.path(), ": ", ls.empty() ? 0 : ls[0],
                                            " labels for the ", s.count, " images of ",
                                            s.images.path()));
  }
  if (s.labels.dtype == Dtype::kF4) {
    if (ls.size() > 2 || (ls.size() == 2 && ls[1] <= 0)) {
      return absl::DataLossError(absl::StrCat(s.labels.path(), ": float targets must be [N] or [N, K], got shape ",
                                              ShapeString(ls)));
    }
    s.targets.kind = TargetKind::kVector;
    s.targets.dim = ls.size() == 2 ? static_cast<int>(ls[1]) : 1;
    return s;
  }
  if (ls.size() != 1) {
    return absl::DataLossError(absl::StrCat(s.labels.path(), ": class labels must be [N], got shape ",
                                            ShapeString(ls), " (multi-hot targets are <f4)"));
  }
  s.targets.kind = TargetKind::kClass;
  for (int64_t i = 0; i < s.count; ++i) {
    const int64_t label = ReadLabel(s.labels, i);
    if (label < 0) {
      return absl::DataLossError(
          absl::StrCat(s.labels.path(), ": label ", label, " of sample ", i, " is negative"));
    }
    if (label >= kMaxClasses) {
      return absl::DataLossError(absl::StrCat(s.labels.path(), ": label ", label, " of sample ", i,
                                              " is not below ", kMaxClasses));
    }
    s.max_label = std::max(s.max_label, label);
  }
  return s;
}

class NpySource : public SampleSource {
 public:
  NpySource(std::string name, NpySplit split) : name_(std::move(name)), s_(std::move(split)) {}

  const std::string& name() const override { return name_; }
  int64_t size() const override { return s_.count; }
  SampleShape shape() const override { return s_.shape; }
  TargetInfo targets() const override { return s_.targets; }

  absl::Status ReadPixels(int64_t i, float* out) const override {
    if (i < 0 || i >= s_.count) return OutOfRange(i);
    const auto numel = static_cast<size_t>(s_.shape.numel());
    const auto channels = static_cast<size_t>(s_.shape.channels);
    const size_t plane = numel / channels;
    const uint8_t* src = s_.images.data() + static_cast<size_t>(i) * numel * s_.images.itemsize;
    if (s_.images.dtype == Dtype::kU1) {
      const float* unit = internal::Uint8ToUnit();
      if (!s_.nhwc || channels == 1) {
        for (size_t k = 0; k < numel; ++k) out[k] = unit[src[k]];
      } else {
        for (size_t p = 0; p < plane; ++p) {
          for (size_t c = 0; c < channels; ++c) out[c * plane + p] = unit[src[p * channels + c]];
        }
      }
    } else if (!s_.nhwc || channels == 1) {
      std::memcpy(out, src, numel * sizeof(float));
    } else {
      for (size_t p = 0; p < plane; ++p) {
        for (size_t c = 0; c < channels; ++c) {
          std::memcpy(out + c * plane + p, src + (p * channels + c) * sizeof(float),
                      sizeof(float));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadTarget(int64_t i, int64_t* cls, float* vec) const override {
    if (i < 0 || i >= s_.count) return OutOfRange(i);
    if (s_.targets.kind == TargetKind::kClass) {
      *cls = ReadLabel(s_.labels, i);
      return absl::OkStatus();
    }
    const size_t dim = static_cast<size_t>(s_.targets.dim);
    std::memcpy(vec, s_.labels.data() + static_cast<size_t>(i) * dim * sizeof(float),
                dim * sizeof(float));
    return absl::OkStatus();
  }

 private:
  absl::Status OutOfRange(int64_t i) const {
    return absl::OutOfRangeError(
        absl::StrCat(name_, ": sample ", i, " is outside [0, ", s_.count, ")"));
  }

  std::string name_;
  NpySplit s_;
};

std::string Dims(const SampleShape& s) {
  return absl::StrCat(s.channels, "x", s.height, "x", s.width);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> OpenNpySource(const job::DatasetSpec& spec,
                                                            Split split) {
  HPTRAIN_RETURN_IF_ERROR(internal::CheckDirectory(spec.path));
  HPTRAIN_ASSIGN_OR_RETURN(NpySplit train, OpenSplit(spec.path, Split::kTrain, spec.layout));
  HPTRAIN_ASSIGN_OR_RETURN(NpySplit test, OpenSplit(spec.path, Split::kTest, spec.layout));
  // The test split must fit the model the training split shapes.
  if (test.shape.channels != train.shape.channels || test.shape.height != train.shape.height ||
      test.shape.width != train.shape.width) {
    return absl::DataLossError(absl::StrCat(test.images.path(), ": samples are ", Dims(test.shape),
                                            " (CxHxW), the training split's are ",
                                            Dims(train.shape)));
  }
  if (test.targets.kind != train.targets.kind || test.targets.dim != train.targets.dim) {
    const auto describe = [](const NpySplit& s) {
      return s.targets.kind == TargetKind::kClass
                 ? std::string("class labels")
                 : absl::StrCat("float targets of ", s.targets.dim);
    };
    return absl::DataLossError(absl::StrCat(test.labels.path(), ": ", describe(test),
                                            ", the training split has ", describe(train)));
  }
  if (train.targets.kind == TargetKind::kClass) {
    int classes = spec.classes;
    if (classes > 0) {
      for (const NpySplit* s : {&train, &test}) {
        if (s->max_label >= classes) {
          return absl::DataLossError(absl::StrCat(s->labels.path(), ": label ", s->max_label,
                                                  " is outside [0, ", classes,
                                                  ") (spec.dataset.classes)"));
        }
      }
    } else {
      classes = static_cast<int>(std::max(train.max_label, test.max_label) + 1);
    }
    train.targets.num_classes = test.targets.num_classes = classes;
  }
  NpySplit& chosen = split == Split::kTrain ? train : test;
  return std::unique_ptr<SampleSource>(
      new NpySource(absl::StrCat(spec.name, "/", SplitName(split)), std::move(chosen)));
}

}  // namespace hptrain::train
