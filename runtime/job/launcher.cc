#include "runtime/job/launcher.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"
#include "runtime/base/exit_codes.h"
#include "runtime/base/files.h"
#include "runtime/job/elastic_workers.h"
#include "runtime/job/job_parser.h"
#include "runtime/job/job_validate.h"
#include "runtime/job/local_rebalancer.h"
#include "runtime/job/placement.h"
#include "runtime/job/progress.h"
#include "runtime/job/restart_policy.h"
#include "runtime/job/run_summary.h"
#include "runtime/job/status_summary.h"
#include "runtime/job/supervisor.h"
#include "runtime/job/worker_process.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/tls_credentials.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/preflight.h"
#include "runtime/train/trainer.h"

namespace hptrain::job {
namespace {

using Clock = std::chrono::steady_clock;

absl::StatusOr<std::string> RandomToken() {
  unsigned char bytes[24];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return HPTRAIN_ERRNO("opening /dev/urandom");
  ssize_t n = read(fd, bytes, sizeof(bytes));
  close(fd);
  if (n != static_cast<ssize_t>(sizeof(bytes))) return absl::InternalError("short read of /dev/urandom");
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

// A private directory for the run's token and port file, removed when the launcher returns.
class RunDirectory {
 public:
  static absl::StatusOr<std::unique_ptr<RunDirectory>> Create(const std::string& job) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/hptrain-", job, "-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) return HPTRAIN_ERRNO("creating run directory");
    return std::unique_ptr<RunDirectory>(new RunDirectory(pattern));
  }
  ~RunDirectory() { RemoveTree(path_); }
  const std::string& path() const { return path_; }

