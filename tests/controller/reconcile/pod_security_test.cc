// The pods the controller renders, held to the "Restricted" Pod Security Standard
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/), which a namespace
// labelled pod-security.kubernetes.io/enforce=restricted admits. Every rule of the profile
// (baseline's included) is a named check here, so a failure says which rule broke.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/reconcile/desired_objects.h"
#include "controller/reconcile/labels.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::Not;

using Violations = std::vector<std::string>;

struct Rule {
  const char* name;
  std::function<Violations(const Json& pod)> check;
};

struct ContainerRef {
  std::string path;  // e.g. "initContainers[copy]"
  const Json* container;
};

// Every container of `pod`: containers, initContainers and ephemeralContainers.
std::vector<ContainerRef> AllContainers(const Json& pod) {
  std::vector<ContainerRef> out;
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    const Json* containers = Find(pod, {"spec", list});
    if (containers == nullptr || !containers->is_array()) continue;
    for (const Json& c : *containers) {
      out.push_back({absl::StrCat(list, "[", StringAt(c, {"name"}), "]"), &c});
    }
  }
  return out;
}

bool IsTrue(const Json* value) {
  return value != nullptr && value->is_boolean() && value->get<bool>();
}

bool IsSet(const Json* value) { return value != nullptr && !value->is_null(); }

bool HasElement(const Json& list, const Json& item) {
  return list.is_array() && std::find(list.begin(), list.end(), item) != list.end();
}

// The pod's securityContext and every container's, with a path for messages.
std::vector<std::pair<std::string, const Json*>> SecurityContexts(const Json& pod) {
  std::vector<std::pair<std::string, const Json*>> out;
  if (const Json* sc = Find(pod, {"spec", "securityContext"}); sc != nullptr) {
    out.emplace_back("spec.securityContext", sc);
  }
  for (const ContainerRef& c : AllContainers(pod)) {
    if (const Json* sc = Find(*c.container, {"securityContext"}); sc != nullptr) {
      out.emplace_back(absl::StrCat(c.path, ".securityContext"), sc);
    }
  }
  return out;
}

const std::set<std::string>& SafeSysctls() {
  static const auto* safe = new std::set<std::string>{
      "kernel.shm_rmid_forced",      "net.ipv4.ip_local_port_range",
      "net.ipv4.ip_unprivileged_port_start",
      "net.ipv4.tcp_syncookies",     "net.ipv4.ping_group_range",
      "net.ipv4.ip_local_reserved_ports",
      "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
      "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"};
  return *safe;
}

