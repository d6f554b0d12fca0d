// imagefolder: PATH/train/<class>/*.{jpg,jpeg,png} and PATH/test/<class>/...; the classes are the
// sorted names of train's subfolders (test must have the same ones), a label is its class's
// position, and a class's images are in file-name order (byte order, like Python's sorted()).
#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/files.h"
#include "runtime/base/status.h"
#include "runtime/train/data/image_source.h"

namespace hptrain::train {
namespace {

bool IsImageName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;  // hidden files (.DS_Store, ._x.jpg)
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

std::vector<std::string> SortedSubfolders(const std::string& dir) {
  std::vector<std::string> names;
  for (const std::string& name : ListDirectory(dir)) {
    if (!name.empty() && name[0] != '.' && IsDirectory(dir + "/" + name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status ListSplit(const std::string& dir, const std::vector<std::string>& classes,
                       std::vector<internal::ImageRecord>* records) {
  for (size_t k = 0; k < classes.size(); ++k) {
    const std::string folder = absl::StrCat(dir, "/", classes[k]);
    std::vector<std::string> files;
    for (const std::string& name : ListDirectory(folder)) {
      if (IsImageName(name) && !IsDirectory(folder + "/" + name)) files.push_back(name);
    }
    if (files.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(folder, ": empty class folder (no .jpg, .jpeg or .png files)"));
    }
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) {
      internal::ImageRecord r;
      r.file = absl::StrCat(folder, "/", file);
      r.label = static_cast<int64_t>(k);
      records->push_back(std::move(r));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> OpenImageFolderSource(const job::DatasetSpec& spec,
                                                                    Split split) {
  if (!IsDirectory(spec.path)) {
    return absl::NotFoundError(absl::StrCat(spec.path, ": data set directory not found"));
  }
  internal::ImageListing listing;
  listing.format = "imagefolder";
  const std::string train = spec.path + "/train";
  const std::string test = spec.path + "/test";
  for (const std::string& dir : {train, test}) {
    if (!IsDirectory(dir)) {
      return absl::NotFoundError(absl::StrCat(
          dir, ": not found (imagefolder expects PATH/train/<class>/*.jpg and PATH/test/<class>/)"));
    }
  }
  const std::vector<std::string> classes = SortedSubfolders(train);
  if (classes.empty()) {
    return absl::NotFoundError(absl::StrCat(train, ": no class folders"));
  }
  const std::vector<std::string> test_classes = SortedSubfolders(test);
  if (test_classes != classes) {
    std::vector<std::string> missing, extra;
    std::set_difference(classes.begin(), classes.end(), test_classes.begin(), test_classes.end(),
                        std::back_inserter(missing));
    std::set_difference(test_classes.begin(), test_classes.end(), classes.begin(), classes.end(),
                        std::back_inserter(extra));
    return absl::InvalidArgumentError(absl::StrCat(
        test, ": the class folders differ from ", train, "'s",
        missing.empty() ? "" : absl::StrCat("; missing: ", absl::StrJoin(missing, ", ")),
        extra.empty() ? "" : absl::StrCat("; extra: ", absl::StrJoin(extra, ", "))));
  }
  HPTRAIN_RETURN_IF_ERROR(ListSplit(train, classes, &listing.train));
  HPTRAIN_RETURN_IF_ERROR(ListSplit(test, classes, &listing.test));
  listing.num_classes = static_cast<int>(classes.size());
  return internal::MakeImageSource(spec, split, std::move(listing));
}

}  // namespace hptrain::train
