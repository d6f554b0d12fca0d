// The command line of hptrain-controller: flags, their environment fallbacks, --help text, and
// the listen addresses of the metrics and health endpoints.
//
// Every flag has an environment variable (shown in --help) read when the flag is absent from
// the command line; the command line wins. --kubeconfig is special: its fallback, $KUBECONFIG
// (a ':'-separated list, first entry), then in-cluster config, then ~/.kube/config, is
// kube::LoadDefaultConfig's rule, applied by the caller.
//
//   --kubeconfig PATH                 [$KUBECONFIG]
//   --namespace NS[,NS...]            repeatable; empty = all namespaces [$HPTRAIN_NAMESPACE]
//   --leader-elect[=true|false]       [$HPTRAIN_LEADER_ELECT]
//   --leader-election-namespace NS    [$HPTRAIN_LEADER_ELECTION_NAMESPACE]
//   --leader-election-id NAME         default hptrain-controller [$HPTRAIN_LEADER_ELECTION_ID]
//   --metrics-address [HOST]:PORT     default :8080; "0" disables [$HPTRAIN_METRICS_ADDRESS]
//   --health-address [HOST]:PORT      default :8081; "0" disables [$HPTRAIN_HEALTH_ADDRESS]
//   --prometheus-url URL              [$HPTRAIN_PROMETHEUS_URL]
//   --workers N                       default 2 [$HPTRAIN_WORKERS]
//   --default-image IMAGE             default hptrain/runtime:<version> [$HPTRAIN_DEFAULT_IMAGE]
//   --default-image-pull-policy P     Always | IfNotPresent | Never; default: Kubernetes' rule
//                                     [$HPTRAIN_DEFAULT_IMAGE_PULL_POLICY]
//   --default-image-pull-secrets S[,S...]  repeatable [$HPTRAIN_DEFAULT_IMAGE_PULL_SECRETS]
// The pull policy and pull secrets go with the default image: they are applied to the pods that
// run it (a template naming no image), unless the template sets its own.
//   --help, -h
// Values come as "--name value" or "--name=value"; a boolean takes no separate value.
//
// (runtime/cli's FlagSet is built for `hptrain <command>` and names that command in its usage
// and error lines, and has no environment fallback for boolean or repeated flags; hence this
// small table of the controller's own.)
//
// Pure functions except for the environment lookup they are given; thread-safe.
#ifndef HPTRAIN_CONTROLLER_MANAGER_FLAGS_H_
#define HPTRAIN_CONTROLLER_MANAGER_FLAGS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hptrain::manager {

inline constexpr char kProgramName[] = "hptrain-controller";

struct ControllerFlags {
  std::string kubeconfig;
  std::vector<std::string> namespaces;  // empty = all
  bool leader_elect = false;
  std::string leader_election_namespace;  // empty: $POD_NAMESPACE, else the config's namespace
  std::string leader_election_id = "hptrain-controller";
  std::string metrics_address = ":8080";
  std::string health_address = ":8081";
  std::string webhook_address = "0";  // "0" = no admission webhook
  std::string webhook_cert_dir = "/etc/hptrain/webhook";
  std::string prometheus_url;
  int workers = 2;
  std::string default_image;  // set to DefaultImage() unless given
  std::string default_image_pull_policy;                // "" = Kubernetes' default
  std::vector<std::string> default_image_pull_secrets;  // Secret names in each job's namespace
  bool help = false;
};

// Reads an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (std::getenv); an empty value reads as unset.
std::optional<std::string> ProcessEnv(const std::string& name);

// "hptrain/runtime:<version of this build>".
std::string DefaultImage();

// Parses `args` (argv without the program name). InvalidArgument, one line naming the flag (or
// the variable), for an unknown flag, a missing or malformed value, a positional argument,
// --workers below 1, an address ParseListenAddress rejects, a --prometheus-url that is not
// http(s), a pull policy Kubernetes does not know, or a pull secret that is not a valid Secret
// name. With --help the other flags are still parsed but not checked.
absl::StatusOr<ControllerFlags> ParseControllerFlags(const std::vector<std::string>& args,
                                                     const EnvLookup& env = ProcessEnv);

// The --help text: usage, what the controller does, every flag with its default and variable.
std::string ControllerHelp();

struct ListenAddress {
  std::string host;  // "0.0.0.0" for ":PORT"
  int port = 0;      // 0 = an ephemeral port
};

// "[HOST]:PORT" (IPv6 hosts in brackets) -> the address; "0" -> nullopt (endpoint disabled).
// InvalidArgument "<flag>: ..." otherwise; `flag` names the flag in the message.
absl::StatusOr<std::optional<ListenAddress>> ParseListenAddress(absl::string_view flag,
                                                                absl::string_view address);

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_FLAGS_H_
