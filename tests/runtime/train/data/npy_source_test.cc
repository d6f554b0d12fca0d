// The npy format: the header parser (versions, dict spellings, errors) and the source's values,
// shapes, targets and one-line errors naming the file.
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/train/data/dataset_readers.h"
#include "runtime/train/data/sample_source.h"
#include "tests/runtime/train/data/npy_writer.h"

namespace hptrain::train {
namespace {

using ::hptrain::testing::NpyHeader;
using ::hptrain::testing::WriteNpy;
using ::testing::HasSubstr;

std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "/hptrain_npy_XXXXXX";
  const char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

absl::StatusOr<internal::NpyHeader> Parse(const std::string& bytes) {
  return internal::ParseNpyHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                  "x.npy");
}

TEST(NpyHeaderTest, ParsesEveryVersionAsNumpyWritesIt) {
  for (int major : {1, 2, 3}) {
    const std::string header = NpyHeader("<f4", {60000, 28, 28}, major);
    EXPECT_EQ(header.size() % 64, 0u);
    auto parsed = Parse(header + std::string(16, '\0'));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->major, major);
    EXPECT_EQ(parsed->descr, "<f4");
    EXPECT_FALSE(parsed->fortran_order);
    EXPECT_EQ(parsed->shape, (std::vector<int64_t>{60000, 28, 28}));
    EXPECT_EQ(parsed->data_offset, header.size());
  }
}

TEST(NpyHeaderTest, ReadsOneDimensionalScalarAndReorderedDicts) {
  auto one = Parse(NpyHeader("<i8", {7}));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->shape, std::vector<int64_t>{7});
  auto scalar = Parse(NpyHeader("<i8", {}));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  // Keys in another order, double quotes, no trailing comma, fortran_order True.
  std::string dict = "{\"shape\": (2,3), \"fortran_order\": True, \"descr\": \"|u1\"}\n";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size());
  bytes += '\0';
  auto other = Parse(bytes + dict);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->descr, "|u1");
  EXPECT_TRUE(other->fortran_order);
  EXPECT_EQ(other->shape, (std::vector<int64_t>{2, 3}));
}

TEST(NpyHeaderTest, RejectsBadMagicVersionTruncationAndMissingKeys) {
  auto magic = Parse("PK\x03\x04 this is a zip file, not an npy");
  EXPECT_EQ(magic.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(magic.status().message(), HasSubstr("x.npy: not a .npy file"));

  std::string v4 = NpyHeader("<f4", {1});
  v4[6] = 4;
  EXPECT_THAT(Parse(v4).status().message(), HasSubstr("version 4.0"));

  const std::string whole = NpyHeader("<f4", {1, 2});
  auto cut = Parse(whole.substr(0, 40));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(), HasSubstr("truncated"));
  EXPECT_EQ(Parse(whole.substr(0, 9)).status().code(), absl::StatusCode::kDataLoss);

  std::string dict = "{'descr': '<f4', 'fortran_order': False}\n";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size());
  bytes += '\0';
  EXPECT_THAT(Parse(bytes + dict).status().message(), HasSubstr("no 'shape'"));
  std::string garbage = std::string("\x93NUMPY\x01\x00", 8) + std::string("\x05\x00", 2) + "hello";
  EXPECT_THAT(Parse(garbage).status().message(), HasSubstr("bad .npy header"));
}

class NpySourceTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }

  job::DatasetSpec Spec() const {
    job::DatasetSpec spec;
    spec.name = "mine";
    spec.format = "npy";
    spec.path = dir_;
    return spec;
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // uint8 [n, 2, 3] images whose pixel k of sample i is (i * 6 + k) * 7 % 256, int64 labels i % 3.
  void WriteGray(const std::string& split, int64_t n) {
    std::vector<uint8_t> pixels;
    for (int64_t i = 0; i < n * 6; ++i) pixels.push_back(static_cast<uint8_t>(i * 7 % 256));
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < n; ++i) labels.push_back(i % 3);
    ASSERT_TRUE(WriteNpy(Path(split + "-images.npy"), "|u1", {n, 2, 3}, pixels));
    ASSERT_TRUE(WriteNpy(Path(split + "-labels.npy"), "<i8", {n}, labels));
  }

  std::string dir_;
};

