// The framing that MP²'s two files (the snapshot dataset, dataset.h, and the predictor,
// predictor.h) share, and the reads, writes and checks that go with it (docs/mp2_files.md).
//
// Every such file is, little-endian:
//   magic    8 bytes naming the format ("HPMP2DAT", "HPMP2PRD")
//   version  u32
//   body     whatever the format defines for that version
//   CRC      u32 CRC-32 (zlib) of every byte before it, magic included
//
// Loading (LoadFramed) reads the whole file and judges it in a fixed order, so that the one line it
// returns says the most useful thing:
//   1. a file that does not start with the magic is foreign, unless it is a prefix of the magic
//      (then it was cut inside the magic);
//   2. a version other than the format's is refused as unsupported, before the body is read;
//   3. the format's parser reads the body; a read past the end names the section it was in, and
//      that cut is reported first;
//   4. then a CRC mismatch, so that a damaged byte reads as damage rather than as a file that
//      contradicts itself;
//   5. then whatever the parser found wrong.
// Every refusal is one line naming the file ("<path>: <why>"). Saving (FramedWriter::Save) appends
// the CRC and replaces the file atomically (runtime/base/atomic_file.h).
#ifndef HPTRAIN_RUNTIME_PS_MP2_FRAMED_FILE_H_
#define HPTRAIN_RUNTIME_PS_MP2_FRAMED_FILE_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "MP² files are little-endian and are read and written with memcpy");

namespace hptrain::ps::mp2 {

// What tells one framed format from another, and how its messages name it.
struct FramedFormat {
  absl::string_view magic;  // 8 bytes
  uint32_t version;         // the only version this build reads and writes
  // "not an hptrain MP² <name> file" for a foreign file.
  absl::string_view name;
  // "unsupported <versioned> version N (this build reads version M)".
  absl::string_view versioned;
};

// Sequential reads over a file's bytes. A read past the end fails, consumes nothing and remembers
// the section it was reading (the last such section wins), so that the loader can say where the
// file was cut. Not thread-safe; the bytes are borrowed and must outlive the reader.
class FramedReader {
 public:
  explicit FramedReader(absl::string_view data) : data_(data) {}

  // Points *out at the next n bytes. False (a cut in `section`) when fewer remain.
  bool Bytes(size_t n, absl::string_view section, const char** out);
  // The next u32. False (a cut in `section`) when fewer than 4 bytes remain.
  bool U32(absl::string_view section, uint32_t* value);
  // The next `count` values of T into *out (resized to count). False (a cut in `section`) when
  // they run past the end, a count whose byte size would overflow included; *out is then untouched.
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
  // Reads the trailing CRC (its value is checked by LoadFramed) and checks that nothing follows.
  // OK, or DataLoss: with an empty message after a cut in "the CRC", else saying how many bytes
  // the file holds beyond what its header accounts for.
  absl::Status End();
  // Records that `section` runs past the end of the file; always false, so a parser can write
  // `return reader.Cut(...)`.
  bool Cut(absl::string_view section);

  size_t remaining() const { return data_.size() - pos_; }
  // The section a read ran past the end in; empty while every read fitted.
  const std::string& truncated_in() const { return truncated_in_; }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
  std::string truncated_in_;
};

// Reads the file at `path` and judges it in the order of the header comment, calling `parse` on
// the body (with the reader past the version) once the magic and version are right. `parse`
// should read through FramedReader::End() and return OK or the first thing wrong with the file;
// after a cut its status is not reported, the cut is.
//
// Returns OK when the file is whole and `parse` returned OK. Otherwise the error, with "<path>: "
// prepended: ReadFile's codes for a file that cannot be read (its message already names the path,
// and is not prefixed); DataLoss for a foreign file, a cut, or a CRC mismatch; InvalidArgument for
// another version; else parse's own status. Blocks on the read.
absl::Status LoadFramed(const std::string& path, const FramedFormat& format,
                        const std::function<absl::Status(FramedReader&)>& parse);

// Builds a framed file in memory: the magic and version on construction, the body through the
// appenders, the CRC when saved.
class FramedWriter {
 public:
  // `body_bytes` is how large the body will be, to reserve the buffer once (a hint only).
  FramedWriter(const FramedFormat& format, size_t body_bytes);

  void U32(uint32_t value);
  void Bytes(absl::string_view bytes);
  template <typename T>
  void Array(const std::vector<T>& values) {
    out_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }

  // Appends the CRC and replaces the file at `path` atomically; call it once, after the body. OK,
  // or WriteFileAtomically's error (the existing file, if any, is then left as it was). Blocks on
  // the write and fsyncs.
  absl::Status Save(const std::string& path);

 private:
  std::string out_;
};

}  // namespace hptrain::ps::mp2

#endif  // HPTRAIN_RUNTIME_PS_MP2_FRAMED_FILE_H_
