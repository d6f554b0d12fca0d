// The decoded formats' sources: listing, labels, pixels, sizes, channels and their errors.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/train/data/augment.h"
#include "runtime/train/data/sample_source.h"
#include "tests/integration/hptrain_process.h"
#include "tests/runtime/train/data/image_test_util.h"

namespace hptrain::train {
namespace {

using hptrain::testing::TempDir;
using testing::Jpeg;
using testing::PatternImage;
using testing::Png;
using testing::Tar;
using testing::WriteFile;

job::DatasetSpec Spec(const std::string& format, const std::string& path) {
  job::DatasetSpec spec;
  spec.name = "mine";
  spec.format = format;
  spec.path = path;
  spec.normalize = false;
  return spec;
}

// H x W x C bytes as the C x H x W floats a source gives.
std::vector<float> Planar(const std::vector<uint8_t>& hwc, int h, int w, int c) {
  std::vector<float> out(hwc.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch)
        out[(static_cast<size_t>(ch) * h + y) * w + x] =
            static_cast<float>(hwc[(static_cast<size_t>(y) * w + x) * c + ch]) / 255.0f;
  return out;
}

std::vector<float> Pixels(const SampleSource& source, int64_t i) {
  std::vector<float> out(static_cast<size_t>(source.shape().numel()));
  absl::Status s = source.ReadPixels(i, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

int64_t Label(const SampleSource& source, int64_t i) {
  int64_t cls = -1;
  EXPECT_TRUE(source.ReadTarget(i, &cls, nullptr).ok());
  return cls;
}

// imagefolder with classes "cat" and "dog" (3 and 2 training images, 1 test image each),
// grayscale 6x5 PNGs; image seed = 10 * class + position.
void WriteFolder(const std::string& root) {
  const char* classes[] = {"cat", "dog"};
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j < 3 - k; ++j) {
      WriteFile(absl::StrCat(root, "/train/", classes[k], "/img", j, ".png"),
                Png(PatternImage(6, 5, 1, 10 * k + j), 6, 5, 1));
    }
    WriteFile(absl::StrCat(root, "/test/", classes[k], "/t.png"),
              Png(PatternImage(6, 5, 1, 100 + k), 6, 5, 1));
  }
  WriteFile(root + "/train/cat/notes.txt", "not an image");
}

TEST(ImageFolderSource, ListsClassesInOrderWithTheirLabelsAndPixels) {
  TempDir dir;
  WriteFolder(dir.path());
  auto train = OpenImageFolderSource(Spec("imagefolder", dir.path()), Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  const SampleSource& s = **train;
  EXPECT_EQ(s.name(), "mine/train");
  ASSERT_EQ(s.size(), 5);
  EXPECT_EQ(s.shape().channels, 1);
  EXPECT_EQ(s.shape().height, 6);
  EXPECT_EQ(s.shape().width, 5);
  EXPECT_EQ(s.targets().kind, TargetKind::kClass);
  EXPECT_EQ(s.targets().num_classes, 2);
  const int seeds[] = {0, 1, 2, 10, 11};
  const int labels[] = {0, 0, 0, 1, 1};
  s.Prefetch({4, 3});
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(Label(s, i), labels[i]);
    EXPECT_EQ(Pixels(s, i), Planar(PatternImage(6, 5, 1, seeds[i]), 6, 5, 1)) << "sample " << i;
  }
  auto test = OpenImageFolderSource(Spec("imagefolder", dir.path()), Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  ASSERT_EQ((*test)->size(), 2);
  EXPECT_EQ(Label(**test, 1), 1);
  EXPECT_EQ(Pixels(**test, 1), Planar(PatternImage(6, 5, 1, 101), 6, 5, 1));
}

TEST(ImageFolderSource, EmptyClassFolderIsAnErrorNamingIt) {
  TempDir dir;
  WriteFolder(dir.path());
  std::filesystem::create_directories(dir.path() + "/train/emu");
  std::filesystem::create_directories(dir.path() + "/test/emu");
  WriteFile(dir.path() + "/test/emu/t.png", Png(PatternImage(6, 5, 1, 0), 6, 5, 1));
  auto source = OpenImageFolderSource(Spec("imagefolder", dir.path()), Split::kTrain);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().message(),
            dir.path() + "/train/emu: empty class folder (no .jpg, .jpeg or .png files)");
}

TEST(ImageFolderSource, TestClassesMustMatchTrain) {
  TempDir dir;
  WriteFolder(dir.path());
  WriteFile(dir.path() + "/test/emu/t.png", Png(PatternImage(6, 5, 1, 0), 6, 5, 1));
  auto source = OpenImageFolderSource(Spec("imagefolder", dir.path()), Split::kTest);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("extra: emu"), std::string::npos) << source.status();
}

TEST(ImageFolderSource, CorruptJpegFailsItsSampleNamingTheFile) {
  TempDir dir;
  WriteFolder(dir.path());
  const std::string jpeg = Jpeg(PatternImage(6, 5, 1, 3), 6, 5, 1);
  const std::string bad = dir.path() + "/train/dog/img9.jpg";
  WriteFile(bad, testing::CutInScan(jpeg));
  auto source = OpenImageFolderSource(Spec("imagefolder", dir.path()), Split::kTrain);
  ASSERT_TRUE(source.ok()) << source.status();  // its header is fine
  ASSERT_EQ((*source)->size(), 6);
  std::vector<float> out(30);
  absl::Status s = (*source)->ReadPixels(5, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message().rfind(bad + ": sample 5: corrupt JPEG: ", 0), 0u) << s;
  // A prefetched corrupt sample reports the same.
  (*source)->Prefetch({5});
  EXPECT_EQ((*source)->ReadPixels(5, out.data()), s);
  EXPECT_TRUE((*source)->ReadPixels(4, out.data()).ok());
}

TEST(ImageFolderSource, MixedSizesNeedImageSize) {
  TempDir dir;
  WriteFolder(dir.path());
  const std::string odd = dir.path() + "/train/dog/img5.png";
  WriteFile(odd, Png(PatternImage(8, 8, 1, 3), 8, 8, 1));
  auto source = OpenImageFolderSource(Spec("imagefolder", dir.path()), Split::kTrain);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(source.status().message(),
            odd + ": image is 8x8, but the first training image (" + dir.path() +
                "/train/cat/img0.png) is 6x5; set spec.dataset.imageSize to resize every image "
                "to one size");

  job::DatasetSpec spec = Spec("imagefolder", dir.path());
  spec.image_size = {4, 3};
  spec.channels = 3;
  source = OpenImageFolderSource(spec, Split::kTrain);
  ASSERT_TRUE(source.ok()) << source.status();
  const SampleShape shape = (*source)->shape();
  EXPECT_EQ(shape.channels, 3);
  EXPECT_EQ(shape.height, 4);
  EXPECT_EQ(shape.width, 3);
  // The 8x8 gray image, copied to 3 channels and resized bilinearly.
  std::vector<float> gray = Planar(PatternImage(8, 8, 1, 3), 8, 8, 1);
  std::vector<float> rgb;
  for (int c = 0; c < 3; ++c) rgb.insert(rgb.end(), gray.begin(), gray.end());
  std::vector<float> expected(36);
  ResizeBilinear(SampleShape{3, 8, 8}, rgb.data(), CropBox{0, 0, 8, 8}, shape, expected.data());
  EXPECT_EQ(Pixels(**source, 5), expected);
}

TEST(FileListSource, KeepsOrderAndLabels) {
  TempDir dir;
  for (int i = 0; i < 4; ++i) {
    WriteFile(absl::StrCat(dir.path(), "/img/", i, ".png"),
              Png(PatternImage(3, 4, 3, i), 3, 4, 3));
  }
  WriteFile(dir.path() + "/train.txt", "img/2.png\t7\n\nimg/0.png\t1\r\nimg/3.png\t0\n");
  WriteFile(dir.path() + "/test.txt", "img/1.png\t4");
  auto train = OpenFileListSource(Spec("filelist", dir.path()), Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ((*train)->size(), 3);
  EXPECT_EQ((*train)->targets().num_classes, 8);
  EXPECT_EQ((*train)->shape().channels, 3);
  const int order[] = {2, 0, 3};
  const int labels[] = {7, 1, 0};
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(Label(**train, i), labels[i]);
    EXPECT_EQ(Pixels(**train, i), Planar(PatternImage(3, 4, 3, order[i]), 3, 4, 3));
  }
  job::DatasetSpec gray = Spec("filelist", dir.path());
  gray.channels = 1;
  gray.classes = 10;
  auto test = OpenFileListSource(gray, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->targets().num_classes, 10);
  EXPECT_EQ((*test)->shape().channels, 1);
  EXPECT_EQ(Label(**test, 0), 4);
}

TEST(FileListSource, MalformedLineNamesFileAndLine) {
  TempDir dir;
  WriteFile(dir.path() + "/a.png", Png(PatternImage(3, 3, 1, 0), 3, 3, 1));
  WriteFile(dir.path() + "/test.txt", "a.png\t0\n");
  WriteFile(dir.path() + "/train.txt", "a.png\t0\na.png 1\n");
  auto source = OpenFileListSource(Spec("filelist", dir.path()), Split::kTrain);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(source.status().message(), dir.path() +
                                           "/train.txt:2: expected `relative/path<TAB>label`, "
                                           "got \"a.png 1\"");
  WriteFile(dir.path() + "/train.txt", "a.png\t0\n\na.png\tcat\n");
  source = OpenFileListSource(Spec("filelist", dir.path()), Split::kTrain);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().message(),
            dir.path() + "/train.txt:3: label \"cat\" is not a class number >= 0");
  job::DatasetSpec few = Spec("filelist", dir.path());
  few.classes = 1;
  WriteFile(dir.path() + "/train.txt", "a.png\t1\n");
  source = OpenFileListSource(few, Split::kTrain);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().message(),
            dir.path() + "/train.txt:1: class 1 is outside [0, 1) (spec.dataset.classes)");
}

