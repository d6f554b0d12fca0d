// Dataset over a SampleSource: the user formats gather bit for bit like the built-in sets, the
// training split's statistics normalize both splits, explicit mean/std, vector targets,
// augmentation keyed by (seed, epoch, index), the test split's center crop, and skipCorrupt.
#include <stdlib.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/train/data/augment.h"
#include "runtime/train/data/dataset.h"
#include "tests/runtime/train/data/npy_writer.h"

namespace hptrain::train {
namespace {

using ::hptrain::testing::WriteNpy;
using ::testing::HasSubstr;

std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "/hptrain_dataset_source_XXXXXX";
  const char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  return all;
}

bool BitEqual(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     static_cast<size_t>(a.numel()) * a.element_size()) == 0;
}

job::DatasetSpec SyntheticSpec() {
  job::DatasetSpec spec;
  spec.name = "synthetic";
  spec.synthetic.samples = 300;
  spec.synthetic.test_samples = 50;
  spec.synthetic.shape = {3, 8, 8};
  return spec;
}

// The built-in synthetic set written as npy (uint8 NCHW, int64 labels) into `dir`.
void WriteSyntheticAsNpy(const std::string& dir) {
  job::DatasetSpec spec = SyntheticSpec();
  spec.normalize = false;
  for (Split split : {Split::kTrain, Split::kTest}) {
    auto data = OpenDataset(spec, split, 5);
    ASSERT_TRUE(data.ok()) << data.status();
    auto batch = (*data)->Gather(Range((*data)->size()));
    ASSERT_TRUE(batch.ok()) << batch.status();
    const torch::Tensor bytes = (batch->inputs * 255.0f).round().to(torch::kUInt8).contiguous();
    const std::string prefix = dir + "/" + SplitName(split);
    ASSERT_TRUE(WriteNpy(prefix + "-images.npy", "|u1", bytes.sizes().vec(), bytes.data_ptr(),
                         static_cast<size_t>(bytes.numel())));
    const torch::Tensor labels = batch->targets.contiguous();
    ASSERT_TRUE(WriteNpy(prefix + "-labels.npy", "<i8", labels.sizes().vec(), labels.data_ptr(),
                         static_cast<size_t>(labels.numel()) * sizeof(int64_t)));
  }
}

job::DatasetSpec NpySpec(const std::string& dir) {
  job::DatasetSpec spec;
  spec.name = "converted";
  spec.format = "npy";
  spec.layout = "NCHW";
  spec.path = dir;
  return spec;
}

TEST(DatasetSourceTest, NpyGathersBitForBitLikeTheBuiltInSet) {
  torch::set_num_threads(1);
  const std::string dir = MakeTempDir();
  WriteSyntheticAsNpy(dir);
  const std::vector<int64_t> some = {299, 0, 17, 17, 150};
  for (bool normalize : {false, true}) {
    job::DatasetSpec builtin = SyntheticSpec();
    builtin.normalize = normalize;
    job::DatasetSpec npy = NpySpec(dir);
    npy.normalize = normalize;
    if (normalize) npy.mean = {0.5}, npy.std = {0.25};  // the synthetic set's constants
    auto a = OpenDataset(builtin, Split::kTrain, 5);
    auto b = OpenDataset(npy, Split::kTrain, 5);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->num_classes(), (*a)->num_classes());
    auto ba = (*a)->Gather(some);
    auto bb = (*b)->Gather(some);
    ASSERT_TRUE(ba.ok() && bb.ok());
    EXPECT_TRUE(BitEqual(ba->inputs, bb->inputs)) << "normalize " << normalize;
    EXPECT_TRUE(BitEqual(ba->targets, bb->targets));
  }
}

