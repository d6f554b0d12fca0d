// The MP² predictor: its architecture, its file, and its inference kernel.
//
// The kernel evaluates kBlock elements at once, with every activation stored as
// [channel][position][lane]: each weight is broadcast across the lanes and the innermost dimension
// is the lanes, in fixed-size vectors. Every element goes through the same instructions whatever
// its lane and however many elements a call holds (a partial block is padded with constant
// histories), so its result depends only on its own history and the weights.
#include "runtime/ps/mp2/predictor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/framed_file.h"
#include "runtime/ps/mp2/normalize.h"

namespace hptrain::ps::mp2 {
namespace {

constexpr FramedFormat kFormat = {"HPMP2PRD", 1, "predictor", "predictor file"};
// Bounds that keep every size of a plausible predictor far from overflow; a header beyond them
// is corrupt or foreign rather than a real network.
constexpr int kMaxHistory = 1024;
constexpr int kMaxChannels = 4096;

// Indices into PredictorRunner::w_, in the order of PredictorShapes.
// clang-format off
enum Weight {
  kConv1W, kConv1B, kSe1AW, kSe1AB, kSe1BW, kSe1BB, kConv2W, kConv2B,
  kSe2AW, kSe2AB, kSe2BW, kSe2BB, kFc1W, kFc1B, kFc2W, kFc2B,
};
// clang-format on

// A name read from a file, fit for a one-line message even when the file is damaged.
std::string Printable(const std::string& name) {
  constexpr size_t kLongest = 64;
  std::string shown = absl::CHexEscape(name.substr(0, kLongest));
  return name.size() > kLongest ? shown + "..." : shown;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status ValidateArchitecture(int history, int channels, int reduction) {
  if (history < 2 || history > kMaxHistory) {
    return absl::InvalidArgumentError(
        absl::StrCat("history K = ", history, " is outside [2, ", kMaxHistory, "]"));
  }
  if (channels < 1 || channels > kMaxChannels) {
    return absl::InvalidArgumentError(
        absl::StrCat("channels C = ", channels, " is outside [1, ", kMaxChannels, "]"));
  }
  if (reduction < 1 || channels % reduction != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduction r = ", reduction, " does not divide channels C = ", channels));
  }
  return absl::OkStatus();
}

// Parses everything after the version. Returns OK with `predictor` filled, or the first problem:
// a truncation (reader.truncated_in() set), a structural error (DataLoss) or a disagreement with
// the declared architecture (InvalidArgument). Parsing goes on past a disagreement so that a
// truncation later in the file is still found; the first disagreement is reported.
absl::Status Parse(FramedReader& reader, Predictor& predictor) {
  uint32_t k, c, r, metadata_length;
  if (!reader.U32("the header", &k) || !reader.U32("the header", &c) ||
      !reader.U32("the header", &r) || !reader.U32("the header", &metadata_length)) {
    return absl::DataLossError("");
  }
  // The values are compared as u32 first so that a huge one does not wrap to a plausible int.
  absl::Status architecture =
      k > kMaxHistory || c > kMaxChannels || r > kMaxChannels
          ? absl::InvalidArgumentError(
                absl::StrCat("implausible architecture K = ", k, ", C = ", c, ", r = ", r))
          : ValidateArchitecture(static_cast<int>(k), static_cast<int>(c), static_cast<int>(r));
  if (!architecture.ok()) return architecture;  // no expected shapes to compare with
  predictor.history = static_cast<int>(k);
  predictor.channels = static_cast<int>(c);
  predictor.reduction = static_cast<int>(r);
  const char* bytes;
  if (!reader.Bytes(metadata_length, "the metadata", &bytes)) return absl::DataLossError("");
  predictor.metadata.assign(bytes, metadata_length);

  const auto expected = PredictorShapes(predictor.history, predictor.channels, predictor.reduction);
  uint32_t count;
  if (!reader.U32("the tensor count", &count)) return absl::DataLossError("");
  absl::Status mismatch;
  if (count != expected.size()) {
    mismatch = absl::InvalidArgumentError(
        absl::StrCat("the file holds ", count, " tensors, the architecture has ", expected.size()));
  }
  for (uint32_t t = 0; t < count; ++t) {
    const std::string section = absl::StrCat("tensor ", t);
    PredictorTensor tensor;
    uint32_t name_length, rank;
    if (!reader.U32(section, &name_length) || !reader.Bytes(name_length, section, &bytes)) {
      return absl::DataLossError("");
    }
    tensor.name.assign(bytes, name_length);
    const std::string named = absl::StrCat(section, " (", Printable(tensor.name), ")");
    if (!reader.U32(named, &rank)) return absl::DataLossError("");
    // Every dimension takes 4 bytes: a rank beyond what is left is a cut (or corrupt) file.
    if (rank > reader.remaining() / 4) {
      reader.Cut(named);
      return absl::DataLossError("");
    }
    uint64_t elements = 1;
    bool too_many = false;
    const uint64_t room = reader.remaining() / sizeof(float);
    for (uint32_t d = 0; d < rank; ++d) {
      uint32_t dim;
      reader.U32(named, &dim);
      tensor.shape.push_back(dim);
      if (dim == 0) elements = 0;
      if (elements != 0 && !too_many) {
        too_many = dim > room / elements;
        elements *= too_many ? 1 : dim;
      }
    }
    const std::string values_section = absl::StrCat("the values of ", named);
    if (too_many) {
      reader.Cut(values_section);
      return absl::DataLossError("");
    }
    if (!reader.Array(elements, values_section, &tensor.values)) return absl::DataLossError("");
    // (A count mismatch is already recorded, so t is within `expected` here.)
    if (mismatch.ok() && (tensor.name != expected[t].first || tensor.shape != expected[t].second)) {
      mismatch = absl::InvalidArgumentError(
          absl::StrCat(named, " is ", Printable(tensor.name), " ", ShapeText(tensor.shape),
                       ", the architecture (K = ", k, ", C = ", c, ", r = ", r, ") expects ",
                       expected[t].first, " ", ShapeText(expected[t].second)));
    }
    predictor.tensors.push_back(std::move(tensor));
  }
  HPTRAIN_RETURN_IF_ERROR(reader.End());
  return mismatch;
}

// ---- Inference kernel ---------------------------------------------------------------------------

// Elements per block. The lanes travel in four-float vectors (the GCC/Clang vector extension:
// SSE on x86-64, NEON on AArch64, plain code elsewhere), kParts of them per block, so the vector
// code does not depend on the auto-vectoriser's judgement. Lane b of every vector is element b:
// each lane sees exactly the same operations in the same order. The small fixed loops over parts
// and outputs are unrolled explicitly so that their accumulators live in registers at -O2 too.
constexpr int kBlock = 16;
constexpr int kParts = kBlock / 4;
typedef float F4 __attribute__((vector_size(16)));
// The same vector read from or written to any float address (no alignment or aliasing promise).
typedef float F4Unaligned __attribute__((vector_size(16), aligned(4), may_alias));

#define HPTRAIN_UNROLL _Pragma("GCC unroll 8")

inline F4 Load(const float* p) { return *reinterpret_cast<const F4Unaligned*>(p); }
inline void Store(float* p, F4 v) { *reinterpret_cast<F4Unaligned*>(p) = v; }
inline F4 Broadcast(float x) { return F4{x, x, x, x}; }
inline F4 Relu(F4 v) { return v > F4{} ? v : F4{}; }

// Conv1d(k = 3, pad = 1) + ReLU at position p for kOut consecutive output channels at once, on
// [channel][K][lane] buffers: their accumulators are independent chains, which hides the adder's
// latency, and they share every input load. The edges are separate instantiations, so the loop
// carries no bounds tests. Each output's sum runs bias, then input channel by channel, taps left
// to right.
template <int kOut, bool kHasLeft, bool kHasRight>
inline void ConvAt(const float* in, int in_channels, int K, int p, const float* w,
                   const float* bias, float* out) {
  const int64_t w_stride = 3 * static_cast<int64_t>(in_channels);
  F4 acc[kOut][kParts];
  HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) {
    HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) acc[k][j] = Broadcast(bias[k]);
  }
  for (int i = 0; i < in_channels; ++i) {
    const float* x = in + (static_cast<int64_t>(i) * K + p) * kBlock;
    HPTRAIN_UNROLL for (int tap = kHasLeft ? 0 : 1; tap < (kHasRight ? 3 : 2); ++tap) {
      F4 weight[kOut];
      HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) {
        weight[k] = Broadcast(w[k * w_stride + 3 * i + tap]);
      }
      HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) {
        const F4 v = Load(x + (tap - 1) * kBlock + 4 * j);
        HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) acc[k][j] += weight[k] * v;
      }
    }
  }
  HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) {
    float* y = out + (k * static_cast<int64_t>(K) + p) * kBlock;
    HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) Store(y + 4 * j, Relu(acc[k][j]));
  }
}

