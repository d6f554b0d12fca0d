#include "runtime/train/data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/base/splitmix64.h"

namespace hptrain::train {
namespace {

// Independent streams of one sample's draws, so that turning one transform on or off never
// changes another's draws.
constexpr uint64_t kCropStream = 1;
constexpr uint64_t kFlipStream = 2;

// The stream `tag` of sample `index` in `epoch`: three mixing steps, so nearby seeds, epochs and
// indices give unrelated streams (the epoch permutation mixes (seed, epoch) the same way, without
// the augmentation salt).
SplitMix64 SampleStream(uint64_t seed, int64_t epoch, int64_t index, uint64_t tag) {
  constexpr uint64_t kAugmentSalt = 0x6A09E667F3BCC909ULL;
  SplitMix64 by_epoch(seed ^ kAugmentSalt ^
                      (0xD1B54A32D192ED03ULL * (static_cast<uint64_t>(epoch) + 1)));
  SplitMix64 by_index(by_epoch.Next() ^
                      (0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(index) + 1)));
  SplitMix64 by_tag(by_index.Next() ^ (0xBF58476D1CE4E5B9ULL * tag));
  return SplitMix64(by_tag.Next());
}

// Uniform in [lo, hi) from the top 53 bits (torch's uniform_ on doubles).
double Uniform(SplitMix64& rng, double lo, double hi) {
  const double u = static_cast<double>(rng.Next() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

// Uniform integer in [lo, hi], lo <= hi.
int64_t UniformInt(SplitMix64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(hi - lo) + 1));
}

// Python's round(): to nearest, ties to even (the default floating-point rounding mode).
int64_t RoundHalfEven(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

// torchvision.transforms.RandomResizedCrop.get_params.
CropBox ResizedCropBox(const job::RandomResizedCropSpec& spec, const SampleShape& in,
                       SplitMix64& rng) {
  const int64_t height = in.height;
  const int64_t width = in.width;
  const double area = static_cast<double>(height * width);
  const double scale_lo = spec.scale.size() > 0 ? spec.scale[0] : 0.08;
  const double scale_hi = spec.scale.size() > 1 ? spec.scale[1] : 1.0;
  const double ratio_lo = spec.ratio.size() > 0 ? spec.ratio[0] : 3.0 / 4.0;
  const double ratio_hi = spec.ratio.size() > 1 ? spec.ratio[1] : 4.0 / 3.0;
  const double log_lo = std::log(ratio_lo);
  const double log_hi = std::log(ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * Uniform(rng, scale_lo, scale_hi);
    const double aspect = std::exp(Uniform(rng, log_lo, log_hi));
    const int64_t w = RoundHalfEven(std::sqrt(target_area * aspect));
    const int64_t h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      CropBox box;
      box.height = h;
      box.width = w;
      box.top = UniformInt(rng, 0, height - h);
      box.left = UniformInt(rng, 0, width - w);
      return box;
    }
  }
  // The central fallback: the whole image, or its central part at the nearest allowed ratio.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  const double min_ratio = std::min(ratio_lo, ratio_hi);
  const double max_ratio = std::max(ratio_lo, ratio_hi);
  CropBox box;
  if (in_ratio < min_ratio) {
    box.width = width;
    box.height = RoundHalfEven(static_cast<double>(width) / min_ratio);
  } else if (in_ratio > max_ratio) {
    box.height = height;
    box.width = RoundHalfEven(static_cast<double>(height) * max_ratio);
  } else {
    box.width = width;
    box.height = height;
  }
  box.top = (height - box.height) / 2;
  box.left = (width - box.width) / 2;
  return box;
}

void FlipRows(const SampleShape& shape, float* pixels) {
  for (int64_t row = 0; row < shape.channels * shape.height; ++row) {
    float* begin = pixels + row * shape.width;
    std::reverse(begin, begin + shape.width);
  }
}

// One axis of the bilinear resize: for output position `dst`, the source index of the first tap,
// the second tap's offset (0 at the last source position) and the two weights. Float arithmetic in
// the order ATen's CPU kernel uses (area_pixel_compute_source_index, guard_index_and_lambda).
struct Taps {
  int64_t index0;
  int64_t step;
  float weight0;
  float weight1;
};

Taps ComputeTaps(int64_t dst, int64_t in_size, int64_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  float src = scale * (static_cast<float>(dst) + 0.5f) - 0.5f;
  if (src < 0.0f) src = 0.0f;
  Taps taps;
  taps.index0 = std::min(static_cast<int64_t>(std::floor(src)), in_size - 1);
  const float lambda = std::min(std::max(src - static_cast<float>(taps.index0), 0.0f), 1.0f);
  taps.weight1 = lambda;
  taps.weight0 = 1.0f - lambda;
  taps.step = taps.index0 < in_size - 1 ? 1 : 0;
  return taps;
}

}  // namespace

SampleShape AugmentedShape(const job::AugmentSpec& augment, const SampleShape& in) {
  SampleShape out = in;
  if (augment.random_crop.size > 0) {
    out.height = out.width = augment.random_crop.size;
  } else if (augment.random_resized_crop.size > 0) {
    out.height = out.width = augment.random_resized_crop.size;
  }
  return out;
}

