#include "runtime/train/data/dataset.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.h"
#include "runtime/train/data/augment.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train {
namespace {

using internal::DatasetInfo;

// Data sets by name. Normalization constants are the mean / std of the training split's pixels
// in [0, 1]; CIFAR's are per channel (R, G, B).
const std::vector<DatasetInfo>& KnownDatasets() {
  static const auto* const kKnown = new std::vector<DatasetInfo>{
      {"fashion-mnist", "idx", "/usr/share/datasets/fashion-mnist", 10, {0.2860f}, {0.3530f}},
      {"mnist", "idx", "/usr/share/datasets/mnist", 10, {0.1307f}, {0.3081f}},
      {"cifar10",
       "cifar-binary",
       "/usr/share/datasets/cifar-10-batches-bin",
       10,
       {0.4914f, 0.4822f, 0.4465f},
       {0.2470f, 0.2435f, 0.2616f}},
      {"cifar100",
       "cifar-binary",
       "/usr/share/datasets/cifar-100-binary",
       100,
       {0.5071f, 0.4865f, 0.4409f},
       {0.2673f, 0.2564f, 0.2762f}},
      {"synthetic", "synthetic", "", 0, {}, {}},
  };
  return *kKnown;
}

// Readers by format name.
internal::ReaderFn FindReader(const std::string& format) {
  static const std::pair<const char*, internal::ReaderFn> kReaders[] = {
      {"idx", &internal::ReadIdx},
      {"cifar-binary", &internal::ReadCifar},
      {"synthetic", &internal::MakeSynthetic},
  };
  for (const auto& [name, fn] : kReaders) {
    if (format == name) return fn;
  }
  return nullptr;
}

// The user formats' sources by format name.
using SourceFn = absl::StatusOr<std::unique_ptr<SampleSource>> (*)(const job::DatasetSpec&, Split);
SourceFn FindSource(const std::string& format) {
  static const std::pair<const char*, SourceFn> kSources[] = {
      {"npy", &OpenNpySource},
      {"imagefolder", &OpenImageFolderSource},
      {"filelist", &OpenFileListSource},
      {"webdataset", &OpenWebDatasetSource},
  };
  for (const auto& [name, fn] : kSources) {
    if (format == name) return fn;
  }
  return nullptr;
}

// DatasetData's checks (see Dataset::FromData).
absl::Status CheckData(const DatasetData& data, bool normalize) {
  const SampleShape& s = data.shape;
  if (s.channels <= 0 || s.height <= 0 || s.width <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(data.name, ": bad sample shape ", s.channels, "x", s.height, "x", s.width));
  }
  if (data.pixels.size() != data.labels.size() * static_cast<size_t>(s.numel())) {
    return absl::InvalidArgumentError(absl::StrCat(data.name, ": ", data.pixels.size(),
                                                   " pixel bytes for ", data.labels.size(),
                                                   " samples of ", s.numel()));
  }
  if (data.num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(data.name, ": no classes"));
  }
  for (size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] < 0 || data.labels[i] >= data.num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(data.name, ": label ", data.labels[i],
                                                     " of sample ", i, " is outside [0, ",
                                                     data.num_classes, ")"));
    }
  }
  if (normalize) {
    const auto fits = [&](const std::vector<float>& v) {
      return v.size() == 1 || v.size() == static_cast<size_t>(s.channels);
    };
    if (!fits(data.mean) || !fits(data.std)) {
      return absl::InvalidArgumentError(absl::StrCat(data.name, ": mean/std need 1 or ", s.channels,
                                                     " values, got ", data.mean.size(), "/",
                                                     data.std.size()));
    }
    for (float v : data.std) {
      if (!(v > 0.0f)) {
        return absl::InvalidArgumentError(absl::StrCat(data.name, ": std ", v, " is not > 0"));
      }
    }
  }
  return absl::OkStatus();
}

// `mean`/`std` (one value, or one per channel) per channel.
Normalization PerChannel(const std::vector<float>& mean, const std::vector<float>& std,
                         int64_t channels) {
  Normalization n;
  for (int64_t c = 0; c < channels; ++c) {
    n.mean.push_back(mean[mean.size() == 1 ? 0 : static_cast<size_t>(c)]);
    n.std.push_back(std[std.size() == 1 ? 0 : static_cast<size_t>(c)]);
  }
  return n;
}