template <int kOut>
void ConvOutputs(const float* in, int in_channels, int K, const float* w, const float* bias,
                 float* out) {
  ConvAt<kOut, false, true>(in, in_channels, K, 0, w, bias, out);
  for (int p = 1; p + 1 < K; ++p) ConvAt<kOut, true, true>(in, in_channels, K, p, w, bias, out);
  ConvAt<kOut, true, false>(in, in_channels, K, K - 1, w, bias, out);
}

// Output channels go in pairs (two accumulators of four vectors use half of SSE's sixteen
// registers, leaving room for the loads), and an odd last one alone.
void ConvRelu(const float* in, int in_channels, int out_channels, int K, const float* weight,
              const float* bias, float* out) {
  const int64_t w_stride = 3 * static_cast<int64_t>(in_channels);
  const int64_t out_stride = static_cast<int64_t>(K) * kBlock;
  int o = 0;
  for (; o + 2 <= out_channels; o += 2) {
    ConvOutputs<2>(in, in_channels, K, weight + o * w_stride, bias + o, out + o * out_stride);
  }
  if (o < out_channels) {
    ConvOutputs<1>(in, in_channels, K, weight + o * w_stride, bias + o, out + o * out_stride);
  }
}

// y[o] = bias[o] + Σ_i w[o][i]·x[i] (then ReLU when asked) for kOut consecutive outputs, over
// [feature][lane] buffers; the sum runs bias, then inputs in order.
template <int kOut>
inline void LinearOutputs(const float* x, int in, const float* w, const float* bias, bool relu,
                          float* y) {
  F4 acc[kOut][kParts];
  HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) {
    HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) acc[k][j] = Broadcast(bias[k]);
  }
  for (int i = 0; i < in; ++i) {
    F4 weight[kOut];
    HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) {
      weight[k] = Broadcast(w[k * static_cast<int64_t>(in) + i]);
    }
    HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) {
      const F4 v = Load(x + static_cast<int64_t>(i) * kBlock + 4 * j);
      HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) acc[k][j] += weight[k] * v;
    }
  }
  HPTRAIN_UNROLL for (int k = 0; k < kOut; ++k) {
    HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) {
      Store(y + k * kBlock + 4 * j, relu ? Relu(acc[k][j]) : acc[k][j]);
    }
  }
}

