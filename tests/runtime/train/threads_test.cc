// The default libtorch thread count (spec.threads 0) from fake cgroup v1 and v2 files: the CPU
// quota rounded up to whole cores, or the cores without one, divided among the workers on the
// host, never below 1.
#include "runtime/train/threads.h"

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::train {
namespace {

// A fake cgroup mount: files written at paths relative to its root, directories made as needed.
class FakeCgroup {
 public:
  const std::string& root() const { return dir_.path(); }
  void Write(const std::string& relative, const std::string& contents) const {
    const std::filesystem::path path = std::filesystem::path(dir_.path()) / relative;
    std::filesystem::create_directories(path.parent_path());
    dir_.Write(relative, contents);
  }

 private:
  testing::TempDir dir_;
};

TEST(DefaultThreads, V2QuotaOfOneCoreOnAnEightCoreMachine) {
  FakeCgroup cgroup;
  cgroup.Write("cpu.max", "100000 100000\n");
  EXPECT_EQ(CgroupCpuLimit(cgroup.root()), 1);
  EXPECT_EQ(DefaultThreads(cgroup.root(), /*cores=*/8, /*workers_on_host=*/1), 1);
}

TEST(DefaultThreads, V2WithoutQuotaDividesTheCores) {
  FakeCgroup cgroup;
  cgroup.Write("cpu.max", "max 100000\n");
  EXPECT_EQ(CgroupCpuLimit(cgroup.root()), 0);
  EXPECT_EQ(DefaultThreads(cgroup.root(), 8, 4), 2);
}

TEST(DefaultThreads, V1QuotaIsRoundedUpToWholeCores) {
  FakeCgroup cgroup;
  cgroup.Write("cpu/cpu.cfs_quota_us", "250000\n");
  cgroup.Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(CgroupCpuLimit(cgroup.root()), 3);
  EXPECT_EQ(DefaultThreads(cgroup.root(), 8, 1), 3);

  // The same under cpu,cpuacct, where most v1 systems mount the controller.
  FakeCgroup combined;
  combined.Write("cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  combined.Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(DefaultThreads(combined.root(), 8, 1), 3);
}

TEST(DefaultThreads, V1QuotaMinusOneIsNoQuota) {
  FakeCgroup cgroup;
  cgroup.Write("cpu/cpu.cfs_quota_us", "-1\n");
  cgroup.Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(CgroupCpuLimit(cgroup.root()), 0);
  EXPECT_EQ(DefaultThreads(cgroup.root(), 8, 2), 4);
}

TEST(DefaultThreads, QuotaIsSharedByTheWorkersOnTheHost) {
  FakeCgroup cgroup;
  cgroup.Write("cpu.max", "800000 100000\n");
  EXPECT_EQ(DefaultThreads(cgroup.root(), 64, 4), 2);
  EXPECT_EQ(DefaultThreads(cgroup.root(), 64, 3), 2);  // 8 / 3, rounded down
}

TEST(DefaultThreads, QuotaAboveTheCoresGivesTheCores) {
  FakeCgroup cgroup;
  cgroup.Write("cpu.max", "1600000 100000\n");
  EXPECT_EQ(DefaultThreads(cgroup.root(), 8, 1), 8);
}

TEST(DefaultThreads, MissingOrUnreadableFilesMeanNoQuota) {
  FakeCgroup empty;
  EXPECT_EQ(CgroupCpuLimit(empty.root()), 0);
  EXPECT_EQ(DefaultThreads(empty.root(), 8, 3), 2);
  EXPECT_EQ(DefaultThreads(empty.root() + "/does-not-exist", 8, 1), 8);

  // A directory where the file should be cannot be read (root can read any file, so no chmod).
  FakeCgroup unreadable;
  std::filesystem::create_directories(unreadable.root() + "/cpu.max");
  EXPECT_EQ(DefaultThreads(unreadable.root(), 8, 2), 4);

  // Malformed contents, and a v1 quota without its period.
  for (const char* contents : {"", "lots 100000\n", "100000\n", "100000 0\n", "1 2 3\n"}) {
    FakeCgroup malformed;
    malformed.Write("cpu.max", contents);
    EXPECT_EQ(DefaultThreads(malformed.root(), 8, 1), 8) << "cpu.max: \"" << contents << "\"";
  }
  FakeCgroup no_period;
  no_period.Write("cpu/cpu.cfs_quota_us", "200000\n");
  EXPECT_EQ(DefaultThreads(no_period.root(), 8, 1), 8);
}

TEST(DefaultThreads, NeverBelowOne) {
  FakeCgroup cgroup;
  cgroup.Write("cpu.max", "50000 100000\n");  // half a core
  EXPECT_EQ(DefaultThreads(cgroup.root(), 8, 1), 1);
  EXPECT_EQ(DefaultThreads(cgroup.root(), 8, 4), 1);
  FakeCgroup none;
  EXPECT_EQ(DefaultThreads(none.root(), 2, 4), 1);
  EXPECT_EQ(DefaultThreads(none.root(), 0, 1), 1);  // cores unknown
  EXPECT_EQ(DefaultThreads(none.root(), 8, 0), 8);  // a worker count below 1 counts as 1
}

TEST(DefaultThreads, OwnCgroupAndItsAncestorsTheTightestWinning) {
  // cgroup v2 on a host: /proc/self/cgroup names the process's cgroup below the mount.
  FakeCgroup v2;
  v2.Write("kubepods/cpu.max", "max 100000\n");
  v2.Write("kubepods/pod1/cpu.max", "400000 100000\n");
  v2.Write("kubepods/pod1/ctr/cpu.max", "max 100000\n");
  const std::string self = "0::/kubepods/pod1/ctr\n";
  EXPECT_EQ(CgroupCpuLimit(v2.root(), self), 4);
  EXPECT_EQ(DefaultThreads(v2.root(), 16, 2, self), 2);
  // Without it only the mount's own files count, as inside a cgroup namespace.
  EXPECT_EQ(CgroupCpuLimit(v2.root()), 0);
  // A path outside this process's cgroup namespace leaves the root alone.
  EXPECT_EQ(CgroupCpuLimit(v2.root(), "0::/../../other\n"), 0);

  // cgroup v1: the cpu controller's line; other controllers' paths do not matter.
  FakeCgroup v1;
  v1.Write("cpu,cpuacct/job/cpu.cfs_quota_us", "300000\n");
  v1.Write("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  v1.Write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  v1.Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(CgroupCpuLimit(v1.root(), "12:memory:/other\n4:cpu,cpuacct:/job\n1:name=systemd:/\n"),
            3);
  EXPECT_EQ(CgroupCpuLimit(v1.root(), "4:cpuacct:/job\n"), 0);

  // A container's cgroup mounted at the root, its host path absent under the mount (v1 without a
  // cgroup namespace): the root's files are the container's.
  FakeCgroup container;
  container.Write("cpu/cpu.cfs_quota_us", "200000\n");
  container.Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(CgroupCpuLimit(container.root(), "5:cpu,cpuacct:/kubepods/burstable/pod9/abc\n"), 2);
}

TEST(ChooseThreads, SpecThreadsWin) {
  ThreadChoice choice = ChooseThreads(3, 4);
  EXPECT_EQ(choice.threads, 3);
  EXPECT_EQ(choice.basis, "spec.threads");
}

TEST(ChooseThreads, DefaultOnThisMachineIsAtLeastOneAndSaysWhy) {
  ThreadChoice choice = ChooseThreads(0, 2);
  EXPECT_GE(choice.threads, 1);
  EXPECT_NE(choice.basis.find("over 2 workers on this host"), std::string::npos) << choice.basis;
}

}  // namespace
}  // namespace hptrain::train
