#include "runtime/base/blas.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>

#include <string>

#include "gtest/gtest.h"

namespace hptrain {
namespace {

TEST(ClassifyBlasPath, DebianAlternatives) {
  const BlasLibrary openblas =
      ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  EXPECT_EQ(openblas.kind, BlasKind::kOpenBlas);
  EXPECT_EQ(openblas.name, "openblas");
  EXPECT_EQ(openblas.path, "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  EXPECT_EQ(ClassifyBlasPath("/usr/lib/aarch64-linux-gnu/openblas-openmp/libblas.so.3").kind,
            BlasKind::kOpenBlas);

  const BlasLibrary reference =
      ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  EXPECT_EQ(reference.kind, BlasKind::kReference);
  EXPECT_EQ(reference.name, "reference (netlib)");

  const BlasLibrary blis = ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/blis-pthread/libblas.so.3");
  EXPECT_EQ(blis.kind, BlasKind::kOther);
  EXPECT_EQ(blis.name, "blis");
  const BlasLibrary atlas = ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3.10.3");
  EXPECT_EQ(atlas.kind, BlasKind::kOther);
  EXPECT_EQ(atlas.name, "atlas");
}

TEST(ClassifyBlasPath, LibrariesNamedByFile) {
  EXPECT_EQ(ClassifyBlasPath("/usr/lib64/libopenblasp-r0.3.21.so").kind, BlasKind::kOpenBlas);
  EXPECT_EQ(ClassifyBlasPath("/opt/intel/oneapi/lib/libmkl_rt.so.2").kind, BlasKind::kMkl);
  EXPECT_EQ(ClassifyBlasPath("/usr/lib64/libflexiblas.so.3").name, "flexiblas");
  // Fedora's reference BLAS (no alternatives directory).
  EXPECT_EQ(ClassifyBlasPath("/usr/lib64/libblas.so.3.9.0").kind, BlasKind::kReference);
  const BlasLibrary other = ClassifyBlasPath("/opt/vendor/lib/libvendorgemm.so.1");
  EXPECT_EQ(other.kind, BlasKind::kOther);
  EXPECT_EQ(other.name, "libvendorgemm.so.1");
  const BlasLibrary none = ClassifyBlasPath("");
  EXPECT_EQ(none.kind, BlasKind::kNone);
  EXPECT_EQ(none.name, "none");
}

TEST(IsBlasLibraryName, AcceptsBlasRejectsTheRest) {
  for (const char* name : {"libblas.so.3", "libblas.so", "libopenblas.so.0", "libmkl_rt.so.2",
                           "libblis.so.4", "libflexiblas.so.3"}) {
    EXPECT_TRUE(IsBlasLibraryName(name)) << name;
  }
  for (const char* name : {"liblapack.so.3", "libtorch_cpu.so.1.13", "libc.so.6", "libcblas3",
                           "libgfortran.so.5", ""}) {
    EXPECT_FALSE(IsBlasLibraryName(name)) << name;
  }
}

TEST(DescribeBlas, NamesLibraryAndFix) {
  BlasLibrary openblas =
      ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  openblas.detail = "0.3.21 (pthread, Haswell)";
  EXPECT_EQ(DescribeBlas(openblas),
            "openblas 0.3.21 (pthread, Haswell) "
            "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  EXPECT_EQ(BlasWarning(openblas), "");

  const BlasLibrary reference =
      ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  const std::string line = DescribeBlas(reference);
  EXPECT_NE(line.find("reference (netlib) /usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"),
            std::string::npos) << line;
  EXPECT_NE(line.find("apt-get install libopenblas0-pthread"), std::string::npos) << line;
  const std::string warning = BlasWarning(reference);
  EXPECT_NE(warning.find("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"), std::string::npos);
  EXPECT_NE(warning.find("apt-get install libopenblas0-pthread"), std::string::npos);
  EXPECT_EQ(warning.find('\n'), std::string::npos);

  EXPECT_EQ(BlasWarning(ClassifyBlasPath("")), "");
  EXPECT_EQ(BlasWarning(ClassifyBlasPath("/opt/intel/lib/libmkl_rt.so.2")), "");
}

// This test program links no BLAS; once it loads the system's libblas.so.3 (whatever the
// alternative points to), LoadedBlas finds that very file.
TEST(LoadedBlas, FindsTheLibraryTheLoaderMapped) {
  ASSERT_EQ(LoadedBlas().kind, BlasKind::kNone);
  void* handle = dlopen("libblas.so.3", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) GTEST_SKIP() << "no libblas.so.3 on this machine";
  link_map* map = nullptr;
  ASSERT_EQ(dlinfo(handle, RTLD_DI_LINKMAP, &map), 0);
  char resolved[PATH_MAX];
  ASSERT_NE(realpath(map->l_name, resolved), nullptr);

  const BlasLibrary blas = LoadedBlas();
  EXPECT_NE(blas.kind, BlasKind::kNone);
  EXPECT_EQ(blas.path, resolved);
  // What the path says, unless the library itself says it is OpenBLAS.
  if (blas.kind != BlasKind::kOpenBlas) {
    EXPECT_EQ(blas.kind, ClassifyBlasPath(resolved).kind);
  } else {
    EXPECT_FALSE(blas.detail.empty());
  }
  dlclose(handle);
}

}  // namespace
}  // namespace hptrain
