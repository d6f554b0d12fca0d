// The fault matrix of docs/reliability.md, through the real binaries: each fault is injected into
// a running `hptrain run` and the test checks what the user gets. With
// spec.runPolicy.restartPolicy OnFailure the launcher restarts the gang from the last checkpoint
// by itself, and the run ends with exactly (bitwise) the parameters of an uninterrupted run; with
// Never the fault fails the run, and the checkpoint left behind is whole and resumable. The
// faults: SIGKILL of a worker mid-step and mid-checkpoint-write, SIGKILL of the ps, SIGSTOP of a
// worker, a full disk at a checkpoint, a network cut between two workers.
//
// Each test prints how long the fault took to be detected (kill to the gang's restart, or to the
// run's end); docs/reliability.md quotes these figures. Nothing here asserts a duration.
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/train/checkpoint.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSteps = 60;
constexpr int kInterval = 10;

// Two workers training an MLP on synthetic data with a deterministic seed, a checkpoint every
// 10 steps, and each step's compute stretched so that a fault lands mid-run.
std::string FaultJob(const std::string& name, const std::string& checkpoint,
                     const std::string& run_policy) {
  return "apiVersion: hptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata:\n"
         "  name: " +
         name +
         "\n"
         "spec:\n"
         "  model: {name: mlp, hidden: [256, 256]}\n"
         "  dataset: {name: synthetic, synthetic: {samples: 8192, testSamples: 256}}\n"
         "  strategy: {type: ssgd}\n"
         "  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}\n"
         "  globalBatchSize: 64\n"
         "  threads: 1\n"
         "  seed: 7\n"
         "  maxSteps: " +
         std::to_string(kSteps) +
         "\n"
         "  workers: {replicas: 2}\n"
         "  checkpoint: {path: " +
         checkpoint + ", intervalSteps: " + std::to_string(kInterval) +
         "}\n"
         "  runPolicy: " +
         run_policy +
         "\n"
         "  testing: {slowdown: [8, 8]}\n";
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The step of the checkpoint at `path`, -1 if there is none (or it does not load).
int64_t CheckpointStep(const std::string& path) {
  if (!FileExists(path)) return -1;
  auto c = train::LoadCheckpoint(path);
  return c.ok() ? c->step : -1;
}

// Files in `dir` whose names start with `prefix`.
std::vector<std::string> FilesStartingWith(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

// Both checkpoints hold the same parameters and optimizer state, bit for bit, at the last step.
void ExpectSameFinalCheckpoint(const std::string& expected_path, const std::string& actual_path) {
  auto expected = train::LoadCheckpoint(expected_path);
  auto actual = train::LoadCheckpoint(actual_path);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(actual.ok()) << actual.status();
  EXPECT_EQ(expected->step, kSteps);
  EXPECT_EQ(actual->step, kSteps);
  const std::vector<float>& pe = expected->sections["params"];
  const std::vector<float>& pa = actual->sections["params"];
  ASSERT_FALSE(pe.empty());
  ASSERT_EQ(pa.size(), pe.size());
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < pe.size(); ++i) {
    if (std::memcmp(&pe[i], &pa[i], sizeof(float)) != 0 && differing++ == 0) first = i;
  }
  EXPECT_EQ(differing, 0u) << "first difference at " << first << ": " << pe[first] << " vs "
                           << pa[first];
  EXPECT_EQ(expected->sections["momentum"], actual->sections["momentum"]);
  EXPECT_EQ(expected->optimizer_steps, actual->optimizer_steps);
}

class Faults : public ::testing::Test {
 protected:
  // The uninterrupted run every recovered run is compared with; once per test (a few seconds).
  void RunReference() {
    reference_ckpt_ = dir_.path() + "/reference.ckpt";
    const std::string job = dir_.Write(
        "reference.yaml", FaultJob("faults-reference", reference_ckpt_, "{restartPolicy: Never}"));
    ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(CheckpointStep(reference_ckpt_), kSteps);
  }

  // Runs `job` (OnFailure) and sends `signo` to the first process whose command line has all of
  // `needles` once a checkpoint in [kInterval, kSteps) exists. Returns the run's result; `*killed`
  // is the pid signalled, `*detected_s` the time from the signal until the gang was restarted (a
  // new process matching `needles` ran).
  ProcessResult RunAndSignal(const std::string& job, const std::string& ckpt,
                             const std::vector<std::string>& needles, int signo, pid_t* killed,
                             double* detected_s) {
    Clock::time_point signalled;
    *killed = -1;
    *detected_s = -1;
    return RunProcess({HptrainBinary(), "run", job, "--quiet"}, 300, [&](pid_t) {
      if (*killed > 0) {
        if (*detected_s >= 0) return;
        for (pid_t pid : FindProcesses(needles)) {
          if (pid != *killed) *detected_s = SecondsSince(signalled);
        }
        return;
      }
      const int64_t step = CheckpointStep(ckpt);
      if (step < kInterval || step >= kSteps) return;
      std::vector<pid_t> pids = FindProcesses(needles);
      if (pids.empty()) return;
      *killed = pids[0];
      signalled = Clock::now();
      kill(*killed, signo);
    });
  }

  TempDir dir_;
  std::string reference_ckpt_;
};

TEST_F(Faults, WorkerKilledMidStepRestartsTheGangToTheUninterruptedParameters) {
  ASSERT_NO_FATAL_FAILURE(RunReference());
  const std::string ckpt = dir_.path() + "/worker.ckpt";
  const std::string job =
      dir_.Write("worker.yaml",
                 FaultJob("faults-worker", ckpt, "{restartPolicy: OnFailure, backoffLimit: 2}"));
  pid_t killed = -1;
  double detected_s = -1;
  ProcessResult r =
      RunAndSignal(job, ckpt, {job, "worker", "--rank 1"}, SIGKILL, &killed, &detected_s);
  ASSERT_GT(killed, 0) << "never saw a checkpoint in [10, 60); exit " << r.exit_code << "\n"
                       << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("worker-1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restarting the gang from the checkpoint at step"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(restart 1 of at most 2)"), std::string::npos) << r.err;
  ExpectSameFinalCheckpoint(reference_ckpt_, ckpt);
  EXPECT_TRUE(FindProcesses({job}).empty());
  std::cout << "worker SIGKILL: gang restarted " << detected_s << " s after the kill\n";
}

TEST_F(Faults, PsKilledRestartsTheGangToTheUninterruptedParameters) {
  ASSERT_NO_FATAL_FAILURE(RunReference());
  const std::string ckpt = dir_.path() + "/ps.ckpt";
  const std::string job =
      dir_.Write("ps.yaml", FaultJob("faults-ps", ckpt, "{restartPolicy: OnFailure}"));
  pid_t killed = -1;
  double detected_s = -1;
  // Only ps-0 is given a port file.
  ProcessResult r = RunAndSignal(job, ckpt, {job, "--port-file"}, SIGKILL, &killed, &detected_s);
  ASSERT_GT(killed, 0) << "never saw a checkpoint in [10, 60); exit " << r.exit_code << "\n"
                       << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("ps-0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restarting the gang from the checkpoint at step"), std::string::npos)
      << r.err;
  ExpectSameFinalCheckpoint(reference_ckpt_, ckpt);
  EXPECT_TRUE(FindProcesses({job}).empty());
  std::cout << "ps SIGKILL: gang restarted " << detected_s << " s after the kill\n";
}

// Rank 0 is killed the moment it creates the temporary file of its second checkpoint (inotify),
// so the kill lands while the checkpoint is being written. The checkpoint file keeps the first
// checkpoint, the gang restarts from it, and the dead writer's temporary file is removed.
TEST_F(Faults, WorkerKilledMidCheckpointWriteKeepsThePreviousCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(RunReference());
  // The watcher races the writer: on a loaded machine the write may finish (and the temporary be
  // renamed) before the kill lands, which is not the case under test; then the run is repeated.
  constexpr int kAttempts = 3;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    const std::string sub = dir_.path() + "/ckpt-" + std::to_string(attempt);
    std::filesystem::create_directory(sub);
    const std::string ckpt = sub + "/write.ckpt";
    const std::string job = dir_.Write(
        "write.yaml",
        FaultJob("faults-write", ckpt, "{restartPolicy: OnFailure, backoffLimit: 1}"));

    const int inotify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    ASSERT_GE(inotify, 0) << std::strerror(errno);
    ASSERT_GE(inotify_add_watch(inotify, sub.c_str(), IN_CREATE), 0) << std::strerror(errno);
    std::atomic<bool> stop{false};
    std::atomic<pid_t> killed{-1};
    std::atomic<int64_t> step_on_disk{-1};
    std::atomic<bool> temporary_seen_after_kill{false};
    Clock::time_point killed_at;
    // Watches for "write.ckpt.tmp.<pid>": the first is the checkpoint at step 10, left alone;
    // the second is killed.
    std::thread watcher([&] {
      int temporaries = 0;
      alignas(inotify_event) char buffer[4096];
      while (!stop.load() && killed.load() < 0) {
        const ssize_t n = read(inotify, buffer, sizeof(buffer));
        if (n <= 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          continue;
        }
        for (ssize_t at = 0; at < n;) {
          const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
          at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
          const std::string name = event->len > 0 ? event->name : "";
          const std::string prefix = "write.ckpt.tmp.";
          if (name.rfind(prefix, 0) != 0 || ++temporaries != 2) continue;
          const pid_t writer = std::atoi(name.c_str() + prefix.size());
          kill(writer, SIGKILL);
          killed_at = Clock::now();
          killed.store(writer);
          temporary_seen_after_kill.store(FileExists(sub + "/" + name));
          step_on_disk.store(CheckpointStep(ckpt));
          break;
        }
      }
    });
    double detected_s = -1;
    ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 300, [&](pid_t) {
      if (killed.load() <= 0 || detected_s >= 0) return;
      for (pid_t pid : FindProcesses({job, "worker", "--rank 0"})) {
        if (pid != killed.load()) detected_s = SecondsSince(killed_at);
      }
    });
    stop.store(true);
    watcher.join();
    close(inotify);

    ASSERT_GT(killed.load(), 0) << "no second checkpoint write was seen; exit " << r.exit_code
                                << "\n" << r.err;
    if (!temporary_seen_after_kill.load() && attempt < kAttempts) {
      std::cout << "attempt " << attempt << ": the write finished before the kill landed; again\n";
      continue;
    }
    // The kill landed mid-write: the writer's temporary file was still there, and the checkpoint
    // file still held the previous checkpoint, whole.
    EXPECT_TRUE(temporary_seen_after_kill.load());
    EXPECT_EQ(step_on_disk.load(), kInterval);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("restarting the gang from the checkpoint at step 10"), std::string::npos)
        << r.err;
    ExpectSameFinalCheckpoint(reference_ckpt_, ckpt);
    // No half-written file is left next to the checkpoint.
    EXPECT_TRUE(FilesStartingWith(sub, "write.ckpt.tmp.").empty());
    std::cout << "SIGKILL mid-checkpoint-write: gang restarted " << detected_s
              << " s after the kill\n";
    return;
  }
}

