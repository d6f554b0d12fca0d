// Config: where the API server is and how to authenticate to it.
//
// Three sources, the same result:
//   LoadKubeconfig(path)   a kubeconfig file (kubectl's format): the current context (or a named
//                          one) picks a cluster (server, CA, insecure-skip-tls-verify) and a user
//                          (token / tokenFile / client certificate and key);
//   InClusterConfig()      a pod's service account: token and ca.crt under
//                          /var/run/secrets/kubernetes.io/serviceaccount, the server from
//                          KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT;
//   LoadDefaultConfig(f)   the controller's rule: --kubeconfig, else $KUBECONFIG, else in-cluster
//                          when KUBERNETES_SERVICE_HOST is set, else ~/.kube/config.
// Files named in a kubeconfig (certificate-authority, client-certificate, client-key) are read at
// load time, relative to the kubeconfig's directory, so a Config holds PEM text only. A token file
// is read at load time too (to fail early) and again by the transport at most once a minute,
// because projected service-account tokens rotate.
//
// Errors are one line naming the source and the field, e.g.
//   kubeconfig /home/u/.kube/config: context "prod" not found
//   kubeconfig /k: users["admin"].user.client-certificate-data: not valid base64
//   in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set
// (InvalidArgument for bad content, NotFound for a missing file or context, Unimplemented for
// exec / auth-provider credentials, which the controller does not run.)
//
// Thread-safety: functions are thread-safe; Config is a value type.
#ifndef HPTRAIN_CONTROLLER_KUBE_CONFIG_H_
#define HPTRAIN_CONTROLLER_KUBE_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hptrain::kube {

struct Config {
  std::string server;           // "https://host:port[/prefix]" or "http://..." (tests)
  std::string token;            // bearer token, or empty
  std::string token_file;       // re-read by the transport; wins over `token` when set
  std::string ca_pem;           // trusted CA bundle; empty = system trust store
  std::string client_cert_pem;  // client certificate (PEM), with client_key_pem
  std::string client_key_pem;
  bool insecure_skip_tls_verify = false;
  std::string default_namespace = "default";   // context namespace / in-cluster namespace file
  absl::Duration timeout = absl::Seconds(30);  // per request; watches use their own
  std::string user_agent;                      // empty: "hptrain-controller/<version>"
  std::string source;                          // "kubeconfig <path>" or "in-cluster", for messages
};

// "hptrain-controller/<version>".
std::string DefaultUserAgent();

// Reads the kubeconfig at `path`; `context` overrides current-context when not empty.
absl::StatusOr<Config> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Parses kubeconfig text. Relative file names resolve against `base_dir`; `source` names the file
// in error messages.
absl::StatusOr<Config> ParseKubeconfig(absl::string_view yaml, const std::string& base_dir,
                                       const std::string& context, const std::string& source);

struct InClusterOptions {
  // Directory holding token, ca.crt and namespace.
  std::string root = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::string host;  // empty: $KUBERNETES_SERVICE_HOST
  std::string port;  // empty: $KUBERNETES_SERVICE_PORT
};

absl::StatusOr<Config> InClusterConfig(const InClusterOptions& options = {});

// --kubeconfig `flag`, else $KUBECONFIG (the first entry of a ':'-separated list), else
// in-cluster when KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config; NotFound when none
// applies.
absl::StatusOr<Config> LoadDefaultConfig(const std::string& kubeconfig_flag);

// A parsed Config::server.
struct ServerAddress {
  bool https = true;
  std::string host;  // without brackets for IPv6
  int port = 443;
  std::string base_path;  // "" or "/prefix" (no trailing slash)
};

// Parses "https://host[:port][/prefix]" (default port 443/80). InvalidArgument otherwise.
absl::StatusOr<ServerAddress> ParseServerUrl(absl::string_view url);

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_CONFIG_H_
