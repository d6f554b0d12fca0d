// File-system queries and removal through POSIX calls, for code linked into programs that load
// libtorch.
//
// Why not std::filesystem: PyTorch's own builds of libtorch (the pip wheels and the LibTorch
// archives) link parts of libstdc++ statically and export them, std::filesystem among them
// (pytorch/pytorch#133437). A program that loads such a libtorch may have its std::filesystem
// calls bound to those copies instead of the C++ runtime's; on an H100 with torch 2.11 (cu130)
// hptrain's call of std::filesystem::remove_all ran into libtorch.so and jumped to address 0, so
// every `hptrain run` ended with SIGSEGV. Putting the C++ runtime first among the program's
// libraries did not change that binding. PyTorch's own code avoids <filesystem> on Linux for the
// same reason; so does everything under runtime/ (tests/runtime/base/files_test.cc checks).
//
// Nothing here throws; the functions are safe to call from several threads.
#ifndef HPTRAIN_RUNTIME_BASE_FILES_H_
#define HPTRAIN_RUNTIME_BASE_FILES_H_

#include <string>
#include <vector>

namespace hptrain {

// Whether `path` names anything (a symbolic link counts as what it points to, as stat(2)).
bool PathExists(const std::string& path);

// Whether `path` is a directory (or a symbolic link to one).
bool IsDirectory(const std::string& path);

// The directory part of `path` ("" for a bare name, "/" for a file in the root), as
// std::filesystem::path::parent_path() gives it for the paths hptrain handles.
std::string ParentDirectory(const std::string& path);

// The last component of `path` (everything after the last '/').
std::string FileName(const std::string& path);

// The names in directory `dir`, without "." and "..", in no particular order; empty if it cannot
// be read.
std::vector<std::string> ListDirectory(const std::string& dir);

// Removes `path` and, if it is a directory, everything under it; symbolic links are removed,
// never followed. Best effort: returns false if anything was left behind or could not be read.
bool RemoveTree(const std::string& path);

}  // namespace hptrain

#endif  // HPTRAIN_RUNTIME_BASE_FILES_H_
