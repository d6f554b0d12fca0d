// Exactness: N workers with any allocation compute what one process with the whole global batch
// computes (docs/design.md "Training semantics"), through the real binary, processes and TCP.
#include <cmath>
#include <iostream>

#include "gtest/gtest.h"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

TEST(Equivalence, FourWorkersWithUnevenAllocationMatchOneProcess) {
  TempDir dir;
  const std::string common =
      "  globalBatchSize: 64\n  epochs: 1\n  maxSteps: 20\n  seed: 7\n  threads: 1\n";
  std::string four = dir.Write(
      "four.yaml",
      LeNetJob("equivalence-four",
               "    - {name: small, replicas: 2, batchSize: 8}\n"
               "    - {name: large, replicas: 2, batchSize: 24}\n",
               common + "  checkpoint: {path: " + dir.path() + "/four.ckpt}\n"));
  std::string one = dir.Write(
      "one.yaml", LeNetJob("equivalence-one", "    - {name: single, replicas: 1}\n",
                           common + "  checkpoint: {path: " + dir.path() + "/one.ckpt}\n"));
  ProcessResult a = RunProcess({HptrainBinary(), "run", four, "--quiet"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ProcessResult b = RunProcess({HptrainBinary(), "run", one, "--quiet"});
  ASSERT_EQ(b.exit_code, 0) << b.err;

  auto ca = train::LoadCheckpoint(dir.path() + "/four.ckpt");
  auto cb = train::LoadCheckpoint(dir.path() + "/one.ckpt");
  ASSERT_TRUE(ca.ok()) << ca.status();
  ASSERT_TRUE(cb.ok()) << cb.status();
  EXPECT_EQ(ca->step, 20);
  EXPECT_EQ(cb->step, 20);
  const std::vector<float>& pa = ca->sections["params"];
  const std::vector<float>& pb = cb->sections["params"];
  ASSERT_EQ(pa.size(), 61706u);
  ASSERT_EQ(pa.size(), pb.size());
  // Every parameter equal within 1e-5 relative (an absolute floor of 1e-7 for values near 0,
  // where relative error is meaningless); float summation order is the only difference.
  size_t worst = 0;
  double worst_error = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    double error = std::abs(static_cast<double>(pa[i]) - pb[i]) /
                   std::max(std::abs(static_cast<double>(pb[i])), 1e-2);
    if (error > worst_error) {
      worst_error = error;
      worst = i;
    }
  }
  std::cout << "max relative difference " << worst_error << " at parameter " << worst << "\n";
  EXPECT_LE(worst_error, 1e-5) << "parameter " << worst << ": " << pa[worst] << " vs " << pb[worst];
  // The two runs really trained: parameters moved away from initialisation identically.
  EXPECT_NE(pa, std::vector<float>(pa.size(), 0.0f));
}

}  // namespace
}  // namespace hptrain::testing