const std::vector<Rule>& RestrictedRules() {
  static const auto* rules = new std::vector<Rule>{
      // --- baseline ---------------------------------------------------------------------------
      {"HostProcess",
       [](const Json& pod) {
         Violations v;
         for (const auto& [path, sc] : SecurityContexts(pod)) {
           if (IsTrue(Find(*sc, {"windowsOptions", "hostProcess"}))) {
             v.push_back(absl::StrCat(path, ".windowsOptions.hostProcess is true"));
           }
         }
         return v;
       }},
      {"Host Namespaces",
       [](const Json& pod) {
         Violations v;
         for (const char* field : {"hostNetwork", "hostPID", "hostIPC"}) {
           if (IsTrue(Find(pod, {"spec", field}))) v.push_back(absl::StrCat("spec.", field));
         }
         return v;
       }},
      {"Privileged Containers",
       [](const Json& pod) {
         Violations v;
         for (const ContainerRef& c : AllContainers(pod)) {
           if (IsTrue(Find(*c.container, {"securityContext", "privileged"}))) {
             v.push_back(absl::StrCat(c.path, " is privileged"));
           }
         }
         return v;
       }},
      {"HostPath Volumes",
       [](const Json& pod) {
         Violations v;
         const Json* volumes = Find(pod, {"spec", "volumes"});
         for (size_t i = 0; volumes != nullptr && i < volumes->size(); ++i) {
           if (IsSet(Find((*volumes)[i], {"hostPath"}))) {
             v.push_back(absl::StrCat("volume ", StringAt((*volumes)[i], {"name"})));
           }
         }
         return v;
       }},
      {"Host Ports",
       [](const Json& pod) {
         Violations v;
         for (const ContainerRef& c : AllContainers(pod)) {
           const Json* ports = Find(*c.container, {"ports"});
           for (size_t i = 0; ports != nullptr && i < ports->size(); ++i) {
             if (IntAt((*ports)[i], {"hostPort"}, 0) != 0) {
               v.push_back(absl::StrCat(c.path, ".ports[", i, "].hostPort"));
             }
           }
         }
         return v;
       }},
      {"AppArmor",
       [](const Json& pod) {
         Violations v;
         const Json* annotations = Find(pod, {"metadata", "annotations"});
         if (annotations != nullptr && annotations->is_object()) {
           for (const auto& [key, value] : annotations->items()) {
             if (!absl::StartsWith(key, "container.apparmor.security.beta.kubernetes.io/")) {
               continue;
             }
             const std::string profile = value.is_string() ? value.get<std::string>() : "";
             if (profile != "runtime/default" && !absl::StartsWith(profile, "localhost/")) {
               v.push_back(absl::StrCat("annotation ", key, ": ", profile));
             }
           }
         }
         for (const auto& [path, sc] : SecurityContexts(pod)) {
           const std::string type = StringAt(*sc, {"appArmorProfile", "type"});
           if (!type.empty() && type != "RuntimeDefault" && type != "Localhost") {
             v.push_back(absl::StrCat(path, ".appArmorProfile.type ", type));
           }
         }
         return v;
       }},
      {"SELinux",
       [](const Json& pod) {
         Violations v;
         static const std::set<std::string> kTypes = {"", "container_t", "container_init_t",
                                                      "container_kvm_t", "container_engine_t"};
         for (const auto& [path, sc] : SecurityContexts(pod)) {
           if (kTypes.count(StringAt(*sc, {"seLinuxOptions", "type"})) == 0) {
             v.push_back(absl::StrCat(path, ".seLinuxOptions.type"));
           }
           for (const char* field : {"user", "role"}) {
             if (!StringAt(*sc, {"seLinuxOptions", field}).empty()) {
               v.push_back(absl::StrCat(path, ".seLinuxOptions.", field));
             }
           }
         }
         return v;
       }},
      {"/proc Mount Type",
       [](const Json& pod) {
         Violations v;
         for (const ContainerRef& c : AllContainers(pod)) {
           const std::string mount = StringAt(*c.container, {"securityContext", "procMount"});
           if (!mount.empty() && mount != "Default") v.push_back(c.path);
         }
         return v;
       }},
      {"Sysctls",
       [](const Json& pod) {
         Violations v;
         const Json* sysctls = Find(pod, {"spec", "securityContext", "sysctls"});
         for (size_t i = 0; sysctls != nullptr && i < sysctls->size(); ++i) {
           const std::string name = StringAt((*sysctls)[i], {"name"});
           if (SafeSysctls().count(name) == 0) v.push_back(name);
         }
         return v;
       }},
      // --- restricted -------------------------------------------------------------------------
      {"Volume Types",
       [](const Json& pod) {
         static const std::set<std::string> kAllowed = {
             "configMap", "csi",       "downwardAPI", "emptyDir", "ephemeral",
             "persistentVolumeClaim", "projected", "secret"};
         Violations v;
         const Json* volumes = Find(pod, {"spec", "volumes"});
         for (size_t i = 0; volumes != nullptr && i < volumes->size(); ++i) {
           for (const auto& [key, value] : (*volumes)[i].items()) {
             if (key != "name" && !value.is_null() && kAllowed.count(key) == 0) {
               v.push_back(absl::StrCat("volume ", StringAt((*volumes)[i], {"name"}), ": ", key));
             }
           }
         }
         return v;
       }},
      {"Privilege Escalation",
       [](const Json& pod) {
         Violations v;
         for (const ContainerRef& c : AllContainers(pod)) {
           const Json* value = Find(*c.container, {"securityContext", "allowPrivilegeEscalation"});
           if (value == nullptr || !value->is_boolean() || value->get<bool>()) {
             v.push_back(absl::StrCat(c.path, ": allowPrivilegeEscalation is not false"));
           }
         }
         return v;
       }},
      {"Running as Non-root",
       [](const Json& pod) {
         Violations v;
         const bool pod_level = IsTrue(Find(pod, {"spec", "securityContext", "runAsNonRoot"}));
         for (const ContainerRef& c : AllContainers(pod)) {
           const Json* own = Find(*c.container, {"securityContext", "runAsNonRoot"});
           const bool explicit_false = own != nullptr && own->is_boolean() && !own->get<bool>();
           if (explicit_false || (!pod_level && !IsTrue(own))) {
             v.push_back(absl::StrCat(c.path, ": runAsNonRoot is not true"));
           }
         }
         return v;
       }},
      {"Running as Non-root user",
       [](const Json& pod) {
         Violations v;
         for (const auto& [path, sc] : SecurityContexts(pod)) {
           if (IntAt(*sc, {"runAsUser"}, -1) == 0) v.push_back(absl::StrCat(path, ".runAsUser 0"));
         }
         return v;
       }},
      {"Seccomp",
       [](const Json& pod) {
         Violations v;
         auto allowed = [](const std::string& type) {
           return type == "RuntimeDefault" || type == "Localhost";
         };
         const std::string pod_type =
             StringAt(pod, {"spec", "securityContext", "seccompProfile", "type"});
         if (!pod_type.empty() && !allowed(pod_type)) {
           v.push_back(absl::StrCat("spec.securityContext.seccompProfile.type ", pod_type));
         }
         for (const ContainerRef& c : AllContainers(pod)) {
           const std::string type =
               StringAt(*c.container, {"securityContext", "seccompProfile", "type"});
           if (type.empty() ? !allowed(pod_type) : !allowed(type)) {
             v.push_back(absl::StrCat(c.path, ": seccompProfile ", type.empty() ? "unset" : type));
           }
         }
         return v;
       }},
      {"Capabilities",
       [](const Json& pod) {
         Violations v;
         for (const ContainerRef& c : AllContainers(pod)) {
           const Json* drop = Find(*c.container, {"securityContext", "capabilities", "drop"});
           bool drops_all = false;
           for (size_t i = 0; drop != nullptr && drop->is_array() && i < drop->size(); ++i) {
             drops_all |= (*drop)[i] == "ALL";
           }
           if (!drops_all) v.push_back(absl::StrCat(c.path, " does not drop ALL"));
           const Json* add = Find(*c.container, {"securityContext", "capabilities", "add"});
           for (size_t i = 0; add != nullptr && add->is_array() && i < add->size(); ++i) {
             if ((*add)[i] != "NET_BIND_SERVICE") {
               v.push_back(absl::StrCat(c.path, " adds ", (*add)[i].dump()));
             }
           }
         }
         return v;
       }},
  };
  return *rules;
}

