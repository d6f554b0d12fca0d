// MP²'s snapshot dataset: what the recorder keeps (traces of sampled elements, windows of full
// snapshots) at each cadence, the sample draw, the file's round trip, and every refusal of a cut,
// damaged, foreign or self-contradictory file as one line naming it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/ps/mp2/dataset.h"
#include "runtime/ps/mp2/schedule.h"
#include "tests/runtime/ps/mp2_test_files.h"

namespace hptrain::ps::mp2::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<int64_t> kSizes = {100, 5000, 20, 9000};  // tensors 1 and 3 are traced
constexpr int64_t kParameters = 14120;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The model's parameters after `step` steps: every value distinct, so a trace or snapshot value
// tells which step and element it came from.
std::vector<float> Params(int64_t step, int64_t n = kParameters) {
  std::vector<float> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(step * 100000 + i);
  return p;
}

RecorderOptions Options(const std::string& path, int every, int samples = 64) {
  RecorderOptions options;
  options.path = path;
  options.model = "lenet5";
  options.dataset = "fashion-mnist";
  options.seed = 42;
  options.every = every;
  options.samples = samples;
  options.window_length = 3;
  options.window_every = 4;
  return options;
}

void ExpectSameDataset(const SnapshotDataset& a, const SnapshotDataset& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.dataset, b.dataset);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.history, b.history);
  EXPECT_EQ(a.every, b.every);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.window_length, b.window_length);
  EXPECT_EQ(a.window_every, b.window_every);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    EXPECT_EQ(a.tensors[t].offset, b.tensors[t].offset);
    EXPECT_EQ(a.tensors[t].size, b.tensors[t].size);
    EXPECT_EQ(a.tensors[t].sample, b.tensors[t].sample);
  }
  EXPECT_EQ(a.rounds, b.rounds);
  EXPECT_EQ(a.traces, b.traces);
  ASSERT_EQ(a.windows.size(), b.windows.size());
  for (size_t w = 0; w < a.windows.size(); ++w) {
    EXPECT_EQ(a.windows[w].first_round, b.windows[w].first_round);
    EXPECT_EQ(a.windows[w].snapshots, b.windows[w].snapshots);
  }
}

// A file's parts, to rebuild it with a changed header or body and a correct CRC: the tests of
// self-contradictory files need files that only a broken writer would produce.
struct FileParts {
  uint32_t version;
  nlohmann::json header;
  std::string body;  // after the header, before the CRC
};

FileParts Split(const std::string& bytes) {
  FileParts parts;
  uint32_t length;
  std::memcpy(&parts.version, bytes.data() + 8, 4);
  std::memcpy(&length, bytes.data() + 12, 4);
  parts.header = nlohmann::json::parse(bytes.substr(16, length));
  parts.body = bytes.substr(16 + length, bytes.size() - 16 - length - 4);
  return parts;
}

std::string Join(const FileParts& parts) {
  const std::string text = parts.header.dump();
  std::string out = "HPMP2DAT";
  PutU32(out, parts.version);
  PutU32(out, static_cast<uint32_t>(text.size()));
  out += text + parts.body;
  PutU32(out, Crc32(out, out.size()));
  return out;
}

class SnapshotDatasetTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A recording of `steps` steps with cadence `every`, saved at path_; returns its bytes.
  std::string Recorded(int steps, int every, int samples = 64) {
    SnapshotRecorder recorder(Options(path_, every, samples), kSizes);
    for (int step = 1; step <= steps; ++step) recorder.Record(step, Params(step).data());
    EXPECT_TRUE(recorder.Save().ok());
    return ReadBytes(path_);
  }

  // A small file for the tests that load it many times: tensors {10, 4100, 3}, 8 samples,
  // 7 rounds, complete windows of 2 snapshots at rounds 0 and 3.
  std::string SmallRecording() {
    RecorderOptions options = Options(path_, 1, 8);
    options.window_length = 2;
    options.window_every = 3;
    SnapshotRecorder recorder(options, {10, 4100, 3});
    for (int step = 1; step <= 7; ++step) recorder.Record(step, Params(step, 4113).data());
    EXPECT_TRUE(recorder.Save().ok());
    EXPECT_EQ(recorder.dataset().windows.size(), 3u);  // the one at round 6 is open
    return ReadBytes(path_);
  }

  absl::Status LoadBytes(const std::string& bytes) {
    WriteBytes(path_, bytes);
    return LoadSnapshotDataset(path_).status();
  }

  std::string dir_ = MakeTempDir("hptrain_mp2_dataset_");
  std::string path_ = dir_ + "/snapshots.bin";
};