// A stopped worker (SIGSTOP: a hang, its sockets still open) makes its peers fail after
// spec.runPolicy.peerTimeoutSeconds; the run ends instead of waiting forever.
TEST_F(Faults, StoppedWorkerFailsItsPeersWithinThePeerTimeout) {
  const std::string ckpt = dir_.path() + "/hang.ckpt";
  const std::string job = dir_.Write(
      "hang.yaml", FaultJob("faults-hang", ckpt, "{restartPolicy: Never, peerTimeoutSeconds: 5}"));
  pid_t stopped = -1;
  Clock::time_point stopped_at;
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 100, [&](pid_t) {
    if (stopped > 0) return;
    const int64_t step = CheckpointStep(ckpt);
    if (step < kInterval || step >= kSteps) return;
    std::vector<pid_t> pids = FindProcesses({job, "worker", "--rank 1"});
    if (pids.empty()) return;
    stopped = pids[0];
    stopped_at = Clock::now();
    kill(stopped, SIGSTOP);
  });
  const double ended_s = SecondsSince(stopped_at);
  ASSERT_GT(stopped, 0) << "never saw a checkpoint in [10, 60); exit " << r.exit_code << "\n"
                        << r.err;
  // 100 s is less than the default peer timeout (120 s): ending at all shows the limit applied.
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("worker-0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runPolicy.restartPolicy is Never"), std::string::npos) << r.err;
  EXPECT_TRUE(FindProcesses({job}).empty());
  // The checkpoint on disk is whole.
  EXPECT_GE(CheckpointStep(ckpt), kInterval);
  std::cout << "SIGSTOP of a worker with peerTimeoutSeconds 5: the run ended " << ended_s
            << " s after the stop; stderr:\n"
            << r.err;
}

