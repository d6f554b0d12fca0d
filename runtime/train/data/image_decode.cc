#include "runtime/train/data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hptrain::train {
namespace {

// Far above any training image; keeps size arithmetic and allocations sane on a corrupt header.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

std::string OneLine(const char* text) {
  std::string s = text == nullptr ? "unknown error" : text;
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

absl::Status Corrupt(ImageFormat format, const std::string& reason) {
  return absl::DataLossError(absl::StrCat("corrupt ", ImageFormatName(format), ": ", reason));
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// One TurboJPEG handle per thread and direction: creating one costs allocations that would
// otherwise be paid per image.
struct TjHandle {
  tjhandle handle = nullptr;
  ~TjHandle() {
    if (handle != nullptr) tjDestroy(handle);
  }
};

tjhandle Decompressor() {
  thread_local TjHandle h;
  if (h.handle == nullptr) h.handle = tjInitDecompress();
  return h.handle;
}

tjhandle Compressor() {
  thread_local TjHandle h;
  if (h.handle == nullptr) h.handle = tjInitCompress();
  return h.handle;
}

// Converts interleaved `from`-channel pixels in place (within `pixels`) to `to` channels.
void ConvertChannels(int from, int to, int64_t count, std::vector<uint8_t>* pixels) {
  if (from == to) return;
  std::vector<uint8_t>& p = *pixels;
  if (from == 3 && to == 1) {
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t r = p[3 * i], g = p[3 * i + 1], b = p[3 * i + 2];
      p[i] = static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
    }
    p.resize(static_cast<size_t>(count));
  } else {  // 1 -> 3, back to front so the source is read before it is overwritten
    p.resize(static_cast<size_t>(count) * 3);
    for (int64_t i = count - 1; i >= 0; --i) {
      const uint8_t v = p[i];
      p[3 * i] = p[3 * i + 1] = p[3 * i + 2] = v;
    }
  }
}

absl::StatusOr<ImageInfo> JpegInfo(const uint8_t* data, size_t size) {
  tjhandle tj = Decompressor();
  if (tj == nullptr) return absl::InternalError("cannot create a TurboJPEG decompressor");
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &width, &height, &subsamp,
                          &colorspace) != 0) {
    return Corrupt(ImageFormat::kJpeg, OneLine(tjGetErrorStr2(tj)));
  }
  if (width <= 0 || height <= 0 || int64_t{width} * height > kMaxPixels) {
    return Corrupt(ImageFormat::kJpeg, absl::StrCat("bad dimensions ", width, "x", height));
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return absl::DataLossError("unsupported JPEG: CMYK color (convert it to RGB)");
  }
  return ImageInfo{ImageFormat::kJpeg, height, width, colorspace == TJCS_GRAY ? 1 : 3};
}

absl::StatusOr<ImageInfo> PngInfo(const uint8_t* data, size_t size) {
  // Signature (8 bytes), then the IHDR chunk: length, "IHDR", width, height, depth, color type.
  if (size < 26 || std::memcmp(data + 12, "IHDR", 4) != 0) {
    return Corrupt(ImageFormat::kPng, "no IHDR chunk");
  }
  const uint32_t width = BigEndian32(data + 16);
  const uint32_t height = BigEndian32(data + 20);
  const int color_type = data[25];
  if (width == 0 || height == 0 || width > (1u << 30) || height > (1u << 30) ||
      int64_t{width} * height > kMaxPixels) {
    return Corrupt(ImageFormat::kPng, absl::StrCat("bad dimensions ", width, "x", height));
  }
  const bool color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
  return ImageInfo{ImageFormat::kPng, static_cast<int>(height), static_cast<int>(width),
                   color ? 3 : 1};
}

absl::StatusOr<ImageInfo> DecodeJpeg(const uint8_t* data, size_t size, int channels,
                                     std::vector<uint8_t>* pixels, int min_height,
                                     int min_width) {
  auto info = JpegInfo(data, size);
  if (!info.ok()) return info.status();
  tjhandle tj = Decompressor();
  if (min_height > 0 && min_width > 0) {
    // libjpeg-turbo scales by num/denom with rounding up (TJSCALED).
    for (int denom : {8, 4, 2}) {
      const int h = (info->height + denom - 1) / denom;
      const int w = (info->width + denom - 1) / denom;
      if (h >= min_height && w >= min_width) {
        info->height = h;
        info->width = w;
        break;
      }
    }
  }
  // Decode to the stored kind; RGB -> gray goes through ConvertChannels so that it is PIL's luma
  // of the decoded RGB, not the JPEG's own Y plane.
  const int stored = info->channels;
  pixels->resize(static_cast<size_t>(info->height) * info->width * stored);
  if (tjDecompress2(tj, data, static_cast<unsigned long>(size), pixels->data(), info->width, 0,
                    info->height, stored == 1 ? TJPF_GRAY : TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0) {
    return Corrupt(ImageFormat::kJpeg, OneLine(tjGetErrorStr2(tj)));
  }
  ConvertChannels(stored, channels, int64_t{info->height} * info->width, pixels);
  return info;
}

// libpng reports errors by longjmp; everything that must survive one lives in this struct, in
// the caller's frame, never in the frame that calls setjmp.
struct PngState {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  char error[256] = {};
  std::vector<uint8_t>* pixels = nullptr;
  std::vector<png_bytep> rows;
  int height = 0, width = 0, channels = 0;
};

void PngReadFn(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "truncated file");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void PngErrorFn(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof(s->error), "%s", message);
  png_longjmp(png, 1);
}

