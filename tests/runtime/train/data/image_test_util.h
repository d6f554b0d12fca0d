// Test helpers for the decoded formats: deterministic images, encoded files and tar shards.
#ifndef HPTRAIN_TESTS_RUNTIME_TRAIN_DATA_IMAGE_TEST_UTIL_H_
#define HPTRAIN_TESTS_RUNTIME_TRAIN_DATA_IMAGE_TEST_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/train/data/image_decode.h"

namespace hptrain::train::testing {

// H x W x C bytes whose values depend on (seed, y, x, c).
inline std::vector<uint8_t> PatternImage(int height, int width, int channels, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(height) * width * channels);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        p[(static_cast<size_t>(y) * width + x) * channels + c] =
            static_cast<uint8_t>((seed * 37 + y * 11 + x * 5 + c * 71 + y * x) % 256);
  return p;
}

inline std::string Png(const std::vector<uint8_t>& pixels, int height, int width, int channels) {
  auto png = EncodePng(pixels.data(), height, width, channels);
  EXPECT_TRUE(png.ok()) << png.status();
  return png.ok() ? *png : std::string();
}

inline std::string Jpeg(const std::vector<uint8_t>& pixels, int height, int width, int channels,
                        int quality = 95) {
  auto jpeg = EncodeJpeg(pixels.data(), height, width, channels, quality);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status();
  return jpeg.ok() ? *jpeg : std::string();
}

// One ustar header block for a regular file (type '0') or another member type.
inline std::string TarHeader(const std::string& name, size_t size, char type = '0') {
  char h[512];
  std::memset(h, 0, sizeof(h));
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011lo", static_cast<unsigned long>(size));
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = type;
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  return std::string(h, sizeof(h));
}

// `jpeg` cut two bytes into its entropy-coded data: the header reads, the decode fails.
inline std::string CutInScan(const std::string& jpeg) {
  const size_t sos = jpeg.find("\xff\xda");
  EXPECT_NE(sos, std::string::npos);
  const size_t length = (static_cast<uint8_t>(jpeg[sos + 2]) << 8) | static_cast<uint8_t>(jpeg[sos + 3]);
  return jpeg.substr(0, sos + 2 + length + 2);
}

// Writes `contents` to `path`, creating its directories.
inline void WriteFile(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << contents;
}

// A tar archive of (name, contents) regular files, in order; names over 100 bytes go in a pax
// header.
inline std::string Tar(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out;
  auto pad = [&out] { out.append((512 - out.size() % 512) % 512, '\0'); };
  for (const auto& [name, data] : members) {
    if (name.size() > 100) {
      std::string record = " path=" + name + "\n";
      size_t length = record.size() + 1;
      while (std::to_string(length).size() + record.size() != length) ++length;
      record = std::to_string(length) + record;
      out += TarHeader("PaxHeader", record.size(), 'x');
      out += record;
      pad();
    }
    out += TarHeader(name.substr(0, 100), data.size());
    out += data;
    pad();
  }
  out.append(1024, '\0');
  return out;
}

}  // namespace hptrain::train::testing

#endif  // HPTRAIN_TESTS_RUNTIME_TRAIN_DATA_IMAGE_TEST_UTIL_H_
