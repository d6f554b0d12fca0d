// The decoded formats through the real binary: Fashion-MNIST written as PNG files (filelist) and
// as WebDataset shards of PNGs trains bit for bit like the same images in IDX files, and a corrupt
// JPEG is a one-line error naming the file.
#include <zlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/data/image_decode.h"
#include "tests/integration/hptrain_process.h"
#include "tests/runtime/train/data/image_test_util.h"

namespace hptrain::testing {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
constexpr int kTrain = 3840;  // 30 steps of 64 read 1,920 of them
constexpr int kTest = 256;
constexpr int kSide = 28;

std::vector<uint8_t> Gunzip(const std::string& path) {
  std::vector<uint8_t> out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  std::array<uint8_t, 1 << 16> buf;
  int n;
  while ((n = gzread(f, buf.data(), buf.size())) > 0) out.insert(out.end(), buf.data(), buf.data() + n);
  gzclose(f);
  return out;
}

struct Split {
  std::vector<uint8_t> images;  // n x 28 x 28
  std::vector<uint8_t> labels;
};

// The first n samples of a Fashion-MNIST split.
Split ReadSplit(const std::string& prefix, int n) {
  Split s;
  const std::vector<uint8_t> images = Gunzip(std::string(kFashionMnist) + "/" + prefix + "-images-idx3-ubyte.gz");
  const std::vector<uint8_t> labels = Gunzip(std::string(kFashionMnist) + "/" + prefix + "-labels-idx1-ubyte.gz");
  if (images.size() < 16 + size_t{kSide} * kSide * n || labels.size() < 8 + size_t(n)) return s;
  s.images.assign(images.begin() + 16, images.begin() + 16 + kSide * kSide * n);
  s.labels.assign(labels.begin() + 8, labels.begin() + 8 + n);
  return s;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  train::testing::WriteFile(path, bytes);
}

std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// IDX files (uncompressed) of the subset, as the built-in reader reads them.
void WriteIdx(const std::string& dir, const std::string& prefix, const Split& s) {
  const auto n = static_cast<uint32_t>(s.labels.size());
  WriteBytes(dir + "/" + prefix + "-images-idx3-ubyte",
             BigEndian(0x803) + BigEndian(n) + BigEndian(kSide) + BigEndian(kSide) +
                 std::string(s.images.begin(), s.images.end()));
  WriteBytes(dir + "/" + prefix + "-labels-idx1-ubyte",
             BigEndian(0x801) + BigEndian(n) + std::string(s.labels.begin(), s.labels.end()));
}

std::string PngOf(const Split& s, size_t i) {
  auto png = train::EncodePng(s.images.data() + i * kSide * kSide, kSide, kSide, 1);
  EXPECT_TRUE(png.ok()) << png.status();
  return png.ok() ? *png : "";
}

// filelist: img/<split>/NNNNN.png and <split>.txt.
void WriteFileList(const std::string& dir, const std::string& split, const Split& s) {
  std::string list;
  for (size_t i = 0; i < s.labels.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "img/%s/%05zu.png", split.c_str(), i);
    WriteBytes(dir + "/" + name, PngOf(s, i));
    list += std::string(name) + "\t" + std::to_string(s.labels[i]) + "\n";
  }
  WriteBytes(dir + "/" + split + ".txt", list);
}

// webdataset: <split>-NNN.tar shards of `per_shard` samples.
void WriteShards(const std::string& dir, const std::string& split, const Split& s, size_t per_shard) {
  for (size_t first = 0, shard = 0; first < s.labels.size(); first += per_shard, ++shard) {
    std::vector<std::pair<std::string, std::string>> members;
    for (size_t i = first; i < std::min(s.labels.size(), first + per_shard); ++i) {
      char key[32];
      std::snprintf(key, sizeof(key), "%06zu", i);
      members.push_back({std::string(key) + ".png", PngOf(s, i)});
      members.push_back({std::string(key) + ".cls", std::to_string(s.labels[i])});
    }
    char name[64];
    std::snprintf(name, sizeof(name), "/%s-%03zu.tar", split.c_str(), shard);
    WriteBytes(dir + name, train::testing::Tar(members));
  }
}

