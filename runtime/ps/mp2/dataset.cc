// MP²'s snapshot dataset file and its recorder.
//
// Loading parses the whole file before judging it, so that the one line it returns says the most
// useful thing: where a cut file ends, else that the checksum fails, else which header field
// disagrees with which.
#include "runtime/ps/mp2/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/base/splitmix64.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/schedule.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the dataset file is little-endian and is read with memcpy");

namespace hptrain::ps::mp2 {
namespace {

constexpr char kMagic[8] = {'H', 'P', 'M', 'P', '2', 'D', 'A', 'T'};
constexpr uint32_t kVersion = 1;
// Keeps the sample draws apart from the other streams derived from the run's seed (data order,
// initialisation), so the traced elements do not correlate with them.
constexpr uint64_t kSampleDomain = 0x6d70322d73616d70ULL;  // "mp2-samp"

uint32_t Crc(const char* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

// How many elements of a tensor are traced: none of a dense one, else min(samples, size). The
// file does not store the counts; reader and writer both derive them from this rule.
int64_t SampleCount(int64_t size, int samples) {
  return size > kMaxDenseElements ? std::min<int64_t>(samples, size) : 0;
}

// `count` distinct indices below `size`, sorted, by Floyd's algorithm (one draw per index, so the
// cost does not grow with the tensor).
std::vector<int32_t> DrawSample(uint64_t seed, int tensor, int64_t size, int samples) {
  const int64_t count = SampleCount(size, samples);
  std::vector<int32_t> sample;
  if (count == size) {
    sample.resize(count);
    std::iota(sample.begin(), sample.end(), 0);
    return sample;
  }
  SplitMix64 mix(seed ^ kSampleDomain);
  SplitMix64 rng(mix.Next() ^ SplitMix64(static_cast<uint64_t>(tensor)).Next());
  std::unordered_set<int64_t> chosen;
  chosen.reserve(static_cast<size_t>(count) * 2);
  for (int64_t j = size - count; j < size; ++j) {
    const int64_t r = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(j) + 1));
    chosen.insert(chosen.count(r) != 0 ? j : r);
  }
  sample.assign(chosen.begin(), chosen.end());
  std::sort(sample.begin(), sample.end());
  return sample;
}

// The first disagreement among the header's fields ("" when none), for loading and saving alike.
// `windows` is how many of dataset.windows are (or will be) in the file.
std::string HeaderProblem(const SnapshotDataset& d, size_t windows) {
  if (d.parameters < 0) return absl::StrCat("parameters = ", d.parameters, " is negative");
  if (d.history < 1) return absl::StrCat("history = ", d.history, " is below 1");
  if (d.every < 1) return absl::StrCat("every = ", d.every, " is below 1");
  if (d.samples < 0) return absl::StrCat("samples = ", d.samples, " is negative");
  if (d.window_length < 0) return absl::StrCat("window_length = ", d.window_length, " is negative");
  if (d.window_every < 1) return absl::StrCat("window_every = ", d.window_every, " is below 1");
  if (d.rounds < 0) return absl::StrCat("rounds = ", d.rounds, " is negative");
  int64_t offset = 0;
  for (size_t t = 0; t < d.tensors.size(); ++t) {
    const DatasetTensor& tensor = d.tensors[t];
    if (tensor.offset != offset) {
      return absl::StrCat("tensor ", t, " starts at ", tensor.offset, ", expected ", offset,
                          " (tensors are contiguous from 0)");
    }
    // Sample indices are i32.
    if (tensor.size < 0 || tensor.size > INT32_MAX) {
      return absl::StrCat("tensor ", t, " has size ", tensor.size);
    }
    offset += tensor.size;
  }
  if (offset != d.parameters) {
    return absl::StrCat("the tensors hold ", offset, " elements, parameters = ", d.parameters);
  }
  // Snapshots of nothing would cost memory per snapshot without a byte of file to back them.
  if (windows > 0 && d.window_length > 0 && d.parameters == 0) {
    return "windows of snapshots of a model without parameters";
  }
  for (size_t w = 0; w < windows; ++w) {
    const int64_t first = d.windows[w].first_round;
    if (first < 0 || (w > 0 && first <= d.windows[w - 1].first_round)) {
      return absl::StrCat("window ", w, " starts at round ", first,
                          ": window starts must be non-negative and increasing");
    }
    if (first > d.rounds - d.window_length) {
      return absl::StrCat("window ", w, " starts at round ", first, ": its ", d.window_length,
                          " snapshots run past the ", d.rounds, " recorded rounds");
    }
  }
  return "";
}

// The first problem with one tensor's sample indices ("" when none).
std::string SampleProblem(const SnapshotDataset& d, size_t t, const int32_t* sample,
                          int64_t count) {
  const int64_t size = d.tensors[t].size;
  for (int64_t i = 0; i < count; ++i) {
    if (sample[i] < 0 || sample[i] >= size || (i > 0 && sample[i] <= sample[i - 1])) {
      return absl::StrCat("sample index ", i, " of tensor ", t, " is ", sample[i],
                          ": indices must be increasing and below the size ", size);
    }
  }
  return "";
}

// Everything that SaveSnapshotDataset and the recorder write must satisfy, so that the loader
// accepts it.
std::string DatasetProblem(const SnapshotDataset& d, size_t windows) {
  std::string problem = HeaderProblem(d, windows);
  if (!problem.empty()) return problem;
  for (size_t t = 0; t < d.tensors.size(); ++t) {
    const std::vector<int32_t>& sample = d.tensors[t].sample;
    const int64_t count = SampleCount(d.tensors[t].size, d.samples);
    if (static_cast<int64_t>(sample.size()) != count) {
      return absl::StrCat("tensor ", t, " traces ", sample.size(), " elements, its size ",
                          d.tensors[t].size, " and samples = ", d.samples, " call for ", count);
    }
    problem = SampleProblem(d, t, sample.data(), count);
    if (!problem.empty()) return problem;
  }
  if (static_cast<int64_t>(d.traces.size()) != d.rounds * d.TraceWidth()) {
    return absl::StrCat("the traces hold ", d.traces.size(), " values, ", d.rounds, " rounds of ",
                        d.TraceWidth(), " call for ", d.rounds * d.TraceWidth());
  }
  for (size_t w = 0; w < windows; ++w) {
    const auto& snapshots = d.windows[w].snapshots;
    if (static_cast<int64_t>(snapshots.size()) != d.window_length) {
      return absl::StrCat("window ", w, " holds ", snapshots.size(), " snapshots, not ",
                          d.window_length);
    }
    for (const std::vector<float>& snapshot : snapshots) {
      if (static_cast<int64_t>(snapshot.size()) != d.parameters) {
        return absl::StrCat("a snapshot of window ", w, " holds ", snapshot.size(), " values, not ",
                            d.parameters);
      }
    }
  }
  return "";
}

void AppendU32(std::string& out, uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void AppendFloats(std::string& out, const std::vector<float>& values) {
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// The file of `d` with its first `windows` windows; `d` must be consistent (DatasetProblem).
std::string Serialize(const SnapshotDataset& d, size_t windows) {
  nlohmann::ordered_json header = {
      {"model", d.model},
      {"dataset", d.dataset},
      {"seed", d.seed},
      {"parameters", d.parameters},
      {"history", d.history},
      {"every", d.every},
      {"samples", d.samples},
      {"window_length", d.window_length},
      {"window_every", d.window_every},
  };
  header["tensors"] = nlohmann::ordered_json::array();
  for (const DatasetTensor& tensor : d.tensors) {
    header["tensors"].push_back({{"offset", tensor.offset}, {"size", tensor.size}});
  }
  header["rounds"] = d.rounds;
  header["windows"] = nlohmann::ordered_json::array();
  for (size_t w = 0; w < windows; ++w) header["windows"].push_back(d.windows[w].first_round);
  // Names that are not UTF-8 would make dump() throw; they are replaced rather than refused.
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);

  std::string out;
  const size_t floats = d.traces.size() + windows * d.window_length * d.parameters;
  out.reserve(sizeof(kMagic) + 12 + text.size() + 4 * (d.TraceWidth() + floats));
  out.append(kMagic, sizeof(kMagic));
  AppendU32(out, kVersion);
  AppendU32(out, static_cast<uint32_t>(text.size()));
  out += text;
  for (const DatasetTensor& tensor : d.tensors) {
    out.append(reinterpret_cast<const char*>(tensor.sample.data()),
               tensor.sample.size() * sizeof(int32_t));
  }
  AppendFloats(out, d.traces);
  for (size_t w = 0; w < windows; ++w) {
    for (const std::vector<float>& snapshot : d.windows[w].snapshots) AppendFloats(out, snapshot);
  }
  AppendU32(out, Crc(out.data(), out.size()));
  return out;
}

// Sequential reads over a whole file. A read past the end fails and remembers the section it
// was reading, so the caller can say where the file was cut.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}

  bool Bytes(size_t n, absl::string_view section, const char** out) {
    if (n > remaining()) return Cut(section);
    *out = data_.data() + pos_;
    pos_ += n;
    return true;
  }
  // `count` values of T into `out`; a count whose byte size overflows is a cut as well.
  template <typename T>
  bool Array(uint64_t count, absl::string_view section, std::vector<T>* out) {
    const char* p;
    if (count > remaining() / sizeof(T) || !Bytes(count * sizeof(T), section, &p)) {
      return Cut(section);
    }
    out->resize(count);
    if (count > 0) std::memcpy(out->data(), p, count * sizeof(T));
    return true;
  }
  bool U32(absl::string_view section, uint32_t* value) {
    const char* p;
    if (!Bytes(sizeof(*value), section, &p)) return false;
    std::memcpy(value, p, sizeof(*value));
    return true;
  }
  bool Cut(absl::string_view section) {
    truncated_in_ = std::string(section);
    return false;
  }
  size_t remaining() const { return data_.size() - pos_; }
  const std::string& truncated_in() const { return truncated_in_; }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
  std::string truncated_in_;
};

absl::StatusOr<int64_t> Integer(const nlohmann::json& object, const char* key, int64_t lo,
                                int64_t hi) {
  const auto it = object.find(key);
  if (it == object.end()) {
    return absl::DataLossError(absl::StrCat("the header lacks \"", key, "\""));
  }
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX)) {
    return absl::DataLossError(absl::StrCat("header field \"", key, "\" is not an integer"));
  }
  const int64_t value = it->get<int64_t>();
  if (value < lo || value > hi) {
    return absl::DataLossError(
        absl::StrCat("header field \"", key, "\" = ", value, " is outside [", lo, ", ", hi, "]"));
  }
  return value;
}