TEST_F(NpySourceTest, Uint8GrayImagesReadAsValueOver255WithClassLabels) {
  WriteGray("train", 5);
  WriteGray("test", 2);
  auto source = OpenNpySource(Spec(), Split::kTrain);
  ASSERT_TRUE(source.ok()) << source.status();
  const SampleSource& s = **source;
  EXPECT_EQ(s.name(), "mine/train");
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.shape().channels, 1);
  EXPECT_EQ(s.shape().height, 2);
  EXPECT_EQ(s.shape().width, 3);
  EXPECT_EQ(s.targets().kind, TargetKind::kClass);
  EXPECT_EQ(s.targets().num_classes, 3);  // max label 2 + 1
  std::vector<float> px(6);
  ASSERT_TRUE(s.ReadPixels(4, px.data()).ok());
  for (int k = 0; k < 6; ++k) {
    const float expected = static_cast<float>((4 * 6 + k) * 7 % 256) / 255.0f;
    EXPECT_EQ(px[static_cast<size_t>(k)], expected) << k;
  }
  int64_t cls = -1;
  ASSERT_TRUE(s.ReadTarget(4, &cls, nullptr).ok());
  EXPECT_EQ(cls, 1);
  EXPECT_EQ(s.ReadPixels(5, px.data()).code(), absl::StatusCode::kOutOfRange);

  auto test = OpenNpySource(Spec(), Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->size(), 2);
  EXPECT_EQ((*test)->name(), "mine/test");
}

TEST_F(NpySourceTest, FloatImagesInEitherLayoutReadAsChannelsFirst) {
  // Sample 0 of an NHWC [1, 2, 2, 3] array: value = 100 * c + 10 * y + x (scaled to [0, 1]).
  std::vector<float> nhwc, nchw;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 2; ++x)
      for (int c = 0; c < 3; ++c) nhwc.push_back((100.0f * c + 10.0f * y + x) / 1000.0f);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 2; ++x) nchw.push_back((100.0f * c + 10.0f * y + x) / 1000.0f);
  const std::vector<uint8_t> label = {0};
  for (const std::string& layout : {"", "NHWC", "NCHW"}) {
    const bool first = layout == "NCHW";
    for (const std::string split : {"train", "test"}) {
      ASSERT_TRUE(WriteNpy(Path(split + "-images.npy"), "<f4",
                           first ? std::vector<int64_t>{1, 3, 2, 2} : std::vector<int64_t>{1, 2, 2, 3},
                           first ? nchw : nhwc));
      ASSERT_TRUE(WriteNpy(Path(split + "-labels.npy"), "|u1", {1}, label));
    }
    job::DatasetSpec spec = Spec();
    spec.layout = layout;
    auto source = OpenNpySource(spec, Split::kTrain);
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ((*source)->shape().channels, 3) << layout;
    EXPECT_EQ((*source)->targets().num_classes, 1);
    std::vector<float> px(12);
    ASSERT_TRUE((*source)->ReadPixels(0, px.data()).ok());
    EXPECT_EQ(px, nchw) << layout;
  }
}

TEST_F(NpySourceTest, LabelDtypesAndTargetKinds) {
  WriteGray("train", 4);
  WriteGray("test", 4);
  // <i4 and |u1 class labels.
  const std::vector<int32_t> i4 = {3, 0, 7, 1};
  ASSERT_TRUE(WriteNpy(Path("train-labels.npy"), "<i4", {4}, i4));
  const std::vector<uint8_t> u1 = {9, 0, 0, 2};
  ASSERT_TRUE(WriteNpy(Path("test-labels.npy"), "|u1", {4}, u1));
  auto source = OpenNpySource(Spec(), Split::kTrain);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->targets().num_classes, 10);  // the test split's 9 counts too
  int64_t cls = -1;
  ASSERT_TRUE((*source)->ReadTarget(2, &cls, nullptr).ok());
  EXPECT_EQ(cls, 7);
  job::DatasetSpec spec = Spec();
  spec.classes = 12;
  EXPECT_EQ((*OpenNpySource(spec, Split::kTest))->targets().num_classes, 12);
  spec.classes = 8;  // the test split's label 9 is outside
  auto outside = OpenNpySource(spec, Split::kTrain);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(outside.status().message(), HasSubstr(Path("test-labels.npy")));

  // <f4 [N]: regression targets of dimension 1.
  const std::vector<float> y = {0.5f, -1.0f, 2.25f, 3.0f};
  ASSERT_TRUE(WriteNpy(Path("train-labels.npy"), "<f4", {4}, y));
  ASSERT_TRUE(WriteNpy(Path("test-labels.npy"), "<f4", {4}, y));
  auto regression = OpenNpySource(Spec(), Split::kTrain);
  ASSERT_TRUE(regression.ok()) << regression.status();
  EXPECT_EQ((*regression)->targets().kind, TargetKind::kVector);
  EXPECT_EQ((*regression)->targets().dim, 1);
  EXPECT_EQ((*regression)->targets().outputs(), 1);
  float v = 0;
  ASSERT_TRUE((*regression)->ReadTarget(2, nullptr, &v).ok());
  EXPECT_EQ(v, 2.25f);

  // <f4 [N, K]: multi-hot rows.
  std::vector<float> hot(4 * 5, 0.0f);
  hot[2 * 5 + 1] = hot[2 * 5 + 4] = 1.0f;
  ASSERT_TRUE(WriteNpy(Path("train-labels.npy"), "<f4", {4, 5}, hot));
  ASSERT_TRUE(WriteNpy(Path("test-labels.npy"), "<f4", {4, 5}, hot));
  auto multi = OpenNpySource(Spec(), Split::kTrain);
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_EQ((*multi)->targets().dim, 5);
  std::vector<float> row(5);
  ASSERT_TRUE((*multi)->ReadTarget(2, nullptr, row.data()).ok());
  EXPECT_EQ(row, (std::vector<float>{0, 1, 0, 0, 1}));
}

