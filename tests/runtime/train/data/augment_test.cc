#include "runtime/train/data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace hptrain::train {
namespace {

using Image = std::vector<float>;

Image RandomImage(const SampleShape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  Image image(static_cast<size_t>(shape.numel()));
  for (float& v : image) v = dist(gen);
  return image;
}

// Pixel (c, y, x) of a C x H x W image.
float At(const Image& image, const SampleShape& shape, int64_t c, int64_t y, int64_t x) {
  return image[static_cast<size_t>((c * shape.height + y) * shape.width + x)];
}

// Image whose pixel (y, x) is a * y + b * x + c0 * channel: bilinear interpolation reproduces such
// a function exactly, so resize outputs can be computed by hand.
Image LinearImage(const SampleShape& shape, float a, float b, float c0) {
  Image image(static_cast<size_t>(shape.numel()));
  for (int64_t c = 0; c < shape.channels; ++c)
    for (int64_t y = 0; y < shape.height; ++y)
      for (int64_t x = 0; x < shape.width; ++x)
        image[static_cast<size_t>((c * shape.height + y) * shape.width + x)] =
            a * static_cast<float>(y) + b * static_cast<float>(x) + c0 * static_cast<float>(c);
  return image;
}

// The zero-padded image torchvision's RandomCrop crops from.
Image Pad(const Image& image, const SampleShape& shape, int64_t padding, SampleShape* padded) {
  *padded = {shape.channels, shape.height + 2 * padding, shape.width + 2 * padding};
  Image out(static_cast<size_t>(padded->numel()), 0.0f);
  for (int64_t c = 0; c < shape.channels; ++c)
    for (int64_t y = 0; y < shape.height; ++y)
      for (int64_t x = 0; x < shape.width; ++x)
        out[static_cast<size_t>((c * padded->height + y + padding) * padded->width + x + padding)] =
            At(image, shape, c, y, x);
  return out;
}

// F.interpolate(mode="bilinear", align_corners=False) one output pixel at a time, in double:
// source coordinate (dst + 0.5) * in / out - 0.5, negative clamped to 0, neighbours clamped to the
// last row/column.
Image ReferenceResize(const Image& image, const SampleShape& shape, const CropBox& box,
                      int64_t out_h, int64_t out_w) {
  Image out(static_cast<size_t>(shape.channels * out_h * out_w));
  auto source = [](int64_t dst, int64_t in, int64_t outn, int64_t* i0, int64_t* i1, double* w1) {
    double src =
        (static_cast<double>(dst) + 0.5) * static_cast<double>(in) / static_cast<double>(outn) -
        0.5;
    src = std::max(src, 0.0);
    *i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    *i1 = std::min(*i0 + 1, in - 1);
    *w1 = src - static_cast<double>(*i0);
  };
  for (int64_t c = 0; c < shape.channels; ++c) {
    for (int64_t y = 0; y < out_h; ++y) {
      int64_t y0, y1;
      double wy;
      source(y, box.height, out_h, &y0, &y1, &wy);
      for (int64_t x = 0; x < out_w; ++x) {
        int64_t x0, x1;
        double wx;
        source(x, box.width, out_w, &x0, &x1, &wx);
        auto v = [&](int64_t yy, int64_t xx) {
          return static_cast<double>(At(image, shape, c, box.top + yy, box.left + xx));
        };
        const double top = v(y0, x0) * (1 - wx) + v(y0, x1) * wx;
        const double bottom = v(y1, x0) * (1 - wx) + v(y1, x1) * wx;
        out[static_cast<size_t>((c * out_h + y) * out_w + x)] =
            static_cast<float>(top * (1 - wy) + bottom * wy);
      }
    }
  }
  return out;
}

Image Mirror(const Image& image, const SampleShape& shape) {
  Image out = image;
  for (int64_t row = 0; row < shape.channels * shape.height; ++row)
    std::reverse(out.begin() + row * shape.width, out.begin() + (row + 1) * shape.width);
  return out;
}

void ExpectNear(const Image& got, const Image& want, float tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance) << "at element " << i;
  }
}