// "<rule>: <what>" for every violation of the restricted profile by `pod`.
Violations RestrictedViolations(const Json& pod) {
  Violations out;
  for (const Rule& rule : RestrictedRules()) {
    for (const std::string& what : rule.check(pod)) {
      out.push_back(absl::StrCat(rule.name, ": ", what));
    }
  }
  return out;
}

// The names of the rules `pod` breaks.
std::set<std::string> BrokenRules(const Json& pod) {
  std::set<std::string> out;
  for (const Rule& rule : RestrictedRules()) {
    if (!rule.check(pod).empty()) out.insert(rule.name);
  }
  return out;
}

DesiredObjects Build(const Json& object) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(object);
  EXPECT_TRUE(job.ok()) << job.status();
  absl::StatusOr<DesiredObjects> desired = BuildDesiredObjects(*job, "tok", 1, "");
  EXPECT_TRUE(desired.ok()) << desired.status();
  return *desired;
}

Json& MainContainer(Json& pod) {
  for (Json& c : pod["spec"]["containers"]) {
    if (c["name"] == Label(pod, kRoleLabel)) return c;
  }
  ADD_FAILURE() << "no main container in " << Name(pod);
  return pod["spec"]["containers"][0];
}

// A job with everything a template may bring: a checkpoint claim, a data claim, a sidecar and
// an init container.
Json FullJob() {
  Json job = testing::HeteroJob();
  job["spec"]["checkpoint"] = Json::parse(R"({"path": "/checkpoints/hetero.ckpt",
      "intervalSteps": 100, "volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}})");
  Json& spec = job["spec"]["workerGroups"][0]["template"]["spec"];
  spec["containers"].push_back(Json::parse(R"({"name": "log-shipper", "image": "fluent-bit:3"})"));
  spec["initContainers"] = Json::parse(R"([{"name": "fetch", "image": "busybox:1.36",
                                            "command": ["true"]}])");
  return job;
}

