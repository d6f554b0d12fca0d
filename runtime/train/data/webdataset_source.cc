// webdataset: PATH/train-*.tar and PATH/test-*.tar, read in sorted name order, each a run of
// WebDataset samples (KEY.jpg|jpeg|png + KEY.cls); samples are numbered across a split's shards
// in that order. Images are read by offset through each shard's index (tar_index.h), built on
// first use.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/files.h"
#include "runtime/base/status.h"
#include "runtime/train/data/image_source.h"
#include "runtime/train/data/tar_index.h"

namespace hptrain::train {
namespace {

absl::Status ListSplit(const std::string& dir, const std::string& prefix,
                       std::vector<internal::ImageRecord>* records) {
  std::vector<std::string> shards;
  for (const std::string& name : ListDirectory(dir)) {
    if (absl::StartsWith(name, prefix + "-") && absl::EndsWith(name, ".tar")) {
      shards.push_back(name);
    }
  }
  std::sort(shards.begin(), shards.end());
  for (const std::string& name : shards) {
    HPTRAIN_ASSIGN_OR_RETURN(ShardIndex index, LoadShardIndex(dir + "/" + name));
    for (const WdsSample& s : index.samples) {
      internal::ImageRecord r;
      r.file = index.shard;
      r.member = s.image_member;
      r.offset = s.image_offset;
      r.size = s.image_size;
      r.label = s.label;
      r.height = s.height;
      r.width = s.width;
      r.channels = s.channels;
      records->push_back(std::move(r));
    }
  }
  if (shards.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, ": no ", prefix, "-*.tar shards"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> OpenWebDatasetSource(const job::DatasetSpec& spec,
                                                                   Split split) {
  if (!IsDirectory(spec.path)) {
    return absl::NotFoundError(absl::StrCat(spec.path, ": data set directory not found"));
  }
  internal::ImageListing listing;
  listing.format = "webdataset";
  // Both splits: the class count (when not given) is the largest label of either + 1.
  HPTRAIN_RETURN_IF_ERROR(ListSplit(spec.path, "train", &listing.train));
  HPTRAIN_RETURN_IF_ERROR(ListSplit(spec.path, "test", &listing.test));
  return internal::MakeImageSource(spec, split, std::move(listing));
}

}  // namespace hptrain::train
