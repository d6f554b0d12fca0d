// MP²'s snapshot dataset file and its recorder.
//
// Loading parses the whole file before judging it (framed_file.h), so that the one line it returns
// says the most useful thing: where a cut file ends, else that the checksum fails, else which
// header field disagrees with which.
#include "runtime/ps/mp2/dataset.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/base/splitmix64.h"
#include "runtime/base/status.h"
#include "runtime/ps/mp2/framed_file.h"
#include "runtime/ps/mp2/schedule.h"

namespace hptrain::ps::mp2 {
namespace {

constexpr FramedFormat kFormat = {"HPMP2DAT", 1, "snapshot dataset", "snapshot dataset"};
// Keeps the sample draws apart from the other streams derived from the run's seed (data order,
// initialisation), so the traced elements do not correlate with them.
constexpr uint64_t kSampleDomain = 0x6d70322d73616d70ULL;  // "mp2-samp"

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

// Writes `d` with its first `windows` windows to `path`, after checking that the loader will
// accept the file.
absl::Status WriteDataset(const std::string& path, const SnapshotDataset& d, size_t windows) {
  const std::string problem = DatasetProblem(d, windows);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("saving snapshot dataset ", path, ": ", problem));
  }
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

  const size_t floats = d.traces.size() + windows * d.window_length * d.parameters;
  FramedWriter file(kFormat, 4 + text.size() + 4 * (d.TraceWidth() + floats));
  file.U32(static_cast<uint32_t>(text.size()));
  file.Bytes(text);
  for (const DatasetTensor& tensor : d.tensors) file.Array(tensor.sample);
  file.Array(d.traces);
  for (size_t w = 0; w < windows; ++w) {
    for (const std::vector<float>& snapshot : d.windows[w].snapshots) file.Array(snapshot);
  }
  return file.Save(path);
}

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
absl::Status Parse(FramedReader& reader, SnapshotDataset& d) {
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
  HPTRAIN_RETURN_IF_ERROR(reader.End());
  return problem;
}

}  // namespace

int64_t SnapshotDataset::TraceWidth() const {
  int64_t width = 0;
  for (const DatasetTensor& tensor : tensors) width += static_cast<int64_t>(tensor.sample.size());
  return width;
}

absl::StatusOr<SnapshotDataset> LoadSnapshotDataset(const std::string& path) {
  SnapshotDataset dataset;
  HPTRAIN_RETURN_IF_ERROR(
      LoadFramed(path, kFormat, [&](FramedReader& reader) { return Parse(reader, dataset); }));
  return dataset;
}

absl::Status SaveSnapshotDataset(const std::string& path, const SnapshotDataset& dataset) {
  return WriteDataset(path, dataset, dataset.windows.size());
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
  return WriteDataset(options_.path, data_, windows);
}

}  // namespace hptrain::ps::mp2