void Linear(const float* x, int in, int out, const float* weight, const float* bias, bool relu,
            float* y) {
  int o = 0;
  for (; o + 2 <= out; o += 2) {
    LinearOutputs<2>(x, in, weight + static_cast<int64_t>(o) * in, bias + o, relu,
                     y + static_cast<int64_t>(o) * kBlock);
  }
  if (o < out) {
    LinearOutputs<1>(x, in, weight + static_cast<int64_t>(o) * in, bias + o, relu,
                     y + static_cast<int64_t>(o) * kBlock);
  }
}

// Per-thread buffers for one block, all [feature][lane]. Allocated once per Predict call and
// thread, never per element.
struct BlockScratch {
  BlockScratch(int K, int C, int reduced)
      : input(2 * K * kBlock),
        act(static_cast<size_t>(C) * K * kBlock),
        act2(static_cast<size_t>(C) * K * kBlock),
        squeeze(static_cast<size_t>(C) * kBlock),
        hidden(static_cast<size_t>(reduced) * kBlock),
        gate(static_cast<size_t>(C) * kBlock),
        pooled(static_cast<size_t>(C) * (K / 2) * kBlock),
        fc(static_cast<size_t>(C) * kBlock),
        out(kBlock),
        history(static_cast<size_t>(K) * kBlock),
        values(K),
        diffs(K) {}
  std::vector<float> input, act, act2, squeeze, hidden, gate, pooled, fc, out;
  std::vector<float> history, values, diffs;
};