TEST(PodSecurityTest, TheChecksSeeEveryRuleBroken) {
  // A compliant pod, then one change per rule, each breaking (at least) that rule.
  const Json base = Build(testing::ShorthandJob(1)).pods[1];
  ASSERT_THAT(RestrictedViolations(base), IsEmpty());
  struct Case {
    const char* rule;
    std::function<void(Json*)> change;
  };
  const std::vector<Case> cases = {
      {"HostProcess",
       [](Json* p) { (*p)["spec"]["securityContext"]["windowsOptions"]["hostProcess"] = true; }},
      {"Host Namespaces", [](Json* p) { (*p)["spec"]["hostNetwork"] = true; }},
      {"Host Namespaces", [](Json* p) { (*p)["spec"]["hostPID"] = true; }},
      {"Host Namespaces", [](Json* p) { (*p)["spec"]["hostIPC"] = true; }},
      {"Privileged Containers",
       [](Json* p) { MainContainer(*p)["securityContext"]["privileged"] = true; }},
      {"HostPath Volumes",
       [](Json* p) {
         (*p)["spec"]["volumes"].push_back(
             Json::parse(R"({"name": "host", "hostPath": {"path": "/var/run"}})"));
       }},
      {"Host Ports", [](Json* p) { MainContainer(*p)["ports"][0]["hostPort"] = 9090; }},
      {"AppArmor",
       [](Json* p) {
         (*p)["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/worker"] =
             "unconfined";
       }},
      {"AppArmor",
       [](Json* p) { (*p)["spec"]["securityContext"]["appArmorProfile"]["type"] = "Unconfined"; }},
      {"SELinux",
       [](Json* p) { MainContainer(*p)["securityContext"]["seLinuxOptions"]["type"] = "spc_t"; }},
      {"SELinux",
       [](Json* p) { (*p)["spec"]["securityContext"]["seLinuxOptions"]["user"] = "system_u"; }},
      {"/proc Mount Type",
       [](Json* p) { MainContainer(*p)["securityContext"]["procMount"] = "Unmasked"; }},
      {"Sysctls",
       [](Json* p) {
         (*p)["spec"]["securityContext"]["sysctls"] =
             Json::parse(R"([{"name": "kernel.msgmax", "value": "65536"}])");
       }},
      {"Volume Types",
       [](Json* p) {
         (*p)["spec"]["volumes"].push_back(
             Json::parse(R"({"name": "n", "nfs": {"server": "nfs", "path": "/"}})"));
       }},
      {"Privilege Escalation",
       [](Json* p) { MainContainer(*p)["securityContext"].erase("allowPrivilegeEscalation"); }},
      {"Privilege Escalation",
       [](Json* p) { MainContainer(*p)["securityContext"]["allowPrivilegeEscalation"] = true; }},
      {"Running as Non-root",
       [](Json* p) { (*p)["spec"]["securityContext"].erase("runAsNonRoot"); }},
      {"Running as Non-root",
       [](Json* p) { MainContainer(*p)["securityContext"]["runAsNonRoot"] = false; }},
      {"Running as Non-root user",
       [](Json* p) { MainContainer(*p)["securityContext"]["runAsUser"] = 0; }},
      {"Running as Non-root user",
       [](Json* p) { (*p)["spec"]["securityContext"]["runAsUser"] = 0; }},
      {"Seccomp", [](Json* p) { (*p)["spec"]["securityContext"].erase("seccompProfile"); }},
      {"Seccomp",
       [](Json* p) {
         MainContainer(*p)["securityContext"]["seccompProfile"]["type"] = "Unconfined";
       }},
      {"Capabilities",
       [](Json* p) {
         MainContainer(*p)["securityContext"]["capabilities"]["drop"] = Json::array({"NET_RAW"});
       }},
      {"Capabilities",
       [](Json* p) {
         MainContainer(*p)["securityContext"]["capabilities"]["add"] = Json::array({"SYS_ADMIN"});
       }},
  };
  std::set<std::string> covered;
  for (const Case& c : cases) {
    Json pod = base;
    c.change(&pod);
    EXPECT_THAT(BrokenRules(pod), Contains(c.rule)) << c.rule << ": " << DumpJson(pod);
    covered.insert(c.rule);
  }
  // Every rule has a case that breaks it.
  for (const Rule& rule : RestrictedRules()) EXPECT_EQ(covered.count(rule.name), 1u) << rule.name;

  // What the profile allows passes.
  Json pod = base;
  MainContainer(pod)["securityContext"]["capabilities"]["add"] = Json::array({"NET_BIND_SERVICE"});
  pod["spec"]["securityContext"]["seccompProfile"] = {{"type", "Localhost"},
                                                      {"localhostProfile", "hptrain.json"}};
  pod["spec"]["securityContext"]["sysctls"] =
      Json::parse(R"([{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}])");
  pod["spec"]["volumes"].push_back(
      Json::parse(R"({"name": "c", "csi": {"driver": "secrets-store.csi.k8s.io"}})"));
  EXPECT_THAT(RestrictedViolations(pod), IsEmpty());
}

