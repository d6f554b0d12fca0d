#include "runtime/job/worker_process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/base/files.h"

namespace hptrain::job {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// `hptrain worker` with the gang's settings as flags.
std::vector<std::string> BuiltinWorkerArgs(const JobSpec& spec, const WorkerLaunch& launch,
                                           int rank, const HostPlacement& host) {
  std::vector<std::string> argv = {launch.binary, "worker", "--job", launch.job_file};
  for (const std::string& o : launch.overrides) argv.insert(argv.end(), {"--set", o});
  argv.insert(argv.end(), {"--coordinator", launch.coordinator, "--rank", std::to_string(rank),
                           "--token-file", launch.token_file, "--bind", host.address,
                           "--metrics-host", host.address, "--metrics-port", "0"});
  // Every worker of a local run shares this machine's CPUs, a placement's hosts too (network
  // namespaces of it): spec.threads 0 divides them among all of them.
  argv.insert(argv.end(), {"--workers-on-host", std::to_string(spec.WorldSize())});
  // A placement's hosts are the workers' nodes (docs/algorithms.md §2; spec.topology, when
  // set, takes precedence in the worker).
  if (launch.placed) argv.insert(argv.end(), {"--node-name", host.address});
  if (!launch.tls_dir.empty()) argv.insert(argv.end(), {"--tls-dir", launch.tls_dir});
  argv.insert(argv.end(), {"--rendezvous-timeout", std::to_string(launch.rendezvous_timeout_s)});
  // Said either way, so that an $HPTRAIN_RESUME left in the caller's environment cannot decide.
  argv.push_back(launch.resume ? "--resume" : "--resume=false");
  return argv;
}

// The same settings as the environment of the user's program (worker_process.h).
std::vector<std::pair<std::string, std::string>> TrainerEnvironment(const JobSpec& spec,
                                                                    const WorkerLaunch& launch,
                                                                    int rank,
                                                                    const HostPlacement& host) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"HPTRAIN_JOB", AbsolutePath(launch.job_file)},
      {"HPTRAIN_COORDINATOR", launch.coordinator},
      {"HPTRAIN_RANK", std::to_string(rank)},
      {"HPTRAIN_GROUP", spec.RankGroups()[static_cast<size_t>(rank)]},
      {"HPTRAIN_LOCAL_RANK", std::to_string(rank)},
      {"HPTRAIN_WORKERS_ON_HOST", std::to_string(spec.WorldSize())},
      {"HPTRAIN_TOKEN_FILE", launch.token_file},
      {"HPTRAIN_BIND_HOST", host.address},
      {"HPTRAIN_METRICS_HOST", host.address},
      {"HPTRAIN_METRICS_PORT", "0"},
      {"HPTRAIN_RENDEZVOUS_TIMEOUT", std::to_string(launch.rendezvous_timeout_s)},
      {"HPTRAIN_RESUME", launch.resume ? "1" : "0"},
  };
  if (!launch.overrides.empty()) {
    env.emplace_back("HPTRAIN_SET", absl::StrJoin(launch.overrides, "\n"));
  }
  if (!launch.tls_dir.empty()) env.emplace_back("HPTRAIN_TLS_DIR", launch.tls_dir);
  if (launch.placed) env.emplace_back("HPTRAIN_NODE_NAME", host.address);
  if (!launch.python_path.empty()) env.emplace_back("PYTHONPATH", launch.python_path);
  return env;
}

}  // namespace

// POSIX only (runtime/base/files.h says why not std::filesystem).
std::string AbsolutePath(const std::string& path) {
  std::string joined = path;
  if (path.empty() || path[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) joined = absl::StrCat(cwd, "/", path);
  }
  const bool absolute = !joined.empty() && joined[0] == '/';
  // Lexically normal: no empty or "." components; ".." removes the component before it (at the
  // root it stays the root).
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(joined, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.emplace_back(part);
      }
      continue;
    }
    parts.emplace_back(part);
  }
  if (parts.empty()) return absolute ? "/" : ".";
  return absl::StrCat(absolute ? "/" : "", absl::StrJoin(parts, "/"));
}

std::string TrainerWorkingDir(const TrainerSpec& trainer, const std::string& job_file) {
  const std::string job_dir = ParentDirectory(AbsolutePath(job_file));
  if (trainer.working_dir.empty()) return job_dir;
  if (trainer.working_dir[0] == '/') return AbsolutePath(trainer.working_dir);
  return AbsolutePath(absl::StrCat(job_dir, "/", trainer.working_dir));
}

std::vector<int> MissingRanks(const std::vector<int>& registered, int world) {
  std::vector<int> missing;
  for (int rank = 0; rank < world; ++rank) {
    if (std::find(registered.begin(), registered.end(), rank) == registered.end()) {
      missing.push_back(rank);
    }
  }
  return missing;
}

std::string NotJoinedMessage(const std::vector<int>& ranks, int timeout_s) {
  return absl::StrCat(ranks.size() == 1 ? "worker " : "workers ", absl::StrJoin(ranks, ", "),
                      " did not join the job within ", timeout_s,
                      " s (never registered with the coordinator): did the program call "
                      "hp.init()?");
}

std::string ExitedWithoutJoiningMessage(const std::string& exit) {
  return absl::StrCat(exit,
                      " without joining the job (it never registered with the coordinator): did "
                      "the program call hp.init()?");
}

std::string TrainerPythonPath(const std::string& binary, const std::string& override_dir,
                              const std::string& inherited) {
  std::string package = override_dir;
  if (package.empty() && !binary.empty()) {
    const std::string bin_dir = ParentDirectory(binary);
    const std::string candidate =
        AbsolutePath(absl::StrCat(bin_dir.empty() ? "." : bin_dir, "/../python"));
    if (IsDirectory(candidate)) package = candidate;
  }
  if (package.empty()) return inherited;
  return inherited.empty() ? package : absl::StrCat(package, ":", inherited);
}

WorkerProcess MakeWorkerProcess(const JobSpec& spec, const WorkerLaunch& launch, int rank,
                                const HostPlacement& host) {
  WorkerProcess process;
  process.argv = host.exec;
  if (!spec.trainer.set()) {
    const std::vector<std::string> args = BuiltinWorkerArgs(spec, launch, rank, host);
    process.argv.insert(process.argv.end(), args.begin(), args.end());
    return process;
  }
  const TrainerSpec& trainer = spec.trainer;
  process.argv.insert(process.argv.end(), trainer.command.begin(), trainer.command.end());
  process.argv.insert(process.argv.end(), trainer.args.begin(), trainer.args.end());
  process.env = TrainerEnvironment(spec, launch, rank, host);
  process.unset_env = {"HPTRAIN_SET", "HPTRAIN_TLS_DIR", "HPTRAIN_NODE_NAME"};
  process.working_dir = TrainerWorkingDir(trainer, launch.job_file);
  return process;
}

}  // namespace hptrain::job