std::string Job(const std::string& name, const std::string& dataset, const std::string& ckpt,
                int replicas, int batch = 64) {
  return "apiVersion: hptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata:\n"
         "  name: " + name + "\n"
         "spec:\n"
         "  model: {name: lenet5}\n"
         "  dataset: " + dataset + "\n"
         "  strategy: {type: ssgd}\n"
         "  optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weightDecay: 5.0e-4}\n"
         "  workerGroups:\n"
         "    - {name: cpu, replicas: " + std::to_string(replicas) + "}\n"
         "  globalBatchSize: " + std::to_string(batch) + "\n  epochs: 1\n  maxSteps: 30\n  seed: 7\n  threads: 1\n"
         "  checkpoint: {path: " + ckpt + "}\n";
}

std::vector<float> Train(const TempDir& dir, const std::string& name, const std::string& dataset) {
  const std::string ckpt = dir.path() + "/" + name + ".ckpt";
  const std::string job = dir.Write(name + ".yaml", Job(name, dataset, ckpt, 4));
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto c = train::LoadCheckpoint(ckpt);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  EXPECT_EQ(c->step, 30);
  return c->sections["params"];
}

TEST(ImageData, PngFileListAndWebDatasetTrainBitForBitLikeIdx) {
  if (!std::filesystem::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashionMnist;
  }
  TempDir dir;
  const Split train = ReadSplit("train", kTrain);
  const Split test = ReadSplit("t10k", kTest);
  ASSERT_EQ(train.labels.size(), size_t{kTrain});
  ASSERT_EQ(test.labels.size(), size_t{kTest});
  WriteIdx(dir.path() + "/idx", "train", train);
  WriteIdx(dir.path() + "/idx", "t10k", test);
  WriteFileList(dir.path() + "/filelist", "train", train);
  WriteFileList(dir.path() + "/filelist", "test", test);
  WriteShards(dir.path() + "/wds", "train", train, 1000);
  WriteShards(dir.path() + "/wds", "test", test, 1000);

  const std::vector<float> idx = Train(
      dir, "idx", "{name: fashion-mnist, path: " + dir.path() + "/idx, normalize: false}");
  ASSERT_EQ(idx.size(), 61706u);
  EXPECT_NE(idx, std::vector<float>(idx.size(), 0.0f));
  const std::vector<float> filelist =
      Train(dir, "filelist",
            "{name: fmnist-png, format: filelist, path: " + dir.path() +
                "/filelist, normalize: false, classes: 10}");
  EXPECT_TRUE(filelist == idx) << "filelist parameters differ from idx";
  const std::vector<float> wds =
      Train(dir, "wds",
            "{name: fmnist-wds, format: webdataset, path: " + dir.path() +
                "/wds, normalize: false, classes: 10}");
  EXPECT_TRUE(wds == idx) << "webdataset parameters differ from idx";
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/wds/train-000.tar.idx"));
}

// Exactly one line on stderr naming `file`, and exit 2.
void ExpectOneLineNaming(const ProcessResult& r, const std::string& file) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find(file), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("corrupt JPEG"), std::string::npos) << lines[0];
}

void WriteJpegFolder(const std::string& root) {
  for (const char* split : {"train", "test"}) {
    for (int k = 0; k < 2; ++k) {
      for (int j = 0; j < 8; ++j) {
        const auto pixels = train::testing::PatternImage(kSide, kSide, 1, 10 * k + j);
        char name[128];
        std::snprintf(name, sizeof(name), "%s/%s/c%d/%02d.jpg", root.c_str(), split, k, j);
        WriteBytes(name, train::testing::Jpeg(pixels, kSide, kSide, 1));
      }
    }
  }
}