TEST_F(SnapshotDatasetTest, SamplesAreDistinctSortedAndOnlyOfPredictedTensors) {
  for (int samples : {1, 64, 4097, 6000, 20000}) {
    SnapshotRecorder recorder(Options(path_, 1, samples), kSizes);
    const SnapshotDataset& d = recorder.dataset();
    ASSERT_EQ(d.tensors.size(), 4u);
    EXPECT_EQ(d.parameters, kParameters);
    int64_t offset = 0, width = 0;
    for (size_t t = 0; t < 4; ++t) {
      const DatasetTensor& tensor = d.tensors[t];
      EXPECT_EQ(tensor.offset, offset);
      EXPECT_EQ(tensor.size, kSizes[t]);
      offset += tensor.size;
      const int64_t expected =
          tensor.size > kMaxDenseElements ? std::min<int64_t>(samples, tensor.size) : 0;
      ASSERT_EQ(static_cast<int64_t>(tensor.sample.size()), expected) << samples << " " << t;
      width += expected;
      for (size_t i = 0; i < tensor.sample.size(); ++i) {
        EXPECT_GE(tensor.sample[i], 0);
        EXPECT_LT(tensor.sample[i], tensor.size);
        if (i > 0) EXPECT_LT(tensor.sample[i - 1], tensor.sample[i]);
      }
    }
    EXPECT_EQ(d.TraceWidth(), width);
  }
  // Drawn from (seed, tensor): the same seed gives the same sample, another seed another, and
  // the two traced tensors differ from each other.
  SnapshotRecorder a(Options(path_, 1), kSizes), b(Options(path_, 1), kSizes);
  RecorderOptions other = Options(path_, 1);
  other.seed = 43;
  SnapshotRecorder c(other, kSizes);
  EXPECT_EQ(a.dataset().tensors[1].sample, b.dataset().tensors[1].sample);
  EXPECT_NE(a.dataset().tensors[1].sample, c.dataset().tensors[1].sample);
  EXPECT_NE(a.dataset().tensors[1].sample, a.dataset().tensors[3].sample);
  // Spread over the tensor rather than bunched at one end.
  const std::vector<int32_t>& s = a.dataset().tensors[3].sample;
  EXPECT_LT(s.front(), 1000);
  EXPECT_GT(s.back(), 8000);
}

TEST_F(SnapshotDatasetTest, RecordsEveryStepTracesAndWindows) {
  SnapshotRecorder recorder(Options(path_, 1), kSizes);
  for (int step = 1; step <= 10; ++step) recorder.Record(step, Params(step).data());
  const SnapshotDataset& d = recorder.dataset();
  EXPECT_EQ(d.rounds, 10);
  ASSERT_EQ(static_cast<int64_t>(d.traces.size()), 10 * d.TraceWidth());
  for (int64_t round = 0; round < 10; ++round) {
    const std::vector<float> p = Params(round + 1);
    int64_t column = 0;
    for (const DatasetTensor& tensor : d.tensors) {
      for (int32_t index : tensor.sample) {
        ASSERT_EQ(d.traces[round * d.TraceWidth() + column], p[tensor.offset + index]);
        ++column;
      }
    }
  }
  // Windows start at recorded rounds 0, 4, 8 and hold 3 consecutive snapshots; the one started
  // at round 8 holds only rounds 8 and 9 so far.
  ASSERT_EQ(d.windows.size(), 3u);
  for (int w = 0; w < 3; ++w) {
    EXPECT_EQ(d.windows[w].first_round, 4 * w);
    ASSERT_EQ(d.windows[w].snapshots.size(), w < 2 ? 3u : 2u);
    for (size_t s = 0; s < d.windows[w].snapshots.size(); ++s) {
      EXPECT_EQ(d.windows[w].snapshots[s], Params(4 * w + s + 1));
    }
  }
}

TEST_F(SnapshotDatasetTest, RecordsEveryOtherStep) {
  SnapshotRecorder recorder(Options(path_, 2), kSizes);
  for (int step = 1; step <= 21; ++step) recorder.Record(step, Params(step).data());
  const SnapshotDataset& d = recorder.dataset();
  EXPECT_EQ(d.every, 2);
  EXPECT_EQ(d.rounds, 10);  // steps 2, 4, ..., 20
  const int64_t width = d.TraceWidth();
  const int32_t index = d.tensors[3].sample[5];
  const int64_t column = static_cast<int64_t>(d.tensors[1].sample.size()) + 5;
  for (int64_t round = 0; round < 10; ++round) {
    EXPECT_EQ(d.traces[round * width + column],
              Params(2 * (round + 1))[d.tensors[3].offset + index]);
  }
  // Windows count recorded rounds, not steps: round 4 is step 10.
  ASSERT_GE(d.windows.size(), 2u);
  EXPECT_EQ(d.windows[1].first_round, 4);
  EXPECT_EQ(d.windows[1].snapshots[0], Params(10));
  EXPECT_EQ(d.windows[1].snapshots[2], Params(14));
}