// spec.dataset.mean/std for `channels`-channel samples; InvalidArgument if their count fits not.
absl::StatusOr<Normalization> ExplicitNormalization(const job::DatasetSpec& spec,
                                                    int64_t channels) {
  const auto fits = [&](size_t n) { return n == 1 || n == static_cast<size_t>(channels); };
  if (!fits(spec.mean.size()) || !fits(spec.std.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.dataset.mean: needs 1 or ", channels, " values for ", channels,
        "-channel samples, got ", spec.mean.size(), " (std ", spec.std.size(), ")"));
  }
  const std::vector<float> mean(spec.mean.begin(), spec.mean.end());
  const std::vector<float> std(spec.std.begin(), spec.std.end());
  return PerChannel(mean, std, channels);
}

bool SameShape(const SampleShape& a, const SampleShape& b) {
  return a.channels == b.channels && a.height == b.height && a.width == b.width;
}

}  // namespace

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::FromData(DatasetData data, bool normalize) {
  HPTRAIN_RETURN_IF_ERROR(CheckData(data, normalize));
  job::DatasetSpec spec;
  spec.normalize = normalize;
  const Normalization norm =
      normalize ? PerChannel(data.mean, data.std, data.shape.channels) : Normalization();
  auto source = std::make_unique<internal::InMemorySource>(std::move(data));
  std::unique_ptr<Dataset> dataset(new Dataset(std::move(source), spec, Split::kTest, 0));
  dataset->normalization_ = norm;
  dataset->normalization_fixed_ = true;
  return dataset;
}

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::FromSource(std::unique_ptr<SampleSource> source,
                                                             const job::DatasetSpec& spec,
                                                             Split split, uint64_t seed) {
  const SampleShape in = source->shape();
  if (in.channels <= 0 || in.height <= 0 || in.width <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(source->name(), ": bad sample shape ",
                                                   in.channels, "x", in.height, "x", in.width));
  }
  const TargetInfo t = source->targets();
  if (t.outputs() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(source->name(), ": no classes or targets"));
  }
  const job::AugmentSpec& augment = spec.augment;
  if (augment.random_crop.size > 0 &&
      (augment.random_crop.size > in.height + 2 * augment.random_crop.padding ||
       augment.random_crop.size > in.width + 2 * augment.random_crop.padding)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.dataset.augment.randomCrop.size: ", augment.random_crop.size,
        " is larger than the padded ", in.height, "x", in.width, " samples of ", source->name()));
  }
  std::unique_ptr<Dataset> dataset(new Dataset(std::move(source), spec, split, seed));
  if (!spec.mean.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(dataset->normalization_, ExplicitNormalization(spec, in.channels));
    dataset->normalization_fixed_ = true;
  } else if (!spec.normalize) {
    dataset->normalization_fixed_ = true;
  }
  return dataset;
}

Dataset::Dataset(std::unique_ptr<SampleSource> source, const job::DatasetSpec& spec, Split split,
                 uint64_t seed)
    : source_(std::move(source)), spec_(spec), split_(split), seed_(seed) {
  size_ = source_->size();
  in_shape_ = source_->shape();
  targets_ = source_->targets();
  shape_ = AugmentedShape(spec_.augment, in_shape_);
  augment_ = split_ == Split::kTrain && spec_.augment.any();
  crop_ = split_ == Split::kTest && !SameShape(shape_, in_shape_);
  if (!augment_ && !crop_) {
    in_memory_ = dynamic_cast<const internal::InMemorySource*>(source_.get());
  }
}

Dataset::~Dataset() = default;

int64_t Dataset::label(int64_t i) const {
  if (targets_.kind != TargetKind::kClass || i < 0 || i >= size_) return -1;
  int64_t cls = -1;
  if (!source_->ReadTarget(i, &cls, nullptr).ok()) return -1;
  return cls;
}

