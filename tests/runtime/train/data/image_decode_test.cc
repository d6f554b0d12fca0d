#include "runtime/train/data/image_decode.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/runtime/train/data/image_test_util.h"

namespace hptrain::train {
namespace {

using testing::Jpeg;
using testing::PatternImage;
using testing::Png;

absl::StatusOr<ImageInfo> Decode(const std::string& bytes, int channels,
                                 std::vector<uint8_t>* pixels) {
  return DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels,
                     pixels);
}

TEST(ImageDecode, PngRoundTripsGrayAndRgbExactly) {
  for (int channels : {1, 3}) {
    const auto image = PatternImage(7, 5, channels, channels);
    std::vector<uint8_t> out;
    auto info = Decode(Png(image, 7, 5, channels), channels, &out);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->format, ImageFormat::kPng);
    EXPECT_EQ(info->height, 7);
    EXPECT_EQ(info->width, 5);
    EXPECT_EQ(info->channels, channels);
    EXPECT_EQ(out, image);
  }
}

TEST(ImageDecode, RgbToGrayIsPilLuma) {
  const auto rgb = PatternImage(4, 6, 3, 9);
  std::vector<uint8_t> gray;
  auto info = Decode(Png(rgb, 4, 6, 3), 1, &gray);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->channels, 3);
  ASSERT_EQ(gray.size(), 24u);
  for (size_t i = 0; i < gray.size(); ++i) {
    // PIL's convert("L"): L = R * 299/1000 + G * 587/1000 + B * 114/1000, rounded.
    const double l = rgb[3 * i] * 0.299 + rgb[3 * i + 1] * 0.587 + rgb[3 * i + 2] * 0.114;
    EXPECT_NEAR(gray[i], l, 0.51) << "pixel " << i;
  }
  // Pure colors hit PIL's integer weights exactly.
  const std::vector<uint8_t> red = {255, 0, 0};
  ASSERT_TRUE(Decode(Png(red, 1, 1, 3), 1, &gray).ok());
  EXPECT_EQ(gray[0], 76);  // (255 * 19595 + 32768) >> 16
}

TEST(ImageDecode, GrayToRgbCopies) {
  const auto gray = PatternImage(3, 3, 1, 2);
  std::vector<uint8_t> rgb;
  ASSERT_TRUE(Decode(Png(gray, 3, 3, 1), 3, &rgb).ok());
  ASSERT_EQ(rgb.size(), 27u);
  for (size_t i = 0; i < gray.size(); ++i) {
    EXPECT_EQ(rgb[3 * i], gray[i]);
    EXPECT_EQ(rgb[3 * i + 1], gray[i]);
    EXPECT_EQ(rgb[3 * i + 2], gray[i]);
  }
}

TEST(ImageDecode, JpegDecodesCloseToTheOriginal) {
  // A smooth image, so that JPEG's loss stays small.
  std::vector<uint8_t> image(32 * 24 * 3);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 24; ++x)
      for (int c = 0; c < 3; ++c) image[(y * 24 + x) * 3 + c] = static_cast<uint8_t>(y * 4 + x * 2 + c * 20);
  std::vector<uint8_t> out;
  auto info = Decode(Jpeg(image, 32, 24, 3, 98), 3, &out);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->format, ImageFormat::kJpeg);
  EXPECT_EQ(info->height, 32);
  EXPECT_EQ(info->width, 24);
  EXPECT_EQ(info->channels, 3);
  ASSERT_EQ(out.size(), image.size());
  double error = 0;
  for (size_t i = 0; i < out.size(); ++i) error += std::abs(int{out[i]} - int{image[i]});
  EXPECT_LT(error / out.size(), 3.0);

  std::vector<uint8_t> gray(32 * 24);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = image[3 * i];
  info = Decode(Jpeg(gray, 32, 24, 1, 98), 1, &out);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->channels, 1);
  ASSERT_EQ(out.size(), gray.size());
}

TEST(ImageDecode, LargeJpegIsDecodedScaledDownToNoLessThanTheMinimum) {
  const auto image = PatternImage(64, 48, 3, 6);
  const std::string jpeg = Jpeg(image, 64, 48, 3);
  std::vector<uint8_t> out;
  struct Case {
    int min_h, min_w, h, w;
  } cases[] = {{16, 12, 16, 12}, {17, 12, 32, 24}, {8, 6, 8, 6}, {7, 2, 8, 6}, {33, 1, 64, 48},
               {0, 0, 64, 48}};
  for (const Case& c : cases) {
    auto info = DecodeImage(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), 3, &out,
                            c.min_h, c.min_w);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->height, c.h) << "minimum " << c.min_h << "x" << c.min_w;
    EXPECT_EQ(info->width, c.w) << "minimum " << c.min_h << "x" << c.min_w;
    EXPECT_EQ(out.size(), static_cast<size_t>(c.h * c.w * 3));
  }
  // PNGs are never scaled.
  const std::string png = Png(image, 64, 48, 3);
  auto info = DecodeImage(reinterpret_cast<const uint8_t*>(png.data()), png.size(), 3, &out, 8, 6);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->height, 64);
}

TEST(ImageDecode, HeaderOnlyReadsDimensions) {
  const auto image = PatternImage(9, 13, 3, 1);
  for (const std::string& bytes : {Png(image, 9, 13, 3), Jpeg(image, 9, 13, 3)}) {
    auto info = ReadImageInfo(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->height, 9);
    EXPECT_EQ(info->width, 13);
    EXPECT_EQ(info->channels, 3);
  }
}

TEST(ImageDecode, TruncatedJpegIsCorruptNotPartlyGray) {
  const auto image = PatternImage(64, 64, 3, 4);
  const std::string jpeg = Jpeg(image, 64, 64, 3);
  std::vector<uint8_t> out;
  auto info = Decode(jpeg.substr(0, jpeg.size() / 2), 3, &out);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("corrupt JPEG: "), std::string::npos)
      << info.status();
  EXPECT_EQ(info.status().message().find('\n'), std::string::npos);
}

TEST(ImageDecode, CorruptPngAndGarbageAreDataLoss) {
  const auto image = PatternImage(16, 16, 1, 5);
  std::string png = Png(image, 16, 16, 1);
  png[png.size() / 2] ^= 0x55;  // inside the compressed data: its CRC fails
  std::vector<uint8_t> out;
  auto info = Decode(png, 1, &out);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("corrupt PNG: "), std::string::npos) << info.status();

  info = Decode("GIF89a....", 1, &out);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().message(), "not a JPEG or PNG image");
}

}  // namespace
}  // namespace hptrain::train