absl::StatusOr<std::string> Text(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return absl::DataLossError(absl::StrCat("header field \"", key, "\" is missing or not text"));
  }
  return it->get<std::string>();
}

// The JSON header's fields into `d` (tensors without samples, windows without snapshots).
absl::Status ParseHeader(const nlohmann::json& header, SnapshotDataset& d) {
  if (!header.is_object()) return absl::DataLossError("the header is not a JSON object");
  HPTRAIN_ASSIGN_OR_RETURN(d.model, Text(header, "model"));
  HPTRAIN_ASSIGN_OR_RETURN(d.dataset, Text(header, "dataset"));
  const auto seed = header.find("seed");
  if (seed == header.end() || !seed->is_number_unsigned()) {
    return absl::DataLossError("header field \"seed\" is missing or not an unsigned integer");
  }
  d.seed = seed->get<uint64_t>();
  HPTRAIN_ASSIGN_OR_RETURN(d.parameters, Integer(header, "parameters", 0, INT64_MAX));
  HPTRAIN_ASSIGN_OR_RETURN(d.history, Integer(header, "history", 1, INT_MAX));
  HPTRAIN_ASSIGN_OR_RETURN(d.every, Integer(header, "every", 1, INT_MAX));
  HPTRAIN_ASSIGN_OR_RETURN(d.samples, Integer(header, "samples", 0, INT_MAX));
  HPTRAIN_ASSIGN_OR_RETURN(d.window_length, Integer(header, "window_length", 0, INT_MAX));
  HPTRAIN_ASSIGN_OR_RETURN(d.window_every, Integer(header, "window_every", 1, INT_MAX));
  HPTRAIN_ASSIGN_OR_RETURN(d.rounds, Integer(header, "rounds", 0, INT64_MAX));
  const auto tensors = header.find("tensors");
  if (tensors == header.end() || !tensors->is_array()) {
    return absl::DataLossError("header field \"tensors\" is missing or not a list");
  }
  for (const nlohmann::json& entry : *tensors) {
    if (!entry.is_object()) return absl::DataLossError("a tensor entry is not a JSON object");
    DatasetTensor tensor;
    HPTRAIN_ASSIGN_OR_RETURN(tensor.offset, Integer(entry, "offset", 0, INT64_MAX));
    HPTRAIN_ASSIGN_OR_RETURN(tensor.size, Integer(entry, "size", 0, INT32_MAX));
    d.tensors.push_back(std::move(tensor));
  }
  const auto windows = header.find("windows");
  if (windows == header.end() || !windows->is_array()) {
    return absl::DataLossError("header field \"windows\" is missing or not a list");
  }
  for (const nlohmann::json& first : *windows) {
    if (!first.is_number_integer() || first.get<int64_t>() < 0) {
      return absl::DataLossError("a window's first round is not a non-negative integer");
    }
    d.windows.push_back({first.get<int64_t>(), {}});
  }
  const std::string problem = HeaderProblem(d, d.windows.size());
  if (!problem.empty()) return absl::DataLossError(absl::StrCat("inconsistent header: ", problem));
  return absl::OkStatus();
}