job::AugmentSpec CropSpec(int64_t size, int64_t padding, bool flip) {
  job::AugmentSpec spec;
  spec.random_crop.size = size;
  spec.random_crop.padding = padding;
  spec.horizontal_flip = flip;
  return spec;
}

job::AugmentSpec ResizedCropSpec(int64_t size, std::vector<double> scale, std::vector<double> ratio,
                                 bool flip = false) {
  job::AugmentSpec spec;
  spec.random_resized_crop.size = size;
  spec.random_resized_crop.scale = std::move(scale);
  spec.random_resized_crop.ratio = std::move(ratio);
  spec.horizontal_flip = flip;
  return spec;
}

bool SameDraws(const AugmentDraws& a, const AugmentDraws& b) {
  return a.crop.top == b.crop.top && a.crop.left == b.crop.left && a.crop.height == b.crop.height &&
         a.crop.width == b.crop.width && a.flip == b.flip;
}

TEST(AugmentTest, AugmentedShapeIsTheCropSize) {
  const SampleShape in{3, 32, 40};
  const SampleShape cropped = AugmentedShape(CropSpec(28, 4, true), in);
  EXPECT_EQ(cropped.channels, 3);
  EXPECT_EQ(cropped.height, 28);
  EXPECT_EQ(cropped.width, 28);
  const SampleShape resized = AugmentedShape(ResizedCropSpec(24, {0.08, 1.0}, {0.75, 4.0 / 3}), in);
  EXPECT_EQ(resized.height, 24);
  EXPECT_EQ(resized.width, 24);
  job::AugmentSpec flip_only;
  flip_only.horizontal_flip = true;
  const SampleShape same = AugmentedShape(flip_only, in);
  EXPECT_EQ(same.channels, 3);
  EXPECT_EQ(same.height, 32);
  EXPECT_EQ(same.width, 40);
}

TEST(AugmentTest, RandomCropHandComputed) {
  // 1 2 3 / 4 5 6 / 7 8 9, padded with one zero on every side, cropped 3 x 3 at (0, 0).
  const SampleShape in{1, 3, 3};
  const Image image = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  AugmentDraws draws;
  draws.crop = CropBox{0, 0, 3, 3};
  Image out(9);
  ApplyAugment(CropSpec(3, 1, false), draws, in, image.data(), out.data());
  EXPECT_EQ(out, (Image{0, 0, 0, 0, 1, 2, 0, 4, 5}));
  draws.flip = true;
  ApplyAugment(CropSpec(3, 1, true), draws, in, image.data(), out.data());
  EXPECT_EQ(out, (Image{0, 0, 0, 2, 1, 0, 5, 4, 0}));
  // The bottom-right corner of the padded input.
  draws = AugmentDraws{};
  draws.crop = CropBox{2, 2, 3, 3};
  ApplyAugment(CropSpec(3, 1, false), draws, in, image.data(), out.data());
  EXPECT_EQ(out, (Image{5, 6, 0, 8, 9, 0, 0, 0, 0}));
}

TEST(AugmentTest, RandomCropMatchesThePaddedWindow) {
  const SampleShape in{3, 12, 10};
  const Image image = RandomImage(in, 1);
  const int64_t size = 8, padding = 3;
  SampleShape padded;
  const Image reference_padded = Pad(image, in, padding, &padded);
  const job::AugmentSpec spec = CropSpec(size, padding, true);
  const SampleShape out_shape = AugmentedShape(spec, in);
  int flips = 0;
  for (int64_t index = 0; index < 200; ++index) {
    const AugmentDraws draws = DrawAugment(spec, in, 42, 0, index);
    ASSERT_EQ(draws.crop.height, size);
    ASSERT_EQ(draws.crop.width, size);
    Image want(static_cast<size_t>(out_shape.numel()));
    for (int64_t c = 0; c < in.channels; ++c)
      for (int64_t y = 0; y < size; ++y)
        for (int64_t x = 0; x < size; ++x)
          want[static_cast<size_t>((c * size + y) * size + x)] =
              At(reference_padded, padded, c, draws.crop.top + y, draws.crop.left + x);
    if (draws.flip) {
      want = Mirror(want, out_shape);
      ++flips;
    }
    Image got(want.size(), -1.0f);
    ApplyAugment(spec, draws, in, image.data(), got.data());
    ASSERT_EQ(got, want) << "index " << index;
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 200);
}