TEST(ImageData, CorruptJpegHeaderIsOneLineErrorNamingTheFile) {
  TempDir dir;
  WriteJpegFolder(dir.path() + "/data");
  const std::string bad = dir.path() + "/data/train/c1/03.jpg";
  WriteBytes(bad, std::string("\xff\xd8\xff\xe0garbage", 11));
  const std::string job =
      dir.Write("job.yaml", Job("corrupt-header",
                                "{name: folder, format: imagefolder, path: " + dir.path() +
                                    "/data, normalize: false}",
                                dir.path() + "/c.ckpt", 2, 16));
  ExpectOneLineNaming(RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120), bad);
}

// Bad input found when the data is opened, before any step: one line naming the file, exit 2.
void ExpectOpenError(const ProcessResult& r, const std::string& file, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find(file), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(what), std::string::npos) << lines[0];
}

TEST(ImageData, EmptyClassFolderMissingClsAndMixedSizesAreBadInput) {
  TempDir dir;
  const std::string job_text = "{name: bad, format: FORMAT, path: " + dir.path() +
                               "/DATA, normalize: false}";
  const auto run = [&](const std::string& format, const std::string& data) {
    std::string dataset = job_text;
    dataset.replace(dataset.find("FORMAT"), 6, format);
    dataset.replace(dataset.find("DATA"), 4, data);
    const std::string job = dir.Write(data + ".yaml", Job(data, dataset, dir.path() + "/" + data +
                                                                            ".ckpt", 1, 16));
    return RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
  };
  // An empty class folder.
  WriteJpegFolder(dir.path() + "/empty");
  std::filesystem::create_directories(dir.path() + "/empty/train/c2");
  std::filesystem::create_directories(dir.path() + "/empty/test/c2");
  ExpectOpenError(run("imagefolder", "empty"), dir.path() + "/empty/train/c2", "empty class folder");
  // Images of two sizes and no spec.dataset.imageSize.
  WriteJpegFolder(dir.path() + "/mixed");
  const std::string odd = dir.path() + "/mixed/train/c1/04.jpg";
  WriteBytes(odd, train::testing::Jpeg(train::testing::PatternImage(20, 24, 1, 3), 20, 24, 1));
  ExpectOpenError(run("imagefolder", "mixed"), odd, "spec.dataset.imageSize");
  // A WebDataset sample without its .cls member.
  std::filesystem::create_directories(dir.path() + "/wds");
  const std::string png = train::testing::Png(train::testing::PatternImage(kSide, kSide, 1, 1),
                                              kSide, kSide, 1);
  for (const char* split : {"train", "test"}) {
    std::vector<std::pair<std::string, std::string>> members;
    for (int j = 0; j < 8; ++j) {
      const std::string key = "s" + std::to_string(j);
      members.push_back({key + ".png", png});
      if (std::string(split) == "test" || j != 6) members.push_back({key + ".cls", "1"});
    }
    WriteBytes(dir.path() + "/wds/" + split + "-000.tar", train::testing::Tar(members));
  }
  ExpectOpenError(run("webdataset", "wds"), dir.path() + "/wds/train-000.tar", "no .cls member");
}

TEST(ImageData, CorruptJpegDataFailsTheRunNamingTheFile) {
  TempDir dir;
  WriteJpegFolder(dir.path() + "/data");
  const std::string bad = dir.path() + "/data/train/c0/05.jpg";
  const std::string good = ReadFile(bad);
  WriteBytes(bad, train::testing::CutInScan(good));  // the header intact, the scan cut
  const std::string job =
      dir.Write("job.yaml", Job("corrupt-data",
                                "{name: folder, format: imagefolder, path: " + dir.path() +
                                    "/data, normalize: false}",
                                dir.path() + "/c.ckpt", 1, 16));
  // Found by the step that reads it, after the workers started: the run's last line reports it
  // (the workers' start-up lines come before).
  const ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 120);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("hptrain run: ", 0), 0u) << r.err;
  EXPECT_NE(lines.back().find(bad + ": sample 5: corrupt JPEG: "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hptrain::testing