TEST(PodSecurityTest, EveryWorkerAndPsPodMeetsTheRestrictedProfile) {
  for (const Json& job : {testing::ShorthandJob(2), testing::ShardedJob("hps", 2),
                          testing::HeteroJob(), FullJob()}) {
    DesiredObjects d = Build(job);
    std::set<std::string> roles;
    for (const Json& pod : d.pods) {
      SCOPED_TRACE(Name(pod));
      roles.insert(Label(pod, kRoleLabel));
      EXPECT_THAT(RestrictedViolations(pod), IsEmpty()) << DumpJson(pod, 2);
    }
    EXPECT_EQ(roles, (std::set<std::string>{kRolePs, kRoleWorker}));
  }
}

TEST(PodSecurityTest, TheDefaultsThemselves) {
  DesiredObjects d = Build(FullJob());
  const Json& ps = d.pods[0];
  const Json& worker = d.pods[1];
  for (const Json* pod : {&ps, &worker}) {
    SCOPED_TRACE(Name(*pod));
    const Json& spec = (*pod)["spec"];
    EXPECT_EQ(spec["securityContext"], Json::parse(R"({
      "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
      "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}})"));
    EXPECT_EQ(spec["automountServiceAccountToken"], false);
    Json copy = *pod;
    const Json& runtime = MainContainer(copy);
    EXPECT_EQ(runtime["securityContext"], Json::parse(R"({"allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true})"));
    // The read-only root leaves /tmp writable, on an emptyDir.
    EXPECT_TRUE(HasElement(runtime["volumeMounts"],
                           Json::parse(R"({"name": "hptrain-tmp", "mountPath": "/tmp"})")));
    EXPECT_TRUE(
        HasElement(spec["volumes"], Json::parse(R"({"name": "hptrain-tmp", "emptyDir": {}})")));
  }
  EXPECT_EQ(kRuntimeUser, 65532);

  // The sidecar and the init container get what the profile requires, but keep a writable root:
  // only the runtime is known to write nothing but /tmp and its volumes.
  const Json want = Json::parse(R"({"allowPrivilegeEscalation": false,
                                    "capabilities": {"drop": ["ALL"]}})");
  EXPECT_EQ(worker["spec"]["containers"][1]["name"], "log-shipper");
  EXPECT_EQ(worker["spec"]["containers"][1]["securityContext"], want);
  EXPECT_EQ(worker["spec"]["initContainers"][0]["securityContext"], want);
  EXPECT_FALSE(worker["spec"]["containers"][1].contains("volumeMounts"));
}

