#include "runtime/train/data/dataset.h"

#include <stdlib.h>
#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/train/data/sampler.h"

namespace hptrain::train {
namespace {

using ::testing::HasSubstr;

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

// A fresh directory under the test temp dir.
std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "/hptrain_dataset_XXXXXX";
  const char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::vector<uint8_t> ReadFilePrefix(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes(n);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

void PutBigEndian(std::vector<uint8_t>* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

// A raw IDX image file with `count` images of rows x cols, pixel i = i % 256, cut to `keep` data
// bytes.
std::vector<uint8_t> IdxImages(uint32_t count, uint32_t rows, uint32_t cols, size_t keep) {
  std::vector<uint8_t> out;
  PutBigEndian(&out, 0x803);
  PutBigEndian(&out, count);
  PutBigEndian(&out, rows);
  PutBigEndian(&out, cols);
  for (size_t i = 0; i < keep; ++i) out.push_back(static_cast<uint8_t>(i % 256));
  return out;
}

std::vector<uint8_t> IdxLabels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> out;
  PutBigEndian(&out, 0x801);
  PutBigEndian(&out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

job::DatasetSpec Spec(const std::string& name, const std::string& path = "") {
  job::DatasetSpec spec;
  spec.name = name;
  spec.path = path;
  return spec;
}

class FashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    torch::set_num_threads(1);
    auto train = OpenDataset(Spec("fashion-mnist"), Split::kTrain, 0);
    ASSERT_TRUE(train.ok()) << train.status();
    train_ = std::move(train).value().release();
  }
  static void TearDownTestSuite() {
    delete train_;
    train_ = nullptr;
  }
  static Dataset* train_;
};
Dataset* FashionMnistTest::train_ = nullptr;

TEST_F(FashionMnistTest, TrainSplitHas60000BalancedSamples) {
  ASSERT_NE(train_, nullptr);
  EXPECT_EQ(train_->size(), 60000);
  EXPECT_EQ(train_->shape().channels, 1);
  EXPECT_EQ(train_->shape().height, 28);
  EXPECT_EQ(train_->shape().width, 28);
  EXPECT_EQ(train_->num_classes(), 10);
  std::vector<int> counts(10, 0);
  for (int64_t i = 0; i < train_->size(); ++i) {
    const int label = train_->label(i);
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++counts[static_cast<size_t>(label)];
  }
  EXPECT_THAT(counts, ::testing::Each(6000));
}

TEST_F(FashionMnistTest, NormalizedInputsHaveZeroMeanUnitStd) {
  ASSERT_NE(train_, nullptr);
  std::vector<int64_t> perm = EpochPermutation(train_->size(), 1, 0);
  perm.resize(10000);
  auto batch = train_->Gather(perm);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->inputs.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(batch->inputs.scalar_type(), torch::kFloat32);
  EXPECT_EQ(batch->targets.scalar_type(), torch::kInt64);
  EXPECT_NEAR(batch->inputs.mean().item<double>(), 0.0, 0.02);
  EXPECT_NEAR(batch->inputs.std().item<double>(), 1.0, 0.02);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(batch->targets[i].item<int64_t>(), train_->label(perm[static_cast<size_t>(i)]));
  }
}

TEST_F(FashionMnistTest, GatherRejectsOutOfRangeIndices) {
  ASSERT_NE(train_, nullptr);
  EXPECT_EQ(train_->Gather({0, 60000}).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(train_->Gather({-1}).status().code(), absl::StatusCode::kOutOfRange);
  auto empty = train_->Gather({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->inputs.size(0), 0);
}

TEST(DatasetTest, FashionMnistTestSplitUnnormalized) {
  job::DatasetSpec spec = Spec("fashion-mnist");
  spec.normalize = false;
  auto test = OpenDataset(spec, Split::kTest, 0);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->size(), 10000);
  auto batch = (*test)->Gather({0, 1, 2, 3});
  ASSERT_TRUE(batch.ok());
  EXPECT_GE(batch->inputs.min().item<float>(), 0.0f);
  EXPECT_LE(batch->inputs.max().item<float>(), 1.0f);
  EXPECT_GT(batch->inputs.max().item<float>(), 0.5f);
}

TEST(DatasetTest, SyntheticIsDeterministicAndLearnableShaped) {
  job::DatasetSpec spec = Spec("synthetic");
  spec.synthetic.samples = 512;
  spec.synthetic.test_samples = 128;
  auto a = OpenDataset(spec, Split::kTrain, 7);
  auto b = OpenDataset(spec, Split::kTrain, 7);
  auto other_seed = OpenDataset(spec, Split::kTrain, 8);
  auto test = OpenDataset(spec, Split::kTest, 7);
  ASSERT_TRUE(a.ok() && b.ok() && other_seed.ok() && test.ok()) << a.status();
  EXPECT_EQ((*a)->size(), 512);
  EXPECT_EQ((*test)->size(), 128);
  std::vector<int64_t> all(512);
  for (int64_t i = 0; i < 512; ++i) all[static_cast<size_t>(i)] = i;
  auto ba = (*a)->Gather(all);
  auto bb = (*b)->Gather(all);
  auto bo = (*other_seed)->Gather(all);
  ASSERT_TRUE(ba.ok() && bb.ok() && bo.ok());
  EXPECT_TRUE(torch::equal(ba->inputs, bb->inputs));
  EXPECT_TRUE(torch::equal(ba->targets, bb->targets));
  EXPECT_FALSE(torch::equal(ba->inputs, bo->inputs));
  // Every class occurs, and no class dominates.
  const torch::Tensor counts = torch::bincount(ba->targets, {}, 10);
  EXPECT_GT(counts.min().item<int64_t>(), 0);
  EXPECT_LT(counts.max().item<int64_t>(), 512 / 3);
  EXPECT_NEAR(ba->inputs.mean().item<double>(), 0.0, 0.1);
  // Test and train samples differ.
  auto bt = (*test)->Gather({0, 1, 2});
  ASSERT_TRUE(bt.ok());
  EXPECT_FALSE(torch::equal(bt->inputs, ba->inputs.slice(0, 0, 3)));
}

TEST(DatasetTest, SyntheticRejectsBadShape) {
  job::DatasetSpec spec = Spec("synthetic");
  spec.synthetic.shape = {1, 28};
  EXPECT_EQ(OpenDataset(spec, Split::kTrain, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DatasetTest, TruncatedGzipIdxIsDataLoss) {
  const std::string dir = MakeTempDir();
  const std::string images = dir + "/train-images-idx3-ubyte.gz";
  WriteFile(images,
            ReadFilePrefix(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz", 100000));
  WriteFile(dir + "/train-labels-idx1-ubyte.gz",
            ReadFilePrefix(std::string(kFashionMnist) + "/train-labels-idx1-ubyte.gz", 1 << 20));
  auto ds = OpenDataset(Spec("fashion-mnist", dir), Split::kTrain, 0);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(ds.status().message()),
              HasSubstr(images + ": truncated: expected 47040000 bytes of image data, got "));
}

TEST(DatasetTest, TruncatedRawIdxIsDataLossWithExactMessage) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/t10k-images-idx3-ubyte", IdxImages(10, 28, 28, 100));
  WriteFile(dir + "/t10k-labels-idx1-ubyte", IdxLabels(std::vector<uint8_t>(10, 1)));
  auto ds = OpenDataset(Spec("mnist", dir), Split::kTest, 0);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ds.status().message(),
            dir + "/t10k-images-idx3-ubyte: truncated: expected 7840 bytes of image data, got 100");
}

TEST(DatasetTest, SmallRawIdxReads) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/t10k-images-idx3-ubyte", IdxImages(3, 4, 5, 60));
  WriteFile(dir + "/t10k-labels-idx1-ubyte", IdxLabels({3, 1, 4}));
  job::DatasetSpec spec = Spec("mnist", dir);
  spec.normalize = false;
  auto ds = OpenDataset(spec, Split::kTest, 0);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 3);
  EXPECT_EQ((*ds)->shape().height, 4);
  EXPECT_EQ((*ds)->shape().width, 5);
  auto batch = (*ds)->Gather({2, 0});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->targets[0].item<int64_t>(), 4);
  EXPECT_EQ(batch->targets[1].item<int64_t>(), 3);
  // Sample 2 starts at data byte 40.
  EXPECT_FLOAT_EQ(batch->inputs[0][0][0][0].item<float>(), 40.0f / 255.0f);
}

TEST(DatasetTest, BadIdxContentIsDataLoss) {
  const std::string dir = MakeTempDir();
  std::vector<uint8_t> images = IdxImages(3, 4, 5, 60);
  WriteFile(dir + "/t10k-images-idx3-ubyte", images);
  WriteFile(dir + "/t10k-labels-idx1-ubyte", IdxLabels({3, 10, 4}));  // 10 is out of range
  auto ds = OpenDataset(Spec("mnist", dir), Split::kTest, 0);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(ds.status().message()), HasSubstr("label 10"));

