// filelist: PATH/train.txt and PATH/test.txt, one `relative/path<TAB>label` per line (the path
// relative to PATH, or absolute; the label an integer class), in the order given. Blank lines are
// ignored; the label follows the line's last tab, so paths may hold spaces.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/files.h"
#include "runtime/base/status.h"
#include "runtime/train/data/image_source.h"

namespace hptrain::train {
namespace {

absl::Status ReadList(const job::DatasetSpec& spec, const std::string& list,
                      std::vector<internal::ImageRecord>* records) {
  auto text = ReadFile(list);
  if (!text.ok()) return text.status();
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    line = absl::StripSuffix(line, "\r");
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const size_t tab = line.rfind('\t');
    const std::string where = absl::StrCat(list, ":", line_number);
    if (tab == absl::string_view::npos || tab == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected `relative/path<TAB>label`, got \"", line, "\""));
    }
    const absl::string_view path = line.substr(0, tab);
    const absl::string_view label_text = absl::StripAsciiWhitespace(line.substr(tab + 1));
    int64_t label = 0;
    if (!absl::SimpleAtoi(label_text, &label) || label < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": label \"", label_text, "\" is not a class number >= 0"));
    }
    if (spec.classes > 0 && label >= spec.classes) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": class ", label, " is outside [0, ",
                                                     spec.classes, ") (spec.dataset.classes)"));
    }
    internal::ImageRecord r;
    r.file = path[0] == '/' ? std::string(path) : absl::StrCat(spec.path, "/", path);
    r.label = label;
    records->push_back(std::move(r));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> OpenFileListSource(const job::DatasetSpec& spec,
                                                                 Split split) {
  if (!IsDirectory(spec.path)) {
    return absl::NotFoundError(absl::StrCat(spec.path, ": data set directory not found"));
  }
  internal::ImageListing listing;
  listing.format = "filelist";
  // Both lists: the class count (when not given) is the largest label of either + 1.
  HPTRAIN_RETURN_IF_ERROR(ReadList(spec, spec.path + "/train.txt", &listing.train));
  HPTRAIN_RETURN_IF_ERROR(ReadList(spec, spec.path + "/test.txt", &listing.test));
  return internal::MakeImageSource(spec, split, std::move(listing));
}

}  // namespace hptrain::train
