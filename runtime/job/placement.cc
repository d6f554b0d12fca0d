#include "runtime/job/placement.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/files.h"
#include "yaml-cpp/yaml.h"

namespace hptrain::job {
namespace {

absl::Status Invalid(const std::string& path, const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", why));
}

absl::StatusOr<HostPlacement> ReadHost(const YAML::Node& node, const std::string& path,
                                       const std::string& field) {
  if (!node.IsMap()) return Invalid(path, field, "must be a map with exec and address");
  HostPlacement host;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (key == "exec") {
      if (!kv.second.IsSequence()) return Invalid(path, field + ".exec", "must be a list of strings");
      for (const auto& a : kv.second) host.exec.push_back(a.as<std::string>());
    } else if (key == "address") {
      host.address = kv.second.as<std::string>();
      if (host.address.empty()) return Invalid(path, field + ".address", "must not be empty");
    } else {
      return Invalid(path, absl::StrCat(field, ".", key), "unknown field (known: exec, address)");
    }
  }
  return host;
}

}  // namespace

absl::StatusOr<Placement> ReadPlacementFile(const std::string& path, int world_size,
                                            int ps_shards) {
  if (!PathExists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  try {
    YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) return Invalid(path, "<document>", "must be a map with ps and workers");
    Placement placement;
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "ps") {
        auto ps = ReadHost(kv.second, path, "ps");
        if (!ps.ok()) return ps.status();
        placement.ps = *ps;
      } else if (key == "workers" || key == "psShards") {
        if (!kv.second.IsSequence()) return Invalid(path, key, "must be a list");
        std::vector<HostPlacement>& hosts =
            key == "workers" ? placement.workers : placement.ps_shards;
        for (size_t i = 0; i < kv.second.size(); ++i) {
          auto h = ReadHost(kv.second[i], path, absl::StrCat(key, "[", i, "]"));
          if (!h.ok()) return h.status();
          hosts.push_back(*h);
        }
      } else {
        return Invalid(path, key, "unknown field (known: ps, psShards, workers)");
      }
    }
    if (!placement.workers.empty() && static_cast<int>(placement.workers.size()) != world_size) {
      return Invalid(path, "workers",
                     absl::StrCat("has ", placement.workers.size(), " entries, the job has ",
                                  world_size, " workers"));
    }
    if (!placement.ps_shards.empty() &&
        static_cast<int>(placement.ps_shards.size()) != ps_shards - 1) {
      return Invalid(path, "psShards",
                     absl::StrCat("has ", placement.ps_shards.size(), " entries, the job has ",
                                  ps_shards - 1, " parameter-server shards beyond the first"));
    }
    return placement;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1,
                                                   ": malformed placement: ", e.msg));
  }
}

}  // namespace hptrain::job