  WriteFile(dir + "/t10k-labels-idx1-ubyte", IdxLabels({3, 1}));  // count mismatch
  ds = OpenDataset(Spec("mnist", dir), Split::kTest, 0);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);

  images[3] = 0x01;  // magic 0x801: a label file where images belong
  WriteFile(dir + "/t10k-images-idx3-ubyte", images);
  ds = OpenDataset(Spec("mnist", dir), Split::kTest, 0);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(ds.status().message()), HasSubstr("bad magic number"));
}

TEST(DatasetTest, MissingDirectoryOrFileIsNotFound) {
  auto ds = OpenDataset(Spec("fashion-mnist", "/nonexistent/hptrain"), Split::kTrain, 0);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ds.status().message()), HasSubstr("/nonexistent/hptrain"));

  const std::string dir = MakeTempDir();
  ds = OpenDataset(Spec("fashion-mnist", dir), Split::kTrain, 0);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ds.status().message()), HasSubstr(dir + "/train-images-idx3-ubyte"));
}

TEST(DatasetTest, UnknownNameOrWrongFormatIsInvalidArgument) {
  EXPECT_EQ(DatasetNames(), (std::vector<std::string>{"fashion-mnist", "mnist", "cifar10",
                                                      "cifar100", "synthetic"}));
  EXPECT_EQ(OpenDataset(Spec("imagenet"), Split::kTrain, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  job::DatasetSpec spec = Spec("fashion-mnist");
  spec.format = "cifar-binary";
  EXPECT_EQ(OpenDataset(spec, Split::kTrain, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// CIFAR records: label byte(s) then 3072 pixels; pixel p of record r = (r * 7 + p) % 256.
std::vector<uint8_t> CifarRecords(int count, int first_record, std::vector<uint8_t> prefix) {
  std::vector<uint8_t> out;
  for (int r = first_record; r < first_record + count; ++r) {
    for (uint8_t b : prefix) out.push_back(static_cast<uint8_t>(b + r));
    for (int p = 0; p < 3072; ++p) out.push_back(static_cast<uint8_t>((r * 7 + p) % 256));
  }
  return out;
}

TEST(DatasetTest, Cifar10TinyFiles) {
  const std::string dir = MakeTempDir();
  for (int i = 1; i <= 5; ++i) {
    WriteFile(dir + "/data_batch_" + std::to_string(i) + ".bin", CifarRecords(2, 2 * (i - 1), {0}));
  }
  WriteFile(dir + "/test_batch.bin", CifarRecords(2, 0, {5}));
  job::DatasetSpec spec = Spec("cifar10", dir);
  spec.normalize = false;
  auto train = OpenDataset(spec, Split::kTrain, 0);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ((*train)->size(), 10);
  EXPECT_EQ((*train)->shape().channels, 3);
  EXPECT_EQ((*train)->num_classes(), 10);
  auto batch = (*train)->Gather({7});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->inputs.sizes(), (std::vector<int64_t>{1, 3, 32, 32}));
  EXPECT_EQ(batch->targets[0].item<int64_t>(), 7);
  // Green plane (channel 1) starts at pixel 1024.
  EXPECT_FLOAT_EQ(batch->inputs[0][1][0][0].item<float>(), ((7 * 7 + 1024) % 256) / 255.0f);

  auto test = OpenDataset(spec, Split::kTest, 0);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->size(), 2);
  EXPECT_EQ((*test)->label(1), 6);

  // Normalized: per-channel constants apply.
  auto normalized = OpenDataset(Spec("cifar10", dir), Split::kTest, 0);
  ASSERT_TRUE(normalized.ok());
  auto nb = (*normalized)->Gather({0});
  ASSERT_TRUE(nb.ok());
  EXPECT_NEAR(nb->inputs[0][2][0][0].item<float>(), ((2048 % 256) / 255.0f - 0.4465f) / 0.2616f,
              1e-5);
}

TEST(DatasetTest, Cifar10TruncatedOrMissingFile) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/test_batch.bin", CifarRecords(2, 0, {1}));
  auto train = OpenDataset(Spec("cifar10", dir), Split::kTrain, 0);
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(train.status().message()), HasSubstr(dir + "/data_batch_1.bin"));

  std::vector<uint8_t> records = CifarRecords(2, 0, {1});
  records.resize(records.size() - 100);
  WriteFile(dir + "/test_batch.bin", records);
  auto test = OpenDataset(Spec("cifar10", dir), Split::kTest, 0);
  EXPECT_EQ(test.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(test.status().message()),
              HasSubstr(dir + "/test_batch.bin: truncated: expected 6146 bytes"));

  WriteFile(dir + "/test_batch.bin", CifarRecords(1, 0, {10}));  // label 10 of 10 classes
  test = OpenDataset(Spec("cifar10", dir), Split::kTest, 0);
  EXPECT_EQ(test.status().code(), absl::StatusCode::kDataLoss);
}

TEST(DatasetTest, Cifar100UsesFineLabels) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/test.bin", CifarRecords(4, 0, {2, 50}));  // coarse 2+r, fine 50+r
  auto test = OpenDataset(Spec("cifar100", dir), Split::kTest, 0);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->size(), 4);
  EXPECT_EQ((*test)->num_classes(), 100);
  EXPECT_EQ((*test)->label(3), 53);
}

}  // namespace
}  // namespace hptrain::train
