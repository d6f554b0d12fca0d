// Bad input and failures as a user meets them through the real binary: every bad input exits 2
// with exactly one line on stderr that names the problem and leaves no --output-json behind; a
// worker killed mid-run fails the run (exit 1) naming the worker and the signal; Ctrl-C stops
// every process (exit 130). Neither leaves a process behind.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

// stderr as exactly one line (ending in '\n'), or a failure showing all of it.
::testing::AssertionResult OneLine(const std::string& err) {
  std::vector<std::string> lines = Lines(err);
  if (lines.size() == 1 && !err.empty() && err.back() == '\n') {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "expected exactly one line on stderr, got "
                                       << lines.size() << ":\n" << err;
}

::testing::AssertionResult Contains(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << needle << "\" not in: " << text;
}

// A valid 2-worker synthetic job, with `extra` appended under spec.
std::string Job(const std::string& extra = "") { return SyntheticJob("errors", 2, extra); }

class BadInput : public ::testing::Test {
 protected:
  // Runs `hptrain run <args> --output-json <dir>/summary.json` and checks the common contract:
  // exit 2, one line on stderr, no summary file. Returns the stderr line.
  std::string ExpectBadInput(std::vector<std::string> args, int expected_exit = 2) {
    std::vector<std::string> argv = {HptrainBinary(), "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--output-json", json_});
    ProcessResult r = RunProcess(argv, 120);
    EXPECT_EQ(r.exit_code, expected_exit) << "stdout:\n" << r.out << "stderr:\n" << r.err;
    EXPECT_TRUE(OneLine(r.err));
    EXPECT_FALSE(FileExists(json_)) << json_ << " was written";
    // Nothing started (or everything stopped).
    EXPECT_TRUE(FindProcesses({dir_.path()}).empty());
    return r.err;
  }

  TempDir dir_;
  const std::string json_ = dir_.path() + "/summary.json";
};

TEST_F(BadInput, MalformedYamlNamesFileLineAndColumn) {
  // Line 4, column 10 is the second ':' of "name: x: y".
  std::string path = dir_.Write("bad.yaml",
                                "apiVersion: hptrain.io/v1alpha1\n"
                                "kind: TrainingJob\n"
                                "metadata:\n"
                                "  name: x: y\n"
                                "spec:\n"
                                "  epochs: 1\n");
  std::string err = ExpectBadInput({path});
  EXPECT_TRUE(Contains(err, "bad.yaml:4:10:")) << "file:line:col of the error";
  EXPECT_TRUE(Contains(err, "YAML"));
}

TEST_F(BadInput, InvalidFieldValueNamesFieldPath) {
  std::string path = dir_.Write("job.yaml", Job());
  std::string err = ExpectBadInput({path, "--set", "spec.globalBatchSize=-3"});
  EXPECT_TRUE(Contains(err, "spec.globalBatchSize"));
  EXPECT_TRUE(Contains(err, "-3"));

  // The same in the file itself.
  std::string text = Job();
  text.replace(text.find("globalBatchSize: 64"), 19, "globalBatchSize: 0");
  std::string in_file = dir_.Write("zero.yaml", text);
  err = ExpectBadInput({in_file});
  EXPECT_TRUE(Contains(err, "spec.globalBatchSize"));
  EXPECT_TRUE(Contains(err, "zero.yaml"));
}

TEST_F(BadInput, UnknownFieldIsAnError) {
  std::string path = dir_.Write("job.yaml", Job("  bogusField: 1\n"));
  std::string err = ExpectBadInput({path});
  EXPECT_TRUE(Contains(err, "spec.bogusField"));
  EXPECT_TRUE(Contains(err, "unknown field"));
}

TEST_F(BadInput, UnknownModelName) {
  std::string path = dir_.Write("job.yaml", Job());
  std::string err = ExpectBadInput({path, "--set", "spec.model.name=lenet7"});
  EXPECT_TRUE(Contains(err, "spec.model.name"));
  EXPECT_TRUE(Contains(err, "lenet7"));
}

TEST_F(BadInput, UnknownStrategyType) {
  std::string path = dir_.Write("job.yaml", Job());
  std::string err = ExpectBadInput({path, "--set", "spec.strategy.type=sgdx"});
  EXPECT_TRUE(Contains(err, "spec.strategy.type"));
  EXPECT_TRUE(Contains(err, "sgdx"));
}

