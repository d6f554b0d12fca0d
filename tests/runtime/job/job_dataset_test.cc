// spec.dataset's fields for your own data (format, layout, normalize, mean, std, imageSize,
// channels, classes, skipCorrupt, augment), spec.task and spec.precision, through the parser and
// the validator: each field lands in JobSpec, and each bad value is refused with a one-line
// message naming the field. The CRD's side of the same cases: tests/deploy/crd_schema_test.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/job/job_parser.h"

namespace hptrain::job {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;

constexpr char kJob[] = R"(apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: t
spec:
  model: {name: lenet5}
  dataset: {name: fashion-mnist}
  globalBatchSize: 64
  workers: {replicas: 2}
)";

// kJob with its data set replaced by a user format's.
std::vector<std::string> UserData(const std::string& format, std::vector<std::string> more = {}) {
  std::vector<std::string> sets = {"spec.dataset={name: my-data, format: " + format +
                                   ", path: /data/x}"};
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

absl::StatusOr<JobSpec> Parse(const std::vector<std::string>& overrides) {
  return ParseJobText(kJob, overrides, "job.yaml");
}

// The one-line InvalidArgument message of a parse that must fail.
std::string ErrorOf(const std::vector<std::string>& overrides) {
  absl::StatusOr<JobSpec> spec = Parse(overrides);
  EXPECT_FALSE(spec.ok());
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  std::string message(spec.status().message());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

TEST(JobDatasetTest, DefaultsAreClassificationInFp32WithoutAugmentation) {
  absl::StatusOr<JobSpec> spec = Parse({});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->task, "classification");
  EXPECT_EQ(spec->precision, "fp32");
  EXPECT_FALSE(spec->dataset.augment.any());
  EXPECT_TRUE(spec->dataset.builtin_format());
  EXPECT_TRUE(spec->dataset.normalize);
  EXPECT_FALSE(spec->dataset.skip_corrupt);
}

TEST(JobDatasetTest, NpyFieldsParse) {
  absl::StatusOr<JobSpec> spec =
      Parse(UserData("npy", {"spec.dataset.layout=NCHW", "spec.dataset.mean=[0.5, 0.4, 0.3]",
                             "spec.dataset.std=[0.2, 0.25, 0.3]", "spec.dataset.classes=12",
                             "spec.dataset.skipCorrupt=true"}));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const DatasetSpec& d = spec->dataset;
  EXPECT_EQ(d.name, "my-data");
  EXPECT_EQ(d.format, "npy");
  EXPECT_EQ(d.path, "/data/x");
  EXPECT_FALSE(d.builtin_format());
  EXPECT_EQ(d.layout, "NCHW");
  EXPECT_THAT(d.mean, ElementsAre(0.5, 0.4, 0.3));
  EXPECT_THAT(d.std, ElementsAre(0.2, 0.25, 0.3));
  EXPECT_EQ(d.classes, 12);
  EXPECT_TRUE(d.skip_corrupt);
}

TEST(JobDatasetTest, DecodedFormatFieldsParse) {
  for (const std::string format : {"imagefolder", "filelist", "webdataset"}) {
    SCOPED_TRACE(format);
    absl::StatusOr<JobSpec> spec =
        Parse(UserData(format, {"spec.dataset.imageSize=[64, 48]", "spec.dataset.channels=3",
                                "spec.dataset.normalize=false"}));
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->dataset.format, format);
    EXPECT_THAT(spec->dataset.image_size, ElementsAre(64, 48));
    EXPECT_EQ(spec->dataset.channels, 3);
    EXPECT_FALSE(spec->dataset.normalize);
  }
  absl::StatusOr<JobSpec> square = Parse(UserData("imagefolder", {"spec.dataset.imageSize=[32]"}));
  ASSERT_TRUE(square.ok()) << square.status();
  EXPECT_THAT(square->dataset.image_size, ElementsAre(32));
}