// A full disk at the second checkpoint: the write fails (ENOSPC), the run fails with a line
// naming the checkpoint, the first checkpoint stays intact with no temporary file beside it, and
// once there is room again --resume continues from it to the uninterrupted run's parameters.
TEST_F(Faults, FullDiskKeepsThePreviousCheckpointAndResumesFromIt) {
  ASSERT_NO_FATAL_FAILURE(RunReference());
  const auto checkpoint_bytes = std::filesystem::file_size(reference_ckpt_);
  const std::string mnt = dir_.path() + "/small";
  std::filesystem::create_directory(mnt);
  // Room for one checkpoint, not for a second one written beside it before the rename.
  const std::string size = "size=" + std::to_string(checkpoint_bytes * 3 / 2 + 8192);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, size.c_str()) != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno)
                 << "); this test needs CAP_SYS_ADMIN";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string ckpt = mnt + "/full.ckpt";
  const std::string job =
      dir_.Write("full.yaml", FaultJob("faults-full", ckpt, "{restartPolicy: Never}"));
  const Clock::time_point start = Clock::now();
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 300);
  const double ended_s = SecondsSince(start);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(r.err.find("writing checkpoint"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(ckpt), std::string::npos) << r.err;
  EXPECT_EQ(CheckpointStep(ckpt), kInterval);
  EXPECT_TRUE(FilesStartingWith(mnt, "full.ckpt.tmp.").empty());

  // Room again: the run resumes from the checkpoint the full disk left.
  const std::string bigger = "size=" + std::to_string(checkpoint_bytes * 4 + 8192);
  ASSERT_EQ(mount("tmpfs", mnt.c_str(), "tmpfs", MS_REMOUNT, bigger.c_str()), 0)
      << std::strerror(errno);
  ProcessResult resumed = RunProcess({HptrainBinary(), "run", job, "--quiet", "--resume"}, 300);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  ExpectSameFinalCheckpoint(reference_ckpt_, ckpt);
  std::cout << "full disk at a checkpoint: the run failed " << ended_s
            << " s after its start; stderr:\n"
            << r.err;
}

