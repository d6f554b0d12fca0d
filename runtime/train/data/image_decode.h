// Image decoding for the decoded data formats (imagefolder, filelist, webdataset): JPEG through
// libjpeg-turbo's TurboJPEG API, PNG through libpng. The format is recognized by the file's magic
// bytes, not its name.
//
// Pixels come out as uint8, interleaved (H x W x C), gray (C = 1) or RGB (C = 3) as asked:
//   RGB -> gray: ITU-R 601-2 luma in PIL's integer arithmetic (Image.convert("L")):
//                L = (19595 R + 38470 G + 7471 B + 32768) >> 16
//   gray -> RGB: the value copied to the three channels.
// PNG: palette images are expanded to RGB, gray below 8 bits to 8 bits, 16-bit samples scaled to
// 8 bits (rounded), and an alpha channel is dropped (PIL's convert("RGB") does the same).
// A JPEG that libjpeg-turbo decodes only with a warning (a truncated file, a bad Huffman code) is
// corrupt: no partly gray image is ever returned.
//
// Nothing here throws; every function is safe to call from several threads at once (each thread
// keeps its own TurboJPEG handle).
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_IMAGE_DECODE_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_IMAGE_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hptrain::train {

enum class ImageFormat { kJpeg, kPng };

// "JPEG" or "PNG", for messages.
const char* ImageFormatName(ImageFormat format);

// What an image's header says.
struct ImageInfo {
  ImageFormat format = ImageFormat::kJpeg;
  int height = 0;
  int width = 0;
  int channels = 0;  // as stored: 1 for gray (with or without alpha), 3 for color
};

// The format by magic bytes; DataLoss "not a JPEG or PNG image" otherwise.
absl::StatusOr<ImageFormat> DetectImageFormat(const uint8_t* data, size_t size);

// Reads only the header of the encoded image in data[0, size) (a prefix of the file will do).
// DataLoss "corrupt JPEG: REASON" / "corrupt PNG: REASON" for a bad header. A JPEG's header may
// lie behind large metadata segments: when a prefix fails, retry with the whole file.
absl::StatusOr<ImageInfo> ReadImageInfo(const uint8_t* data, size_t size);

// Decodes the image into `pixels` (resized to height * width * channels bytes, H x W x C) with
// `channels` (1 or 3) channels, converting as above. Returns the decoded image's height and width
// and its stored channels. DataLoss "corrupt JPEG: REASON" / "corrupt PNG: REASON" when decoding
// fails.
//
// min_height, min_width > 0 (the size the caller resizes to next) let a JPEG at least twice as
// large be decoded with libjpeg-turbo's DCT scaling, by the largest of 1/2, 1/4 and 1/8 that
// keeps both sides >= the minimum: a far cheaper decode, and a smoothed rather than an aliased
// input to the bilinear resize. PNGs are always decoded at full size.
absl::StatusOr<ImageInfo> DecodeImage(const uint8_t* data, size_t size, int channels,
                                      std::vector<uint8_t>* pixels, int min_height = 0,
                                      int min_width = 0);

// The encoders the tests and the benchmark write their images with (and what a user could use to
// convert a data set). `pixels` is H x W x C uint8, C = 1 or 3. EncodePng is lossless;
// EncodeJpeg takes a quality in [1, 100] (4:2:0 chroma subsampling for RGB).
absl::StatusOr<std::string> EncodePng(const uint8_t* pixels, int height, int width, int channels);
absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int height, int width, int channels,
                                       int quality);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_IMAGE_DECODE_H_
