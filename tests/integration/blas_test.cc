// The BLAS library through the real binary: `hptrain version`'s "blas:" line names the library a
// running hptrain maps (its /proc/<pid>/maps), whichever the libblas.so.3 alternative or
// LD_LIBRARY_PATH selects; a CPU worker on the reference BLAS warns once at start, naming the
// fix, and one on OpenBLAS does not.
#include <limits.h>
#include <stdlib.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

constexpr char kWarning[] = "warning: the reference BLAS (";

std::string Resolve(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : "";
}

std::string Parent(const std::string& path) { return path.substr(0, path.rfind('/')); }

// The "blas: ..." line of `hptrain version`, run with `env` (NAME=VALUE entries) added.
std::string VersionBlasLine(const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {HptrainBinary(), "version"});
  const ProcessResult r = RunProcess(argv, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& line : Lines(r.out)) {
    if (line.rfind("blas: ", 0) == 0) return line;
  }
  ADD_FAILURE() << "no blas: line in\n" << r.out;
  return "";
}

// Lines of `text` that contain `needle`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  for (const std::string& line : Lines(text)) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

struct JobRun {
  ProcessResult result;
  std::string mapped_blas;  // the libblas.so* file the `hptrain run` process mapped
};

// `hptrain run` of a 2-worker synthetic job, with `env` added; reads the run process's
// /proc/<pid>/maps (which shows files with links resolved) while it runs.
JobRun RunJob(const TempDir& dir, const std::vector<std::string>& env = {}) {
  const std::string job = dir.Write("blas.yaml", SyntheticJob("blas", 2, "  epochs: 1\n"));
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {HptrainBinary(), "run", job});
  JobRun run;
  run.result = RunProcess(argv, 300, [&run](pid_t pid) {
    if (!run.mapped_blas.empty()) return;
    for (const std::string& line : Lines(ReadFile("/proc/" + std::to_string(pid) + "/maps"))) {
      const size_t slash = line.find('/');
      if (slash == std::string::npos) continue;
      const std::string path = line.substr(slash);
      const std::string name = path.substr(path.rfind('/') + 1);
      if (name.rfind("libblas.so", 0) == 0) {
        run.mapped_blas = path;
        return;
      }
    }
  });
  EXPECT_EQ(run.result.exit_code, 0) << run.result.err;
  return run;
}

TEST(Blas, VersionNamesTheLibraryTheProcessMaps) {
  TempDir dir;
  const JobRun run = RunJob(dir);
  ASSERT_FALSE(run.mapped_blas.empty()) << "hptrain maps no libblas.so*";
  const std::string line = VersionBlasLine();
  EXPECT_NE(line.find(" " + run.mapped_blas), std::string::npos)
      << line << " does not name " << run.mapped_blas;
  const bool reference = line.rfind("blas: reference (netlib) ", 0) == 0;
  if (run.mapped_blas.find("openblas") != std::string::npos) {
    EXPECT_EQ(line.rfind("blas: openblas ", 0), 0u) << line;
  }
  if (Parent(run.mapped_blas).substr(Parent(run.mapped_blas).rfind('/')) == "/blas") {
    EXPECT_TRUE(reference) << line;
  }
  // Each CPU worker warns once on the reference BLAS, and never on another.
  EXPECT_EQ(LinesWith(run.result.err, kWarning).size(), reference ? 2u : 0u) << run.result.err;
}

// Debian's alternatives live beside each other: <multiarch>/blas (reference) and
// <multiarch>/openblas-pthread; LD_LIBRARY_PATH picks one for a process whichever the
// alternative points to.
TEST(Blas, LibraryPathSelectsTheLibraryVersionNames) {
  TempDir dir;
  // The library the alternative gives, as the line names it: <multiarch>/<alternative>/libblas*.
  const std::string default_line = VersionBlasLine();
  const size_t start = default_line.find(" /");
  ASSERT_NE(start, std::string::npos) << default_line;
  const std::string loaded =
      default_line.substr(start + 1, default_line.find(' ', start + 1) - start - 1);
  const std::string multiarch = Parent(Parent(loaded));
  int checked = 0;
  for (const auto& [subdir, prefix] : {std::pair<std::string, std::string>{
                                           "blas", "blas: reference (netlib) "},
                                       {"openblas-pthread", "blas: openblas "}}) {
    const std::string library = Resolve(multiarch + "/" + subdir + "/libblas.so.3");
    if (library.empty()) continue;
    ++checked;
    const std::string line = VersionBlasLine({"LD_LIBRARY_PATH=" + multiarch + "/" + subdir});
    EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
    EXPECT_NE(line.find(" " + library), std::string::npos) << line << " does not name " << library;
    if (subdir == "blas") {
      EXPECT_NE(line.find("apt-get install libopenblas0-pthread"), std::string::npos) << line;
      // The workers inherit the library path: both warn, once each, naming the fix.
      const JobRun run = RunJob(dir, {"LD_LIBRARY_PATH=" + multiarch + "/blas"});
      const std::vector<std::string> warnings = LinesWith(run.result.err, kWarning);
      ASSERT_EQ(warnings.size(), 2u) << run.result.err;
      for (int rank : {0, 1}) {
        EXPECT_EQ(LinesWith(run.result.err, "hptrain worker " + std::to_string(rank) + ": " +
                                                kWarning).size(), 1u) << run.result.err;
      }
      EXPECT_NE(warnings[0].find("apt-get install libopenblas0-pthread"), std::string::npos);
    }
  }
  if (checked == 0) GTEST_SKIP() << "neither " << multiarch << "/blas nor openblas-pthread";
}

}  // namespace
}  // namespace hptrain::testing