TEST(AugmentTest, RandomCropPositionsCoverTheFullRange) {
  const SampleShape in{1, 32, 28};
  const int64_t size = 30, padding = 2;
  const job::AugmentSpec spec = CropSpec(size, padding, false);
  const int64_t max_top = in.height + 2 * padding - size;  // 6
  const int64_t max_left = in.width + 2 * padding - size;  // 2
  std::vector<int> tops(static_cast<size_t>(max_top + 1)), lefts(static_cast<size_t>(max_left + 1));
  const int n = 4000;
  for (int64_t index = 0; index < n; ++index) {
    const AugmentDraws draws = DrawAugment(spec, in, 7, 3, index);
    ASSERT_GE(draws.crop.top, 0);
    ASSERT_LE(draws.crop.top, max_top);
    ASSERT_GE(draws.crop.left, 0);
    ASSERT_LE(draws.crop.left, max_left);
    EXPECT_FALSE(draws.flip);
    ++tops[static_cast<size_t>(draws.crop.top)];
    ++lefts[static_cast<size_t>(draws.crop.left)];
  }
  // Uniform: every position about n / (range + 1) times.
  for (size_t i = 0; i < tops.size(); ++i) {
    EXPECT_NEAR(tops[i], n / static_cast<double>(tops.size()), 0.2 * n / tops.size()) << i;
  }
  for (size_t i = 0; i < lefts.size(); ++i) {
    EXPECT_NEAR(lefts[i], n / static_cast<double>(lefts.size()), 0.2 * n / lefts.size()) << i;
  }
}

TEST(AugmentTest, CropAsLargeAsThePaddedInputIsAtTheOrigin) {
  const SampleShape in{1, 5, 5};
  const AugmentDraws draws = DrawAugment(CropSpec(7, 1, false), in, 1, 0, 0);
  EXPECT_EQ(draws.crop.top, 0);
  EXPECT_EQ(draws.crop.left, 0);
}

TEST(AugmentTest, FlipIsAFairCoinAndMirrorsRows) {
  const SampleShape in{2, 3, 4};
  const Image image = RandomImage(in, 2);
  job::AugmentSpec spec;
  spec.horizontal_flip = true;
  const int n = 4000;
  int flips = 0;
  for (int64_t index = 0; index < n; ++index) {
    const AugmentDraws draws = DrawAugment(spec, in, 11, 0, index);
    EXPECT_EQ(draws.crop.top, 0);
    EXPECT_EQ(draws.crop.left, 0);
    EXPECT_EQ(draws.crop.height, in.height);
    EXPECT_EQ(draws.crop.width, in.width);
    flips += draws.flip ? 1 : 0;
  }
  EXPECT_NEAR(flips, n / 2, n / 20);

  AugmentDraws draws;
  draws.flip = true;
  Image out(image.size());
  ApplyAugment(spec, draws, in, image.data(), out.data());
  for (int64_t c = 0; c < in.channels; ++c)
    for (int64_t y = 0; y < in.height; ++y)
      for (int64_t x = 0; x < in.width; ++x)
        ASSERT_EQ(At(out, in, c, y, x), At(image, in, c, y, in.width - 1 - x));
  draws.flip = false;
  ApplyAugment(spec, draws, in, image.data(), out.data());
  EXPECT_EQ(out, image);
}

