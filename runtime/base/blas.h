// The BLAS library this process runs libtorch's CPU matrix products on, found at run time.
//
// Debian's libtorch links `libblas.so.3`, which the dynamic loader resolves through the
// `libblas.so.3-<triplet>` alternative: on a fresh Debian 12 that is the reference (netlib)
// BLAS, on which the demo job trains at about two thirds of OpenBLAS's samples/s; `apt-get
// install libopenblas0-pthread` switches the alternative to OpenBLAS. PyTorch's own builds link MKL statically instead, and
// load no BLAS library at all. `hptrain version` prints what was loaded (DescribeBlas) and a CPU
// worker logs BlasWarning once at start.
//
// Nothing here links a BLAS: LoadedBlas walks the objects the loader has already mapped
// (dl_iterate_phdr) and asks the one it finds for OpenBLAS's entry points with dlsym, so code
// without libtorch can call it too (it then finds none). Thread-safe; nothing throws.
#ifndef HPTRAIN_RUNTIME_BASE_BLAS_H_
#define HPTRAIN_RUNTIME_BASE_BLAS_H_

#include <string>

namespace hptrain {

enum class BlasKind {
  kNone,       // no BLAS shared library is loaded (none linked, or built into libtorch)
  kOpenBlas,   // OpenBLAS (Debian's openblas-pthread/-openmp/-serial alternatives)
  kReference,  // the reference BLAS from netlib (Debian's libblas3, the default alternative)
  kMkl,        // Intel oneMKL (libmkl_rt)
  kOther,      // another implementation (BLIS, ATLAS, FlexiBLAS, ...)
};

struct BlasLibrary {
  BlasKind kind = BlasKind::kNone;
  // "openblas", "reference (netlib)", "mkl", "blis", "atlas", "flexiblas", or for kOther the
  // library's file name; "none" for kNone.
  std::string name;
  // The loaded library's path with symbolic links resolved (the alternatives' target); "" for
  // kNone.
  std::string path;
  // OpenBLAS only: its version, threading and core, e.g. "0.3.21 (pthread, Haswell)"; else "".
  std::string detail;
};

// What a BLAS library is, from its path with links resolved; kind kNone for "". Pure: the path
// need not exist. Paths name the implementation in their directory (Debian's
// /usr/lib/<triplet>/openblas-pthread/libblas.so.3, .../blas/libblas.so.3.11.0) or file name
// (libopenblas.so.0, libmkl_rt.so.2, libblis.so.4).
BlasLibrary ClassifyBlasPath(const std::string& resolved_path);

// Whether `file_name` (no directory) is a library that provides BLAS: libblas.so*,
// libopenblas*, libmkl_rt*, libblis*, libflexiblas*.
bool IsBlasLibraryName(const std::string& file_name);

// The BLAS library loaded in this process: the first libblas.so* among the loaded objects, else
// the first other one IsBlasLibraryName accepts; kind kNone if there is none. An object that
// exports openblas_get_config is OpenBLAS whatever its path, and fills `detail`.
BlasLibrary LoadedBlas();

// One line for `hptrain version`, after "blas: ": "openblas 0.3.21 (pthread, Haswell) PATH",
// "reference (netlib) PATH — slow on CPU; apt-get install libopenblas0-pthread", "none loaded
// (libtorch's own, if it has one built in)".
std::string DescribeBlas(const BlasLibrary& blas);

// The warning a CPU worker logs at start when `blas` is the reference BLAS (naming the path and
// the package that replaces it); "" for any other.
std::string BlasWarning(const BlasLibrary& blas);

}  // namespace hptrain

#endif  // HPTRAIN_RUNTIME_BASE_BLAS_H_
