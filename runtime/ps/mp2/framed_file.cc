#include "runtime/ps/mp2/framed_file.h"

#include <zlib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"

namespace hptrain::ps::mp2 {
namespace {

// zlib takes lengths as uInt: a file of 4 GiB or more goes through it in pieces.
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

// The stored CRC against the computed one ("" when they agree). Only a file long enough to hold a
// magic, a version and a CRC is checked: a shorter one was reported as cut already.
std::string CrcProblem(absl::string_view data, size_t magic_size) {
  if (data.size() < magic_size + 8) return "";
  uint32_t stored;
  std::memcpy(&stored, data.data() + data.size() - 4, 4);
  const uint32_t computed = Crc(data.data(), data.size() - 4);
  if (stored == computed) return "";
  return absl::StrCat("CRC mismatch (stored ", stored, ", computed ", computed,
                      "): the file is corrupt");
}

}  // namespace

bool FramedReader::Bytes(size_t n, absl::string_view section, const char** out) {
  if (n > remaining()) return Cut(section);
  *out = data_.data() + pos_;
  pos_ += n;
  return true;
}

bool FramedReader::U32(absl::string_view section, uint32_t* value) {
  const char* p;
  if (!Bytes(sizeof(*value), section, &p)) return false;
  std::memcpy(value, p, sizeof(*value));
  return true;
}

absl::Status FramedReader::End() {
  uint32_t crc;
  if (!U32("the CRC", &crc)) return absl::DataLossError("");
  if (remaining() != 0) {
    return absl::DataLossError(
        absl::StrCat("the file holds ", remaining(), " bytes more than its header accounts for"));
  }
  return absl::OkStatus();
}

bool FramedReader::Cut(absl::string_view section) {
  truncated_in_ = std::string(section);
  return false;
}

absl::Status LoadFramed(const std::string& path, const FramedFormat& format,
                        const std::function<absl::Status(FramedReader&)>& parse) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  auto fail = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat(path, ": ", why));
  };
  const absl::string_view magic = format.magic;
  if (data.size() < magic.size() || std::memcmp(data.data(), magic.data(), magic.size()) != 0) {
    // A file cut inside the magic itself still starts like one of ours.
    if (std::memcmp(data.data(), magic.data(), std::min(data.size(), magic.size())) == 0) {
      return fail(absl::StatusCode::kDataLoss, "truncated: the file ends inside the magic");
    }
    return fail(absl::StatusCode::kDataLoss,
                absl::StrCat("not an hptrain MP² ", format.name, " file"));
  }
  FramedReader reader(absl::string_view(data).substr(magic.size()));
  uint32_t version;
  if (!reader.U32("the version", &version)) {
    return fail(absl::StatusCode::kDataLoss, "truncated: the file ends inside the version");
  }
  if (version != format.version) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrCat("unsupported ", format.versioned, " version ", version,
                             " (this build reads version ", format.version, ")"));
  }
  const absl::Status parsed = parse(reader);
  if (!reader.truncated_in().empty()) {
    return fail(absl::StatusCode::kDataLoss,
                absl::StrCat("truncated: the file ends inside ", reader.truncated_in()));
  }
  // The checksum is judged before the parser's complaints: a damaged byte should read as damage,
  // not as a header that contradicts itself or a predictor of another architecture.
  const std::string damage = CrcProblem(data, magic.size());
  if (!damage.empty()) return fail(absl::StatusCode::kDataLoss, damage);
  if (!parsed.ok()) return fail(parsed.code(), parsed.message());
  return absl::OkStatus();
}

FramedWriter::FramedWriter(const FramedFormat& format, size_t body_bytes) {
  out_.reserve(format.magic.size() + 4 + body_bytes + 4);
  out_.append(format.magic.data(), format.magic.size());
  U32(format.version);
}

void FramedWriter::U32(uint32_t value) {
  out_.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void FramedWriter::Bytes(absl::string_view bytes) { out_.append(bytes.data(), bytes.size()); }

absl::Status FramedWriter::Save(const std::string& path) {
  U32(Crc(out_.data(), out_.size()));
  return WriteFileAtomically(path, out_);
}

}  // namespace hptrain::ps::mp2
