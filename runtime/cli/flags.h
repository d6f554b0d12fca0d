// A small command-line parser for the hptrain subcommands and the benchmark tools:
// `--name value`, `--name=value`, boolean `--name`, repeated flags (--set), positional arguments,
// an environment variable fallback per flag (how the controller configures pods), and generated
// --help text.
#ifndef HPTRAIN_RUNTIME_CLI_FLAGS_H_
#define HPTRAIN_RUNTIME_CLI_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hptrain::cli {

class FlagSet {
 public:
  // The flags of an hptrain subcommand: help and errors name it "hptrain <command>".
  FlagSet(const std::string& command, std::string usage)
      : FlagSet(Invocation{"hptrain " + command}, std::move(usage)) {}
  // The flags of a program of its own (a benchmark tool): help and errors name `program`.
  static FlagSet ForProgram(std::string program, std::string usage) {
    return FlagSet(Invocation{std::move(program)}, std::move(usage));
  }

  // `env` (may be empty) is read when the flag is not on the command line.
  void String(const std::string& name, std::string* value, const std::string& env,
              const std::string& help);
  void Int(const std::string& name, int* value, const std::string& env, const std::string& help);
  void Bool(const std::string& name, bool* value, const std::string& help);
  void Repeated(const std::string& name, std::vector<std::string>* values,
                const std::string& help);

  // Parses argv[first..argc). Unknown flags, missing values and bad integers are InvalidArgument
  // naming the flag. Sets help_requested() on --help/-h instead of failing.
  absl::Status Parse(int argc, char** argv, int first = 1);

  // The common start of every command: parses, prints --help to stdout, or reports a parse
  // error as one line on stderr. Returns true to go on; false with *exit_code set to stop.
  bool ParseOrExit(int argc, char** argv, int* exit_code);

  const std::vector<std::string>& positional() const { return positional_; }
  bool help_requested() const { return help_requested_; }
  std::string Help() const;

 private:
  struct Invocation {
    std::string name;  // "hptrain run", or a program's name
  };
  FlagSet(Invocation invocation, std::string usage)
      : invocation_(std::move(invocation.name)), usage_(std::move(usage)) {}

  enum class Kind { kString, kInt, kBool, kRepeated };
  struct Flag {
    std::string name;
    Kind kind;
    void* target;
    std::string env;
    std::string help;
    bool seen = false;
  };
  absl::Status Assign(Flag& flag, const std::string& value);

  std::string invocation_;  // "hptrain run", or a program's name
  std::string usage_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
};

}  // namespace hptrain::cli

#endif  // HPTRAIN_RUNTIME_CLI_FLAGS_H_