AugmentDraws DrawAugment(const job::AugmentSpec& augment, const SampleShape& in, uint64_t seed,
                         int64_t epoch, int64_t index) {
  AugmentDraws draws;
  draws.crop = CropBox{0, 0, in.height, in.width};
  if (augment.random_crop.size > 0) {
    SplitMix64 rng = SampleStream(seed, epoch, index, kCropStream);
    const int64_t size = augment.random_crop.size;
    const int64_t padding = augment.random_crop.padding;
    draws.crop.height = draws.crop.width = size;
    // A crop larger than the padded input sits at 0 and reads zeros past its end.
    draws.crop.top = UniformInt(rng, 0, std::max<int64_t>(in.height + 2 * padding - size, 0));
    draws.crop.left = UniformInt(rng, 0, std::max<int64_t>(in.width + 2 * padding - size, 0));
  } else if (augment.random_resized_crop.size > 0) {
    SplitMix64 rng = SampleStream(seed, epoch, index, kCropStream);
    draws.crop = ResizedCropBox(augment.random_resized_crop, in, rng);
  }
  if (augment.horizontal_flip) {
    SplitMix64 rng = SampleStream(seed, epoch, index, kFlipStream);
    draws.flip = (rng.Next() >> 63) != 0;
  }
  return draws;
}

void ApplyAugment(const job::AugmentSpec& augment, const AugmentDraws& draws, const SampleShape& in,
                  const float* pixels, float* out) {
  const SampleShape shape = AugmentedShape(augment, in);
  if (augment.random_crop.size > 0) {
    const int64_t padding = augment.random_crop.padding;
    for (int64_t c = 0; c < shape.channels; ++c) {
      const float* plane = pixels + c * in.height * in.width;
      for (int64_t y = 0; y < shape.height; ++y) {
        float* dst = out + (c * shape.height + y) * shape.width;
        const int64_t src_y = draws.crop.top + y - padding;
        if (src_y < 0 || src_y >= in.height) {
          std::fill(dst, dst + shape.width, 0.0f);
          continue;
        }
        for (int64_t x = 0; x < shape.width; ++x) {
          const int64_t src_x = draws.crop.left + x - padding;
          dst[x] = src_x < 0 || src_x >= in.width ? 0.0f : plane[src_y * in.width + src_x];
        }
      }
    }
  } else if (augment.random_resized_crop.size > 0) {
    ResizeBilinear(in, pixels, draws.crop, shape, out);
  } else {
    std::memcpy(out, pixels, static_cast<size_t>(in.numel()) * sizeof(float));
  }
  if (draws.flip) FlipRows(shape, out);
}

void CenterCrop(const SampleShape& in, const float* pixels, const SampleShape& out, float* dst) {
  if (out.height > in.height || out.width > in.width) {
    ResizeBilinear(in, pixels, CropBox{0, 0, in.height, in.width}, out, dst);
    return;
  }
  const int64_t top = (in.height - out.height) / 2;
  const int64_t left = (in.width - out.width) / 2;
  for (int64_t c = 0; c < out.channels; ++c) {
    for (int64_t y = 0; y < out.height; ++y) {
      const float* src = pixels + (c * in.height + top + y) * in.width + left;
      std::memcpy(dst + (c * out.height + y) * out.width, src,
                  static_cast<size_t>(out.width) * sizeof(float));
    }
  }
}

void ResizeBilinear(const SampleShape& in, const float* pixels, const CropBox& box,
                    const SampleShape& out, float* dst) {
  std::vector<Taps> rows(static_cast<size_t>(out.height));
  std::vector<Taps> cols(static_cast<size_t>(out.width));
  for (int64_t y = 0; y < out.height; ++y)
    rows[static_cast<size_t>(y)] = ComputeTaps(y, box.height, out.height);
  for (int64_t x = 0; x < out.width; ++x)
    cols[static_cast<size_t>(x)] = ComputeTaps(x, box.width, out.width);
  for (int64_t c = 0; c < out.channels; ++c) {
    const float* plane = pixels + (c * in.height + box.top) * in.width + box.left;
    float* out_plane = dst + c * out.height * out.width;
    for (int64_t y = 0; y < out.height; ++y) {
      const Taps& r = rows[static_cast<size_t>(y)];
      const float* row0 = plane + r.index0 * in.width;
      const float* row1 = row0 + r.step * in.width;
      for (int64_t x = 0; x < out.width; ++x) {
        const Taps& t = cols[static_cast<size_t>(x)];
        const int64_t x0 = t.index0;
        const int64_t x1 = x0 + t.step;
        const float top = row0[x0] * t.weight0 + row0[x1] * t.weight1;
        const float bottom = row1[x0] * t.weight0 + row1[x1] * t.weight1;
        out_plane[y * out.width + x] = top * r.weight0 + bottom * r.weight1;
      }
    }
  }
}

}  // namespace hptrain::train
