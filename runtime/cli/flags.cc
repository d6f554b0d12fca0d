#include "runtime/cli/flags.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/exit_codes.h"

namespace hptrain::cli {

void FlagSet::String(const std::string& name, std::string* value, const std::string& env,
                     const std::string& help) {
  flags_.push_back({name, Kind::kString, value, env, help});
}
void FlagSet::Int(const std::string& name, int* value, const std::string& env,
                  const std::string& help) {
  flags_.push_back({name, Kind::kInt, value, env, help});
}
void FlagSet::Bool(const std::string& name, bool* value, const std::string& help) {
  flags_.push_back({name, Kind::kBool, value, "", help});
}
void FlagSet::Repeated(const std::string& name, std::vector<std::string>* values,
                       const std::string& help) {
  flags_.push_back({name, Kind::kRepeated, values, "", help});
}

absl::Status FlagSet::Assign(Flag& flag, const std::string& value) {
  flag.seen = true;
  switch (flag.kind) {
    case Kind::kString:
      *static_cast<std::string*>(flag.target) = value;
      break;
    case Kind::kInt:
      if (!absl::SimpleAtoi(value, static_cast<int*>(flag.target))) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, ": expected an integer, got \"", value, "\""));
      }
      break;
    case Kind::kBool:
      if (value == "true" || value == "1") {
        *static_cast<bool*>(flag.target) = true;
      } else if (value == "false" || value == "0") {
        *static_cast<bool*>(flag.target) = false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag.name, ": expected true or false, got \"", value, "\""));
      }
      break;
    case Kind::kRepeated:
      static_cast<std::vector<std::string>*>(flag.target)->push_back(value);
      break;
  }
  return absl::OkStatus();
}

absl::Status FlagSet::Parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Flag* flag = nullptr;
    for (auto& f : flags_) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see ", invocation_, " --help)"));
    }
    if (!has_value) {
      if (flag->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    absl::Status status = Assign(*flag, value);
    if (!status.ok()) return status;
  }
  for (auto& flag : flags_) {
    if (flag.seen || flag.env.empty()) continue;
    if (const char* env = std::getenv(flag.env.c_str()); env != nullptr && *env != '\0') {
      absl::Status status = Assign(flag, env);
      if (!status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("$", flag.env, ": ", status.message()));
      }
    }
  }
  return absl::OkStatus();
}

bool FlagSet::ParseOrExit(int argc, char** argv, int* exit_code) {
  absl::Status parsed = Parse(argc, argv);
  if (help_requested()) {
    std::fputs(Help().c_str(), stdout);
    *exit_code = kExitOk;
    return false;
  }
  if (!parsed.ok()) {
    *exit_code = ReportErrorAs(invocation_, parsed);
    return false;
  }
  return true;
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat("usage: ", invocation_, " ", usage_, "\n\nflags:\n");
  for (const auto& flag : flags_) {
    std::string left = absl::StrCat("  --", flag.name,
                                     flag.kind == Kind::kBool ? "" : " VALUE");
    if (left.size() < 26) left.resize(26, ' ');
    absl::StrAppend(&out, left, " ", flag.help);
    if (!flag.env.empty()) absl::StrAppend(&out, " [$", flag.env, "]");
    out += "\n";
  }
  return out;
}

}  // namespace hptrain::cli
