// Whole-file reads and crash-safe whole-file writes.
//
// WriteFileAtomically() is how hptrain publishes files that other programs read while it runs or
// after it dies: the run summary (`--output-json`), checkpoints' index files, status files. A
// reader of PATH sees either the old contents or the new ones, never a prefix, even if the writer
// crashes or the machine loses power mid-write:
//
//   1. write the contents to PATH.tmp.<pid> in the same directory (so rename stays on one file
//      system),
//   2. fsync the temporary file (its data is on disk before its name is),
//   3. rename() it over PATH (atomic replacement, POSIX),
//   4. fsync the directory (the rename itself is durable).
//
// Both functions block on file I/O and are safe to call from several threads for different paths.
// Two threads of one process writing the SAME path at once share the temporary name and may fail;
// serialize such writers. Nothing here throws.
#ifndef HPTRAIN_RUNTIME_BASE_ATOMIC_FILE_H_
#define HPTRAIN_RUNTIME_BASE_ATOMIC_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hptrain {

// Replaces the file at `path` with `contents`, atomically and durably (steps above). A new file
// gets mode 0666 minus the umask; an existing file's mode, owner and hard links are not kept (it
// is replaced by a new inode). A symbolic link at `path` is replaced, not followed.
//
// Returns OK once the new contents and the rename are on disk. On error the message names `path`
// and the failing call; the code follows errno (PermissionDenied for EACCES, NotFound when the
// directory is missing, Internal otherwise). Before the rename any error removes the temporary file
// and leaves `path` untouched. The only error after the rename is a failed directory fsync: `path`
// then already holds the new contents, which may not survive a power loss.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// Returns the whole contents of the regular file at `path`. Errors name `path`: NotFound when it
// does not exist, PermissionDenied when it cannot be opened, FailedPrecondition when it is a
// directory, Internal for other read failures.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace hptrain

#endif  // HPTRAIN_RUNTIME_BASE_ATOMIC_FILE_H_