// Every strategy of the schema is built now; a gossip parameter on another strategy is refused
// with its field path.
TEST_F(BadInput, GossipParameterOnAnotherStrategy) {
  std::string path = dir_.Write("job.yaml", Job());
  std::string err = ExpectBadInput(
      {path, "--set", "spec.strategy.type=localsgd", "--set", "spec.strategy.threshold=0.1"});
  EXPECT_TRUE(Contains(err, "spec.strategy.threshold"));
  EXPECT_TRUE(Contains(err, "does not apply to strategy localsgd"));
}

TEST_F(BadInput, MissingJobFile) {
  std::string path = dir_.path() + "/does-not-exist.yaml";
  std::string err = ExpectBadInput({path});
  EXPECT_TRUE(Contains(err, path));
}

TEST_F(BadInput, MalformedSetFlag) {
  std::string path = dir_.Write("job.yaml", Job());
  std::string err = ExpectBadInput({path, "--set", "spec.epochs"});
  EXPECT_TRUE(Contains(err, "--set"));
  EXPECT_TRUE(Contains(err, "spec.epochs"));
}

TEST_F(BadInput, MissingDataDirectoryNamesPath) {
  const std::string missing = dir_.path() + "/no-such-data";
  std::string path = dir_.Write(
      "job.yaml", LeNetJob("errors-data", "    - {name: cpu, replicas: 2}\n",
                           "  globalBatchSize: 64\n  maxSteps: 2\n  threads: 1\n"));
  std::string err = ExpectBadInput({path, "--set", "spec.dataset.path=" + missing});
  EXPECT_TRUE(Contains(err, missing));
}

TEST_F(BadInput, TruncatedDataFileNamesFile) {
  if (!std::filesystem::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashionMnist;
  }
  const std::string data = dir_.path() + "/fashion-mnist";
  std::filesystem::create_directory(data);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    std::filesystem::copy_file(std::string(kFashionMnist) + "/" + name, data + "/" + name);
  }
  const std::string images = data + "/train-images-idx3-ubyte.gz";
  std::filesystem::resize_file(images, std::filesystem::file_size(images) / 2);
  std::string path = dir_.Write(
      "job.yaml", LeNetJob("errors-truncated", "    - {name: cpu, replicas: 2}\n",
                           "  globalBatchSize: 64\n  maxSteps: 2\n  threads: 1\n"));
  std::string err = ExpectBadInput({path, "--set", "spec.dataset.path=" + data});
  EXPECT_TRUE(Contains(err, images));
}

