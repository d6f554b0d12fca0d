#include "runtime/base/blas.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/files.h"

namespace hptrain {
namespace {

constexpr char kFix[] = "apt-get install libopenblas0-pthread";

std::string Resolve(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

// dl_iterate_phdr's callback: the loaded objects' paths, libblas.so* first.
struct Found {
  std::string blas;   // the first libblas.so*
  std::string other;  // the first other BLAS library
};

int CollectBlas(struct dl_phdr_info* info, size_t, void* data) {
  auto* found = static_cast<Found*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  const std::string path = info->dlpi_name;
  const std::string name = FileName(path);
  if (!IsBlasLibraryName(name)) return 0;
  if (absl::StartsWith(name, "libblas.so")) {
    if (found->blas.empty()) found->blas = path;
  } else if (found->other.empty()) {
    found->other = path;
  }
  return 0;
}

// "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64" and parallel mode 1 ->
// "0.3.21 (pthread, Haswell)".
std::string OpenBlasDetail(void* handle) {
  using ConfigFn = char* (*)();
  using ParallelFn = int (*)();
  auto config = reinterpret_cast<ConfigFn>(dlsym(handle, "openblas_get_config"));
  auto parallel = reinterpret_cast<ParallelFn>(dlsym(handle, "openblas_get_parallel"));
  auto core = reinterpret_cast<ConfigFn>(dlsym(handle, "openblas_get_corename"));
  std::string version;
  if (config != nullptr && config() != nullptr) {
    std::vector<std::string> words = absl::StrSplit(config(), ' ', absl::SkipEmpty());
    if (words.size() >= 2) version = words[1];
  }
  std::string threading;
  if (parallel != nullptr) {
    switch (parallel()) {
      case 0: threading = "serial"; break;
      case 1: threading = "pthread"; break;
      case 2: threading = "openmp"; break;
      default: break;
    }
  }
  if (core != nullptr && core() != nullptr) {
    threading = threading.empty() ? core() : absl::StrCat(threading, ", ", core());
  }
  if (threading.empty()) return version;
  return version.empty() ? absl::StrCat("(", threading, ")")
                         : absl::StrCat(version, " (", threading, ")");
}

}  // namespace

bool IsBlasLibraryName(const std::string& file_name) {
  const std::string name = absl::AsciiStrToLower(file_name);
  for (const char* prefix : {"libblas.so", "libopenblas", "libmkl_rt", "libblis", "libflexiblas"}) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

BlasLibrary ClassifyBlasPath(const std::string& resolved_path) {
  BlasLibrary blas;
  blas.path = resolved_path;
  if (resolved_path.empty()) {
    blas.name = "none";
    return blas;
  }
  const std::string name = absl::AsciiStrToLower(FileName(resolved_path));
  const std::string dir = absl::AsciiStrToLower(FileName(ParentDirectory(resolved_path)));
  // The implementation's name, in the directory of an alternative or in the file name; checked
  // before the generic "blas" (flexiblas and openblas contain it).
  const struct {
    const char* word;
    BlasKind kind;
    const char* label;
  } kKnown[] = {{"openblas", BlasKind::kOpenBlas, "openblas"},
                {"mkl", BlasKind::kMkl, "mkl"},
                {"flexiblas", BlasKind::kOther, "flexiblas"},
                {"blis", BlasKind::kOther, "blis"},
                {"atlas", BlasKind::kOther, "atlas"}};
  for (const auto& known : kKnown) {
    if (absl::StrContains(name, known.word) || absl::StrContains(dir, known.word)) {
      blas.kind = known.kind;
      blas.name = known.label;
      return blas;
    }
  }
  // Debian's libblas3 (/usr/lib/<triplet>/blas/libblas.so.3.11.0), or a libblas.so / librefblas
  // elsewhere (Fedora's blas package, a netlib build): the reference implementation.
  if (dir == "blas" || absl::StartsWith(name, "libblas.so") ||
      absl::StartsWith(name, "librefblas")) {
    blas.kind = BlasKind::kReference;
    blas.name = "reference (netlib)";
    return blas;
  }
  blas.kind = BlasKind::kOther;
  blas.name = FileName(resolved_path);
  return blas;
}

BlasLibrary LoadedBlas() {
  Found found;
  dl_iterate_phdr(CollectBlas, &found);
  const std::string loaded = !found.blas.empty() ? found.blas : found.other;
  if (loaded.empty()) return ClassifyBlasPath("");
  BlasLibrary blas = ClassifyBlasPath(Resolve(loaded));
  // Already loaded: RTLD_NOLOAD only returns a handle to it (counted; closed below).
  if (void* handle = dlopen(loaded.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
    if (dlsym(handle, "openblas_get_config") != nullptr) {
      blas.kind = BlasKind::kOpenBlas;
      blas.name = "openblas";
      blas.detail = OpenBlasDetail(handle);
    }
    dlclose(handle);
  }
  return blas;
}

std::string DescribeBlas(const BlasLibrary& blas) {
  switch (blas.kind) {
    case BlasKind::kNone:
      return "none loaded (libtorch's own, if it has one built in)";
    case BlasKind::kReference:
      return absl::StrCat(blas.name, " ", blas.path, " — slow on CPU; ", kFix);
    default:
      return blas.detail.empty() ? absl::StrCat(blas.name, " ", blas.path)
                                 : absl::StrCat(blas.name, " ", blas.detail, " ", blas.path);
  }
}

std::string BlasWarning(const BlasLibrary& blas) {
  if (blas.kind != BlasKind::kReference) return "";
  return absl::StrCat("warning: the reference BLAS (", blas.path, ") makes CPU training slow; ",
                      kFix);
}

}  // namespace hptrain
