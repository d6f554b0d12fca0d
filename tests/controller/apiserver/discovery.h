// Discovery documents of the API server double, shaped like kube-apiserver v1.28's
// (fixtures 01, 02, 05, 06), built from the served resource types.
//
//   GET /version           VersionInfo
//   GET /api               APIVersions {versions: ["v1"]}
//   GET /apis              APIGroupList of every served group
//   GET /apis/G            APIGroup
//   GET /api/v1, /apis/G/V APIResourceList, with status and scale subresources as entries
//
// Thread-safety: free functions without shared state.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_DISCOVERY_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_DISCOVERY_H_

#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/resource_type.h"

namespace hptrain::testing {

// The /version body for `git_version` ("v1.28.7": major "1", minor "28").
nlohmann::json VersionInfo(const std::string& git_version);

// The /api body; `server_address` is "host:port".
nlohmann::json CoreApiVersions(const std::string& server_address);

// The /apis body.
nlohmann::json ApiGroupList(const std::vector<ResourceType>& types);

// The /apis/<group> body, or nullopt when no served type is in `group`.
std::optional<nlohmann::json> ApiGroup(const std::vector<ResourceType>& types,
                                       const std::string& group);

// The /api/v1 (group "") or /apis/<group>/<version> body, or nullopt when nothing is served
// there.
std::optional<nlohmann::json> ApiResourceList(const std::vector<ResourceType>& types,
                                              const std::string& group, const std::string& version);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_DISCOVERY_H_