// SE(C, r) in place on act [C][K][lane].
void SqueezeExcite(float* act, int C, int reduced, int K, const float* const* w, int first,
                   BlockScratch& s) {
  const F4 length = Broadcast(static_cast<float>(K));
  for (int c = 0; c < C; ++c) {
    const float* x = act + static_cast<int64_t>(c) * K * kBlock;
    HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) {
      F4 sum = Load(x + 4 * j);
      for (int p = 1; p < K; ++p) sum += Load(x + p * kBlock + 4 * j);
      Store(s.squeeze.data() + static_cast<int64_t>(c) * kBlock + 4 * j, sum / length);
    }
  }
  Linear(s.squeeze.data(), C, reduced, w[first], w[first + 1], /*relu=*/true, s.hidden.data());
  Linear(s.hidden.data(), reduced, C, w[first + 2], w[first + 3], /*relu=*/false, s.gate.data());
  for (int c = 0; c < C; ++c) {
    float* g = s.gate.data() + static_cast<int64_t>(c) * kBlock;
    for (int b = 0; b < kBlock; ++b) g[b] = 1.0f / (1.0f + std::exp(-g[b]));
    float* x = act + static_cast<int64_t>(c) * K * kBlock;
    HPTRAIN_UNROLL for (int j = 0; j < kParts; ++j) {
      const F4 gate = Load(g + 4 * j);
      for (int p = 0; p < K; ++p) {
        Store(x + p * kBlock + 4 * j, Load(x + p * kBlock + 4 * j) * gate);
      }
    }
  }
}

// The network on s.input ([2][K][lane]: values, diffs); the normalised changes land in s.out.
void ForwardBlock(const float* const* w, int K, int C, int reduced, BlockScratch& s) {
  ConvRelu(s.input.data(), 2, C, K, w[kConv1W], w[kConv1B], s.act.data());
  SqueezeExcite(s.act.data(), C, reduced, K, w, kSe1AW, s);
  ConvRelu(s.act.data(), C, C, K, w[kConv2W], w[kConv2B], s.act2.data());
  SqueezeExcite(s.act2.data(), C, reduced, K, w, kSe2AW, s);
  const int half = K / 2;
  for (int c = 0; c < C; ++c) {
    for (int q = 0; q < half; ++q) {
      const float* a = s.act2.data() + (static_cast<int64_t>(c) * K + 2 * q) * kBlock;
      float* y = s.pooled.data() + (static_cast<int64_t>(c) * half + q) * kBlock;
      for (int b = 0; b < kBlock; ++b) y[b] = std::max(a[b], a[kBlock + b]);
    }
  }
  Linear(s.pooled.data(), C * half, C, w[kFc1W], w[kFc1B], /*relu=*/true, s.fc.data());
  Linear(s.fc.data(), C, 1, w[kFc2W], w[kFc2B], /*relu=*/false, s.out.data());
  for (int b = 0; b < kBlock; ++b) s.out[b] = std::tanh(s.out[b]);
}

