#include "tests/integration/hptrain_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace hptrain::testing {

std::string HptrainBinary() {
  const char* dir = std::getenv("HPTRAIN_BIN");
  return std::string(dir ? dir : "build/bin") + "/hptrain";
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/hptrain-test-XXXXXX";
  path_ = mkdtemp(pattern.data());
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& name, const std::string& contents) const {
  std::string path = path_ + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

static std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ProcessResult RunProcess(const std::vector<std::string>& argv, int timeout_s,
                         const std::function<void(pid_t)>& while_running, const std::string& cwd) {
  TempDir capture;
  std::string out_path = capture.path() + "/out";
  std::string err_path = capture.path() + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  ProcessResult result;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    if (while_running) while_running(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = Slurp(out_path);
  result.err = Slurp(err_path);
  return result;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& stdout_path,
            const std::string& stderr_path) {
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int Terminate(pid_t pid, int grace_s) {
  if (pid <= 0) return -1;
  kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      if (waitpid(pid, &status, 0) != pid) return -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ReadFile(const std::string& path) { return Slurp(path); }

bool FileExists(const std::string& path) {
  std::error_code ignored;
  return std::filesystem::exists(path, ignored);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (dirent* entry = readdir(proc)) {
    pid_t pid = atoi(entry->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::string cmdline = Slurp("/proc/" + std::string(entry->d_name) + "/cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    bool all = !cmdline.empty();
    for (const auto& n : needles) all = all && cmdline.find(n) != std::string::npos;
    // A zombie has an empty cmdline; it is not counted as running.
    if (all) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

std::string LeNetJob(const std::string& name, const std::string& groups,
                     const std::string& extra) {
  return "apiVersion: hptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata:\n"
         "  name: " + name + "\n"
         "spec:\n"
         "  model: {name: lenet5}\n"
         "  dataset: {name: fashion-mnist}\n"
         "  strategy: {type: ssgd}\n"
         "  optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weightDecay: 5.0e-4}\n"
         "  workerGroups:\n" + groups + extra;
}

std::string SyntheticJob(const std::string& name, int replicas, const std::string& extra) {
  return "apiVersion: hptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata:\n"
         "  name: " + name + "\n"
         "spec:\n"
         "  model: {name: mlp, hidden: [64]}\n"
         "  dataset: {name: synthetic, synthetic: {samples: 2048, testSamples: 256}}\n"
         "  strategy: {type: ssgd}\n"
         "  optimizer: {type: sgd, lr: 0.1}\n"
         "  globalBatchSize: 64\n"
         "  threads: 1\n"
         "  workers: {replicas: " + std::to_string(replicas) + "}\n" + extra;
}

DemoRun RunDemoJob(const std::string& dir, const std::string& tag,
                   const std::vector<std::string>& sets) {
  const std::string json = dir + "/" + tag + ".json";
  std::vector<std::string> argv = {HptrainBinary(), "run", "examples/fashion-mnist.yaml",
                                   "--quiet", "--output-json", json};
  for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
  DemoRun run;
  run.process = RunProcess(argv, 900);
  if (FileExists(json)) run.summary = ReadFile(json);
  return run;
}

}  // namespace hptrain::testing