TEST_F(SnapshotDatasetTest, OverlappingWindowStartsAreSkipped) {
  RecorderOptions options = Options(path_, 1);
  options.window_length = 3;
  options.window_every = 2;
  SnapshotRecorder recorder(options, kSizes);
  for (int step = 1; step <= 9; ++step) recorder.Record(step, Params(step).data());
  // Round 2 falls inside the window 0..2; the next start is round 4, then round 8.
  ASSERT_EQ(recorder.dataset().windows.size(), 3u);
  EXPECT_EQ(recorder.dataset().windows[1].first_round, 4);
  EXPECT_EQ(recorder.dataset().windows[2].first_round, 8);
}

TEST_F(SnapshotDatasetTest, SaveWritesOnlyCompleteWindowsAndLaterRecordsCompleteThem) {
  SnapshotRecorder recorder(Options(path_, 1), kSizes);
  for (int step = 1; step <= 9; ++step) recorder.Record(step, Params(step).data());
  ASSERT_TRUE(recorder.Save().ok());
  auto loaded = LoadSnapshotDataset(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->rounds, 9);
  ASSERT_EQ(loaded->windows.size(), 2u);  // the window at round 8 has 1 of 3 snapshots
  EXPECT_EQ(loaded->traces, recorder.dataset().traces);
  // The open window stays in memory and is completed by the next records.
  ASSERT_EQ(recorder.dataset().windows.size(), 3u);
  recorder.Record(10, Params(10).data());
  recorder.Record(11, Params(11).data());
  ASSERT_TRUE(recorder.Save().ok());
  loaded = LoadSnapshotDataset(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameDataset(*loaded, recorder.dataset());
  ASSERT_EQ(loaded->windows.size(), 3u);
  EXPECT_EQ(loaded->windows[2].snapshots[2], Params(11));
}

TEST_F(SnapshotDatasetTest, RoundTripAndLayout) {
  SnapshotRecorder recorder(Options(path_, 1), kSizes);
  for (int step = 1; step <= 7; ++step) recorder.Record(step, Params(step).data());
  ASSERT_TRUE(recorder.Save().ok());
  const std::string bytes = ReadBytes(path_);
  auto loaded = LoadSnapshotDataset(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // Both windows (rounds 0..2 and 4..6) are complete after 7 rounds: everything is in the file.
  ExpectSameDataset(*loaded, recorder.dataset());

  // The layout of the header comment.
  const FileParts parts = Split(bytes);
  EXPECT_EQ(bytes.substr(0, 8), "HPMP2DAT");
  EXPECT_EQ(parts.version, 1u);
  EXPECT_EQ(parts.header["model"], "lenet5");
  EXPECT_EQ(parts.header["seed"], 42u);
  EXPECT_EQ(parts.header["parameters"], kParameters);
  EXPECT_EQ(parts.header["tensors"][3]["offset"], 5120);
  EXPECT_EQ(parts.header["rounds"], 7);
  EXPECT_EQ(parts.header["windows"], nlohmann::json::array({0, 4}));
  const int64_t width = recorder.dataset().TraceWidth();
  EXPECT_EQ(static_cast<int64_t>(parts.body.size()), 4 * (width + 7 * width + 2 * 3 * kParameters));
  int32_t first_index;
  std::memcpy(&first_index, parts.body.data(), 4);
  EXPECT_EQ(first_index, recorder.dataset().tensors[1].sample[0]);

  // The free function writes the same file, and reads it back the same.
  const std::string copy = dir_ + "/copy.bin";
  ASSERT_TRUE(SaveSnapshotDataset(copy, *loaded).ok());
  EXPECT_EQ(ReadBytes(copy), bytes);
}

TEST_F(SnapshotDatasetTest, EmptyRecordingRoundTrips) {
  SnapshotRecorder recorder(Options(path_, 1), kSizes);
  ASSERT_TRUE(recorder.Save().ok());
  auto loaded = LoadSnapshotDataset(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->parameters, kParameters);
  EXPECT_EQ(loaded->rounds, 0);
  EXPECT_TRUE(loaded->traces.empty());
  EXPECT_TRUE(loaded->windows.empty());
  EXPECT_EQ(loaded->tensors[3].sample, recorder.dataset().tensors[3].sample);

  // A model without parameters records rounds, but no traces and no windows.
  SnapshotRecorder nothing(Options(path_, 1), {});
  const float unused = 0;
  for (int step = 1; step <= 5; ++step) nothing.Record(step, &unused);
  ASSERT_TRUE(nothing.Save().ok());
  loaded = LoadSnapshotDataset(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->parameters, 0);
  EXPECT_EQ(loaded->rounds, 5);
  EXPECT_TRUE(loaded->windows.empty());
}

TEST_F(SnapshotDatasetTest, RefusesTruncations) {
  const std::string bytes = SmallRecording();
  uint32_t header_length;
  std::memcpy(&header_length, bytes.data() + 12, 4);
  const size_t header_end = 16 + header_length;
  std::vector<size_t> cuts;
  for (size_t cut = 0; cut < header_end + 200; cut += 7) cuts.push_back(cut);
  for (size_t cut = header_end + 200; cut < bytes.size(); cut += 4999) cuts.push_back(cut);
  cuts.push_back(bytes.size() - 1);
  for (size_t cut : cuts) {
    const absl::Status status = LoadBytes(bytes.substr(0, cut));
    ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss) << "cut at " << cut;
    EXPECT_THAT(std::string(status.message()), HasSubstr("truncated")) << cut;
    ExpectOneLineNamingFile(status, path_);
  }
  EXPECT_THAT(std::string(LoadBytes(bytes.substr(0, header_end + 10)).message()),
              HasSubstr("the sample indices of tensor 1"));
  EXPECT_THAT(std::string(LoadBytes(bytes.substr(0, bytes.size() - 100)).message()),
              HasSubstr("snapshot 1 of window 1"));
}

TEST_F(SnapshotDatasetTest, RefusesFlippedBytes) {
  const std::string bytes = SmallRecording();
  uint32_t header_length;
  std::memcpy(&header_length, bytes.data() + 12, 4);
  // Densely through the header and the sample indices, sparsely through the values.
  const size_t header_end = 16 + header_length;
  for (size_t at = 12; at < bytes.size(); at += at < header_end + 100 ? 5 : 4999) {
    std::string damaged = bytes;
    damaged[at] ^= 0x04;
    const absl::Status status = LoadBytes(damaged);
    ASSERT_EQ(status.code(), absl::StatusCode::kDataLoss) << "flip at " << at;
    ExpectOneLineNamingFile(status, path_);
  }
  std::string damaged = bytes;
  damaged[bytes.size() - 1000] ^= 0x01;  // a window's value
  EXPECT_THAT(std::string(LoadBytes(damaged).message()), HasSubstr("CRC mismatch"));
}

TEST_F(SnapshotDatasetTest, RefusesForeignFilesAndOtherVersions) {
  absl::Status status = LoadBytes("{\"model\": \"lenet5\"}\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("not an hptrain MP² snapshot dataset file"));
  ExpectOneLineNamingFile(status, path_);
  status = LoadBytes(std::string("HPMP2PRD\x01\0\0\0", 12));  // a predictor's start
  EXPECT_THAT(std::string(status.message()), HasSubstr("not an hptrain MP² snapshot dataset"));

  FileParts parts = Split(Recorded(2, 1));
  parts.version = 7;
  status = LoadBytes(Join(parts));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("version 7"));
  ExpectOneLineNamingFile(status, path_);

  status = LoadSnapshotDataset(dir_ + "/absent.bin").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  ExpectOneLineNamingFile(status, dir_ + "/absent.bin");
}

// Files whose checksum is right but whose header contradicts itself or the data.
TEST_F(SnapshotDatasetTest, RefusesInconsistentFiles) {
  const FileParts good = Split(Recorded(9, 1, 8));
  ASSERT_TRUE(LoadBytes(Join(good)).ok());
  struct Case {
    const char* name;
    std::function<void(FileParts&)> change;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"gap between tensors", [](FileParts& p) { p.header["tensors"][2]["offset"] = 5101; },
       "tensor 2 starts at 5101"},
      {"parameters", [](FileParts& p) { p.header["parameters"] = kParameters + 1; }, "parameters"},
      {"missing seed", [](FileParts& p) { p.header.erase("seed"); }, "\"seed\""},
      {"negative size", [](FileParts& p) { p.header["tensors"][0]["size"] = -1; }, "\"size\""},
      {"text where a number belongs", [](FileParts& p) { p.header["rounds"] = "nine"; },
       "\"rounds\""},
      {"window past the rounds", [](FileParts& p) { p.header["windows"][1] = 7; }, "window 1"},
      {"windows out of order",
       [](FileParts& p) {
         p.header["windows"] = {4, 0};
       },
       "window 1"},
      {"unsorted sample",
       [](FileParts& p) {
         // Swap the first two indices of tensor 1.
         std::string a = p.body.substr(0, 4), b = p.body.substr(4, 4);
         p.body.replace(0, 4, b);
         p.body.replace(4, 4, a);
       },
       "sample index 1 of tensor 1"},
      {"sample past the tensor",
       [](FileParts& p) {
         const int32_t beyond = 5000;
         p.body.replace(28, 4, reinterpret_cast<const char*>(&beyond), 4);  // tensor 1's last
       },
       "sample index 7 of tensor 1"},
      {"more rounds than data", [](FileParts& p) { p.header["rounds"] = 10; }, "truncated"},
      {"fewer rounds than data", [](FileParts& p) { p.header["rounds"] = 8; }, "bytes"},
      {"not JSON", [](FileParts& p) { p.header = "}{"; }, "not a JSON object"},
      {"windows of nothing",
       [](FileParts& p) {
         p.header["tensors"] = nlohmann::json::array();
         p.header["parameters"] = 0;
       },
       "without parameters"},
  };
  for (const Case& c : cases) {
    FileParts parts = good;
    c.change(parts);
    const absl::Status status = LoadBytes(Join(parts));
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.expected)) << c.name;
    ExpectOneLineNamingFile(status, path_);
  }
  // A header that is not JSON text at all.
  std::string bytes = Join(good);
  const size_t length = good.header.dump().size();
  bytes[16] = '@';
  const uint32_t crc = Crc32(bytes, bytes.size() - 4);
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  ASSERT_GT(length, 0u);
  EXPECT_THAT(std::string(LoadBytes(bytes).message()), HasSubstr("not valid JSON"));
}