TEST(DatasetSourceTest, TrainingStatisticsNormalizeBothSplits) {
  const std::string dir = MakeTempDir();
  WriteSyntheticAsNpy(dir);
  const job::DatasetSpec spec = NpySpec(dir);
  auto train = OpenDataset(spec, Split::kTrain, 5);
  auto test = OpenDataset(spec, Split::kTest, 5);
  ASSERT_TRUE(train.ok() && test.ok());
  // The reference: every training pixel, per channel, in double.
  job::DatasetSpec raw = spec;
  raw.normalize = false;
  auto unit = OpenDataset(raw, Split::kTrain, 5);
  ASSERT_TRUE(unit.ok());
  const torch::Tensor x = (*(*unit)->Gather(Range(300))).inputs.to(torch::kFloat64);
  auto norm = (*train)->normalization();
  ASSERT_TRUE(norm.ok()) << norm.status();
  ASSERT_EQ(norm->mean.size(), 3u);
  for (int64_t c = 0; c < 3; ++c) {
    const torch::Tensor channel = x.select(1, c);
    EXPECT_NEAR(norm->mean[static_cast<size_t>(c)], channel.mean().item<double>(), 1e-6);
    EXPECT_NEAR(norm->std[static_cast<size_t>(c)], channel.std(false).item<double>(), 1e-6);
  }
  auto test_norm = (*test)->normalization();
  ASSERT_TRUE(test_norm.ok());
  EXPECT_EQ(test_norm->mean, norm->mean);
  EXPECT_EQ(test_norm->std, norm->std);
  // Gathered values are (x - mean[c]) / std[c] in float.
  auto batch = (*test)->Gather({3});
  auto plain = OpenDataset(raw, Split::kTest, 5);
  auto unit_batch = (*plain)->Gather({3});
  ASSERT_TRUE(batch.ok() && unit_batch.ok());
  const float* got = batch->inputs.data_ptr<float>();
  const float* in = unit_batch->inputs.data_ptr<float>();
  for (int64_t k = 0; k < 3 * 64; ++k) {
    const size_t c = static_cast<size_t>(k / 64);
    EXPECT_EQ(got[k], (in[k] - norm->mean[c]) / norm->std[c]) << k;
  }
}

TEST(DatasetSourceTest, ExplicitMeanAndStdMustFitTheChannels) {
  const std::string dir = MakeTempDir();
  WriteSyntheticAsNpy(dir);
  job::DatasetSpec spec = NpySpec(dir);
  spec.mean = {0.1, 0.2, 0.3};
  spec.std = {0.5, 0.25, 2.0};
  auto data = OpenDataset(spec, Split::kTrain, 5);
  ASSERT_TRUE(data.ok()) << data.status();
  auto norm = (*data)->normalization();
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->mean, (std::vector<float>{0.1f, 0.2f, 0.3f}));
  EXPECT_EQ(norm->std, (std::vector<float>{0.5f, 0.25f, 2.0f}));
  spec.mean = {0.1, 0.2};
  spec.std = {1.0, 1.0};
  auto bad = OpenDataset(spec, Split::kTrain, 5);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("spec.dataset.mean"));
}

TEST(DatasetSourceTest, VectorTargetsGatherAsFloatRows) {
  const std::string dir = MakeTempDir();
  std::vector<uint8_t> pixels(6 * 4, 128);
  std::vector<float> targets;
  for (int i = 0; i < 6 * 2; ++i) targets.push_back(0.5f * i);
  for (const std::string split : {"train", "test"}) {
    ASSERT_TRUE(WriteNpy(dir + "/" + split + "-images.npy", "|u1", {6, 2, 2}, pixels));
    ASSERT_TRUE(WriteNpy(dir + "/" + split + "-labels.npy", "<f4", {6, 2}, targets));
  }
  job::DatasetSpec spec = NpySpec(dir);
  spec.normalize = false;
  auto data = OpenDataset(spec, Split::kTrain, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((*data)->targets().kind, TargetKind::kVector);
  EXPECT_EQ((*data)->targets().outputs(), 2);
  auto batch = (*data)->Gather({4, 1});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->targets.scalar_type(), torch::kFloat32);
  EXPECT_EQ(batch->targets.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(batch->targets[0][1].item<float>(), 4.5f);
  EXPECT_EQ(batch->targets[1][0].item<float>(), 1.0f);
  EXPECT_EQ(batch->inputs[0][0][1][1].item<float>(), 128.0f / 255.0f);
}

// A 1 x 4 x 4 source whose sample i has every pixel i / 100; sample `bad` cannot be read.
class FakeSource : public SampleSource {
 public:
  FakeSource(int64_t size, int64_t bad) : size_(size), bad_(bad) {}
  const std::string& name() const override { return name_; }
  int64_t size() const override { return size_; }
  SampleShape shape() const override { return {1, 4, 4}; }
  TargetInfo targets() const override { return {TargetKind::kClass, 3, 0}; }
  absl::Status ReadPixels(int64_t i, float* out) const override {
    if (i == bad_) return absl::DataLossError("fake/img7.png: sample 7: bad Huffman code");
    for (int k = 0; k < 16; ++k) out[k] = static_cast<float>(i) / 100.0f;
    return absl::OkStatus();
  }
  absl::Status ReadTarget(int64_t i, int64_t* cls, float*) const override {
    *cls = i % 3;
    return absl::OkStatus();
  }

 private:
  std::string name_ = "fake/train";
  int64_t size_;
  int64_t bad_;
};

TEST(DatasetSourceTest, CorruptSampleFailsTheGatherUnlessSkipped) {
  job::DatasetSpec spec;
  spec.name = "fake";
  spec.format = "imagefolder";
  spec.normalize = false;
  auto strict = Dataset::FromSource(std::make_unique<FakeSource>(10, 7), spec, Split::kTrain, 0);
  ASSERT_TRUE(strict.ok()) << strict.status();
  auto failed = (*strict)->Gather({1, 7, 2});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(failed.status().message(), HasSubstr("fake/img7.png: sample 7"));
  EXPECT_EQ((*strict)->corrupt_samples(), 0);

  spec.skip_corrupt = true;
  auto lenient = Dataset::FromSource(std::make_unique<FakeSource>(10, 7), spec, Split::kTrain, 0);
  ASSERT_TRUE(lenient.ok());
  auto batch = (*lenient)->Gather({1, 7, 2, 7});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->dropped, 2);
  EXPECT_EQ(batch->inputs.size(0), 2);
  EXPECT_EQ(batch->targets.size(0), 2);
  EXPECT_EQ(batch->inputs[0][0][0][0].item<float>(), 0.01f);
  EXPECT_EQ(batch->inputs[1][0][0][0].item<float>(), 0.02f);
  EXPECT_EQ(batch->targets[1].item<int64_t>(), 2);
  EXPECT_EQ((*lenient)->corrupt_samples(), 2);
}