// Three "hosts" (network namespaces: the ps and the launcher, worker 0, worker 1) on one bridge,
// as the benchmark harness's emulated cluster (bench/README.md). Removed on destruction.
class Cluster {
 public:
  Cluster() : prefix_("hpf" + std::to_string(getpid())) {}
  ~Cluster() {
    for (int i = 0; i < 3; ++i) Run("ip netns del " + Host(i) + " 2>/dev/null");
    Run("ip netns del " + prefix_ + "-sw 2>/dev/null");
  }
  // Builds the namespaces and links; false (with `*why`) where this machine does not allow it.
  bool Up(std::string* why) {
    const std::string sw = prefix_ + "-sw";
    std::vector<std::string> commands = {"ip netns add " + sw,
                                         "ip -n " + sw + " link add br0 type bridge",
                                         "ip -n " + sw + " link set br0 up"};
    for (int i = 0; i < 3; ++i) {
      const std::string ns = Host(i);
      commands.push_back("ip netns add " + ns);
      commands.push_back("ip -n " + ns + " link set lo up");
      commands.push_back("ip -n " + ns + " link add eth0 type veth peer name h" +
                         std::to_string(i) + " netns " + sw);
      commands.push_back("ip -n " + ns + " addr add " + Address(i) + "/24 dev eth0");
      commands.push_back("ip -n " + ns + " link set eth0 up");
      commands.push_back("ip -n " + sw + " link set h" + std::to_string(i) + " master br0");
      commands.push_back("ip -n " + sw + " link set h" + std::to_string(i) + " up");
    }
    for (const std::string& command : commands) {
      if (Run(command + " 2>/dev/null") != 0) {
        *why = "'" + command + "' failed (network namespaces need root and iproute2)";
        return false;
      }
    }
    return true;
  }
  std::string Host(int i) const { return prefix_ + "-h" + std::to_string(i); }
  std::string Address(int i) const { return "10.91.0." + std::to_string(i + 1); }
  std::string Placement() const {
    auto host = [&](int i) {
      return "{exec: [ip, netns, exec, " + Host(i) + "], address: " + Address(i) + "}";
    };
    return "ps: " + host(0) + "\nworkers:\n  - " + host(1) + "\n  - " + host(2) + "\n";
  }
  // Cuts (or heals) the link between the two workers only: each drops the other's address.
  bool Cut(bool cut) {
    const std::string verb = cut ? "add" : "del";
    return Run("ip -n " + Host(1) + " route " + verb + " blackhole " + Address(2) + "/32") == 0 &&
           Run("ip -n " + Host(2) + " route " + verb + " blackhole " + Address(1) + "/32") == 0;
  }

