// The MP² predictor: its file (round trip, every refusal as one line naming the file), its
// inference against a plain double-precision reference of the torch modules, the determinism
// that mode B relies on, and the normalisation it reads (normalize.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/splitmix64.h"
#include "runtime/ps/mp2/normalize.h"
#include "runtime/ps/mp2/predictor.h"
#include "tests/runtime/ps/mp2_test_files.h"

namespace hptrain::ps::mp2::testing {
namespace {

using ::testing::HasSubstr;

// Weights uniform in ±amplitude/sqrt(fan-in), so that activations neither vanish nor saturate.
Predictor RandomPredictor(int K, int C, int r, uint64_t seed, double amplitude = 1.5) {
  Predictor predictor = EmptyPredictor(K, C, r);
  predictor.metadata = R"({"source":"test"})";
  SplitMix64 rng(seed);
  for (PredictorTensor& tensor : predictor.tensors) {
    const int64_t fan_in = tensor.shape.size() == 1 ? 1 : tensor.values.size() / tensor.shape[0];
    const double scale = amplitude / std::sqrt(static_cast<double>(fan_in));
    for (float& v : tensor.values) v = static_cast<float>(rng.Symmetric() * scale);
  }
  return predictor;
}

void ExpectSamePredictor(const Predictor& a, const Predictor& b) {
  EXPECT_EQ(a.history, b.history);
  EXPECT_EQ(a.channels, b.channels);
  EXPECT_EQ(a.reduction, b.reduction);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    EXPECT_EQ(a.tensors[t].name, b.tensors[t].name);
    EXPECT_EQ(a.tensors[t].shape, b.tensors[t].shape);
    ASSERT_EQ(a.tensors[t].values.size(), b.tensors[t].values.size());
    EXPECT_EQ(0, std::memcmp(a.tensors[t].values.data(), b.tensors[t].values.data(),
                             a.tensors[t].values.size() * sizeof(float)))
        << a.tensors[t].name;
  }
}

// The file format written independently of the library, from the header's description, so that
// the tests can build files the library would never write (wrong shapes, names, counts).

std::string EncodeFile(uint32_t version, uint32_t K, uint32_t C, uint32_t r,
                       const std::string& metadata, const std::vector<PredictorTensor>& tensors) {
  std::string out = "HPMP2PRD";
  PutU32(out, version);
  PutU32(out, K);
  PutU32(out, C);
  PutU32(out, r);
  PutU32(out, static_cast<uint32_t>(metadata.size()));
  out += metadata;
  PutU32(out, static_cast<uint32_t>(tensors.size()));
  for (const PredictorTensor& t : tensors) {
    PutU32(out, static_cast<uint32_t>(t.name.size()));
    out += t.name;
    PutU32(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) PutU32(out, static_cast<uint32_t>(d));
    out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
  }
  PutU32(out, Crc32(out, out.size()));
  return out;
}

std::string Encode(const Predictor& p) {
  return EncodeFile(1, p.history, p.channels, p.reduction, p.metadata, p.tensors);
}

class PredictorFileTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_ = MakeTempDir("hptrain_mp2_predictor_");
  std::string path_ = dir_ + "/predictor.bin";
};

