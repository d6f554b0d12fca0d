// Image transforms on one sample's float pixels (C x H x W, values in [0, 1] before
// normalization): bilinear resize, and spec.dataset.augment's random crop, random resized crop and
// horizontal flip, with torchvision's parameters (RandomCrop, RandomResizedCrop,
// RandomHorizontalFlip).
//
// Every random draw is a pure function of (seed, epoch, sample index): AugmentDraws. A sample looks
// the same whichever worker reads it, at whatever batch size, after a restart or a rebalance.
// The test split uses CenterCrop to the training output size instead.
//
// Pure functions on flat buffers, no libtorch; safe to call from several threads.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_AUGMENT_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_AUGMENT_H_

#include <cstdint>

#include "runtime/job/job_spec.h"
#include "runtime/train/data/sample_source.h"

namespace hptrain::train {

// A crop window in the (padded) input: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0;
  int64_t left = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// The random choices for one sample in one epoch.
struct AugmentDraws {
  CropBox crop;       // in input coordinates; for randomCrop, in the zero-padded input
  bool flip = false;  // mirror left-right after the crop
};

// The output shape of the training split under `augment` for inputs of shape `in`: the crop's
// size, or `in` when no crop is set.
SampleShape AugmentedShape(const job::AugmentSpec& augment, const SampleShape& in);

// The draws for `index` in `epoch`: randomCrop picks top, left uniformly in
// [0, in + 2*padding - size]; randomResizedCrop follows torchvision's RandomResizedCrop.get_params
// (ten tries of area scale and log-uniform ratio, then the central fallback); flip is a fair coin.
AugmentDraws DrawAugment(const job::AugmentSpec& augment, const SampleShape& in, uint64_t seed,
                         int64_t epoch, int64_t index);

// Writes the transformed sample (shape AugmentedShape(augment, in)) to `out`: randomCrop copies
// the window of the input padded with `padding` zeros on every side; randomResizedCrop resizes the
// window to size x size (ResizeBilinear); then the flip.
void ApplyAugment(const job::AugmentSpec& augment, const AugmentDraws& draws,
                  const SampleShape& in, const float* pixels, float* out);

// The test split: the central out.height x out.width window of `in` (top = (H - h) / 2, left =
// (W - w) / 2, rounded down); an output larger than the input is resized instead.
void CenterCrop(const SampleShape& in, const float* pixels, const SampleShape& out, float* dst);

// Bilinear resize of the window `box` of `in` to out.height x out.width, half-pixel centers and
// edge clamping (torch.nn.functional.interpolate(mode="bilinear", align_corners=False,
// antialias=False) on the cropped tensor).
void ResizeBilinear(const SampleShape& in, const float* pixels, const CropBox& box,
                    const SampleShape& out, float* dst);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_AUGMENT_H_
