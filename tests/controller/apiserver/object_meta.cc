#include "tests/controller/apiserver/object_meta.h"

#include <atomic>
#include <mutex>
#include <random>
#include <regex>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/controller/apiserver/json_util.h"

namespace hptrain::testing {
namespace {

std::mutex g_random_mu;

std::mt19937_64& Random() {
  static std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

constexpr char kSubdomainRegex[] =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr char kLabelRegex[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr char kDns1035Regex[] = "[a-z]([-a-z0-9]*[a-z0-9])?";

nlohmann::json StripForCompare(const nlohmann::json& object, bool spec_only) {
  nlohmann::json copy = object;
  if (!copy.is_object()) return copy;
  if (spec_only) {
    copy.erase("metadata");
    copy.erase("status");
  } else if (copy.contains("metadata") && copy["metadata"].is_object()) {
    copy["metadata"].erase("resourceVersion");
    copy["metadata"].erase("managedFields");
  }
  return copy;
}

void SetDefault(nlohmann::json* object, const char* key, nlohmann::json value) {
  if (!object->contains(key)) (*object)[key] = std::move(value);
}

void DefaultPod(bool create, nlohmann::json* pod) {
  nlohmann::json& spec = (*pod)["spec"];
  if (!spec.is_object()) spec = nlohmann::json::object();
  SetDefault(&spec, "restartPolicy", "Always");
  SetDefault(&spec, "terminationGracePeriodSeconds", 30);
  SetDefault(&spec, "dnsPolicy", "ClusterFirst");
  SetDefault(&spec, "securityContext", nlohmann::json::object());
  SetDefault(&spec, "schedulerName", "default-scheduler");
  SetDefault(&spec, "serviceAccountName", "default");
  SetDefault(&spec, "serviceAccount", spec["serviceAccountName"]);
  SetDefault(&spec, "priority", 0);
  SetDefault(&spec, "enableServiceLinks", true);
  SetDefault(&spec, "preemptionPolicy", "PreemptLowerPriority");
  bool has_resources = false;
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (nlohmann::json& container : spec["containers"]) {
      if (!container.is_object()) continue;
      SetDefault(&container, "resources", nlohmann::json::object());
      if (!container["resources"].empty()) has_resources = true;
      SetDefault(&container, "terminationMessagePath", "/dev/termination-log");
      SetDefault(&container, "terminationMessagePolicy", "File");
      std::string image = container.value("image", "");
      bool latest = image.find(':') == std::string::npos ||
                    (image.size() >= 7 && image.compare(image.size() - 7, 7, ":latest") == 0);
      SetDefault(&container, "imagePullPolicy", latest ? "Always" : "IfNotPresent");
    }
  }
  if (create) {
    (*pod)["status"] = {{"phase", "Pending"},
                        {"qosClass", has_resources ? "Burstable" : "BestEffort"}};
  }
}

void DefaultService(bool create, nlohmann::json* service) {
  static std::atomic<int> next_ip{1};
  nlohmann::json& spec = (*service)["spec"];
  if (!spec.is_object()) spec = nlohmann::json::object();
  SetDefault(&spec, "type", "ClusterIP");
  SetDefault(&spec, "sessionAffinity", "None");
  if (!spec.contains("clusterIP")) {
    int n = next_ip.fetch_add(1);
    spec["clusterIP"] = absl::StrFormat("10.96.%d.%d", (n / 250) % 250, 1 + n % 250);
  }
  SetDefault(&spec, "clusterIPs", nlohmann::json::array({spec["clusterIP"]}));
  SetDefault(&spec, "ipFamilies", nlohmann::json::array({"IPv4"}));
  SetDefault(&spec, "ipFamilyPolicy", "SingleStack");
  SetDefault(&spec, "internalTrafficPolicy", "Cluster");
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (nlohmann::json& port : spec["ports"]) {
      if (!port.is_object()) continue;
      SetDefault(&port, "protocol", "TCP");
      if (port.contains("port")) SetDefault(&port, "targetPort", port["port"]);
    }
  }
  if (create) (*service)["status"] = {{"loadBalancer", nlohmann::json::object()}};
}

void DefaultSecret(nlohmann::json* secret) {
  SetDefault(secret, "type", "Opaque");
  if (secret->contains("stringData") && (*secret)["stringData"].is_object()) {
    nlohmann::json& data = (*secret)["data"];
    if (!data.is_object()) data = nlohmann::json::object();
    for (const auto& [key, value] : (*secret)["stringData"].items()) {
      data[key] = absl::Base64Escape(value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  secret->erase("stringData");
}

void DefaultCrd(bool create, nlohmann::json* crd) {
  nlohmann::json& spec = (*crd)["spec"];
  if (!spec.is_object()) return;
  SetDefault(&spec, "conversion", {{"strategy", "None"}});
  if (spec.contains("names") && spec["names"].is_object()) {
    SetDefault(&spec["names"], "listKind", absl::StrCat(spec["names"].value("kind", ""), "List"));
  }
  if (!create) return;
  nlohmann::json stored = nlohmann::json::array();
  for (const nlohmann::json& version : spec.value("versions", nlohmann::json::array())) {
    if (version.value("storage", false)) stored.push_back(version.value("name", ""));
  }
  (*crd)["status"] = {{"conditions", nullptr},
                      {"acceptedNames", {{"plural", ""}, {"kind", ""}}},
                      {"storedVersions", stored}};
}

}  // namespace

std::string NowTimestamp() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

std::string NewUid() {
  uint64_t hi, lo;
  {
    std::lock_guard<std::mutex> lock(g_random_mu);
    hi = Random()();
    lo = Random()();
  }
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", hi >> 32, (hi >> 16) & 0xffff, hi & 0xffff,
                         lo >> 48, lo & 0xffffffffffffULL);
}

std::string RandomSuffix(int length) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  std::lock_guard<std::mutex> lock(g_random_mu);
  for (int i = 0; i < length; ++i) out.push_back(kAlphabet[Random()() % (sizeof(kAlphabet) - 1)]);
  return out;
}

std::vector<Cause> ValidateName(const ResourceType& type, const nlohmann::json& object) {
  std::vector<Cause> causes;
  const nlohmann::json* name_field = FindPath(object, {"metadata", "name"});
  std::string name =
      name_field != nullptr && name_field->is_string() ? name_field->get<std::string>() : "";
  if (name.empty()) {
    causes.push_back({"FieldValueRequired", "Required value: name or generateName is required",
                      "metadata.name"});
    return causes;
  }
  static const std::regex kSubdomain(kSubdomainRegex);
  static const std::regex kLabel(kLabelRegex);
  static const std::regex kDns1035(kDns1035Regex);
  const char* regex = kSubdomainRegex;
  const std::regex* compiled = &kSubdomain;
  const char* what =
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
      "characters, '-' or '.', and must start and end with an alphanumeric "
      "character (e.g. 'example.com', regex used for validation is '";
  size_t max_length = 253;
  if (type.kind == "Namespace") {
    regex = kLabelRegex;
    compiled = &kLabel;
    max_length = 63;
    what =
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
        "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '";
  } else if (type.kind == "Service" && type.group.empty()) {
    regex = kDns1035Regex;
    compiled = &kDns1035;
    max_length = 63;
    what =
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
        "with an alphabetic character, and end with an alphanumeric character (e.g. "
        "'my-name',  or 'abc-123', regex used for validation is '";
  }
  if (!std::regex_match(name, *compiled)) {
    causes.push_back({"FieldValueInvalid",
                      absl::StrCat("Invalid value: \"", name, "\": ", what, regex, "')"),
                      "metadata.name"});
  } else if (name.size() > max_length) {
    causes.push_back({"FieldValueInvalid",
                      absl::StrCat("Invalid value: \"", name, "\": must be no more than ",
                                   max_length, " characters"),
                      "metadata.name"});
  }
  return causes;
}

bool SpecChanged(const nlohmann::json& a, const nlohmann::json& b) {
  return StripForCompare(a, true) != StripForCompare(b, true);
}

bool SameObject(const nlohmann::json& a, const nlohmann::json& b) {
  return StripForCompare(a, false) == StripForCompare(b, false);
}

void ApplyBuiltinDefaults(const ResourceType& type, bool create, nlohmann::json* object) {
  if (type.custom) return;
  if (type.group.empty() && type.kind == "Pod") {
    DefaultPod(create, object);
  } else if (type.group.empty() && type.kind == "Service") {
    DefaultService(create, object);
  } else if (type.group.empty() && type.kind == "Secret") {
    DefaultSecret(object);
  } else if (type.group.empty() && type.kind == "Namespace") {
    SetDefault(&(*object)["spec"], "finalizers", nlohmann::json::array({"kubernetes"}));
    if (create) (*object)["status"] = {{"phase", "Active"}};
  } else if (type.group == "events.k8s.io") {
    SetDefault(object, "deprecatedSource", nlohmann::json::object());
    SetDefault(object, "deprecatedFirstTimestamp", nullptr);
    SetDefault(object, "deprecatedLastTimestamp", nullptr);
  } else if (type.group == "apiextensions.k8s.io") {
    DefaultCrd(create, object);
  }
}

}  // namespace hptrain::testing
