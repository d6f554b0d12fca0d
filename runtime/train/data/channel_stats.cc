// The user formats' normalization statistics (dataset.h): per-channel mean and std of the
// training split, once per process. Computing them reads every training sample, which for the
// decoded formats means decoding every image: those keep the result in
// PATH/.hptrain-stats-train.json (next to the data, when the directory is writable; delete it to
// recompute), reused while the sample count and shape match.
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/base/files.h"
#include "runtime/base/status.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train::internal {
namespace {

struct CachedStats {
  Normalization normalization;
  int64_t samples = 0;
};

// What identifies a data set's training split within a process.
std::string Key(const job::DatasetSpec& spec) {
  return absl::StrCat(spec.format, "|", spec.path, "|", spec.layout, "|",
                      absl::StrJoin(spec.image_size, "x"), "|", spec.channels);
}

std::string CacheFile(const job::DatasetSpec& spec) {
  const std::string dir = IsDirectory(spec.path) ? spec.path : ParentDirectory(spec.path);
  return absl::StrCat(dir.empty() ? "." : dir, "/.hptrain-stats-train.json");
}

std::string Shape(const SampleShape& s) {
  return absl::StrCat(s.channels, "x", s.height, "x", s.width);
}

// The cache file's statistics if they were computed for `source`'s count and shape.
bool ReadCacheFile(const std::string& path, const SampleSource& source, CachedStats* out) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return false;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return false;
  try {
    if (j.at("samples").get<int64_t>() != source.size() ||
        j.at("shape").get<std::string>() != Shape(source.shape())) {
      return false;
    }
    out->normalization.mean = j.at("mean").get<std::vector<float>>();
    out->normalization.std = j.at("std").get<std::vector<float>>();
    out->samples = j.at("used").get<int64_t>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  const size_t channels = static_cast<size_t>(source.shape().channels);
  return out->normalization.mean.size() == channels && out->normalization.std.size() == channels;
}

void WriteCacheFile(const std::string& path, const SampleSource& source, const CachedStats& stats) {
  nlohmann::json j;
  j["samples"] = source.size();
  j["shape"] = Shape(source.shape());
  j["used"] = stats.samples;
  j["mean"] = stats.normalization.mean;
  j["std"] = stats.normalization.std;
  // A read-only data directory keeps the statistics in memory only.
  (void)WriteFileAtomically(path, j.dump() + "\n");
}

}  // namespace

absl::StatusOr<Normalization> ChannelStats(const SampleSource& source, bool skip_corrupt,
                                           int64_t* samples) {
  const SampleShape shape = source.shape();
  const auto channels = static_cast<size_t>(shape.channels);
  const auto plane = static_cast<size_t>(shape.height * shape.width);
  std::vector<double> sum(channels, 0.0), sum_sq(channels, 0.0);
  std::vector<float> pixels(channels * plane);
  int64_t used = 0;
  for (int64_t i = 0; i < source.size(); ++i) {
    absl::Status read = source.ReadPixels(i, pixels.data());
    if (!read.ok()) {
      if (skip_corrupt) continue;
      return Annotate(read, "computing the normalization statistics");
    }
    for (size_t c = 0; c < channels; ++c) {
      // Per sample in double, so that the sum over samples loses nothing that matters.
      double s = 0.0, sq = 0.0;
      const float* x = pixels.data() + c * plane;
      for (size_t p = 0; p < plane; ++p) {
        s += x[p];
        sq += static_cast<double>(x[p]) * x[p];
      }
      sum[c] += s;
      sum_sq[c] += sq;
    }
    ++used;
  }
  if (used == 0) {
    return absl::DataLossError(
        absl::StrCat(source.name(), ": no readable sample to compute normalization statistics"));
  }
  Normalization n;
  const double count = static_cast<double>(used) * static_cast<double>(plane);
  for (size_t c = 0; c < channels; ++c) {
    const double mean = sum[c] / count;
    const double var = std::max(0.0, sum_sq[c] / count - mean * mean);
    const double std = std::sqrt(var);
    n.mean.push_back(static_cast<float>(mean));
    n.std.push_back(std > 0.0 ? static_cast<float>(std) : 1.0f);
  }
  *samples = used;
  return n;
}

absl::StatusOr<Normalization> TrainingStats(const job::DatasetSpec& spec,
                                            const SampleSource* train) {
  static std::mutex mu;
  static auto* const cache = new std::map<std::string, CachedStats>();
  const std::string key = Key(spec);
  // Held while computing: the two splits of one process wait for one computation.
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second.normalization;

  std::unique_ptr<SampleSource> opened;
  if (train == nullptr) {
    HPTRAIN_ASSIGN_OR_RETURN(opened, OpenUserSource(spec, Split::kTrain));
    train = opened.get();
  }
  // The decoded formats decode every image for this: worth a file.
  const bool use_file = spec.format != "npy";
  const std::string file = CacheFile(spec);
  CachedStats stats;
  std::string from;
  if (use_file && ReadCacheFile(file, *train, &stats)) {
    from = absl::StrCat(" (read from ", file, ")");
  } else {
    HPTRAIN_ASSIGN_OR_RETURN(stats.normalization,
                             ChannelStats(*train, spec.skip_corrupt, &stats.samples));
    if (use_file) WriteCacheFile(file, *train, stats);
  }
  std::fprintf(stderr, "data: %s: normalization mean [%s] std [%s] from %lld training samples%s\n",
               spec.name.c_str(), absl::StrJoin(stats.normalization.mean, ", ").c_str(),
               absl::StrJoin(stats.normalization.std, ", ").c_str(),
               static_cast<long long>(stats.samples), from.c_str());
  std::fflush(stderr);
  (*cache)[key] = stats;
  return stats.normalization;
}

}  // namespace hptrain::train::internal