TEST(DatasetSourceTest, AugmentationDrawsFromSeedEpochAndIndexOnly) {
  job::DatasetSpec spec = SyntheticSpec();
  spec.synthetic.shape = {3, 12, 12};
  spec.augment.random_crop.size = 10;
  spec.augment.random_crop.padding = 2;
  spec.augment.horizontal_flip = true;
  auto train = OpenDataset(spec, Split::kTrain, 5);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ((*train)->shape().height, 10);
  EXPECT_EQ((*train)->shape().width, 10);
  job::DatasetSpec raw = spec;
  raw.augment = job::AugmentSpec();
  raw.normalize = false;
  auto plain = OpenDataset(raw, Split::kTrain, 5);
  ASSERT_TRUE(plain.ok());

  // Each row is ApplyAugment of the sample's own draws, then the set's normalization.
  const std::vector<int64_t> indices = {4, 9, 4};
  auto batch = (*train)->Gather(indices, GatherOptions{3});
  ASSERT_TRUE(batch.ok()) << batch.status();
  const SampleShape in{3, 12, 12};
  for (size_t r = 0; r < indices.size(); ++r) {
    auto source = (*plain)->Gather({indices[r]});
    std::vector<float> expected(3 * 10 * 10);
    ApplyAugment(spec.augment, DrawAugment(spec.augment, in, 5, 3, indices[r]), in,
                 source->inputs.data_ptr<float>(), expected.data());
    for (float& v : expected) v = (v - 0.5f) / 0.25f;
    EXPECT_EQ(0, std::memcmp(batch->inputs[static_cast<int64_t>(r)].data_ptr<float>(),
                             expected.data(), expected.size() * sizeof(float)))
        << "row " << r;
  }
  // The same sample in another batch of the same epoch looks the same; another epoch differs
  // somewhere over a few samples.
  auto alone = (*train)->Gather({9}, GatherOptions{3});
  EXPECT_TRUE(BitEqual(alone->inputs[0], batch->inputs[1]));
  const std::vector<int64_t> several = Range(8);
  auto e3 = (*train)->Gather(several, GatherOptions{3});
  auto e4 = (*train)->Gather(several, GatherOptions{4});
  EXPECT_FALSE(BitEqual(e3->inputs, e4->inputs));

  // The test split: the center crop to the same size, no randomness.
  auto test = OpenDataset(spec, Split::kTest, 5);
  auto test_plain = OpenDataset(raw, Split::kTest, 5);
  ASSERT_TRUE(test.ok() && test_plain.ok());
  EXPECT_EQ((*test)->shape().height, 10);
  auto tb = (*test)->Gather({2}, GatherOptions{1});
  auto tp = (*test_plain)->Gather({2});
  std::vector<float> centered(3 * 10 * 10);
  CenterCrop(in, tp->inputs.data_ptr<float>(), (*test)->shape(), centered.data());
  for (float& v : centered) v = (v - 0.5f) / 0.25f;
  EXPECT_EQ(0, std::memcmp(tb->inputs.data_ptr<float>(), centered.data(),
                           centered.size() * sizeof(float)));
}

}  // namespace
}  // namespace hptrain::train