// Everything after the version into `d`. Returns the first problem found; parsing goes on past a
// bad sample index so that a cut later in the file is still reported as a cut.
absl::Status Parse(Reader& reader, SnapshotDataset& d) {
  uint32_t length;
  const char* bytes;
  if (!reader.U32("the header length", &length) ||
      !reader.Bytes(length, "the JSON header", &bytes)) {
    return absl::DataLossError("");
  }
  const nlohmann::json header =
      nlohmann::json::parse(bytes, bytes + length, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return absl::DataLossError("the header is not valid JSON");
  HPTRAIN_RETURN_IF_ERROR(ParseHeader(header, d));

  absl::Status problem;
  for (size_t t = 0; t < d.tensors.size(); ++t) {
    const int64_t count = SampleCount(d.tensors[t].size, d.samples);
    std::vector<int32_t>& sample = d.tensors[t].sample;
    if (!reader.Array(count, absl::StrCat("the sample indices of tensor ", t), &sample)) {
      return absl::DataLossError("");
    }
    const std::string why = SampleProblem(d, t, sample.data(), count);
    if (problem.ok() && !why.empty()) problem = absl::DataLossError(why);
  }
  const int64_t width = d.TraceWidth();
  // width ≤ Σ sizes fits in int64; rounds × width may not, which Array() treats as a cut.
  uint64_t trace_values;
  if (__builtin_mul_overflow(static_cast<uint64_t>(d.rounds), static_cast<uint64_t>(width),
                             &trace_values)) {
    trace_values = UINT64_MAX;
  }
  if (!reader.Array(trace_values, "the traces", &d.traces)) return absl::DataLossError("");
  for (size_t w = 0; w < d.windows.size(); ++w) {
    // Grown one snapshot at a time: a window_length that the file cannot back is never allocated.
    for (int s = 0; s < d.window_length; ++s) {
      std::vector<float> snapshot;
      if (!reader.Array(static_cast<uint64_t>(d.parameters),
                        absl::StrCat("snapshot ", s, " of window ", w), &snapshot)) {
        return absl::DataLossError("");
      }
      d.windows[w].snapshots.push_back(std::move(snapshot));
    }
  }
  uint32_t crc;
  if (!reader.U32("the CRC", &crc)) return absl::DataLossError("");
  if (reader.remaining() != 0) {
    return absl::DataLossError(absl::StrCat("the file holds ", reader.remaining(),
                                            " bytes more than its header accounts for"));
  }
  return problem;
}

}  // namespace