TEST(AugmentTest, DrawsArePureFunctionsOfSeedEpochAndIndex) {
  const SampleShape in{3, 32, 32};
  for (const job::AugmentSpec& spec :
       {CropSpec(28, 4, true), ResizedCropSpec(24, {0.08, 1.0}, {0.75, 4.0 / 3}, true)}) {
    int differ_epoch = 0, differ_index = 0, differ_seed = 0;
    for (int64_t index = 0; index < 100; ++index) {
      const AugmentDraws a = DrawAugment(spec, in, 5, 2, index);
      // The same arguments in another order of calls give the same draws.
      EXPECT_TRUE(SameDraws(a, DrawAugment(spec, in, 5, 2, index)));
      differ_epoch += SameDraws(a, DrawAugment(spec, in, 5, 3, index)) ? 0 : 1;
      differ_index += SameDraws(a, DrawAugment(spec, in, 5, 2, index + 1)) ? 0 : 1;
      differ_seed += SameDraws(a, DrawAugment(spec, in, 6, 2, index)) ? 0 : 1;
    }
    EXPECT_GT(differ_epoch, 90);
    EXPECT_GT(differ_index, 90);
    EXPECT_GT(differ_seed, 90);
  }
}

TEST(AugmentTest, CropDrawsDoNotDependOnTheFlipSetting) {
  const SampleShape in{1, 28, 28};
  for (int64_t index = 0; index < 50; ++index) {
    const AugmentDraws with = DrawAugment(CropSpec(24, 2, true), in, 9, 1, index);
    const AugmentDraws without = DrawAugment(CropSpec(24, 2, false), in, 9, 1, index);
    EXPECT_EQ(with.crop.top, without.crop.top);
    EXPECT_EQ(with.crop.left, without.crop.left);
    EXPECT_FALSE(without.flip);
  }
}

TEST(AugmentTest, ResizedCropBoxesStayInsideAndRespectScaleAndRatio) {
  // Small enough areas that every first try fits: the boxes then follow the draws' distribution
  // (rejected tries would favour shapes that fit the image).
  const SampleShape in{3, 300, 300};
  const double area = 300.0 * 300.0;
  const job::AugmentSpec spec = ResizedCropSpec(64, {0.05, 0.15}, {0.5, 2.0});
  const int n = 2000;
  double area_sum = 0;
  int wider = 0, low_quarter = 0;
  for (int64_t index = 0; index < n; ++index) {
    const CropBox box = DrawAugment(spec, in, 3, 0, index).crop;
    ASSERT_GT(box.height, 0);
    ASSERT_GT(box.width, 0);
    ASSERT_GE(box.top, 0);
    ASSERT_GE(box.left, 0);
    ASSERT_LE(box.top + box.height, in.height);
    ASSERT_LE(box.left + box.width, in.width);
    // w and h are rounded to whole pixels: allow half a pixel on each side.
    const double h = static_cast<double>(box.height), w = static_cast<double>(box.width);
    EXPECT_GE((w + 0.5) * (h + 0.5) / area, 0.05);
    EXPECT_LE((w - 0.5) * (h - 0.5) / area, 0.15);
    EXPECT_GE((w + 0.5) / (h - 0.5), 0.5);
    EXPECT_LE((w - 0.5) / (h + 0.5), 2.0);
    area_sum += w * h / area;
    wider += w > h ? 1 : 0;
    low_quarter += std::log(w / h) < std::log(0.5) + 0.25 * std::log(4.0) ? 1 : 0;
  }
  // Area fraction uniform in [0.05, 0.15]: mean 0.1. Log-uniform ratio: half of the crops are wider
  // than tall and a quarter have log(w / h) in the lowest quarter of [log 0.5, log 2] (a ratio
  // uniform in [0.5, 2] would give a third and a sixth).
  EXPECT_NEAR(area_sum / n, 0.1, 0.005);
  EXPECT_NEAR(wider, n / 2, n / 20);
  EXPECT_NEAR(low_quarter, n / 4, n / 20);
}

