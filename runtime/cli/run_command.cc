// hptrain run JOB.yaml: runs a TrainingJob as local processes (see runtime/job/launcher.h).
#include <unistd.h>

#include <climits>
#include <cstdio>

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

}  // namespace

int RunCommand(int argc, char** argv) {
  job::LaunchOptions options;
  FlagSet set("run", "JOB.yaml [--set path=value]... [--output-json PATH] [--resume]");
  set.Repeated("set", &options.overrides,
               "override a job field, e.g. --set spec.epochs=1 (repeatable)");
  set.String("output-json", &options.output_json, "",
             "write the run summary here (atomically, only when the run succeeds)");
  set.Bool("resume", &options.resume, "continue from spec.checkpoint.path if it exists");
  set.Bool("quiet", &options.quiet, "no progress display, only the summary");
  set.String("placement", &options.placement_file, "",
             "run the ps and each worker on other hosts (a placement file, see bench/README.md)");
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  if (set.positional().size() != 1) {
    return ReportError("run", absl::InvalidArgumentError(
                                  "expected exactly one job file (hptrain run JOB.yaml)"));
  }
  options.job_file = set.positional()[0];
  options.binary = SelfPath(argv[0]);
  return job::Launch(options);
}

}  // namespace hptrain::cli
