// libFuzzer target: the TrainingJob parser (runtime/job/job_parser.h) on arbitrary documents and
// `--set` overrides. The input is the YAML document; after a line "#--set" each further line is
// one override ("path=value"). Every input must come back as a spec or an error, never a crash,
// a hang or an exception; an accepted spec must also pass ValidateJob again and parse the same
// way a second time.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/job/job_parser.h"
#include "runtime/job/job_validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  const std::string marker = "\n#--set\n";
  if (size_t at = text.find(marker); at != std::string::npos) {
    std::string rest = text.substr(at + marker.size());
    text.resize(at + 1);
    size_t begin = 0;
    while (begin <= rest.size() && overrides.size() < 16) {
      size_t end = rest.find('\n', begin);
      if (end == std::string::npos) end = rest.size();
      if (end > begin) overrides.push_back(rest.substr(begin, end - begin));
      begin = end + 1;
    }
  }
  absl::StatusOr<hptrain::job::JobSpec> spec = hptrain::job::ParseJobText(text, overrides);
  if (!spec.ok()) {
    if (spec.status().message().empty()) {
      std::fprintf(stderr, "job parser fuzz: an error without a message\n");
      std::abort();
    }
    return 0;
  }
  if (absl::Status again = hptrain::job::ValidateJob(*spec); !again.ok()) {
    std::fprintf(stderr, "job parser fuzz: an accepted spec fails validation: %s\n",
                 std::string(again.message()).c_str());
    std::abort();
  }
  absl::StatusOr<hptrain::job::JobSpec> second = hptrain::job::ParseJobText(text, overrides);
  if (!second.ok() || second->name != spec->name || second->WorldSize() != spec->WorldSize()) {
    std::fprintf(stderr, "job parser fuzz: the same input parsed differently\n");
    std::abort();
  }
  return 0;
}