void PngWarningFn(png_structp, png_const_charp) {}

bool ReadPng(PngState* s, png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, s, &PngReadFn);
  png_set_user_limits(png, 1u << 30, 1u << 30);
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_scale_16(png);
  if ((color_type & PNG_COLOR_MASK_ALPHA) != 0) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  s->height = static_cast<int>(png_get_image_height(png, info));
  s->width = static_cast<int>(png_get_image_width(png, info));
  s->channels = png_get_channels(png, info);
  if (int64_t{s->height} * s->width > kMaxPixels || (s->channels != 1 && s->channels != 3)) {
    png_error(png, "unsupported dimensions or channels");
  }
  const size_t row_bytes = png_get_rowbytes(png, info);
  s->pixels->resize(row_bytes * static_cast<size_t>(s->height));
  s->rows.resize(static_cast<size_t>(s->height));
  for (int y = 0; y < s->height; ++y) s->rows[y] = s->pixels->data() + row_bytes * y;
  png_read_image(png, s->rows.data());
  png_read_end(png, nullptr);
  return true;
}

absl::StatusOr<ImageInfo> DecodePng(const uint8_t* data, size_t size, int channels,
                                    std::vector<uint8_t>* pixels) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (png == nullptr) return absl::InternalError("cannot create a libpng reader");
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return absl::InternalError("cannot create a libpng info struct");
  }
  PngState s;
  s.data = data;
  s.size = size;
  s.pixels = pixels;
  png_set_error_fn(png, &s, &PngErrorFn, &PngWarningFn);
  const bool ok = ReadPng(&s, png, info);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) return Corrupt(ImageFormat::kPng, OneLine(s.error));
  ConvertChannels(s.channels, channels, int64_t{s.height} * s.width, pixels);
  return ImageInfo{ImageFormat::kPng, s.height, s.width, s.channels};
}

struct PngWriteState {
  std::string out;
  char error[256] = {};
};

void PngWriteFn(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngWriteState*>(png_get_io_ptr(png))->out.append(reinterpret_cast<char*>(data), n);
}

void PngFlushFn(png_structp) {}

void PngWriteErrorFn(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngWriteState*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof(s->error), "%s", message);
  png_longjmp(png, 1);
}

bool WritePng(PngWriteState* s, png_structp png, png_infop info, const uint8_t* pixels, int height,
              int width, int channels) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, s, &PngWriteFn, &PngFlushFn);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) {
    png_write_row(png, pixels + static_cast<size_t>(y) * width * channels);
  }
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

const char* ImageFormatName(ImageFormat format) {
  return format == ImageFormat::kJpeg ? "JPEG" : "PNG";
}

absl::StatusOr<ImageFormat> DetectImageFormat(const uint8_t* data, size_t size) {
  static constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
    return ImageFormat::kJpeg;
  }
  if (size >= 8 && std::memcmp(data, kPngMagic, 8) == 0) return ImageFormat::kPng;
  return absl::DataLossError("not a JPEG or PNG image");
}

absl::StatusOr<ImageInfo> ReadImageInfo(const uint8_t* data, size_t size) {
  auto format = DetectImageFormat(data, size);
  if (!format.ok()) return format.status();
  return *format == ImageFormat::kJpeg ? JpegInfo(data, size) : PngInfo(data, size);
}

absl::StatusOr<ImageInfo> DecodeImage(const uint8_t* data, size_t size, int channels,
                                      std::vector<uint8_t>* pixels, int min_height,
                                      int min_width) {
  if (channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(absl::StrCat("channels must be 1 or 3, got ", channels));
  }
  auto format = DetectImageFormat(data, size);
  if (!format.ok()) return format.status();
  return *format == ImageFormat::kJpeg
             ? DecodeJpeg(data, size, channels, pixels, min_height, min_width)
             : DecodePng(data, size, channels, pixels);
}

absl::StatusOr<std::string> EncodePng(const uint8_t* pixels, int height, int width,
                                      int channels) {
  if ((channels != 1 && channels != 3) || height <= 0 || width <= 0) {
    return absl::InvalidArgumentError("EncodePng: bad shape");
  }
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (png == nullptr) return absl::InternalError("cannot create a libpng writer");
  png_infop info = png_create_info_struct(png);
  PngWriteState s;
  png_set_error_fn(png, &s, &PngWriteErrorFn, &PngWarningFn);
  const bool ok =
      info != nullptr && WritePng(&s, png, info, pixels, height, width, channels);
  png_destroy_write_struct(&png, &info);
  if (!ok) return absl::InternalError(absl::StrCat("PNG encoding failed: ", OneLine(s.error)));
  return std::move(s.out);
}

absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int height, int width, int channels,
                                       int quality) {
  if ((channels != 1 && channels != 3) || height <= 0 || width <= 0) {
    return absl::InvalidArgumentError("EncodeJpeg: bad shape");
  }
  tjhandle tj = Compressor();
  if (tj == nullptr) return absl::InternalError("cannot create a TurboJPEG compressor");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(tj, pixels, width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size,
                  channels == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0) != 0) {
    if (buf != nullptr) tjFree(buf);
    return absl::InternalError(
        absl::StrCat("JPEG encoding failed: ", OneLine(tjGetErrorStr2(tj))));
  }
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  return out;
}

}  // namespace hptrain::train
