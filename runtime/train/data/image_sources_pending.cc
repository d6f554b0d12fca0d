// Placeholders for the decoded formats' sources until their implementations
// (image_folder_source.cc, file_list_source.cc, webdataset_source.cc) are in the build; this file
// goes when they come.
#include "absl/strings/str_cat.h"
#include "runtime/train/data/sample_source.h"

namespace hptrain::train {
namespace {

absl::Status NotBuilt(const std::string& format) {
  return absl::UnimplementedError(
      absl::StrCat("spec.dataset.format: ", format, " is not available in this build"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> OpenImageFolderSource(const job::DatasetSpec& spec,
                                                                    Split split) {
  (void)spec, (void)split;
  return NotBuilt("imagefolder");
}

absl::StatusOr<std::unique_ptr<SampleSource>> OpenFileListSource(const job::DatasetSpec& spec,
                                                                 Split split) {
  (void)spec, (void)split;
  return NotBuilt("filelist");
}

absl::StatusOr<std::unique_ptr<SampleSource>> OpenWebDatasetSource(const job::DatasetSpec& spec,
                                                                   Split split) {
  (void)spec, (void)split;
  return NotBuilt("webdataset");
}

}  // namespace hptrain::train