absl::Status Dataset::Prepare() const {
  std::call_once(prepared_, [this] {
    if (!normalization_fixed_) {
      absl::StatusOr<Normalization> stats =
          internal::TrainingStats(spec_, split_ == Split::kTrain ? source_.get() : nullptr);
      if (!stats.ok()) {
        prepare_status_ = stats.status();
        return;
      }
      normalization_ = *std::move(stats);
      if (normalization_.mean.size() != static_cast<size_t>(in_shape_.channels)) {
        prepare_status_ = absl::InternalError(absl::StrCat(
            name(), ": ", normalization_.mean.size(), " channel statistics for ",
            in_shape_.channels, " channels"));
        return;
      }
    }
    if (in_memory_ != nullptr) {
      const auto channels = static_cast<size_t>(in_shape_.channels);
      lut_.resize(channels * 256);
      const bool none = normalization_.none();
      for (size_t c = 0; c < channels; ++c) {
        const float mean = none ? 0.0f : normalization_.mean[c];
        const float std = none ? 1.0f : normalization_.std[c];
        for (int v = 0; v < 256; ++v) {
          lut_[c * 256 + static_cast<size_t>(v)] = (static_cast<float>(v) / 255.0f - mean) / std;
        }
      }
    }
  });
  return prepare_status_;
}

absl::StatusOr<Normalization> Dataset::normalization() const {
  HPTRAIN_RETURN_IF_ERROR(Prepare());
  return normalization_;
}

absl::StatusOr<Batch> Dataset::Gather(const std::vector<int64_t>& indices,
                                      const GatherOptions& options) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t index = indices[static_cast<size_t>(i)];
    if (index < 0 || index >= size()) {
      return absl::OutOfRangeError(absl::StrCat(name(), ": index ", index, " (position ", i,
                                                " of the batch) is outside [0, ", size(), ")"));
    }
  }
  HPTRAIN_RETURN_IF_ERROR(Prepare());
  try {
    return in_memory_ != nullptr ? GatherUint8(indices) : GatherGeneral(indices, options);
  } catch (const std::exception& e) {
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    return absl::InternalError(absl::StrCat(
        name(), ": gather of ", n,
        " samples failed: ", c10 != nullptr ? c10->what_without_backtrace() : e.what()));
  }
}

// The built-in sets without augmentation: one table lookup per pixel, bit for bit what
// (v / 255.0f - mean) / std gives.
absl::StatusOr<Batch> Dataset::GatherUint8(const std::vector<int64_t>& indices) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  const SampleShape& s = in_shape_;
  const auto plane = static_cast<size_t>(s.height * s.width);
  const auto numel = static_cast<size_t>(s.numel());
  const std::vector<int32_t>& labels = in_memory_->data().labels;
  Batch batch;
  batch.inputs = torch::empty({n, s.channels, s.height, s.width}, torch::kFloat32);
  batch.targets = torch::empty({n}, torch::kInt64);
  float* out = batch.inputs.data_ptr<float>();
  int64_t* targets = batch.targets.data_ptr<int64_t>();
  for (size_t i = 0; i < indices.size(); ++i) {
    const uint8_t* src = in_memory_->pixels(indices[i]);
    float* dst = out + i * numel;
    for (size_t c = 0; c < static_cast<size_t>(s.channels); ++c) {
      const float* lut = lut_.data() + c * 256;
      for (size_t p = 0; p < plane; ++p) dst[c * plane + p] = lut[src[c * plane + p]];
    }
    targets[i] = labels[static_cast<size_t>(indices[i])];
  }
  return batch;
}

