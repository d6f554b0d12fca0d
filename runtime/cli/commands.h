// The hptrain subcommands. Each takes argv from its own name on and returns the exit code.
#ifndef HPTRAIN_RUNTIME_CLI_COMMANDS_H_
#define HPTRAIN_RUNTIME_CLI_COMMANDS_H_

namespace hptrain::cli {

int RunCommand(int argc, char** argv);     // hptrain run JOB.yaml: local launcher
int PsCommand(int argc, char** argv);      // hptrain ps: coordinator (+ parameter server)
int WorkerCommand(int argc, char** argv);  // hptrain worker: one training process
int Mp2Command(int argc, char** argv);     // hptrain mp2 collect|train|eval: MP²'s offline tools
int Mp2CollectCommand(int argc, char** argv);  // hptrain mp2 collect: record a snapshot dataset
int StrategiesCommand(int argc, char** argv);  // hptrain strategies: the strategy descriptors
int CrdCommand(int argc, char** argv);         // hptrain crd: the TrainingJob CRD
int ExportCommand(int argc, char** argv);      // hptrain export: a model for torch.jit.load

}  // namespace hptrain::cli

#endif  // HPTRAIN_RUNTIME_CLI_COMMANDS_H_