TEST(JobDatasetTest, AugmentFieldsParse) {
  absl::StatusOr<JobSpec> spec =
      Parse({"spec.dataset.augment={randomCrop: {size: 24, padding: 4}, horizontalFlip: true}"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const AugmentSpec& a = spec->dataset.augment;
  EXPECT_EQ(a.random_crop.size, 24);
  EXPECT_EQ(a.random_crop.padding, 4);
  EXPECT_TRUE(a.horizontal_flip);
  EXPECT_EQ(a.random_resized_crop.size, 0);
  EXPECT_TRUE(a.any());

  spec = Parse(UserData("imagefolder", {"spec.dataset.augment.randomResizedCrop={size: 56, "
                                        "scale: [0.2, 0.9], ratio: [0.5, 2]}"}));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const RandomResizedCropSpec& r = spec->dataset.augment.random_resized_crop;
  EXPECT_EQ(r.size, 56);
  EXPECT_THAT(r.scale, ElementsAre(0.2, 0.9));
  EXPECT_THAT(r.ratio, ElementsAre(0.5, 2.0));
  EXPECT_FALSE(spec->dataset.augment.horizontal_flip);

  // torchvision's defaults when scale and ratio are left out.
  spec = Parse({"spec.dataset.augment.randomResizedCrop.size=20"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->dataset.augment.random_resized_crop.scale, ElementsAre(0.08, 1.0));
  EXPECT_THAT(spec->dataset.augment.random_resized_crop.ratio, ElementsAre(3.0 / 4.0, 4.0 / 3.0));
}

TEST(JobDatasetTest, TaskAndPrecisionParse) {
  for (const char* task : {"classification", "multilabel", "regression"}) {
    absl::StatusOr<JobSpec> spec = Parse({std::string("spec.task=") + task});
    ASSERT_TRUE(spec.ok()) << task << ": " << spec.status();
    EXPECT_EQ(spec->task, task);
  }
  absl::StatusOr<JobSpec> script =
      Parse({"spec.task=torchscript", "spec.model={torchscript: m.pt}"});
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_EQ(script->task, "torchscript");
  for (const char* precision : {"fp32", "bf16"}) {
    absl::StatusOr<JobSpec> spec =
        Parse({std::string("spec.precision=") + precision, "spec.device=cpu"});
    ASSERT_TRUE(spec.ok()) << precision << ": " << spec.status();
    EXPECT_EQ(spec->precision, precision);
  }
  absl::StatusOr<JobSpec> fp16 = Parse({"spec.precision=fp16", "spec.device=cuda"});
  ASSERT_TRUE(fp16.ok()) << fp16.status();
  EXPECT_EQ(fp16->precision, "fp16");
}

struct BadCase {
  std::string name;
  std::vector<std::string> overrides;
  std::string message;  // what the error starts with, after "job.yaml: "
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class JobDatasetErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(JobDatasetErrorTest, NamesTheField) {
  EXPECT_THAT(ErrorOf(GetParam().overrides), StartsWith("job.yaml: " + GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Table, JobDatasetErrorTest,
    ::testing::Values(
        // the formats
        BadCase{"UnknownFormat", UserData("tfrecord"),
                "spec.dataset.format: unknown format \"tfrecord\" (expected one of idx, "
                "cifar-binary, synthetic, npy, imagefolder, filelist, webdataset)"},
        BadCase{"UserFormatWithoutName",
                {"spec.dataset={format: npy, path: /data/x}"},
                "spec.dataset.name: required: a label for the data set"},
        BadCase{"UserFormatWithoutPath",
                {"spec.dataset={name: x, format: webdataset}"},
                "spec.dataset.path: required for format webdataset"},
        BadCase{"UnknownBuiltinName",
                {"spec.dataset.name=imagenet"},
                "spec.dataset.name: unknown dataset \"imagenet\""},
        BadCase{"LayoutOnImageFolder", UserData("imagefolder", {"spec.dataset.layout=NCHW"}),
                "spec.dataset.layout: applies only to format npy, got format imagefolder"},
        BadCase{"UnknownLayout", UserData("npy", {"spec.dataset.layout=HWC"}),
                "spec.dataset.layout: unknown layout \"HWC\" (expected one of NHWC, NCHW)"},
        BadCase{"ImageSizeOnNpy", UserData("npy", {"spec.dataset.imageSize=[28, 28]"}),
                "spec.dataset.imageSize: applies only to formats imagefolder, filelist and "
                "webdataset"},
        BadCase{"ImageSizeOfThree", UserData("filelist", {"spec.dataset.imageSize=[3, 28, 28]"}),
                "spec.dataset.imageSize: needs n or [height, width], got 3 values"},
        BadCase{"ImageSizeZero", UserData("filelist", {"spec.dataset.imageSize=[28, 0]"}),
                "spec.dataset.imageSize[1]: must be >= 1, got 0"},
        BadCase{"ImageSizeNotAList", UserData("filelist", {"spec.dataset.imageSize=28"}),
                "spec.dataset.imageSize: must be a list"},
        BadCase{"ChannelsOnNpy", UserData("npy", {"spec.dataset.channels=1"}),
                "spec.dataset.channels: applies only to formats imagefolder, filelist and "
                "webdataset"},
        BadCase{"ChannelsTwo", UserData("webdataset", {"spec.dataset.channels=2"}),
                "spec.dataset.channels: must be 1 or 3, got 2"},
        BadCase{"NegativeClasses", UserData("npy", {"spec.dataset.classes=-1"}),
                "spec.dataset.classes: must be >= 0, got -1"},
        BadCase{"SkipCorruptNotABoolean", UserData("npy", {"spec.dataset.skipCorrupt=sometimes"}),
                "spec.dataset.skipCorrupt: must be true or false"},
        // the built-in sets refuse the user formats' fields
        BadCase{"LayoutOnBuiltin",
                {"spec.dataset.layout=NHWC"},
                "spec.dataset.layout: applies only to formats npy, imagefolder, filelist and "
                "webdataset"},
        BadCase{"ImageSizeOnBuiltin",
                {"spec.dataset.imageSize=[28]"},
                "spec.dataset.imageSize: applies only to formats npy, imagefolder"},
        BadCase{"ChannelsOnBuiltin",
                {"spec.dataset.channels=1"},
                "spec.dataset.channels: applies only to formats npy, imagefolder"},
        BadCase{"ClassesOnBuiltin",
                {"spec.dataset.classes=10"},
                "spec.dataset.classes: applies only to formats npy, imagefolder"},
        BadCase{"SkipCorruptOnBuiltin",
                {"spec.dataset.skipCorrupt=true"},
                "spec.dataset.skipCorrupt: applies only to formats npy, imagefolder"},
        // normalization
        BadCase{"MeanWithoutStd", UserData("npy", {"spec.dataset.mean=[0.5]"}),
                "spec.dataset.std: required with spec.dataset.mean"},
        BadCase{"StdWithoutMean", UserData("npy", {"spec.dataset.std=[0.5]"}),
                "spec.dataset.mean: required with spec.dataset.std"},
        BadCase{"MeanAndStdSizes",
                UserData("npy", {"spec.dataset.mean=[0.5, 0.5, 0.5]", "spec.dataset.std=[0.2]"}),
                "spec.dataset.std: needs as many values as spec.dataset.mean (3), got 1"},
        BadCase{"MeanWithNormalizeFalse",
                UserData("npy", {"spec.dataset.mean=[0.5]", "spec.dataset.std=[0.2]",
                                 "spec.dataset.normalize=false"}),
                "spec.dataset.mean: cannot be combined with normalize: false"},
        BadCase{"StdZero",
                UserData("npy", {"spec.dataset.mean=[0.5, 0.5]", "spec.dataset.std=[0.2, 0]"}),
                "spec.dataset.std[1]: must be > 0, got 0"},
        BadCase{"MeanNotANumber", UserData("npy", {"spec.dataset.mean=[half]"}),
                "spec.dataset.mean[0]: must be a number"},
        // augmentation
        BadCase{"TwoCrops",
                {"spec.dataset.augment={randomCrop: {size: 24}, randomResizedCrop: {size: 24}}"},
                "spec.dataset.augment.randomResizedCrop: cannot be combined with randomCrop"},
        BadCase{"CropWithoutSize",
                {"spec.dataset.augment.randomCrop={padding: 4}"},
                "spec.dataset.augment.randomCrop.size: required"},
        BadCase{"ResizedCropWithoutSize",
                {"spec.dataset.augment.randomResizedCrop={scale: [0.5, 1]}"},
                "spec.dataset.augment.randomResizedCrop.size: required"},
        BadCase{"NegativeCropSize",
                {"spec.dataset.augment.randomCrop.size=-3"},
                "spec.dataset.augment.randomCrop.size: must be >= 0, got -3"},
        BadCase{"NegativePadding",
                {"spec.dataset.augment.randomCrop={size: 24, padding: -1}"},
                "spec.dataset.augment.randomCrop.padding: must be >= 0, got -1"},
        BadCase{"OneScaleValue",
                {"spec.dataset.augment.randomResizedCrop={size: 24, scale: [0.5]}"},
                "spec.dataset.augment.randomResizedCrop.scale: needs two values [min, max], got 1"},
        BadCase{"ScaleReversed",
                {"spec.dataset.augment.randomResizedCrop={size: 24, scale: [0.9, 0.1]}"},
                "spec.dataset.augment.randomResizedCrop.scale: needs 0 < min <= max, got "
                "[0.9, 0.1]"},
        BadCase{"ScaleAboveOne",
                {"spec.dataset.augment.randomResizedCrop={size: 24, scale: [0.5, 1.5]}"},
                "spec.dataset.augment.randomResizedCrop.scale: max is at most 1, got 1.5"},
        BadCase{"RatioZero",
                {"spec.dataset.augment.randomResizedCrop={size: 24, ratio: [0, 1]}"},
                "spec.dataset.augment.randomResizedCrop.ratio: needs 0 < min <= max, got [0, 1]"},
        BadCase{"UnknownAugment",
                {"spec.dataset.augment.rotate=10"},
                "spec.dataset.augment.rotate: unknown field"},
        BadCase{"FlipNotABoolean",
                {"spec.dataset.augment.horizontalFlip=yes please"},
                "spec.dataset.augment.horizontalFlip: must be true or false"},
        // task and precision
        BadCase{"UnknownTask",
                {"spec.task=detection"},
                "spec.task: unknown task \"detection\" (expected one of classification, "
                "multilabel, regression, torchscript)"},
        BadCase{"TorchScriptTaskOnAZooModel",
                {"spec.task=torchscript"},
                "spec.task: torchscript needs spec.model.torchscript"},
        BadCase{"UnknownPrecision",
                {"spec.precision=fp8"},
                "spec.precision: unknown precision \"fp8\" (expected one of fp32, bf16, fp16)"},
        BadCase{"Fp16OnCpu",
                {"spec.precision=fp16", "spec.device=cpu"},
                "spec.precision: fp16 needs a GPU (spec.device: cpu); use bf16 on the CPU"}));

// examples/data/*.yaml: one job per format, each parsed and validated as `hptrain run` reads it.
TEST(JobDatasetTest, DataExamplesParseAndValidate) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("examples/data")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    absl::StatusOr<JobSpec> spec = ParseJobFile(entry.path().string());
    ASSERT_TRUE(spec.ok()) << entry.path() << ": " << spec.status();
    EXPECT_FALSE(spec->dataset.builtin_format()) << entry.path();
    EXPECT_EQ(spec->dataset.path.rfind("/data/", 0), 0u) << entry.path();
  }
  EXPECT_GE(count, 4);
}

}  // namespace
}  // namespace hptrain::job
