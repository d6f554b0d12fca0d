// The built-in sets (idx, cifar-binary, synthetic) as a SampleSource over their DatasetData.
#include <array>

#include "absl/strings/str_cat.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train::internal {

const float* Uint8ToUnit() {
  static const std::array<float, 256> kTable = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[static_cast<size_t>(v)] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return kTable.data();
}

InMemorySource::InMemorySource(DatasetData data) : data_(std::move(data)) {}

TargetInfo InMemorySource::targets() const {
  TargetInfo info;
  info.kind = TargetKind::kClass;
  info.num_classes = data_.num_classes;
  return info;
}

absl::Status InMemorySource::ReadPixels(int64_t i, float* out) const {
  if (i < 0 || i >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat(data_.name, ": sample ", i, " is outside [0, ", size(), ")"));
  }
  const uint8_t* src = pixels(i);
  const float* unit = Uint8ToUnit();
  const auto numel = static_cast<size_t>(data_.shape.numel());
  for (size_t k = 0; k < numel; ++k) out[k] = unit[src[k]];
  return absl::OkStatus();
}

absl::Status InMemorySource::ReadTarget(int64_t i, int64_t* cls, float* vec) const {
  (void)vec;
  if (i < 0 || i >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat(data_.name, ": sample ", i, " is outside [0, ", size(), ")"));
  }
  *cls = data_.labels[static_cast<size_t>(i)];
  return absl::OkStatus();
}

}  // namespace hptrain::train::internal