TEST(FileListSource, MissingImageIsNotFoundAtOpen) {
  TempDir dir;
  WriteFile(dir.path() + "/a.png", Png(PatternImage(3, 3, 1, 0), 3, 3, 1));
  WriteFile(dir.path() + "/train.txt", "a.png\t0\nb.png\t0\n");
  WriteFile(dir.path() + "/test.txt", "a.png\t0\n");
  auto source = OpenFileListSource(Spec("filelist", dir.path()), Split::kTrain);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find(dir.path() + "/b.png: sample 1: "), std::string::npos)
      << source.status();
}

TEST(WebDatasetSource, ReadsShardsInOrderLikeTheSameFileList) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> shard0, shard1, test;
  for (int i = 0; i < 5; ++i) {
    const std::string key = absl::StrCat("k", i);
    auto& shard = i < 3 ? shard0 : shard1;
    shard.push_back({key + ".cls", std::to_string(i % 3)});
    shard.push_back({key + ".png", Png(PatternImage(4, 4, 3, i), 4, 4, 3)});
  }
  test.push_back({"t.jpg", Jpeg(PatternImage(4, 4, 3, 9), 4, 4, 3)});
  test.push_back({"t.cls", "4"});
  WriteFile(dir.path() + "/train-001.tar", Tar(shard1));
  WriteFile(dir.path() + "/train-000.tar", Tar(shard0));
  WriteFile(dir.path() + "/test-000.tar", Tar(test));
  auto train = OpenWebDatasetSource(Spec("webdataset", dir.path()), Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ((*train)->size(), 5);
  EXPECT_EQ((*train)->targets().num_classes, 5);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(Label(**train, i), i % 3);
    EXPECT_EQ(Pixels(**train, i), Planar(PatternImage(4, 4, 3, static_cast<int>(i)), 4, 4, 3));
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/train-000.tar.idx"));
  auto again = OpenWebDatasetSource(Spec("webdataset", dir.path()), Split::kTest);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Label(**again, 0), 4);
}

TEST(WebDatasetSource, MissingClsIsAnErrorNamingShardAndKey) {
  TempDir dir;
  const std::string png = Png(PatternImage(4, 4, 1, 0), 4, 4, 1);
  WriteFile(dir.path() + "/train-000.tar", Tar({{"a.png", png}, {"a.cls", "0"}, {"b.png", png}}));
  WriteFile(dir.path() + "/test-000.tar", Tar({{"a.png", png}, {"a.cls", "0"}}));
  auto source = OpenWebDatasetSource(Spec("webdataset", dir.path()), Split::kTest);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().message(), dir.path() + "/train-000.tar: sample b: no .cls member");
}

}  // namespace
}  // namespace hptrain::train