TEST_F(PredictorFileTest, ShapesFollowTheTorchModules) {
  const auto shapes = PredictorShapes(5, 32, 4);
  ASSERT_EQ(shapes.size(), 16u);
  EXPECT_EQ(shapes[0].first, "conv1.weight");
  EXPECT_EQ(shapes[0].second, (std::vector<int64_t>{32, 2, 3}));
  EXPECT_EQ(shapes[2].first, "se1.fc_a.weight");
  EXPECT_EQ(shapes[2].second, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(shapes[4].second, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(shapes[6].first, "conv2.weight");
  EXPECT_EQ(shapes[6].second, (std::vector<int64_t>{32, 32, 3}));
  EXPECT_EQ(shapes[11].first, "se2.fc_b.bias");
  EXPECT_EQ(shapes[12].first, "fc1.weight");
  EXPECT_EQ(shapes[12].second, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shapes[14].second, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(shapes[15].first, "fc2.bias");
  EXPECT_EQ(shapes[15].second, (std::vector<int64_t>{1}));
  EXPECT_TRUE(ValidatePredictor(EmptyPredictor(5, 32, 4)).ok());
}

TEST_F(PredictorFileTest, ValidateRefusesBadArchitecturesAndTensors) {
  EXPECT_EQ(ValidatePredictor(EmptyPredictor(1, 8, 2)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePredictor(EmptyPredictor(5, 8, 3)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePredictor(EmptyPredictor(5, 0, 1)).code(), absl::StatusCode::kInvalidArgument);
  Predictor short_values = EmptyPredictor(5, 8, 2);
  short_values.tensors[6].values.pop_back();
  EXPECT_THAT(std::string(ValidatePredictor(short_values).message()), HasSubstr("conv2.weight"));
  Predictor renamed = EmptyPredictor(5, 8, 2);
  renamed.tensors[1].name = "conv1.b";
  EXPECT_EQ(ValidatePredictor(renamed).code(), absl::StatusCode::kInvalidArgument);
  Predictor missing = EmptyPredictor(5, 8, 2);
  missing.tensors.pop_back();
  EXPECT_EQ(ValidatePredictor(missing).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PredictorFileTest, RoundTripIsBitExactAndMatchesTheDocumentedFormat) {
  Predictor predictor = RandomPredictor(5, 8, 2, 7);
  predictor.tensors[3].values[0] = -0.0f;
  predictor.tensors[3].values[1] = 1e-40f;  // subnormal
  ASSERT_TRUE(SavePredictor(path_, predictor).ok());
  EXPECT_EQ(ReadBytes(path_), Encode(predictor));
  auto loaded = LoadPredictor(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSamePredictor(predictor, *loaded);
  EXPECT_TRUE(std::signbit(loaded->tensors[3].values[0]));
}

TEST_F(PredictorFileTest, MissingFileIsNotFound) {
  auto loaded = LoadPredictor(dir_ + "/absent.bin");
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  ExpectOneLineNamingFile(loaded.status(), dir_ + "/absent.bin");
}

TEST_F(PredictorFileTest, RefusesTruncations) {
  const std::string bytes = Encode(RandomPredictor(3, 2, 1, 11));
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    WriteBytes(path_, bytes.substr(0, cut));
    auto loaded = LoadPredictor(path_);
    ASSERT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << "cut at " << cut;
    EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("truncated")) << cut;
    ExpectOneLineNamingFile(loaded.status(), path_);
  }
}

TEST_F(PredictorFileTest, TruncationNamesTheSection) {
  const Predictor predictor = RandomPredictor(5, 8, 2, 3);
  const std::string bytes = Encode(predictor);
  WriteBytes(path_, bytes.substr(0, bytes.size() - 40));
  EXPECT_THAT(std::string(LoadPredictor(path_).status().message()),
              HasSubstr("the values of tensor 14 (fc2.weight)"));
  WriteBytes(path_, bytes.substr(0, bytes.size() - 2));
  EXPECT_THAT(std::string(LoadPredictor(path_).status().message()), HasSubstr("the CRC"));
  WriteBytes(path_, bytes.substr(0, 20));
  EXPECT_THAT(std::string(LoadPredictor(path_).status().message()), HasSubstr("the header"));
}

TEST_F(PredictorFileTest, RefusesFlippedBytes) {
  const std::string bytes = Encode(RandomPredictor(3, 2, 1, 5));
  for (size_t at = 0; at < bytes.size(); at += 3) {
    std::string damaged = bytes;
    damaged[at] ^= 0x20;
    WriteBytes(path_, damaged);
    auto loaded = LoadPredictor(path_);
    ASSERT_FALSE(loaded.ok()) << "flip at " << at;
    ExpectOneLineNamingFile(loaded.status(), path_);
    // Past the magic and the version every damage is data loss.
    if (at >= 12) EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << at;
  }
  std::string damaged = bytes;
  damaged[bytes.size() - 6] ^= 0x01;  // inside fc2.bias's value
  WriteBytes(path_, damaged);
  EXPECT_THAT(std::string(LoadPredictor(path_).status().message()), HasSubstr("CRC mismatch"));
}

TEST_F(PredictorFileTest, RefusesAForeignFile) {
  WriteBytes(path_, "model: resnet18\nlr: 0.1\n");
  auto loaded = LoadPredictor(path_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("not an hptrain MP² predictor file"));
  ExpectOneLineNamingFile(loaded.status(), path_);
  WriteBytes(path_, std::string("HPMP2DAT\x01\0\0\0", 12));  // a snapshot dataset's start
  EXPECT_THAT(std::string(LoadPredictor(path_).status().message()),
              HasSubstr("not an hptrain MP² predictor file"));
}

TEST_F(PredictorFileTest, RefusesAnUnsupportedVersion) {
  const Predictor p = RandomPredictor(5, 4, 2, 1);
  WriteBytes(path_, EncodeFile(2, 5, 4, 2, p.metadata, p.tensors));
  auto loaded = LoadPredictor(path_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("version 2"));
  ExpectOneLineNamingFile(loaded.status(), path_);
}

TEST_F(PredictorFileTest, RefusesTensorsOfAnotherArchitecture) {
  // The header says C = 8, the tensors are those of C = 4.
  const Predictor c4 = RandomPredictor(5, 4, 2, 1);
  WriteBytes(path_, EncodeFile(1, 5, 8, 2, c4.metadata, c4.tensors));
  auto loaded = LoadPredictor(path_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("conv1.weight"));
  ExpectOneLineNamingFile(loaded.status(), path_);
  // r = 4 instead of 2: the squeeze-excitation layers disagree first.
  WriteBytes(path_, EncodeFile(1, 5, 4, 4, c4.metadata, c4.tensors));
  EXPECT_THAT(std::string(LoadPredictor(path_).status().message()), HasSubstr("se1.fc_a.weight"));
  // K = 7 instead of 5: fc1 reads 3 pooled positions, not 2.
  WriteBytes(path_, EncodeFile(1, 7, 4, 2, c4.metadata, c4.tensors));
  EXPECT_THAT(std::string(LoadPredictor(path_).status().message()), HasSubstr("fc1.weight"));
  // An architecture that cannot exist.
  WriteBytes(path_, EncodeFile(1, 5, 6, 4, c4.metadata, c4.tensors));
  EXPECT_EQ(LoadPredictor(path_).status().code(), absl::StatusCode::kInvalidArgument);
  // K = 4 has the same shapes as K = 5: the file loads, and says K = 4, for the caller to check
  // against the history it runs with (PredictorRunner::history()).
  WriteBytes(path_, EncodeFile(1, 4, 4, 2, c4.metadata, c4.tensors));
  auto k4 = LoadPredictor(path_);
  ASSERT_TRUE(k4.ok()) << k4.status();
  EXPECT_EQ(PredictorRunner(*k4).history(), 4);
}

TEST_F(PredictorFileTest, RefusesATensorOfTheWrongShapeOrName) {
  const Predictor p = RandomPredictor(5, 4, 2, 1);
  std::vector<PredictorTensor> tensors = p.tensors;
  tensors[14].shape = {4, 1};  // fc2.weight transposed: same count, wrong shape
  WriteBytes(path_, EncodeFile(1, 5, 4, 2, p.metadata, tensors));
  auto loaded = LoadPredictor(path_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("fc2.weight [4,1]"));
  ExpectOneLineNamingFile(loaded.status(), path_);

  tensors = p.tensors;
  std::swap(tensors[0].name, tensors[1].name);
  WriteBytes(path_, EncodeFile(1, 5, 4, 2, p.metadata, tensors));
  EXPECT_EQ(LoadPredictor(path_).status().code(), absl::StatusCode::kInvalidArgument);

  tensors = p.tensors;
  tensors.push_back(tensors.back());
  WriteBytes(path_, EncodeFile(1, 5, 4, 2, p.metadata, tensors));
  loaded = LoadPredictor(path_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("17 tensors"));
}

TEST_F(PredictorFileTest, FailedSaveLeavesTheExistingFile) {
  const Predictor old_predictor = RandomPredictor(5, 4, 2, 1);
  ASSERT_TRUE(SavePredictor(path_, old_predictor).ok());
  const std::string before = ReadBytes(path_);

  // An invalid predictor is refused before anything is written.
  Predictor invalid = RandomPredictor(5, 4, 2, 2);
  invalid.tensors[2].values.resize(3);
  absl::Status status = SavePredictor(path_, invalid);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path_));
  EXPECT_EQ(ReadBytes(path_), before);

  // A write that fails midway (the temporary file cannot be created: a directory has its name).
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);
  status = SavePredictor(path_, RandomPredictor(5, 4, 2, 3));
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(ReadBytes(path_), before);
  ::rmdir(tmp.c_str());
  auto loaded = LoadPredictor(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSamePredictor(old_predictor, *loaded);
}

// ---- Inference ------------------------------------------------------------------------------

// A plain transcription of the torch modules in double precision: the oracle for the kernel.
double ReferenceForward(const Predictor& p, const float* values, const float* diffs) {
  const int K = p.history, C = p.channels, R = C / p.reduction, P = K / 2;
  auto W = [&](int t) { return p.tensors[t].values.data(); };
  using Matrix = std::vector<std::vector<double>>;
  Matrix in(2, std::vector<double>(K));
  for (int k = 0; k < K; ++k) {
    in[0][k] = values[k];
    in[1][k] = diffs[k];
  }
  auto conv_relu = [&](const Matrix& x, const float* w, const float* b) {
    const int channels_in = static_cast<int>(x.size());
    Matrix y(C, std::vector<double>(K));
    for (int o = 0; o < C; ++o) {
      for (int q = 0; q < K; ++q) {
        double s = b[o];
        for (int i = 0; i < channels_in; ++i) {
          for (int j = 0; j < 3; ++j) {
            const int at = q + j - 1;
            if (at >= 0 && at < K) s += double(w[(o * channels_in + i) * 3 + j]) * x[i][at];
          }
        }
        y[o][q] = std::max(s, 0.0);
      }
    }
    return y;
  };
  auto se = [&](Matrix& x, int first) {
    std::vector<double> squeeze(C), hidden(R);
    for (int c = 0; c < C; ++c) {
      for (int q = 0; q < K; ++q) squeeze[c] += x[c][q] / K;
    }
    for (int j = 0; j < R; ++j) {
      double s = W(first + 1)[j];
      for (int c = 0; c < C; ++c) s += double(W(first)[j * C + c]) * squeeze[c];
      hidden[j] = std::max(s, 0.0);
    }
    for (int c = 0; c < C; ++c) {
      double s = W(first + 3)[c];
      for (int j = 0; j < R; ++j) s += double(W(first + 2)[c * R + j]) * hidden[j];
      const double gate = 1.0 / (1.0 + std::exp(-s));
      for (int q = 0; q < K; ++q) x[c][q] *= gate;
    }
  };
  Matrix a = conv_relu(in, W(0), W(1));
  se(a, 2);
  Matrix b = conv_relu(a, W(6), W(7));
  se(b, 8);
  std::vector<double> flat;
  for (int c = 0; c < C; ++c) {
    for (int q = 0; q < P; ++q) flat.push_back(std::max(b[c][2 * q], b[c][2 * q + 1]));
  }
  std::vector<double> hidden(C);
  for (int o = 0; o < C; ++o) {
    double s = W(13)[o];
    for (int f = 0; f < C * P; ++f) s += double(W(12)[o * C * P + f]) * flat[f];
    hidden[o] = std::max(s, 0.0);
  }
  double y = W(15)[0];
  for (int c = 0; c < C; ++c) y += double(W(14)[c]) * hidden[c];
  return std::tanh(y);
}

// n histories of K values: a slow drift plus noise around a per-element level, as parameters
// move during training.
std::vector<float> RandomHistories(int64_t n, int K, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> h(n * K);
  for (int64_t e = 0; e < n; ++e) {
    const double level = rng.Symmetric();
    const double drift = 0.01 * rng.Symmetric();
    for (int k = 0; k < K; ++k) {
      h[e * K + k] = static_cast<float>(level + drift * k + 0.003 * rng.Symmetric());
    }
  }
  return h;
}

struct Architecture {
  int K, C, r;
};

class PredictorRunnerTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(PredictorRunnerTest, ForwardMatchesTheReference) {
  const auto [K, C, r] = GetParam();
  const Predictor predictor = RandomPredictor(K, C, r, 100 + K * 31 + C);
  const PredictorRunner runner(predictor);
  EXPECT_EQ(runner.history(), K);
  SplitMix64 rng(9);
  double largest = 0;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> values(K), diffs(K);
    for (int k = 0; k < K; ++k) values[k] = static_cast<float>(rng.Symmetric() * 0.5);
    diffs[0] = 0;
    for (int k = 1; k < K; ++k) diffs[k] = values[k] - values[k - 1];
    const double expected = ReferenceForward(predictor, values.data(), diffs.data());
    largest = std::max(largest, std::abs(expected));
    EXPECT_NEAR(runner.Forward(values.data(), diffs.data()), expected, 1e-5) << trial;
  }
  // The weights are large enough for the comparison to mean something.
  EXPECT_GT(largest, 0.05);
}

TEST_P(PredictorRunnerTest, PredictMatchesTheReferenceAndForward) {
  const auto [K, C, r] = GetParam();
  const Predictor predictor = RandomPredictor(K, C, r, 200 + K + C);
  const PredictorRunner runner(predictor);
  const int64_t n = 53;
  const std::vector<float> h = RandomHistories(n, K, 4);
  std::vector<float> out(n);
  runner.Predict(h.data(), n, out.data());
  std::vector<float> values(K), diffs(K);
  for (int64_t e = 0; e < n; ++e) {
    const Normalisation norm = Normalise(h.data() + e * K, 1, K, values.data(), diffs.data());
    const double change = ReferenceForward(predictor, values.data(), diffs.data());
    EXPECT_NEAR(out[e], h[e * K + K - 1] + change * norm.scale, 1e-5 * norm.scale + 1e-7) << e;
    // The same float operations as Forward on the normalised input, bit for bit.
    const float exact = h[e * K + K - 1] + runner.Forward(values.data(), diffs.data()) * norm.scale;
    EXPECT_EQ(out[e], exact) << e;
  }
}

TEST_P(PredictorRunnerTest, PredictIsIndependentOfBatchingAndThreads) {
  const auto [K, C, r] = GetParam();
  const PredictorRunner runner(RandomPredictor(K, C, r, 300 + C));
  const int64_t n = 437;  // not a multiple of any block size
  const std::vector<float> h = RandomHistories(n, K, 5);
  std::vector<float> batched(n), threaded(n), single(n), pieces(n);
  runner.Predict(h.data(), n, batched.data(), 1);
  runner.Predict(h.data(), n, threaded.data(), 3);
  for (int64_t e = 0; e < n; ++e) runner.Predict(h.data() + e * K, 1, single.data() + e, 1);
  // Uneven pieces, so every element sits in another lane of another block.
  for (int64_t e = 0, len = 1; e < n; e += len, len = len % 23 + 5) {
    const int64_t m = std::min(len, n - e);
    runner.Predict(h.data() + e * K, m, pieces.data() + e, 2);
  }
  EXPECT_EQ(0, std::memcmp(batched.data(), threaded.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(batched.data(), single.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(batched.data(), pieces.data(), n * sizeof(float)));
  // More threads than elements, and nothing at all.
  std::vector<float> few(3);
  runner.Predict(h.data(), 3, few.data(), 16);
  EXPECT_EQ(0, std::memcmp(batched.data(), few.data(), 3 * sizeof(float)));
  runner.Predict(h.data(), 0, nullptr, 4);
}

TEST_P(PredictorRunnerTest, ConstantHistoryPredictsTheConstant) {
  const auto [K, C, r] = GetParam();
  const PredictorRunner runner(RandomPredictor(K, C, r, 400, /*amplitude=*/3.0));
  for (float level : {0.0f, 1.0f, -0.25f, 3.5e-3f, -7.75f, 1e-7f}) {
    const std::vector<float> h(5 * K, level);
    std::vector<float> out(5);
    runner.Predict(h.data(), 5, out.data());
    for (float v : out) EXPECT_NEAR(v, level, 1e-6) << level;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, PredictorRunnerTest,
                         ::testing::Values(Architecture{5, 32, 4}, Architecture{5, 8, 4},
                                           Architecture{2, 3, 3}, Architecture{4, 6, 2},
                                           Architecture{7, 5, 1}),
                         [](const ::testing::TestParamInfo<Architecture>& info) {
                           return "K" + std::to_string(info.param.K) + "C" +
                                  std::to_string(info.param.C) + "r" + std::to_string(info.param.r);
                         });

// ---- Normalisation (normalize.h) -------------------------------------------------------------

TEST(NormaliseTest, DenormaliseInvertsNormalise) {
  SplitMix64 rng(17);
  for (int trial = 0; trial < 1000; ++trial) {
    const int K = 2 + trial % 7;
    const double magnitude = std::pow(10.0, trial % 9 - 4);
    std::vector<float> x(K), values(K), diffs(K);
    float largest = 0;
    for (int k = 0; k < K; ++k) {
      x[k] =
          static_cast<float>(magnitude * (1.0 + 0.1 * rng.Symmetric()) * (trial % 2 == 0 ? 1 : -1));
      largest = std::max(largest, std::abs(x[k]));
    }
    const Normalisation norm = Normalise(x.data(), 1, K, values.data(), diffs.data());
    EXPECT_EQ(values[0], 0.0f);
    EXPECT_EQ(diffs[0], 0.0f);
    for (int k = 0; k < K; ++k) {
      EXPECT_LE(std::abs(values[k]), 0.5f + 1e-6f);
      EXPECT_NEAR(Denormalise(norm, values[k]), x[k], 1e-6 * largest) << trial << " " << k;
      if (k > 0) EXPECT_EQ(diffs[k], values[k] - values[k - 1]);
    }
  }
}

TEST(NormaliseTest, StrideReadsEveryStrideth) {
  const float x[] = {1, 100, 2, 100, 4, 100};
  float values[3], diffs[3];
  const Normalisation norm = Normalise(x, 2, 3, values, diffs);
  EXPECT_EQ(norm.first, 1.0f);
  EXPECT_FLOAT_EQ(norm.scale, 6.0f);
  EXPECT_FLOAT_EQ(values[2], 0.5f);
  EXPECT_FLOAT_EQ(diffs[2], 2.0f / 6.0f);
}

TEST(NormaliseTest, ConstantSequencesGiveFiniteZeros) {
  for (float level : {0.0f, 1.0f, -3.0f, 1e-30f, 6e4f}) {
    const std::vector<float> x(5, level);
    float values[5], diffs[5];
    const Normalisation norm = Normalise(x.data(), 1, 5, values, diffs);
    EXPECT_EQ(norm.scale, kNormalisationEpsilon);
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(values[k], 0.0f);
      EXPECT_EQ(diffs[k], 0.0f);
    }
    EXPECT_EQ(Denormalise(norm, 0.0f), level);
  }
}

}  // namespace
}  // namespace hptrain::ps::mp2::testing
