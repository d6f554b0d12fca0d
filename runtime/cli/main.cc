// hptrain: the runtime's single binary. Subcommands: run, ps, worker, mp2, strategies, crd,
// export, version.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "runtime/base/blas.h"
#include "runtime/cli/commands.h"
#include "runtime/sync/strategy_descriptor.h"

namespace {

constexpr char kUsage[] =
    "usage: hptrain <command> [flags]\n"
    "\n"
    "commands:\n"
    "  run JOB.yaml   run a TrainingJob as local processes (one ps, N workers)\n"
    "  ps             the job's coordinator; started by `run` or by the controller in a pod\n"
    "  worker         one training process; started by `run` or by the controller in a pod\n"
    "  mp2            MP²'s predictor tools: collect snapshots, train and evaluate predictors\n"
    "  strategies     the strategies and their parameters (--json, --markdown)\n"
    "  crd            print the TrainingJob CustomResourceDefinition\n"
    "  export         write a trained model as a TorchScript module for torch.jit.load\n"
    "  version        print the version, the strategies built in and the BLAS in use\n"
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
  if (!std::strcmp(command, "strategies")) {
    return hptrain::cli::StrategiesCommand(argc - 1, argv + 1);
  }
  if (!std::strcmp(command, "crd")) return hptrain::cli::CrdCommand(argc - 1, argv + 1);
  if (!std::strcmp(command, "export")) return hptrain::cli::ExportCommand(argc - 1, argv + 1);
  if (!std::strcmp(command, "version") || !std::strcmp(command, "--version")) {
    // The second line lists the strategies (their descriptors; the benchmark harness reads it);
    // the third names the BLAS library libtorch's CPU matrix products run on in this process.
    std::vector<std::string> names;
    for (const auto& d : hptrain::sync::StrategyDescriptors()) names.push_back(d.name);
    std::printf("hptrain %s\nstrategies: %s\nblas: %s\n", HPTRAIN_VERSION,
                absl::StrJoin(names, " ").c_str(),
                hptrain::DescribeBlas(hptrain::LoadedBlas()).c_str());
    return 0;
  }
  std::fprintf(stderr, "hptrain: unknown command \"%s\"\n%s", command, kUsage);
  return 2;
}