// A listening socket on 127.0.0.1:<some free port>, closed on destruction.
class HeldPort {
 public:
  HeldPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        listen(fd_, 4) == 0 && getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~HeldPort() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

TEST(PortInUse, PsCoordinatorPort) {
  TempDir dir;
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  std::string job = dir.Write("job.yaml", Job());
  std::string token = dir.Write("token", "secret\n");
  ProcessResult r = RunProcess({HptrainBinary(), "ps", "--job", job, "--token-file", token,
                                "--port", std::to_string(held.port())},
                               60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(OneLine(r.err));
  EXPECT_TRUE(Contains(r.err, "already in use"));
  EXPECT_TRUE(Contains(r.err, std::to_string(held.port())));
}

TEST(PortInUse, PsMetricsPort) {
  TempDir dir;
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  std::string job = dir.Write("job.yaml", Job());
  std::string token = dir.Write("token", "secret\n");
  ProcessResult r = RunProcess({HptrainBinary(), "ps", "--job", job, "--token-file", token,
                                "--port", "0", "--metrics-port", std::to_string(held.port())},
                               60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(OneLine(r.err));
  EXPECT_TRUE(Contains(r.err, "already in use"));
  EXPECT_TRUE(Contains(r.err, std::to_string(held.port())));
}

TEST(PortInUse, WorkerMetricsPort) {
  TempDir dir;
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  std::string job = dir.Write("job.yaml", Job());
  std::string token = dir.Write("token", "secret\n");
  // The metrics endpoint is bound before the coordinator is contacted, so none is needed.
  ProcessResult r = RunProcess({HptrainBinary(), "worker", "--job", job, "--token-file", token,
                                "--coordinator", "127.0.0.1:1", "--rank", "0", "--metrics-port",
                                std::to_string(held.port())},
                               60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(OneLine(r.err));
  EXPECT_TRUE(Contains(r.err, "already in use"));
  EXPECT_TRUE(Contains(r.err, std::to_string(held.port())));
}

// A 4-worker synthetic job slowed down to run for about 10 s or more.
// A job that is still training when the tests below signal it, 3 s after all four workers are
// up, on a host of any speed: its steps are slowed down 50 times, and there are enough of them
// (a minute or more at the synthetic MLP's speed) that it cannot finish first. The tests stop it
// long before; a run that ignored the signal would end with exit 0 and fail them.
std::string SlowJob(const std::string& name) {
  return SyntheticJob(name, 4,
                      "  epochs: 100\n  maxSteps: 3000\n"
                      "  testing: {slowdown: [50, 50, 50, 50]}\n");
}

std::vector<std::string> CoreFiles(const std::string& dir) {
  std::vector<std::string> cores;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("core", 0) == 0) cores.push_back(name);
  }
  return cores;
}

TEST(Failure, WorkerKilledWithSigkillFailsTheRun) {
  TempDir dir;
  const std::string job = dir.Write("killed.yaml", SlowJob("errors-killed"));
  const std::string json = dir.path() + "/summary.json";
  pid_t killed = -1;
  Clock::time_point seen;
  Clock::time_point start = Clock::now();
  double killed_after_s = 0;
  ProcessResult r = RunProcess(
      {HptrainBinary(), "run", job, "--quiet", "--output-json", json, "--set",
       "spec.runPolicy.restartPolicy=Never"}, 300,
      [&](pid_t) {
        if (killed > 0) return;
        std::vector<pid_t> pids = FindProcesses({job, "worker", "--rank 2"});
        if (pids.empty()) return;
        if (seen == Clock::time_point()) seen = Clock::now();
        // Give it time to load, rendezvous and start training.
        if (Clock::now() - seen < std::chrono::seconds(3)) return;
        killed = pids[0];
        killed_after_s = std::chrono::duration<double>(Clock::now() - start).count();
        kill(killed, SIGKILL);
      },
      dir.path());
  ASSERT_GT(killed, 0) << "worker 2 was never seen; the run ended with " << r.exit_code << "\n"
                       << r.err;
  const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_FALSE(lines.empty());
  const std::string& last = lines.back();
  EXPECT_TRUE(Contains(last, "worker-2"));
  EXPECT_TRUE(Contains(last, "SIGKILL"));
  EXPECT_TRUE(Contains(last, std::to_string(killed)));
  EXPECT_FALSE(Contains(r.err, "core dumped"));
  EXPECT_TRUE(CoreFiles(dir.path()).empty());
  EXPECT_FALSE(FileExists(json));
  EXPECT_TRUE(FindProcesses({job}).empty()) << "processes of the job outlived the run";
  // The run stopped promptly after the kill instead of waiting out a timeout.
  EXPECT_LT(total_s - killed_after_s, 30.0);
}

TEST(Failure, CtrlCStopsEveryProcess) {
  TempDir dir;
  const std::string job = dir.Write("interrupted.yaml", SlowJob("errors-interrupted"));
  const std::string json = dir.path() + "/summary.json";
  bool sent = false;
  Clock::time_point seen;
  int workers_seen = 0;
  ProcessResult r = RunProcess(
      {HptrainBinary(), "run", job, "--quiet", "--output-json", json}, 300,
      [&](pid_t pid) {
        if (sent) return;
        std::vector<pid_t> workers = FindProcesses({job, "worker"});
        if (workers.size() < 4) return;
        if (seen == Clock::time_point()) seen = Clock::now();
        if (Clock::now() - seen < std::chrono::seconds(3)) return;
        workers_seen = static_cast<int>(workers.size());
        sent = true;
        kill(pid, SIGINT);
      },
      dir.path());
  ASSERT_TRUE(sent) << "the workers were never all seen; the run ended with " << r.exit_code
                    << "\n" << r.err;
  EXPECT_EQ(workers_seen, 4);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(Contains(lines.back(), "SIGINT"));
  EXPECT_FALSE(FileExists(json));
  EXPECT_TRUE(FindProcesses({job}).empty()) << "processes of the job outlived the run";
}

}  // namespace
}  // namespace hptrain::testing