TEST_F(NpySourceTest, BadFilesAreOneLineDataLossNamingTheFile) {
  WriteGray("train", 4);
  WriteGray("test", 2);
  const auto expect_error = [&](const std::string& file, const std::string& what,
                                absl::StatusCode code = absl::StatusCode::kDataLoss) {
    auto source = OpenNpySource(Spec(), Split::kTrain);
    ASSERT_FALSE(source.ok()) << what;
    EXPECT_EQ(source.status().code(), code) << source.status();
    EXPECT_THAT(source.status().message(), HasSubstr(Path(file))) << what;
    EXPECT_THAT(source.status().message(), HasSubstr(what));
    EXPECT_EQ(std::string(source.status().message()).find('\n'), std::string::npos);
  };
  std::vector<uint8_t> pixels(4 * 6, 1);
  // Truncated: 23 of 24 data bytes.
  ASSERT_TRUE(WriteNpy(Path("train-images.npy"), "|u1", {4, 2, 3}, pixels.data(), 23));
  expect_error("train-images.npy", "truncated: expected 24 bytes");
  // Wrong dtype.
  std::vector<double> doubles(24, 0.5);
  ASSERT_TRUE(WriteNpy(Path("train-images.npy"), "<f8", {4, 2, 3}, doubles));
  expect_error("train-images.npy", "dtype '<f8' is not supported for images");
  ASSERT_TRUE(WriteNpy(Path("train-images.npy"), ">f4", {4, 2, 3}, pixels));
  expect_error("train-images.npy", "big-endian");
  std::vector<uint8_t> again(24, 0);
  ASSERT_TRUE(WriteNpy(Path("train-images.npy"), "|u1", {4, 2, 3}, again));
  // Labels / images length mismatch.
  const std::vector<int64_t> three = {0, 1, 2};
  ASSERT_TRUE(WriteNpy(Path("train-labels.npy"), "<i8", {3}, three));
  expect_error("train-labels.npy", "3 labels for the 4 images");
  // Negative class.
  const std::vector<int64_t> negative = {0, -1, 2, 0};
  ASSERT_TRUE(WriteNpy(Path("train-labels.npy"), "<i8", {4}, negative));
  expect_error("train-labels.npy", "label -1 of sample 1 is negative");
  const std::vector<int64_t> good = {0, 1, 2, 0};
  ASSERT_TRUE(WriteNpy(Path("train-labels.npy"), "<i8", {4}, good));
  // Fortran order.
  {
    std::ofstream out(Path("test-images.npy"), std::ios::binary | std::ios::trunc);
    const std::string header = ::hptrain::testing::NpyHeader("|u1", {2, 2, 3}, 1, true);
    out << header << std::string(12, '\0');
  }
  expect_error("test-images.npy", "fortran_order");
  // The test split's shape disagrees with the training split's.
  std::vector<uint8_t> wide(2 * 2 * 4, 0);
  ASSERT_TRUE(WriteNpy(Path("test-images.npy"), "|u1", {2, 2, 4}, wide));
  expect_error("test-images.npy", "the training split's are 1x2x3");
  // Not an npy at all; a missing file.
  WriteGray("test", 2);
  { std::ofstream(Path("test-labels.npy"), std::ios::trunc) << "0\n1\n"; }
  expect_error("test-labels.npy", "not a .npy file");
  std::remove(Path("test-labels.npy").c_str());
  expect_error("test-labels.npy", "no such file", absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hptrain::train