int64_t SnapshotDataset::TraceWidth() const {
  int64_t width = 0;
  for (const DatasetTensor& tensor : tensors) width += static_cast<int64_t>(tensor.sample.size());
  return width;
}

absl::StatusOr<SnapshotDataset> LoadSnapshotDataset(const std::string& path) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  auto fail = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat(path, ": ", why));
  };
  if (data.size() < sizeof(kMagic) || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    // A file cut inside the magic itself still starts like one of ours.
    if (std::memcmp(data.data(), kMagic, std::min(data.size(), sizeof(kMagic))) == 0) {
      return fail(absl::StatusCode::kDataLoss, "truncated: the file ends inside the magic");
    }
    return fail(absl::StatusCode::kDataLoss, "not an hptrain MP² snapshot dataset file");
  }
  Reader reader(absl::string_view(data).substr(sizeof(kMagic)));
  uint32_t version;
  if (!reader.U32("the version", &version)) {
    return fail(absl::StatusCode::kDataLoss, "truncated: the file ends inside the version");
  }
  if (version != kVersion) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrCat("unsupported snapshot dataset version ", version,
                             " (this build reads version ", kVersion, ")"));
  }
  SnapshotDataset dataset;
  const absl::Status parsed = Parse(reader, dataset);
  if (!reader.truncated_in().empty()) {
    return fail(absl::StatusCode::kDataLoss,
                absl::StrCat("truncated: the file ends inside ", reader.truncated_in()));
  }
  // The checksum is judged before the header's consistency: a damaged byte reads as damage.
  if (data.size() >= sizeof(kMagic) + 8) {
    uint32_t stored;
    std::memcpy(&stored, data.data() + data.size() - 4, 4);
    const uint32_t computed = Crc(data.data(), data.size() - 4);
    if (stored != computed) {
      return fail(absl::StatusCode::kDataLoss,
                  absl::StrCat("CRC mismatch (stored ", stored, ", computed ", computed,
                               "): the file is corrupt"));
    }
  }
  if (!parsed.ok()) return fail(parsed.code(), parsed.message());
  return dataset;
}

