#include "runtime/base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain {
namespace {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Closes a descriptor on scope exit unless Release()d; close errors matter only where the caller
// closes explicitly (after writing), so they are ignored here.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

absl::Status WriteAll(int fd, std::string_view data, const std::string& name) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return HPTRAIN_ERRNO(absl::StrCat("write ", name));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Steps 1-3 of the header's protocol. The caller removes `tmp` if this fails.
absl::Status WriteAndRename(const std::string& tmp, const std::string& path,
                            std::string_view contents) {
  // O_TRUNC without O_EXCL: a leftover from a crashed process that had our pid is overwritten.
  // O_NOFOLLOW: never write through a symlink someone planted at the temporary name.
  const int raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (raw < 0) return HPTRAIN_ERRNO(absl::StrCat("open ", tmp));
  FdCloser closer(raw);
  HPTRAIN_RETURN_IF_ERROR(WriteAll(raw, contents, tmp));
  if (::fsync(raw) != 0) return HPTRAIN_ERRNO(absl::StrCat("fsync ", tmp));
  // close() can report a deferred write error (NFS); check it rather than let the closer drop it.
  if (::close(closer.Release()) != 0) return HPTRAIN_ERRNO(absl::StrCat("close ", tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return HPTRAIN_ERRNO(absl::StrCat("rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  const int raw = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (raw < 0) return HPTRAIN_ERRNO(absl::StrCat("open directory ", dir));
  FdCloser closer(raw);
  // Some file systems (certain FUSE and network ones) cannot fsync a directory and say EINVAL;
  // there is nothing more durable to be had there, so that is not an error.
  if (::fsync(raw) != 0 && errno != EINVAL) {
    return HPTRAIN_ERRNO(absl::StrCat("fsync directory ", dir));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  if (path.empty()) return absl::InvalidArgumentError("write file: empty path");
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  absl::Status status = WriteAndRename(tmp, path, contents);
  if (!status.ok()) {
    ::unlink(tmp.c_str());  // may not exist (open failed); nothing else to do either way
    return Annotate(status, absl::StrCat("writing ", path));
  }
  HPTRAIN_RETURN_IF_ERROR(SyncDirectory(DirectoryOf(path)), "writing ", path,
                          " (contents replaced, rename not yet durable)");
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) return Annotate(HPTRAIN_ERRNO("open"), absl::StrCat("reading ", path));
  FdCloser closer(raw);
  struct stat st;
  if (::fstat(raw, &st) != 0)
    return Annotate(HPTRAIN_ERRNO("fstat"), absl::StrCat("reading ", path));
  if (S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("reading ", path, ": is a directory"));
  }
  std::string contents;
  if (S_ISREG(st.st_mode) && st.st_size > 0) contents.reserve(static_cast<size_t>(st.st_size));
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(raw, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return Annotate(HPTRAIN_ERRNO("read"), absl::StrCat("reading ", path));
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  return contents;
}

}  // namespace hptrain