#undef HPTRAIN_UNROLL

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> PredictorShapes(int history, int channels,
                                                                          int reduction) {
  const int64_t c = channels;
  const int64_t reduced = reduction > 0 ? channels / reduction : 0;
  const int64_t flat = c * (history / 2);
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"conv1.weight", {c, 2, 3}},
                                                                      {"conv1.bias", {c}}};
  auto se = [&](const std::string& name) {
    shapes.push_back({name + ".fc_a.weight", {reduced, c}});
    shapes.push_back({name + ".fc_a.bias", {reduced}});
    shapes.push_back({name + ".fc_b.weight", {c, reduced}});
    shapes.push_back({name + ".fc_b.bias", {c}});
  };
  se("se1");
  shapes.push_back({"conv2.weight", {c, c, 3}});
  shapes.push_back({"conv2.bias", {c}});
  se("se2");
  shapes.push_back({"fc1.weight", {c, flat}});
  shapes.push_back({"fc1.bias", {c}});
  shapes.push_back({"fc2.weight", {1, c}});
  shapes.push_back({"fc2.bias", {1}});
  return shapes;
}

Predictor EmptyPredictor(int history, int channels, int reduction) {
  Predictor predictor;
  predictor.history = history;
  predictor.channels = channels;
  predictor.reduction = reduction;
  for (auto& [name, shape] : PredictorShapes(history, channels, reduction)) {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    predictor.tensors.push_back({name, shape, std::vector<float>(elements, 0.0f)});
  }
  return predictor;
}

absl::Status ValidatePredictor(const Predictor& predictor) {
  HPTRAIN_RETURN_IF_ERROR(
      ValidateArchitecture(predictor.history, predictor.channels, predictor.reduction));
  const auto expected = PredictorShapes(predictor.history, predictor.channels, predictor.reduction);
  if (predictor.tensors.size() != expected.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the predictor has ", predictor.tensors.size(),
                                                   " tensors, the architecture has ",
                                                   expected.size()));
  }
  for (size_t t = 0; t < expected.size(); ++t) {
    const PredictorTensor& tensor = predictor.tensors[t];
    if (tensor.name != expected[t].first || tensor.shape != expected[t].second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t, " is ", Printable(tensor.name), " ", ShapeText(tensor.shape),
                       ", expected ", expected[t].first, " ", ShapeText(expected[t].second)));
    }
    int64_t elements = 1;
    for (int64_t d : tensor.shape) elements *= d;
    if (static_cast<int64_t>(tensor.values.size()) != elements) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", Printable(tensor.name), " has ",
                                                     tensor.values.size(), " values, its shape ",
                                                     ShapeText(tensor.shape), " needs ", elements));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Predictor> LoadPredictor(const std::string& path) {
  Predictor predictor;
  // Validation is part of the parse so that it is reported after the CRC: a damaged byte should
  // read as damage, not as a predictor of another architecture.
  auto parse = [&](FramedReader& reader) {
    const absl::Status parsed = Parse(reader, predictor);
    return parsed.ok() ? ValidatePredictor(predictor) : parsed;
  };
  HPTRAIN_RETURN_IF_ERROR(LoadFramed(path, kFormat, parse));
  return predictor;
}

absl::Status SavePredictor(const std::string& path, const Predictor& predictor) {
  HPTRAIN_RETURN_IF_ERROR(ValidatePredictor(predictor), "saving predictor ", path);
  size_t values = 0;
  for (const PredictorTensor& tensor : predictor.tensors) values += tensor.values.size();
  FramedWriter file(kFormat,
                    48 + predictor.metadata.size() + 64 * predictor.tensors.size() + 4 * values);
  file.U32(static_cast<uint32_t>(predictor.history));
  file.U32(static_cast<uint32_t>(predictor.channels));
  file.U32(static_cast<uint32_t>(predictor.reduction));
  file.U32(static_cast<uint32_t>(predictor.metadata.size()));
  file.Bytes(predictor.metadata);
  file.U32(static_cast<uint32_t>(predictor.tensors.size()));
  for (const PredictorTensor& tensor : predictor.tensors) {
    file.U32(static_cast<uint32_t>(tensor.name.size()));
    file.Bytes(tensor.name);
    file.U32(static_cast<uint32_t>(tensor.shape.size()));
    for (int64_t d : tensor.shape) file.U32(static_cast<uint32_t>(d));
    file.Array(tensor.values);
  }
  return file.Save(path);
}