 private:
  static int Run(const std::string& command) { return std::system(command.c_str()); }
  std::string prefix_;
};

// A network cut between the two workers (each can still reach the ps): both wait on each other,
// fail after spec.runPolicy.peerTimeoutSeconds, and the launcher restarts the gang; once the cut
// heals the run ends with the uninterrupted run's parameters.
TEST_F(Faults, NetworkCutBetweenWorkersFailsWithinThePeerTimeoutAndRecovers) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  Cluster cluster;
  std::string why;
  if (!cluster.Up(&why)) GTEST_SKIP() << why;
  ASSERT_NO_FATAL_FAILURE(RunReference());
  const std::string ckpt = dir_.path() + "/cut.ckpt";
  const std::string job = dir_.Write(
      "cut.yaml", FaultJob("faults-cut", ckpt,
                           "{restartPolicy: OnFailure, backoffLimit: 3, peerTimeoutSeconds: 5}"));
  const std::string placement = dir_.Write("cut.placement.yaml", cluster.Placement());
  std::vector<pid_t> cut_workers;
  Clock::time_point cut_at;
  double failed_s = -1;
  bool healed = false;
  ProcessResult r = RunProcess(
      {"/usr/sbin/ip", "netns", "exec", cluster.Host(0), HptrainBinary(), "run", job, "--quiet",
       "--placement", placement},
      300, [&](pid_t) {
        if (healed) return;
        if (cut_workers.empty()) {
          const int64_t step = CheckpointStep(ckpt);
          if (step < kInterval || step >= kSteps) return;
          cut_workers = FindProcesses({job, "worker"});
          if (cut_workers.size() != 2) {
            cut_workers.clear();
            return;
          }
          ASSERT_TRUE(cluster.Cut(true));
          cut_at = Clock::now();
          return;
        }
        // The gang that saw the cut is gone: heal it for the restarted one.
        for (pid_t pid : FindProcesses({job, "worker"})) {
          if (std::find(cut_workers.begin(), cut_workers.end(), pid) != cut_workers.end()) return;
        }
        failed_s = SecondsSince(cut_at);
        ASSERT_TRUE(cluster.Cut(false));
        healed = true;
      });
  ASSERT_FALSE(cut_workers.empty())
      << "never saw a checkpoint in [10, 60); exit " << r.exit_code << "\n"
      << r.err;
  EXPECT_TRUE(healed);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("Timed out"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restarting the gang from the checkpoint at step"), std::string::npos)
      << r.err;
  ExpectSameFinalCheckpoint(reference_ckpt_, ckpt);
  std::cout << "network cut between the workers (peerTimeoutSeconds 5): the gang was stopped "
            << failed_s << " s after the cut; stderr:\n"
            << r.err;
}

TEST(FaultsInput, NegativePeerTimeoutIsBadInput) {
  TempDir dir;
  const std::string job = dir.Write(
      "bad.yaml", SyntheticJob("faults-bad", 1, "  runPolicy: {peerTimeoutSeconds: -1}\n"));
  ProcessResult r = RunProcess({HptrainBinary(), "run", job, "--quiet"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("spec.runPolicy.peerTimeoutSeconds"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hptrain::testing
