#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.h"
#include "runtime/train/data/dataset_readers.h"

namespace hptrain::train::internal {

absl::Status CheckDirectory(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(dir, ": data set directory not found"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FindFile(const std::string& dir,
                                     const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    std::string path = absl::StrCat(dir, "/", name);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  std::string message = absl::StrCat(dir, "/", names.front(), ": no such file");
  if (names.size() > 1) {
    absl::StrAppend(&message, " (also tried ", absl::StrJoin(names.begin() + 1, names.end(), ", "),
                    ")");
  }
  return absl::NotFoundError(message);
}

absl::StatusOr<std::unique_ptr<GzFile>> GzFile::Open(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return HPTRAIN_ERRNO(absl::StrCat("gzopen ", path));
  // A larger buffer than zlib's 8 KiB default: the image files are tens of MB.
  gzbuffer(file, 1 << 20);
  return std::unique_ptr<GzFile>(new GzFile(path, file));
}

GzFile::~GzFile() { gzclose(file_); }

absl::StatusOr<size_t> GzFile::Read(uint8_t* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    // gzread takes an unsigned count but returns int: read in chunks below INT_MAX.
    const auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(file_, buf + done, chunk);
    int err = Z_OK;
    const char* message = gzerror(file_, &err);
    // Z_BUF_ERROR is zlib's "unexpected end of file": a truncated gzip stream, reported to the
    // caller as a short read so that it names what was missing.
    if (got < 0 || (err != Z_OK && err != Z_BUF_ERROR)) {
      return absl::DataLossError(absl::StrCat(path_, ": corrupt gzip data: ", message));
    }
    done += static_cast<size_t>(got);
    if (static_cast<unsigned>(got) < chunk) break;
  }
  return done;
}

absl::Status GzFile::ReadExactly(uint8_t* buf, size_t n, const std::string& what) {
  HPTRAIN_ASSIGN_OR_RETURN(const size_t got, Read(buf, n));
  if (got != n) {
    return absl::DataLossError(
        absl::StrCat(path_, ": truncated: expected ", n, " bytes of ", what, ", got ", got));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> GzFile::ReadAll() {
  std::vector<uint8_t> data;
  constexpr size_t kChunk = 1 << 22;
  for (;;) {
    const size_t old = data.size();
    data.resize(old + kChunk);
    HPTRAIN_ASSIGN_OR_RETURN(const size_t got, Read(data.data() + old, kChunk));
    data.resize(old + got);
    if (got < kChunk) return data;
  }
}

}  // namespace hptrain::train::internal
