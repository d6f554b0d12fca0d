// hptrain: the runtime's single binary. Subcommands: run, ps, worker, mp2, version.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_join.h"
#include "runtime/cli/commands.h"
#include "runtime/sync/registry.h"

namespace {

constexpr char kUsage[] =
    "usage: hptrain <command> [flags]\n"
    "\n"
    "commands:\n"
    "  run JOB.yaml   run a TrainingJob as local processes (one ps, N workers)\n"
    "  ps             the job's coordinator; started by `run` or by the controller in a pod\n"
    "  worker         one training process; started by `run` or by the controller in a pod\n"
    "  mp2            MP²'s predictor tools: collect snapshots, train and evaluate predictors\n"
    "  version        print the version and the strategies built in\n"
    "\n"
    "`hptrain <command> --help` lists a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  // gRPC logs its own copy of errors we report as one line (e.g. a port in use); keep it quiet
  // unless the user asks for it.
  setenv("GRPC_VERBOSITY", "NONE", /*overwrite=*/0);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char* command = argv[1];
  if (!std::strcmp(command, "run")) return hptrain::cli::RunCommand(argc - 1, argv + 1);
  if (!std::strcmp(command, "ps")) return hptrain::cli::PsCommand(argc - 1, argv + 1);
  if (!std::strcmp(command, "worker")) return hptrain::cli::WorkerCommand(argc - 1, argv + 1);
  if (!std::strcmp(command, "mp2")) return hptrain::cli::Mp2Command(argc - 1, argv + 1);
  if (!std::strcmp(command, "version") || !std::strcmp(command, "--version")) {
    // The second line lists the strategies built into this binary (the benchmark harness reads it).
    std::printf("hptrain %s\nstrategies: %s\n", HPTRAIN_VERSION,
                absl::StrJoin(hptrain::sync::RegisteredStrategies(), " ").c_str());
    return 0;
  }
  std::fprintf(stderr, "hptrain: unknown command \"%s\"\n%s", command, kUsage);
  return 2;
}
