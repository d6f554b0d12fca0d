// Every manifest in examples/ runs: the CPU ones under `hptrain run` for a few steps (the
// TorchScript one after examples/export_torchscript.py has made its module), and the GPU ones,
// which cannot run here, parse, validate and say in their header that they need GPU nodes; and
// the jobs of examples/data/ on the data examples/data/make_data.py writes.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "runtime/job/job_parser.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Examples() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator("examples")) {
    if (entry.path().extension() == ".yaml") out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Header(const std::string& path) {
  std::ifstream in(path);
  std::string line, header;
  while (std::getline(in, line) && line.rfind('#', 0) == 0) header += line + "\n";
  return header;
}

bool DatasetInstalled(const job::JobSpec& spec) {
  if (spec.dataset.name == "synthetic") return true;
  return fs::exists(spec.dataset.path);
}

TEST(Examples, EveryExampleRunsOrIsAGpuExample) {
  const std::vector<std::string> examples = Examples();
  ASSERT_GE(examples.size(), 5u) << "run from the repository root";
  int ran = 0;
  for (const std::string& path : examples) {
    SCOPED_TRACE(path);
    absl::StatusOr<job::JobSpec> spec = job::ParseJobFile(path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    if (spec->device == "cuda") {
      EXPECT_NE(Header(path).find("Needs GPU nodes"), std::string::npos)
          << "a cuda example says in its header that it needs GPU nodes";
      continue;
    }
    if (!DatasetInstalled(*spec)) {
      std::cout << path << ": skipped, its data set is not installed at " << spec->dataset.path
                << "\n";
      continue;
    }
    TempDir dir;
    std::vector<std::string> argv = {HptrainBinary(), "run", path, "--quiet", "--set",
                                     "spec.maxSteps=3", "--set", "spec.epochs=1"};
    if (!spec->model.torchscript.empty()) {
      // The module is a build output: examples/export_torchscript.py makes it (Debian's
      // python3-torch).
      const std::string module = dir.path() + "/" + fs::path(spec->model.torchscript).filename().string();
      ProcessResult exported = RunProcess(
          {"/usr/bin/python3", "examples/export_torchscript.py", module}, 300);
      if (exported.exit_code != 0 && exported.err.find("No module named 'torch'") != std::string::npos) {
        std::cout << path << ": skipped, python3-torch is not installed\n";
        continue;
      }
      ASSERT_EQ(exported.exit_code, 0) << exported.err;
      argv.insert(argv.end(), {"--set", "spec.model.torchscript=" + module});
    }
    if (!spec->checkpoint.path.empty()) {
      argv.insert(argv.end(), {"--set", "spec.checkpoint.path=" + dir.path() + "/job.ckpt"});
    }
    const std::string predictor =
        spec->strategy.type == "mp2" ? spec->strategy.String("predictor") : "";
    if (!predictor.empty() && predictor != "zero" && !fs::exists(predictor)) {
      // The manifest names the runtime image's copy (absolute, as a pod needs); the same file is
      // in the source tree.
      argv.insert(argv.end(), {"--set", "spec.strategy.predictor=examples/predictors/" +
                                            fs::path(predictor).filename().string()});
    }
    if (!spec->collect.path.empty()) {
      argv.insert(argv.end(), {"--set", "spec.collect.path=" + dir.path() + "/job.mp2d"});
    }
    ProcessResult r = RunProcess(argv, 600);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ++ran;
  }
  std::cout << ran << " of " << examples.size() << " examples ran\n";
  EXPECT_GT(ran, 0);
}

// examples/data/: make_data.py writes the first 512 samples of each Fashion-MNIST split in every
// format, and each job runs on its format for two steps and an evaluation.
TEST(Examples, DataExamplesRunOnWhatMakeDataWrites) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  TempDir dir;
  const std::string data = dir.path() + "/data";
  ProcessResult made = RunProcess(
      {"/usr/bin/python3", "examples/data/make_data.py", data, "--limit", "512"}, 300);
  if (made.exit_code != 0 && made.err.find("No module named") != std::string::npos) {
    GTEST_SKIP() << "make_data.py needs python3-numpy and python3-pil: " << made.err;
  }
  ASSERT_EQ(made.exit_code, 0) << made.err;
  int ran = 0;
  for (const auto& entry : fs::directory_iterator("examples/data")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    absl::StatusOr<job::JobSpec> spec = job::ParseJobFile(path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    // /data/fashion-mnist/<format> in the manifest: the same folder under make_data.py's output.
    const std::string folder = data + "/" + fs::path(spec->dataset.path).filename().string();
    ASSERT_TRUE(fs::is_directory(folder)) << folder;
    ProcessResult r = RunProcess({HptrainBinary(), "run", path, "--quiet", "--set",
                                  "spec.maxSteps=2", "--set", "spec.epochs=1", "--set",
                                  "spec.dataset.path=" + folder},
                                 600);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ++ran;
  }
  EXPECT_GE(ran, 4);
}

}  // namespace
}  // namespace hptrain::testing
