// Private to runtime/train/data: what the decoded formats (imagefolder, filelist, webdataset)
// share. Each format's Open*Source lists its encoded images with their labels (ImageListing);
// MakeImageSource checks the listing against spec.dataset and returns the SampleSource that
// decodes them (image_decode.h) through a DecodePool (decode_pool.h).
//
// What MakeImageSource settles, the same way for every decoded format:
//   channels  spec.dataset.channels, or the first training image's (gray: 1, else 3)
//   size      spec.dataset.imageSize (every image resized with ResizeBilinear), or the first
//             training image's; then every image of the split must have it (their headers are
//             read at open: InvalidArgument "FILE: image is HxW, but FIRST is HxW; set
//             spec.dataset.imageSize to resize every image")
//   classes   spec.dataset.classes (labels beyond it: InvalidArgument naming the image), else
//             listing.num_classes, else the largest label in either split + 1
// Pixels are v / 255.0f of the decoded 8-bit values (the idx reader's mapping), resized after.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_IMAGE_SOURCE_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_IMAGE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/data/image_decode.h"
#include "runtime/train/data/sample_source.h"

namespace hptrain::train::internal {

// One encoded image: a whole file, or a byte range of one (a tar member).
struct ImageRecord {
  std::string file;
  std::string member;  // the tar member's name; "" for a whole file
  int64_t offset = 0;
  int64_t size = -1;   // -1: to the end of the file
  int64_t label = 0;
  // The header, when the listing knows it already (webdataset's index); height 0: unknown.
  int height = 0, width = 0, channels = 0;
};

// "FILE" or "SHARD:MEMBER", for messages.
std::string RecordName(const ImageRecord& record);

struct ImageListing {
  std::string format;  // "imagefolder" | "filelist" | "webdataset", for messages
  std::vector<ImageRecord> train;
  std::vector<ImageRecord> test;
  int num_classes = 0;  // the format's own class count (imagefolder: its folders); 0: from labels
};

// The source of `split` over `listing` (above). NotFound when the split has no images; DataLoss
// naming the file when the first training image's header cannot be read.
absl::StatusOr<std::unique_ptr<SampleSource>> MakeImageSource(const job::DatasetSpec& spec,
                                                              Split split, ImageListing listing);

// `size` bytes of `path` from `offset` (size -1: to the end). NotFound / PermissionDenied from
// open; DataLoss "PATH: truncated: ..." when the file is shorter.
absl::StatusOr<std::string> ReadFileRange(const std::string& path, int64_t offset, int64_t size);

// The header of the image at path[offset, offset + size): reads a prefix, then the whole image
// if the prefix was not enough.
absl::StatusOr<ImageInfo> ReadImageInfoAt(const std::string& path, int64_t offset, int64_t size);

// "train" or "test" (SplitName without the libtorch library that defines it).
const char* SplitLabel(Split split);

}  // namespace hptrain::train::internal

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_IMAGE_SOURCE_H_