absl::StatusOr<Batch> Dataset::GatherGeneral(const std::vector<int64_t>& indices,
                                             const GatherOptions& options) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  const SampleShape& out_shape = shape_;
  const auto out_numel = static_cast<size_t>(out_shape.numel());
  const auto plane = static_cast<size_t>(out_shape.height * out_shape.width);
  const bool vector = targets_.kind == TargetKind::kVector;
  const auto dim = static_cast<size_t>(targets_.dim);
  Batch batch;
  batch.inputs =
      torch::empty({n, out_shape.channels, out_shape.height, out_shape.width}, torch::kFloat32);
  batch.targets = vector ? torch::empty({n, targets_.dim}, torch::kFloat32)
                         : torch::empty({n}, torch::kInt64);
  float* out = batch.inputs.data_ptr<float>();
  int64_t* classes = vector ? nullptr : batch.targets.data_ptr<int64_t>();
  float* vectors = vector ? batch.targets.data_ptr<float>() : nullptr;
  const bool transform = augment_ || crop_;
  std::vector<float> read(transform ? static_cast<size_t>(in_shape_.numel()) : 0);
  int64_t rows = 0;
  for (const int64_t index : indices) {
    float* dst = out + static_cast<size_t>(rows) * out_numel;
    absl::Status status = source_->ReadPixels(index, transform ? read.data() : dst);
    if (status.ok()) {
      int64_t cls = 0;
      status = source_->ReadTarget(index, &cls,
                                   vector ? vectors + static_cast<size_t>(rows) * dim : nullptr);
      if (status.ok() && !vector) {
        if (cls < 0 || cls >= targets_.num_classes) {
          status = absl::DataLossError(absl::StrCat(name(), ": sample ", index, ": label ", cls,
                                                    " is outside [0, ", targets_.num_classes,
                                                    ")"));
        }
        classes[rows] = cls;
      }
    }
    if (!status.ok()) {
      if (!spec_.skip_corrupt) return status;
      ++batch.dropped;
      corrupt_.fetch_add(1, std::memory_order_relaxed);
      std::fprintf(stderr, "data: %s: skipping a corrupt sample (spec.dataset.skipCorrupt): %s\n",
                   name().c_str(), std::string(status.message()).c_str());
      continue;
    }
    if (augment_) {
      const AugmentDraws draws = DrawAugment(spec_.augment, in_shape_, seed_, options.epoch, index);
      ApplyAugment(spec_.augment, draws, in_shape_, read.data(), dst);
    } else if (crop_) {
      CenterCrop(in_shape_, read.data(), out_shape, dst);
    }
    if (!normalization_.none()) {
      for (size_t c = 0; c < static_cast<size_t>(out_shape.channels); ++c) {
        const float mean = normalization_.mean[c];
        const float std = normalization_.std[c];
        float* x = dst + c * plane;
        for (size_t p = 0; p < plane; ++p) x[p] = (x[p] - mean) / std;
      }
    }
    ++rows;
  }
  if (rows < n) {
    batch.inputs = batch.inputs.narrow(0, 0, rows);
    batch.targets = batch.targets.narrow(0, 0, rows);
  }
  return batch;
}

std::vector<std::string> DatasetNames() {
  std::vector<std::string> names;
  for (const DatasetInfo& known : KnownDatasets()) names.push_back(known.name);
  return names;
}

namespace internal {

absl::StatusOr<std::unique_ptr<SampleSource>> OpenUserSource(const job::DatasetSpec& spec,
                                                             Split split) {
  const SourceFn open = FindSource(spec.format);
  if (open == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.dataset.format: \"", spec.format, "\" has no sample source"));
  }
  return open(spec, split);
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const job::DatasetSpec& spec, Split split,
                                                     uint64_t seed) {
  return Dataset::Open(spec, split, seed);
}

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const job::DatasetSpec& spec, Split split,
                                                       uint64_t seed) {
  if (FindSource(spec.format) != nullptr) {
    HPTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SampleSource> source,
                             internal::OpenUserSource(spec, split));
    return FromSource(std::move(source), spec, split, seed);
  }
  const DatasetInfo* info = nullptr;
  for (const DatasetInfo& known : KnownDatasets()) {
    if (known.name == spec.name) info = &known;
  }
  if (info == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown data set \"", spec.name, "\"; known: ", absl::StrJoin(DatasetNames(), ", ")));
  }
  const std::string format = spec.format.empty() ? info->format : spec.format;
  if (format != info->format) {
    return absl::InvalidArgumentError(absl::StrCat("data set ", info->name, " is in format \"",
                                                   info->format, "\", not \"", format, "\""));
  }
  const internal::ReaderFn reader = FindReader(format);
  if (reader == nullptr) {
    return absl::InternalError(absl::StrCat("no reader for format \"", format, "\""));
  }
  const internal::ReaderArgs args{*info, spec, spec.path.empty() ? info->default_path : spec.path,
                                  split, seed};
  HPTRAIN_ASSIGN_OR_RETURN(DatasetData data, reader(args));
  HPTRAIN_RETURN_IF_ERROR(CheckData(data, spec.normalize));
  // The set's own constants unless the job gives its own.
  const Normalization builtin = spec.normalize && spec.mean.empty()
                                    ? PerChannel(data.mean, data.std, data.shape.channels)
                                    : Normalization();
  HPTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<Dataset> dataset,
      FromSource(std::make_unique<internal::InMemorySource>(std::move(data)), spec, split, seed));
  if (!dataset->normalization_fixed_) {
    dataset->normalization_ = builtin;
    dataset->normalization_fixed_ = true;
  }
  return dataset;
}

}  // namespace hptrain::train
