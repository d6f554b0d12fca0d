#include "runtime/train/checkpoint.h"

#include <zlib.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"

namespace hptrain::train {
namespace {

constexpr char kMagic[8] = {'H', 'P', 'T', 'C', 'K', 'P', 'T', '1'};
constexpr uint64_t kMaxHeader = 1 << 20;

template <typename T>
void Append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

uint32_t Crc(const char* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

std::string EncodeCheckpoint(const Checkpoint& checkpoint) {
  nlohmann::json header;
  header["job"] = checkpoint.job;
  header["step"] = checkpoint.step;
  header["epoch"] = checkpoint.epoch;
  header["step_in_epoch"] = checkpoint.step_in_epoch;
  header["optimizer_steps"] = checkpoint.optimizer_steps;
  header["sections"] = nlohmann::json::array();
  size_t payload = 0;
  for (const auto& [name, values] : checkpoint.sections) {
    header["sections"].push_back({{"name", name}, {"count", values.size()}});
    payload += values.size() * sizeof(float);
  }
  std::string text = header.dump();
  std::string out;
  out.reserve(sizeof(kMagic) + 8 + text.size() + payload + 4);
  out.append(kMagic, sizeof(kMagic));
  Append(out, static_cast<uint64_t>(text.size()));
  out += text;
  for (const auto& [name, values] : checkpoint.sections) {
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  Append(out, Crc(out.data(), out.size()));
  return out;
}

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint) {
  return WriteFileAtomically(path, EncodeCheckpoint(checkpoint));
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  return DecodeCheckpoint(data, path);
}

absl::StatusOr<Checkpoint> DecodeCheckpoint(const std::string& data, const std::string& path) {
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  if (data.size() < sizeof(kMagic) + 8 + 4) return corrupt("truncated checkpoint");
  if (std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) return corrupt("not a checkpoint");
  uint32_t stored_crc;
  std::memcpy(&stored_crc, data.data() + data.size() - 4, 4);
  uint64_t header_len;
  std::memcpy(&header_len, data.data() + sizeof(kMagic), 8);
  size_t pos = sizeof(kMagic) + 8;
  if (header_len > kMaxHeader || header_len > data.size() - pos - 4) {
    return corrupt("truncated checkpoint (header)");
  }
  nlohmann::json header = nlohmann::json::parse(data.substr(pos, header_len), nullptr, false);
  if (header.is_discarded() || !header.is_object()) return corrupt("unreadable header");
  pos += header_len;
  Checkpoint checkpoint;
  try {
    checkpoint.job = header.at("job").get<std::string>();
    checkpoint.step = header.at("step").get<int64_t>();
    checkpoint.epoch = header.at("epoch").get<int>();
    checkpoint.step_in_epoch = header.at("step_in_epoch").get<int64_t>();
    checkpoint.optimizer_steps = header.at("optimizer_steps").get<int64_t>();
    for (const auto& section : header.at("sections")) {
      std::string name = section.at("name").get<std::string>();
      uint64_t count = section.at("count").get<uint64_t>();
      size_t available = data.size() - 4 - pos;
      if (count > available / sizeof(float)) {
        return corrupt(absl::StrCat("truncated checkpoint: section ", name, " needs ",
                                    count * sizeof(float), " bytes, ", available, " left"));
      }
      std::vector<float>& values = checkpoint.sections[name];
      values.resize(count);
      std::memcpy(values.data(), data.data() + pos, count * sizeof(float));
      pos += count * sizeof(float);
    }
  } catch (const nlohmann::json::exception& e) {
    return corrupt(absl::StrCat("bad header: ", e.what()));
  }
  if (pos != data.size() - 4) return corrupt("trailing bytes after the last section");
  if (Crc(data.data(), data.size() - 4) != stored_crc) return corrupt("checksum mismatch");
  return checkpoint;
}

absl::Status CheckSection(const Checkpoint& checkpoint, const std::string& path,
                          const std::string& name, size_t expected) {
  auto it = checkpoint.sections.find(name);
  if (it == checkpoint.sections.end() || it->second.size() != expected) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": section ", name, " does not match this model (expected ", expected, " values)"));
  }
  return absl::OkStatus();
}

}  // namespace hptrain::train
