// hptrain run JOB.yaml: runs a TrainingJob as local processes (see runtime/job/launcher.h).
// hptrain mp2 collect JOB.yaml --out FILE: the same run, recording MP²'s snapshot dataset on rank 0
// (spec.collect, runtime/ps/mp2/dataset.h).
#include <unistd.h>

#include <climits>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "runtime/base/exit_codes.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/flags.h"
#include "runtime/job/launcher.h"

namespace hptrain::cli {
namespace {

std::string SelfPath(const char* argv0) {
  char buffer[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return argv0;
  return std::string(buffer, static_cast<size_t>(n));
}

// The flags `run` and `mp2 collect` share: --set, --output-json, --quiet, --placement,
// --rendezvous-timeout.
void AddLaunchFlags(FlagSet& set, job::LaunchOptions* options, const char* set_example) {
  set.Repeated("set", &options->overrides,
               absl::StrCat("override a job field, e.g. --set ", set_example, " (repeatable)"));
  set.String("output-json", &options->output_json, "",
             "write the run summary here (atomically, only when the run succeeds)");
  set.Bool("quiet", &options->quiet, "no progress display, only the summary");
  set.String("placement", &options->placement_file, "",
             "run the ps and each worker on other hosts (a placement file, see bench/README.md)");
  set.Int("rendezvous-timeout", &options->rendezvous_timeout_s, "HPTRAIN_RENDEZVOUS_TIMEOUT",
          "seconds a worker waits for its peers, and a spec.trainer program may take to join the "
          "job (default 120)");
}

// --rendezvous-timeout below 1 second: InvalidArgument naming the flag.
absl::Status CheckLaunchFlags(const job::LaunchOptions& options) {
  if (options.rendezvous_timeout_s >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--rendezvous-timeout must be at least 1 second, got ", options.rendezvous_timeout_s));
}

}  // namespace

int RunCommand(int argc, char** argv) {
  job::LaunchOptions options;
  FlagSet set("run",
              "JOB.yaml [--set path=value]... [--output-json PATH] [--resume] [--control PATH]");
  AddLaunchFlags(set, &options, "spec.epochs=1");
  set.Bool("resume", &options.resume, "continue from spec.checkpoint.path if it exists");
  set.String("control", &options.control_file, "",
             "elastic jobs (spec.elastic): read commands appended to this file while the job "
             "runs, one a line: add (a worker in the lowest free slot), remove SLOT [at STEP], "
             "kill SLOT (default: a file in the run directory, printed at start)");
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (set.positional().size() != 1) {
    return ReportError("run", absl::InvalidArgumentError(
                                  "expected exactly one job file (hptrain run JOB.yaml)"));
  }
  if (absl::Status s = CheckLaunchFlags(options); !s.ok()) return ReportError("run", s);
  options.job_file = set.positional()[0];
  options.binary = SelfPath(argv[0]);
  return job::Launch(options);
}

int Mp2CollectCommand(int argc, char** argv) {
  job::LaunchOptions options;
  std::string out;
  int every = 1, samples = 1024, window_every = 200, window_length = 15;
  FlagSet set("mp2 collect",
              "JOB.yaml --out FILE [--every N] [--samples N] [--window-every N] "
              "[--window-length N] [--set path=value]...");
  set.String("out", &out, "", "the snapshot dataset to write (replaced atomically after every "
                              "epoch, so an interrupted run keeps the epochs it finished)");
  set.Int("every", &every, "", "steps between recorded rounds (T_h, default 1)");
  set.Int("samples", &samples, "",
          "elements traced per predicted tensor (over 4096 elements), default 1024");
  set.Int("window-every", &window_every, "",
          "recorded rounds between windows of full snapshots, default 200");
  set.Int("window-length", &window_length, "",
          "consecutive full snapshots per window (history K + the rounds replayed), default 15");
  AddLaunchFlags(set, &options, "spec.maxSteps=500");
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (set.positional().size() != 1) {
    return ReportError("mp2 collect", absl::InvalidArgumentError(
                                          "expected exactly one job file (hptrain mp2 collect "
                                          "JOB.yaml --out FILE)"));
  }
  if (out.empty()) {
    return ReportError("mp2 collect",
                       absl::InvalidArgumentError("--out FILE is required: the dataset to write"));
  }
  if (absl::Status s = CheckLaunchFlags(options); !s.ok()) return ReportError("mp2 collect", s);
  options.job_file = set.positional()[0];
  options.binary = SelfPath(argv[0]);
  // Validation of the values is the job's (spec.collect), so the messages name the job field.
  options.overrides.push_back(absl::StrCat("spec.collect.path=", out));
  options.overrides.push_back(absl::StrCat("spec.collect.every=", every));
  options.overrides.push_back(absl::StrCat("spec.collect.samples=", samples));
  options.overrides.push_back(absl::StrCat("spec.collect.windowEvery=", window_every));
  options.overrides.push_back(absl::StrCat("spec.collect.windowLength=", window_length));
  return job::Launch(options);
}

}  // namespace hptrain::cli
