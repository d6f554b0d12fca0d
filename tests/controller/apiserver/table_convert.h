// Server-side printing: the meta.k8s.io Table a GET or LIST answers when the client asks for one
// (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, what `kubectl get` sends), for custom
// resources as apiextensions-apiserver builds it: a Name column, then the served version's
// additionalPrinterColumns (a CRD without any gets Age, as the real CRD defaulting adds).
// Cells follow the column type: integer, number, boolean and string values as such, a missing
// value as null, a date as the age kubectl prints ("5m", "3h12m"). Only simple JSONPaths
// (`.status.phase`, `.spec.workers.replicas`) are read, which is what CRD printer columns use.
// Built-in types have no printer columns in the double and keep their plain JSON answer.
//
// Thread-safety: free functions without shared state.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_TABLE_CONVERT_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_TABLE_CONVERT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/resource_type.h"

namespace hptrain::testing {

// The Table apiVersion ("meta.k8s.io/v1" or "meta.k8s.io/v1beta1") the Accept header asks for,
// in its order of preference; nullopt when it asks for no Table.
std::optional<std::string> AcceptedTableVersion(const std::string& accept);

// The printer columns of a CRD version (its additionalPrinterColumns, or Age when it has none).
nlohmann::json PrinterColumnsOf(const nlohmann::json& crd_version);

// apimachinery's duration.HumanDuration: "45s", "5m30s", "2h5m", "3d4h", "2y10d".
std::string HumanDuration(absl::Duration d);

struct TableOptions {
  std::string api_version = "meta.k8s.io/v1";
  std::string include_object = "Metadata";  // includeObject: None, Metadata or Object
  std::string resource_version;
  std::string continue_token;  // lists only
  absl::Time now;
};

// The Table of `objects` of `type` (whose printer_columns must be set).
nlohmann::json ToTable(const ResourceType& type, const std::vector<nlohmann::json>& objects,
                       const TableOptions& options);

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_TABLE_CONVERT_H_