TEST(AugmentTest, ResizedCropWithFixedScaleAndRatioCoversEveryPosition) {
  // Area 16 of 64 at ratio 1: a 4 x 4 window at a top and left uniform in [0, 4].
  const SampleShape in{1, 8, 8};
  const job::AugmentSpec spec = ResizedCropSpec(4, {0.25, 0.25}, {1.0, 1.0});
  std::set<int64_t> tops, lefts;
  for (int64_t index = 0; index < 500; ++index) {
    const CropBox box = DrawAugment(spec, in, 1, 0, index).crop;
    EXPECT_EQ(box.height, 4);
    EXPECT_EQ(box.width, 4);
    tops.insert(box.top);
    lefts.insert(box.left);
  }
  EXPECT_EQ(tops, (std::set<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(lefts, (std::set<int64_t>{0, 1, 2, 3, 4}));
}

TEST(AugmentTest, ResizedCropFallsBackToTheCentralCrop) {
  // The whole area at a ratio of 2 to 3 never fits a square: the fallback keeps the full width and
  // height round(10 / 2) = 5, centered: top (10 - 5) / 2 = 2.
  CropBox box = DrawAugment(ResizedCropSpec(8, {1.0, 1.0}, {2.0, 3.0}), {1, 10, 10}, 1, 0, 0).crop;
  EXPECT_EQ(box.top, 2);
  EXPECT_EQ(box.left, 0);
  EXPECT_EQ(box.height, 5);
  EXPECT_EQ(box.width, 10);
  // A 10 x 40 image is wider than ratio 1 allows: full height, width round(10 * 1) = 10, left 15.
  box = DrawAugment(ResizedCropSpec(8, {1.0, 1.0}, {0.5, 1.0}), {1, 10, 40}, 1, 0, 0).crop;
  EXPECT_EQ(box.top, 0);
  EXPECT_EQ(box.left, 15);
  EXPECT_EQ(box.height, 10);
  EXPECT_EQ(box.width, 10);
  // Within the ratio range: the whole image.
  box = DrawAugment(ResizedCropSpec(8, {1.0, 1.0}, {0.5, 2.0}), {1, 10, 15}, 1, 0, 0).crop;
  EXPECT_EQ(box.height, 10);
  EXPECT_EQ(box.width, 15);
  EXPECT_EQ(box.top, 0);
  EXPECT_EQ(box.left, 0);
}

TEST(AugmentTest, ResizeBilinearHandComputed) {
  // f(y, x) = 2y + x on 2 x 2, up to 4 x 4: source coordinates 0 (clamped), 0.25, 0.75, 1 (the
  // second tap clamped to the last row), so out(y, x) = 2 sy + sx.
  const SampleShape small{1, 2, 2};
  const Image up_in = {0, 1, 2, 3};
  Image up(16);
  ResizeBilinear(small, up_in.data(), CropBox{0, 0, 2, 2}, {1, 4, 4}, up.data());
  const float s[] = {0.0f, 0.25f, 0.75f, 1.0f};
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      EXPECT_FLOAT_EQ(up[static_cast<size_t>(y * 4 + x)], 2 * s[y] + s[x]) << y << "," << x;
  EXPECT_FLOAT_EQ(up[5], 0.75f);
  EXPECT_FLOAT_EQ(up[9], 1.75f);

  // f(y, x) = 4y + x on 4 x 4, down to 2 x 2: sources 0.5 and 2.5, the means of the 2 x 2 blocks.
  const SampleShape four{1, 4, 4};
  const Image down_in = LinearImage(four, 4, 1, 0);
  Image down(4);
  ResizeBilinear(four, down_in.data(), CropBox{0, 0, 4, 4}, {1, 2, 2}, down.data());
  EXPECT_EQ(down, (Image{2.5f, 4.5f, 10.5f, 12.5f}));

  // A window at its own size is a copy of it.
  Image window(4);
  ResizeBilinear(four, down_in.data(), CropBox{1, 1, 2, 2}, {1, 2, 2}, window.data());
  EXPECT_EQ(window, (Image{5, 6, 9, 10}));
}

TEST(AugmentTest, ResizeBilinearMatchesTheReferenceFormula) {
  const SampleShape in{3, 13, 17};
  const Image image = RandomImage(in, 3);
  const CropBox boxes[] = {{0, 0, 13, 17}, {2, 3, 7, 11}, {5, 0, 8, 4}, {12, 16, 1, 1}};
  const int64_t sizes[][2] = {{13, 17}, {32, 32}, {5, 9}, {1, 1}, {7, 40}, {26, 3}};
  for (const CropBox& box : boxes) {
    for (const auto& size : sizes) {
      Image got(static_cast<size_t>(in.channels * size[0] * size[1]));
      ResizeBilinear(in, image.data(), box, {in.channels, size[0], size[1]}, got.data());
      SCOPED_TRACE(testing::Message() << "box " << box.top << "," << box.left << " " << box.height
                                      << "x" << box.width << " to " << size[0] << "x" << size[1]);
      ExpectNear(got, ReferenceResize(image, in, box, size[0], size[1]), 2e-6f);
    }
  }
}

TEST(AugmentTest, ResizedCropIsTheResizedWindowThenTheFlip) {
  const SampleShape in{3, 20, 24};
  const Image image = RandomImage(in, 4);
  const job::AugmentSpec spec = ResizedCropSpec(16, {0.08, 1.0}, {0.75, 4.0 / 3}, true);
  const SampleShape out_shape = AugmentedShape(spec, in);
  int flips = 0;
  for (int64_t index = 0; index < 50; ++index) {
    const AugmentDraws draws = DrawAugment(spec, in, 8, 1, index);
    Image want = ReferenceResize(image, in, draws.crop, 16, 16);
    if (draws.flip) {
      want = Mirror(want, out_shape);
      ++flips;
    }
    Image got(want.size());
    ApplyAugment(spec, draws, in, image.data(), got.data());
    ExpectNear(got, want, 2e-6f);
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 50);
}

TEST(AugmentTest, CenterCropHandComputed) {
  // 5 x 5 to 3 x 3: top = left = 1. 4 x 4 to 3 x 3: (4 - 3) / 2 rounds down to 0.
  const SampleShape five{1, 5, 5};
  const Image image5 = LinearImage(five, 5, 1, 0);
  Image out(9);
  CenterCrop(five, image5.data(), {1, 3, 3}, out.data());
  EXPECT_EQ(out, (Image{6, 7, 8, 11, 12, 13, 16, 17, 18}));
  const SampleShape four{2, 4, 4};
  const Image image4 = LinearImage(four, 4, 1, 100);
  Image out2(18);
  CenterCrop(four, image4.data(), {2, 3, 3}, out2.data());
  EXPECT_EQ(out2, (Image{0, 1, 2, 4, 5, 6, 8, 9, 10, 100, 101, 102, 104, 105, 106, 108, 109, 110}));
}

TEST(AugmentTest, CenterCropMatchesTheCentralWindow) {
  const SampleShape in{3, 32, 29};
  const Image image = RandomImage(in, 5);
  for (const SampleShape& out_shape :
       {SampleShape{3, 28, 28}, SampleShape{3, 32, 29}, SampleShape{3, 1, 7}}) {
    Image got(static_cast<size_t>(out_shape.numel()));
    CenterCrop(in, image.data(), out_shape, got.data());
    const int64_t top = (in.height - out_shape.height) / 2;
    const int64_t left = (in.width - out_shape.width) / 2;
    for (int64_t c = 0; c < in.channels; ++c)
      for (int64_t y = 0; y < out_shape.height; ++y)
        for (int64_t x = 0; x < out_shape.width; ++x)
          ASSERT_EQ(At(got, out_shape, c, y, x), At(image, in, c, top + y, left + x));
  }
}

TEST(AugmentTest, CenterCropToALargerSizeResizes) {
  const SampleShape in{1, 6, 6};
  const Image image = RandomImage(in, 6);
  Image got(64);
  CenterCrop(in, image.data(), {1, 8, 8}, got.data());
  ExpectNear(got, ReferenceResize(image, in, CropBox{0, 0, 6, 6}, 8, 8), 2e-6f);
}

}  // namespace
}  // namespace hptrain::train