 private:
  explicit RunDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

bool IsZombieOrGone(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t close_paren = line.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= line.size() ||
         line[close_paren + 2] == 'Z';
}

// Waits for the ps to write "<coordinator port> <metrics port>".
absl::StatusOr<int> WaitForPort(const std::string& port_file, pid_t ps_pid) {
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    absl::StatusOr<std::string> text = ReadFile(port_file);
    if (text.ok()) {
      std::vector<std::string> parts = absl::StrSplit(*text, ' ');
      int port = 0;
      if (!parts.empty() && absl::SimpleAtoi(parts[0], &port) && port > 0) return port;
    }
    if (IsZombieOrGone(ps_pid)) return absl::AbortedError("the ps exited before serving");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("the ps did not start serving within 60 s");
}

std::vector<std::string> JobArgs(const LaunchOptions& options) {
  std::vector<std::string> args = {"--job", options.job_file};
  for (const auto& o : options.overrides) {
    args.push_back("--set");
    args.push_back(o);
  }
  return args;
}

// The task's primary metric of an evaluation: its name and value (classification's accuracy for
// a report without metrics).
std::pair<std::string, double> PrimaryOf(const hptrain::v1::EpochReport& e) {
  if (e.metrics_size() == 0) return {"accuracy", e.test_accuracy()};
  return {e.metrics(0).name(), e.metrics(0).value()};
}

// Removes "<path>.tmp.<pid>" files beside `path`: what a writer killed mid-write leaves
// (WriteFileAtomically, runtime/base/atomic_file.h). Only between gangs, when no writer runs.
void RemoveDeadWritersTemporaries(const std::string& path) {
  std::string dir = ParentDirectory(path);
  if (dir.empty()) dir = ".";
  const std::string prefix = FileName(path) + ".tmp.";
  for (const std::string& name : ListDirectory(dir)) {
    if (name.rfind(prefix, 0) == 0) unlink((dir + "/" + name).c_str());
  }
}

}  // namespace

int Launch(const LaunchOptions& options) {
  auto spec_or = ParseJobFile(options.job_file, options.overrides);
  if (!spec_or.ok()) return ReportError("run", spec_or.status());
  const JobSpec spec = *std::move(spec_or);
  if (absl::Status preflight = train::Preflight(spec); !preflight.ok()) {
    return ReportError("run", preflight);
  }
  if (!options.control_file.empty() && !spec.elastic.enabled) {
    return ReportError("run", absl::InvalidArgumentError(absl::StrCat(
                                  "--control ", options.control_file,
                                  ": the job has no spec.elastic (only an elastic job's workers "
                                  "come and go)")));
  }
  if (options.resume && spec.checkpoint.path.empty()) {
    return ReportError("run", absl::InvalidArgumentError(
                                       "--resume needs spec.checkpoint.path in the job"));
  }
  if (options.resume) {
    // A damaged checkpoint is bad input: say so once here rather than once per worker.
    auto checkpoint = train::LoadCheckpoint(spec.checkpoint.path);
    if (!checkpoint.ok() && !absl::IsNotFound(checkpoint.status())) {
      return ReportError("run", checkpoint.status());
    }
  }
  Placement placement;
  if (!options.placement_file.empty()) {
    auto read = ReadPlacementFile(options.placement_file, spec.WorldSize(), PsShardCount(spec));
    if (!read.ok()) return ReportError("run", read.status());
    placement = *std::move(read);
  }
  if (spec.trainer.set()) {
    const std::string dir = TrainerWorkingDir(spec.trainer, options.job_file);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return ReportError("run", absl::InvalidArgumentError(absl::StrCat(
                                    "spec.trainer.workingDir: ", dir, " is not a directory")));
    }
  }
  // The command line of a ps: its host's prefix (placement.h), then the hptrain command.
  auto command = [&](const HostPlacement& host, const char* role) {
    std::vector<std::string> argv = host.exec;
    argv.push_back(options.binary);
    argv.push_back(role);
    for (auto& a : JobArgs(options)) argv.push_back(a);
    return argv;
  };
  auto dir = RunDirectory::Create(spec.name);
  if (!dir.ok()) return ReportError("run", dir.status());
  auto token = RandomToken();
  if (!token.ok()) return ReportError("run", token.status());
  const std::string token_file = (*dir)->path() + "/token";
  const std::string port_file = (*dir)->path() + "/ps.port";
  {
    int fd = open(token_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, token->data(), token->size()) != static_cast<ssize_t>(token->size())) {
      if (fd >= 0) close(fd);
      return ReportError("run", HPTRAIN_ERRNO("writing the job token"));
    }
    close(fd);
  }
  // Elastic jobs: the control file, and the workers that come and go (elastic_workers.h).
  std::optional<ElasticWorkers> elastic;
  if (spec.elastic.enabled) {
    const std::string control_path =
        options.control_file.empty() ? (*dir)->path() + "/control" : options.control_file;
    auto control = ControlFile::Open(control_path);
    if (!control.ok()) return ReportError("run", control.status());
    ElasticWorkersOptions elastic_options;
    elastic_options.slots = spec.Slots();
    elastic_options.min_members = spec.elastic.min_replicas;
    elastic_options.join_timeout_seconds = static_cast<double>(spec.elastic.join_timeout_seconds);
    elastic_options.restart_policy = spec.run_policy.restart_policy;
    elastic_options.backoff_limit = spec.run_policy.backoff_limit;
    elastic.emplace(elastic_options, *std::move(control), std::cerr);
    std::fprintf(stderr,
                 "hptrain run: elastic job, worker slots 0..%d, minReplicas %d; control "
                 "file %s (lines: add, remove SLOT [at STEP], kill SLOT)\n",
                 spec.Slots() - 1, spec.elastic.min_replicas, control_path.c_str());
    std::fflush(stderr);
  }
  // spec.security.tls: a CA and a certificate of this run, for every address a ps serves on
  // (docs/security.md); the children get the directory, this process's client uses it too.
  std::vector<std::string> tls_args;
  WorkerLaunch workers;  // what every worker of a gang shares
  workers.binary = options.binary;
  workers.job_file = options.job_file;
  workers.overrides = options.overrides;
  workers.token_file = token_file;
  workers.rendezvous_timeout_s = options.rendezvous_timeout_s;
  workers.placed = !placement.workers.empty();
  if (spec.trainer.set()) {
    const char* package = std::getenv("HPTRAIN_PYTHONPATH");
    const char* inherited = std::getenv("PYTHONPATH");
    workers.python_path = TrainerPythonPath(options.binary, package ? package : "",
                                            inherited ? inherited : "");
  }
  if (spec.security.tls.enabled) {
    const std::string tls_dir = (*dir)->path() + "/tls";
    if (mkdir(tls_dir.c_str(), 0700) != 0) {
      return ReportError("run", HPTRAIN_ERRNO(absl::StrCat("creating ", tls_dir)));
    }
    std::vector<std::string> hosts = {"127.0.0.1", "localhost"};
    std::vector<HostPlacement> servers = placement.ps_shards;
    servers.push_back(placement.ps);
    for (const HostPlacement& host : servers) {
      if (std::find(hosts.begin(), hosts.end(), host.address) == hosts.end()) {
        hosts.push_back(host.address);
      }
    }
    absl::Status tls = ps::GenerateRunCertificates(tls_dir, hosts);
    if (tls.ok()) tls = ps::UseTls(tls_dir, spec.security.tls.mutual);
    if (!tls.ok()) return ReportError("run", tls);
    tls_args = {"--tls-dir", tls_dir};
    workers.tls_dir = tls_dir;
  }

  if (absl::Status s = Supervisor::InstallInterruptHandlers(); !s.ok()) {
    return ReportError("run", s);
  }
  const auto start = Clock::now();
  const double start_unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A ps process on `host`, serving on its address with ports picked by the system.
  auto ps_command = [&](const HostPlacement& host, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = command(host, "ps");
    argv.insert(argv.end(), {"--host", host.address, "--port", "0", "--metrics-host",
                             host.address, "--metrics-port", "0", "--token-file", token_file});
    argv.insert(argv.end(), tls_args.begin(), tls_args.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  ProgressDisplay display(std::cout, !options.quiet && isatty(STDOUT_FILENO));
  hptrain::v1::JobStatus last;  // the coordinator's last status of the current gang
  bool have_final = false;
  double previous_epoch_end = 0.0;  // wall_seconds of the last epoch end shown
  std::vector<ProgressPoint> timeline;
  RunResult result;
  int failed_child_exit = -1;  // FailedChildExitCode of the last failed attempt
  // One pass per gang: the first, then one per restart that spec.runPolicy allows
  // (restart_policy.h). A restarted gang gets a new ps and workers that resume from
  // spec.checkpoint.path (from scratch without one).
  for (int restarts = 0;; ++restarts) {
    const bool resume = options.resume || (restarts > 0 && !spec.checkpoint.path.empty());
    unlink(port_file.c_str());  // the previous gang's ps wrote it
    Supervisor supervisor;
    std::vector<std::string> ps_argv =
        ps_command(placement.ps, {"--linger", "60", "--port-file", port_file});
    auto ps_pid = supervisor.Spawn("ps-0", ps_argv, {}, ChildRole::kMustSucceed);
    if (!ps_pid.ok()) return ReportError("run", ps_pid.status());
    auto port = WaitForPort(port_file, *ps_pid);
    if (!port.ok()) {
      RunResult failed = supervisor.Wait(WaitOptions{absl::Seconds(2)});
      return ReportError("run", absl::Status(port.status().code(),
                                                  failed.first_failure.empty()
                                                      ? port.status().message()
                                                      : failed.first_failure));
    }
    const std::string address = absl::StrCat(placement.ps.address, ":", *port);
    // Parameter-server shards beyond the first, on their hosts (the ps host by default),
    // registering with ps-0.
    for (int shard = 1; shard < PsShardCount(spec); ++shard) {
      const HostPlacement& host = placement.ps_shards.empty()
                                      ? placement.ps
                                      : placement.ps_shards[static_cast<size_t>(shard - 1)];
      std::vector<std::string> argv = ps_command(
          host, {"--shard", std::to_string(shard), "--coordinator", address, "--linger", "0"});
      auto pid = supervisor.Spawn(absl::StrCat("ps-", shard), argv, {}, ChildRole::kMustSucceed);
      if (!pid.ok()) {
        supervisor.Wait(WaitOptions{absl::Seconds(2)});
        return ReportError("run", pid.status());
      }
    }
    workers.coordinator = address;
    workers.resume = resume;
    // The worker of a slot (its --rank). An elastic job's slots beyond the placement file's
    // workers take their hosts in turn.
    auto spawn_worker = [&](int slot) -> absl::StatusOr<pid_t> {
      const HostPlacement host =
          placement.workers.empty()
              ? HostPlacement{}
              : placement.workers[static_cast<size_t>(slot) % placement.workers.size()];
      WorkerProcess process = MakeWorkerProcess(spec, workers, slot, host);
      ChildSpec child;
      child.name = absl::StrCat("worker-", slot);
      child.argv = std::move(process.argv);
      child.env = std::move(process.env);
      child.unset_env = std::move(process.unset_env);
      child.working_dir = std::move(process.working_dir);
      return supervisor.Spawn(child);
    };
    ps::CoordinatorClient client(address, *token, std::chrono::seconds(5));
    if (elastic) {
      elastic->BeginGang(&supervisor, spawn_worker,
                         [&](MembershipChangeKind kind, int slot, int64_t at_step,
                             const std::string& reason) -> absl::Status {
                           hptrain::v1::MembershipChangeRequest request;
                           request.set_kind(kind == MembershipChangeKind::kLost
                                                ? hptrain::v1::MembershipChangeRequest::LOST
                                                : hptrain::v1::MembershipChangeRequest::REMOVE);
                           request.set_slot(slot);
                           request.set_at_step(at_step);
                           request.set_reason(reason);
                           return client.ChangeMembership(request).status();
                         });
    }
    for (int rank = 0; rank < spec.WorldSize(); ++rank) {
      absl::Status started = elastic ? elastic->StartWorker(rank) : spawn_worker(rank).status();
      if (!started.ok()) {
        supervisor.Wait(WaitOptions{absl::Seconds(2)});
        return ReportError("run", started);
      }
    }
    // A user's program (spec.trainer) joins the job by registering with the coordinator
    // (hp.init()); one that has not within the rendezvous timeout, or that exits 0 without
    // having done so, fails the gang, naming it.
    const auto join_deadline = Clock::now() + std::chrono::seconds(options.rendezvous_timeout_s);
    std::string join_failure;
    std::string shortage_failure;  // an elastic job's members below minReplicas too long
    last = hptrain::v1::JobStatus();
    have_final = false;
    bool shutdown_sent = false;
    size_t evaluations_shown = 0;  // of this gang's coordinator
    std::optional<LocalRebalancer> rebalancer;
    if (spec.rebalance.enabled) rebalancer.emplace(spec);
    WaitOptions wait;
    wait.grace_period = absl::Seconds(5);
    if (spec.run_policy.active_deadline_seconds > 0) {  // for the whole run, restarts included
      wait.timeout = std::max(absl::ZeroDuration(),
                              absl::Seconds(spec.run_policy.active_deadline_seconds) -
                                  absl::FromChrono(Clock::now() - start));
    }
    wait.periodic_callback = [&]() -> absl::Status {
      auto status = client.GetJobStatus();
      if (!status.ok()) return absl::OkStatus();  // the ps may be starting or stopping
      last = *status;
      if (spec.trainer.set() && last.registered() < spec.WorldSize() &&
          Clock::now() >= join_deadline) {
        join_failure = NotJoinedMessage(
            MissingRanks({last.registered_ranks().begin(), last.registered_ranks().end()},
                         spec.WorldSize()),
            options.rendezvous_timeout_s);
        return absl::DeadlineExceededError(join_failure);
      }
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      const std::vector<int> members =
          CurrentMembers({last.members().begin(), last.members().end()},
                         last.membership_changes_size(), spec.WorldSize());
      if (elastic) {
        if (absl::Status polled = elastic->Poll(members, elapsed); !polled.ok()) {
          shortage_failure = std::string(polled.message());
          return polled;
        }
      }
      // The first member's report gives the position (rank 0's; an elastic job's slot 0 may have
      // left).
      const int lead_slot = elastic && !members.empty() ? members.front() : 0;
      ProgressState state;
      state.epochs = spec.epochs;
      if (elastic) state.members = static_cast<int>(members.size());
      double samples_per_second = 0;
      for (const auto& r : last.ranks()) {
        if (r.rank() == lead_slot) {
          state.step = r.step();
          state.epoch = r.epoch() + 1;
          state.steps_per_epoch = r.steps_per_epoch();
          state.loss = r.train_loss();
        }
        samples_per_second += r.samples_per_second();
      }
      if (last.ranks_size() >= spec.WorldSize() && last.ranks_size() > 0 &&
          (timeline.empty() || elapsed - timeline.back().elapsed_seconds >= 1.0)) {
        ProgressPoint point;
        point.elapsed_seconds = elapsed;
        point.step = last.ranks(0).step();
        const size_t world = static_cast<size_t>(spec.Slots());
        point.batch_sizes.assign(world, 0);
        point.rank_steps.assign(world, 0);
        point.compute_seconds.assign(world, 0.0);
        for (const auto& r : last.ranks()) {
          point.step = std::min<int64_t>(point.step, r.step());
          if (r.rank() >= 0 && r.rank() < spec.Slots()) {
            const size_t rank = static_cast<size_t>(r.rank());
            point.batch_sizes[rank] = r.batch_size();
            point.rank_steps[rank] = r.step();
            point.compute_seconds[rank] = r.compute_seconds();
          }
        }
        timeline.push_back(std::move(point));
      }
      if (rebalancer) {
        std::vector<RankProgress> progress;
        for (const auto& r : last.ranks()) {
          progress.push_back({r.rank(), r.step(), r.batch_size(), r.compute_seconds()});
        }
        if (auto allocation = rebalancer->Update(progress, elapsed)) {
          auto set = client.SetAllocation(*allocation, 2);
          if (!set.ok()) {
            std::fprintf(stderr, "hptrain run: rebalancing failed: %s\n",
                         std::string(set.status().message()).c_str());
          }
        }
      }
      // Every worker runs at the pace of the slowest; rank throughputs add up.
      state.samples_per_second = samples_per_second;
      if (spec.max_steps > 0) state.total_steps = spec.max_steps;
      state.elapsed_seconds = elapsed;
      if (!options.quiet && state.steps_per_epoch > 0) display.Update(state);
      // Evaluations in step order: interim ones get a line of their own, epoch ends the epoch line
      // (its duration from the previous epoch end).
      for (; !options.quiet && evaluations_shown < static_cast<size_t>(last.evaluations_size());
           ++evaluations_shown) {
        const auto& e = last.evaluations(static_cast<int>(evaluations_shown));
        const auto [metric, value] = PrimaryOf(e);
        if (e.interim()) {
          display.Evaluation(e.step(), e.epochs_done(), metric, value, e.test_loss(),
                             {e.worker_test_accuracy().begin(), e.worker_test_accuracy().end()});
          continue;
        }
        display.EpochEnd(e.epoch() + 1, metric, value, e.test_loss(), e.train_loss(),
                         e.wall_seconds() - previous_epoch_end,
                         {e.worker_test_accuracy().begin(), e.worker_test_accuracy().end()});
        previous_epoch_end = e.wall_seconds();
      }
      const bool finished =
          elastic ? elastic->Finished(members, last.done()) : last.done() == spec.WorldSize();
      if (finished && !shutdown_sent) {
        have_final = true;
        shutdown_sent = true;
        (void)client.Shutdown();
      }
      return absl::OkStatus();
    };
    if (spec.trainer.set() || elastic) {
      wait.exit_check = [&](const ChildStatus& child) -> absl::Status {
        if (elastic) elastic->Exited(child);
        if (!spec.trainer.set()) return absl::OkStatus();
        int rank = -1;
        if (!absl::SimpleAtoi(absl::StripPrefix(child.name, "worker-"), &rank)) {
          return absl::OkStatus();  // a ps
        }
        // Asked now, after the exit: a program that registered did so before it exited.
        auto status = client.GetJobStatus();
        if (!status.ok()) return absl::OkStatus();  // the ps's own failure says more
        const auto& registered = status->registered_ranks();
        if (std::find(registered.begin(), registered.end(), rank) != registered.end()) {
          return absl::OkStatus();
        }
        return absl::FailedPreconditionError(ExitedWithoutJoiningMessage(child.Describe()));
      };
    }
    // A worker reports its failure to the coordinator and then exits: read the report before
    // the ps is stopped, so the run's last line carries it even when the exit came first.
    wait.before_stop = [&] {
      if (auto status = client.GetJobStatus(); status.ok()) last = *std::move(status);
    };
    if (elastic) {
      wait.absorb_failure = [&](const ChildStatus& child) { return elastic->AbsorbFailure(child); };
    }
    result = supervisor.Wait(wait);
    for (const std::string& failure : {join_failure, shortage_failure}) {
      if (!failure.empty() && result.outcome == RunOutcome::kFailed &&
          result.first_failure == absl::StrCat("progress callback: ", failure)) {
        result.first_failure = failure;
      }
    }
    if (result.ok()) break;
    failed_child_exit = FailedChildExitCode(result);
    RestartDecision decision = DecideRestart(spec.run_policy.restart_policy,
                                             spec.run_policy.backoff_limit, restarts, result);
    if (elastic && !elastic->fatal_reason().empty()) {  // a worker's failure the job cannot take
      decision.restart = false;
      decision.reason = elastic->fatal_reason();
    }
    std::string why = result.first_failure;
    if (!last.failure().empty()) why = absl::StrCat(why, " (", last.failure(), ")");
    if (!decision.restart) {
      result.first_failure = why + decision.reason;
      break;
    }
    if (!options.quiet) display.Finish();
    std::string from = "the start (no spec.checkpoint.path)";
    if (!spec.checkpoint.path.empty()) {
      RemoveDeadWritersTemporaries(spec.checkpoint.path);
      auto checkpoint = train::LoadCheckpoint(spec.checkpoint.path);
      from = checkpoint.ok() ? absl::StrCat("the checkpoint at step ", checkpoint->step)
                             : "the start (no checkpoint yet)";
    }
    std::fprintf(stderr,
                 "hptrain run: %s; restarting the gang from %s (restart %d of at most %d)\n",
                 why.c_str(), from.c_str(), restarts + 1, spec.run_policy.backoff_limit);
  }
  Supervisor::UninstallInterruptHandlers();
  if (!options.quiet) display.Finish();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();

  if (!result.ok()) {
    std::fprintf(stderr, "hptrain run: %s\n", result.first_failure.c_str());
    // A worker that found bad input mid-run (a corrupt sample) makes it the run's bad input too.
    if (result.outcome == RunOutcome::kFailed && failed_child_exit == kExitBadInput) {
      return kExitBadInput;
    }
    return result.ExitCode();
  }
  if (!have_final) {
    return ReportError("run", absl::InternalError("workers exited without reporting done"));
  }
  RunSummary summary = BuildSummary(spec, last, wall, start_unix_seconds);
  summary.timeline = std::move(timeline);
  if (elastic) summary.worker_restarts = elastic->restarts();
  std::cout << FormatSummaryTable(summary) << std::flush;
  if (!options.output_json.empty()) {
    absl::Status written = WriteFileAtomically(options.output_json, RunSummaryToJson(summary));
    if (!written.ok()) return ReportError("run", written);
  }
  return kExitOk;
}

}  // namespace hptrain::job
