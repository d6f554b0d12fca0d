// What the request-handler fuzz targets share: the input as a sequence of records, and writing
// seed files.
//
// Record format (all the targets that take several calls per input):
//   u8  selector   which call (modulo the number of calls)
//   u16 length     little-endian; clipped to the bytes left
//   length bytes   the call's payload (a serialized request, or a stream, see Messages)
// A stream payload is itself u16-length-prefixed messages, one after the other.
#ifndef HPTRAIN_TESTS_FUZZ_FUZZ_INPUT_H_
#define HPTRAIN_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace hptrain::fuzz {

struct Record {
  uint8_t selector = 0;
  std::string payload;
};

// Splits u16-length-prefixed pieces off `data`; a short last piece is kept as it is.
inline std::vector<std::string> Pieces(const uint8_t* data, size_t size) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 2 <= size) {
    size_t length = data[at] | (static_cast<size_t>(data[at + 1]) << 8);
    at += 2;
    if (length > size - at) length = size - at;
    out.emplace_back(reinterpret_cast<const char*>(data + at), length);
    at += length;
  }
  return out;
}

inline std::vector<Record> Records(const uint8_t* data, size_t size) {
  std::vector<Record> out;
  size_t at = 0;
  while (at + 3 <= size) {
    Record r;
    r.selector = data[at];
    size_t length = data[at + 1] | (static_cast<size_t>(data[at + 2]) << 8);
    at += 3;
    if (length > size - at) length = size - at;
    r.payload.assign(reinterpret_cast<const char*>(data + at), length);
    at += length;
    out.push_back(std::move(r));
  }
  return out;
}

// The inverse of Pieces (payloads over 65535 bytes cannot be written and are cut).
inline std::string Join(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) {
    const size_t n = p.size() > 0xffff ? 0xffff : p.size();
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>(n >> 8));
    out.append(p, 0, n);
  }
  return out;
}

// The inverse of Records.
inline std::string Encode(const std::vector<Record>& records) {
  std::string out;
  for (const Record& r : records) {
    const size_t n = r.payload.size() > 0xffff ? 0xffff : r.payload.size();
    out.push_back(static_cast<char>(r.selector));
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>(n >> 8));
    out.append(r.payload, 0, n);
  }
  return out;
}

// With $HPTRAIN_FUZZ_WRITE_SEEDS set, `write(dir)` writes the target's seed files into it and the
// process exits (called from LLVMFuzzerInitialize, before libFuzzer reads any input).
template <typename F>
void MaybeWriteSeeds(F write) {
  const char* dir = std::getenv("HPTRAIN_FUZZ_WRITE_SEEDS");
  if (dir == nullptr || *dir == '\0') return;
  write(std::string(dir));
  std::exit(0);
}

inline void WriteSeed(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

}  // namespace hptrain::fuzz

#endif  // HPTRAIN_TESTS_FUZZ_FUZZ_INPUT_H_
