#include "runtime/train/data/dataset.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.h"
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

}  // namespace

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::FromData(DatasetData data, bool normalize) {
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
  return std::unique_ptr<Dataset>(new Dataset(std::move(data), normalize));
}

Dataset::Dataset(DatasetData data, bool normalize) : data_(std::move(data)) {
  const auto channels = static_cast<size_t>(data_.shape.channels);
  lut_.resize(channels * 256);
  for (size_t c = 0; c < channels; ++c) {
    const float mean = normalize ? data_.mean[data_.mean.size() == 1 ? 0 : c] : 0.0f;
    const float std = normalize ? data_.std[data_.std.size() == 1 ? 0 : c] : 1.0f;
    mean_.push_back(mean);
    std_.push_back(std);
    for (int v = 0; v < 256; ++v) {
      lut_[c * 256 + static_cast<size_t>(v)] = (static_cast<float>(v) / 255.0f - mean) / std;
    }
  }
}

absl::StatusOr<Batch> Dataset::Gather(const std::vector<int64_t>& indices) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t index = indices[static_cast<size_t>(i)];
    if (index < 0 || index >= size()) {
      return absl::OutOfRangeError(absl::StrCat(name(), ": index ", index, " (position ", i,
                                                " of the batch) is outside [0, ", size(), ")"));
    }
  }
  const SampleShape& s = data_.shape;
  const auto plane = static_cast<size_t>(s.height * s.width);
  const auto numel = static_cast<size_t>(s.numel());
  try {
    Batch batch;
    batch.inputs = torch::empty({n, s.channels, s.height, s.width}, torch::kFloat32);
    batch.targets = torch::empty({n}, torch::kInt64);
    float* out = batch.inputs.data_ptr<float>();
    int64_t* targets = batch.targets.data_ptr<int64_t>();
    for (size_t i = 0; i < indices.size(); ++i) {
      const auto index = static_cast<size_t>(indices[i]);
      const uint8_t* src = data_.pixels.data() + index * numel;
      float* dst = out + i * numel;
      for (size_t c = 0; c < static_cast<size_t>(s.channels); ++c) {
        const float* lut = lut_.data() + c * 256;
        for (size_t p = 0; p < plane; ++p) dst[c * plane + p] = lut[src[c * plane + p]];
      }
      targets[i] = data_.labels[index];
    }
    return batch;
  } catch (const std::exception& e) {
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    return absl::InternalError(absl::StrCat(
        name(), ": gather of ", n,
        " samples failed: ", c10 != nullptr ? c10->what_without_backtrace() : e.what()));
  }
}

std::vector<std::string> DatasetNames() {
  std::vector<std::string> names;
  for (const DatasetInfo& known : KnownDatasets()) names.push_back(known.name);
  return names;
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const job::DatasetSpec& spec, Split split,
                                                     uint64_t seed) {
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
  return Dataset::FromData(std::move(data), spec.normalize);
}

}  // namespace hptrain::train