absl::Status SaveSnapshotDataset(const std::string& path, const SnapshotDataset& dataset) {
  const std::string problem = DatasetProblem(dataset, dataset.windows.size());
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("saving snapshot dataset ", path, ": ", problem));
  }
  return WriteFileAtomically(path, Serialize(dataset, dataset.windows.size()));
}

SnapshotRecorder::SnapshotRecorder(RecorderOptions options,
                                   const std::vector<int64_t>& tensor_sizes)
    : options_(std::move(options)) {
  // A zero cadence would divide by zero below; it can only mean "every step".
  options_.every = std::max(options_.every, 1);
  options_.window_every = std::max(options_.window_every, 1);
  data_.model = options_.model;
  data_.dataset = options_.dataset;
  data_.seed = options_.seed;
  data_.history = options_.history;
  data_.every = options_.every;
  data_.samples = options_.samples;
  data_.window_length = options_.window_length;
  data_.window_every = options_.window_every;
  for (size_t t = 0; t < tensor_sizes.size(); ++t) {
    DatasetTensor tensor;
    tensor.offset = data_.parameters;
    tensor.size = tensor_sizes[t];
    tensor.sample = DrawSample(options_.seed, static_cast<int>(t), tensor.size, options_.samples);
    data_.parameters += tensor.size;
    data_.tensors.push_back(std::move(tensor));
  }
}

void SnapshotRecorder::Record(int64_t steps_done, const float* parameters) {
  if (steps_done % options_.every != 0) return;
  const int64_t round = data_.rounds;
  for (const DatasetTensor& tensor : data_.tensors) {
    const float* values = parameters + tensor.offset;
    for (int32_t index : tensor.sample) data_.traces.push_back(values[index]);
  }
  // One window is filled at a time: a start that falls inside an open window is skipped (only
  // possible when window_length > window_every). A model without parameters has none.
  if (open_window_ < 0 && data_.window_length > 0 && data_.parameters > 0 &&
      round % data_.window_every == 0) {
    data_.windows.push_back({round, {}});
    open_window_ = static_cast<int64_t>(data_.windows.size()) - 1;
  }
  if (open_window_ >= 0) {
    SnapshotWindow& window = data_.windows[open_window_];
    window.snapshots.emplace_back(parameters, parameters + data_.parameters);
    if (static_cast<int64_t>(window.snapshots.size()) == data_.window_length) open_window_ = -1;
  }
  data_.rounds = round + 1;
}

absl::Status SnapshotRecorder::Save() const {
  // The window being filled is always the newest; it stays out of the file until complete.
  const size_t windows = data_.windows.size() - (open_window_ >= 0 ? 1 : 0);
  const std::string problem = DatasetProblem(data_, windows);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("saving snapshot dataset ", options_.path, ": ", problem));
  }
  return WriteFileAtomically(options_.path, Serialize(data_, windows));
}

}  // namespace hptrain::ps::mp2