TEST(PodSecurityTest, TemplateSecurityValuesWin) {
  Json job = testing::ShorthandJob(1);
  Json& spec = job["spec"]["workers"]["template"]["spec"];
  spec["automountServiceAccountToken"] = true;
  spec["securityContext"] = Json::parse(R"({"runAsUser": 1000, "fsGroup": 2000,
      "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/hptrain.json"}})");
  spec["containers"][0]["securityContext"] = Json::parse(R"({"readOnlyRootFilesystem": false,
      "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}})");
  DesiredObjects d = Build(job);
  Json worker = d.pods[1];
  EXPECT_EQ(worker["spec"]["automountServiceAccountToken"], true);
  // Theirs where set, ours beside.
  EXPECT_EQ(worker["spec"]["securityContext"], Json::parse(R"({
      "runAsUser": 1000, "fsGroup": 2000,
      "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/hptrain.json"},
      "runAsNonRoot": true, "runAsGroup": 65532, "fsGroupChangePolicy": "OnRootMismatch"})"));
  EXPECT_EQ(MainContainer(worker)["securityContext"], Json::parse(R"({
      "readOnlyRootFilesystem": false,
      "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
      "allowPrivilegeEscalation": false})"));
  EXPECT_THAT(RestrictedViolations(worker), IsEmpty());
  // The ps pod has no template of its own here: all defaults.
  EXPECT_EQ(d.pods[0]["spec"]["securityContext"]["runAsUser"], kRuntimeUser);
  EXPECT_EQ(d.pods[0]["spec"]["automountServiceAccountToken"], false);
}

TEST(PodSecurityTest, TemplatesThatLeaveTheProfileAreNotContradicted) {
  // A template may ask for root or privilege (for a namespace that allows it): the defaults do
  // not turn that into a pod the kubelet or the API server refuses.
  Json job = testing::ShorthandJob(1);
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["securityContext"] =
      Json::parse(R"({"runAsUser": 0, "privileged": true})");
  DesiredObjects d = Build(job);
  Json worker = d.pods[1];
  // runAsNonRoot: true would keep a uid-0 container from starting.
  EXPECT_FALSE(worker["spec"]["securityContext"].contains("runAsNonRoot"));
  // allowPrivilegeEscalation: false is refused beside privileged: true.
  EXPECT_FALSE(MainContainer(worker)["securityContext"].contains("allowPrivilegeEscalation"));
  EXPECT_EQ(MainContainer(worker)["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(BrokenRules(worker),
            (std::set<std::string>{"Privileged Containers", "Privilege Escalation",
                                   "Running as Non-root", "Running as Non-root user"}));

  job["spec"]["workers"]["template"]["spec"]["containers"][0]["securityContext"] =
      Json::parse(R"({"capabilities": {"add": ["SYS_ADMIN"]}})");
  worker = Build(job).pods[1];
  EXPECT_FALSE(MainContainer(worker)["securityContext"].contains("allowPrivilegeEscalation"));
  EXPECT_EQ(worker["spec"]["securityContext"]["runAsNonRoot"], true);
  // The ps pod is not affected by the worker template's choices.
  EXPECT_THAT(RestrictedViolations(Build(job).pods[0]), IsEmpty());
  EXPECT_THAT(BrokenRules(worker), Not(Contains("Running as Non-root")));
}

}  // namespace
}  // namespace hptrain::reconcile
