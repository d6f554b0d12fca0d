// hptrain strategies [--json | --markdown] and hptrain crd: the strategy descriptors, printed
// (runtime/cli/strategy_docs.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/cli/commands.h"
#include "runtime/cli/strategy_docs.h"

namespace hptrain::cli {

int StrategiesCommand(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: hptrain strategies [--json | --markdown]\n"
      "  the strategies, their parameters (type, default, range) and where they run;\n"
      "  --json: the same as one JSON document; --markdown: README.md's strategy table\n";
  std::string text;
  if (argc == 1) {
    text = StrategiesTable();
  } else if (argc == 2 && !std::strcmp(argv[1], "--json")) {
    text = StrategiesJson();
  } else if (argc == 2 && !std::strcmp(argv[1], "--markdown")) {
    text = StrategiesMarkdown();
  } else if (argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::fputs(kUsage, stdout);
    return 0;
  } else {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

int CrdCommand(int argc, char** argv) {
  if (argc > 1) {
    const bool help = !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h");
    std::fputs("usage: hptrain crd\n  print the TrainingJob CustomResourceDefinition (YAML)\n",
               help ? stdout : stderr);
    return help ? 0 : 2;
  }
  std::fputs(CrdYaml().c_str(), stdout);
  return 0;
}

}  // namespace hptrain::cli