PredictorRunner::PredictorRunner(const Predictor& predictor) : p_(predictor) {
  const absl::Status valid = ValidatePredictor(p_);
  if (!valid.ok()) {
    // A runner is only ever built from a loaded or freshly trained predictor: this is a bug.
    std::fprintf(stderr, "PredictorRunner: invalid predictor: %s\n",
                 std::string(valid.message()).c_str());
    std::abort();
  }
  for (const PredictorTensor& tensor : p_.tensors) w_.push_back(tensor.values.data());
}

int PredictorRunner::history() const { return p_.history; }

float PredictorRunner::Forward(const float* values, const float* diffs) const {
  const int K = p_.history;
  BlockScratch s(K, p_.channels, p_.channels / p_.reduction);
  // Lane 0 holds the element, the others zeros: the same instructions as in Predict.
  for (int k = 0; k < K; ++k) {
    s.input[k * kBlock] = values[k];
    s.input[(K + k) * kBlock] = diffs[k];
  }
  ForwardBlock(w_.data(), K, p_.channels, p_.channels / p_.reduction, s);
  return s.out[0];
}

void PredictorRunner::Predict(const float* histories, int64_t n, float* out, int threads) const {
  if (n <= 0) return;
  const int K = p_.history;
  const int C = p_.channels;
  const int reduced = C / p_.reduction;
  auto run = [&](int64_t begin, int64_t end) {
    BlockScratch s(K, C, reduced);
    Normalisation norm[kBlock];
    for (int64_t e0 = begin; e0 < end; e0 += kBlock) {
      const int lanes = static_cast<int>(std::min<int64_t>(kBlock, end - e0));
      // Transposed to [k][lane]; the lanes past the end get a constant history of zeros.
      std::fill(s.history.begin(), s.history.end(), 0.0f);
      for (int b = 0; b < lanes; ++b) {
        const float* h = histories + (e0 + b) * K;
        for (int k = 0; k < K; ++k) s.history[k * kBlock + b] = h[k];
      }
      for (int b = 0; b < kBlock; ++b) {
        norm[b] = Normalise(s.history.data() + b, kBlock, K, s.values.data(), s.diffs.data());
        for (int k = 0; k < K; ++k) {
          s.input[k * kBlock + b] = s.values[k];
          s.input[(K + k) * kBlock + b] = s.diffs[k];
        }
      }
      ForwardBlock(w_.data(), K, C, reduced, s);
      for (int b = 0; b < lanes; ++b) {
        out[e0 + b] = s.history[(K - 1) * kBlock + b] + s.out[b] * norm[b].scale;
      }
    }
  };
  // Contiguous ranges of whole blocks, one per thread; the caller takes the last one.
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(threads, blocks));
  if (workers == 1) {
    run(0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (int64_t t = 0; t < workers; ++t) {
    const int64_t begin = std::min(n, blocks * t / workers * kBlock);
    const int64_t end = std::min(n, blocks * (t + 1) / workers * kBlock);
    if (t + 1 == workers) {
      run(begin, end);
      break;
    }
    try {
      pool.emplace_back(run, begin, end);
    } catch (const std::system_error&) {
      // No thread to be had: the range runs here instead, with the same results.
      run(begin, end);
    }
  }
  for (std::thread& thread : pool) thread.join();
}

}  // namespace hptrain::ps::mp2