TEST_F(SnapshotDatasetTest, SaveRefusesInconsistentDatasets) {
  SnapshotRecorder recorder(Options(path_, 1), kSizes);
  for (int step = 1; step <= 5; ++step) recorder.Record(step, Params(step).data());
  SnapshotDataset d = recorder.dataset();
  ASSERT_EQ(d.windows.size(), 2u);
  d.windows.pop_back();  // the open window at round 4 (1 of 3)
  ASSERT_TRUE(SaveSnapshotDataset(path_, d).ok());
  const std::string before = ReadBytes(path_);

  std::vector<SnapshotDataset> bad(5, d);
  bad[0].traces.pop_back();
  bad[1].tensors[1].sample.pop_back();
  bad[2].windows[0].snapshots.pop_back();
  bad[3].tensors[2].offset += 1;
  bad[4].rounds = 2;  // window 0 (rounds 0..2) runs past the rounds
  bad[4].traces.resize(2 * d.TraceWidth());
  for (const SnapshotDataset& dataset : bad) {
    const absl::Status status = SaveSnapshotDataset(path_, dataset);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    ExpectOneLineNamingFile(status, path_);
    EXPECT_EQ(ReadBytes(path_), before);
  }
}

TEST_F(SnapshotDatasetTest, FailedSaveLeavesNoPartialFile) {
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  SnapshotRecorder recorder(Options(path_, 1), kSizes);
  recorder.Record(1, Params(1).data());
  // The temporary file cannot be created (a directory has its name): no file appears at all.
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);
  absl::Status status = recorder.Save();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(path_));
  EXPECT_FALSE(Exists(path_));
  ASSERT_EQ(::rmdir(tmp.c_str()), 0);

  // With a saved file in place, a failed save keeps it whole.
  ASSERT_TRUE(recorder.Save().ok());
  const std::string before = ReadBytes(path_);
  recorder.Record(2, Params(2).data());
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);
  EXPECT_FALSE(recorder.Save().ok());
  EXPECT_EQ(ReadBytes(path_), before);
  ASSERT_EQ(::rmdir(tmp.c_str()), 0);
  EXPECT_TRUE(LoadSnapshotDataset(path_).ok());

  // A directory that does not exist.
  SnapshotRecorder elsewhere(Options(dir_ + "/missing/snapshots.bin", 1), kSizes);
  status = elsewhere.Save();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Exists(dir_ + "/missing"));
}

}  // namespace
}  // namespace hptrain::ps::mp2::testing
