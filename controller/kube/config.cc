#include "controller/kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "controller/kube/tls.h"
#include "runtime/base/status.h"

#ifndef HPTRAIN_VERSION
#define HPTRAIN_VERSION "dev"
#endif

namespace hptrain::kube {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string why = err != 0 ? std::strerror(err) : "cannot open";
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", why));
    return absl::PermissionDeniedError(absl::StrCat(path, ": ", why));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return absl::StrCat(base_dir, "/", path);
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinHostPort(const std::string& host, const std::string& port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

// Reads a kubeconfig (YAML) scalar; missing and null read as "". Nodes are read through const
// references: a non-const operator[] would insert the key.
std::string Scalar(const YAML::Node& node, const char* key) {
  const YAML::Node value = node[key];
  if (!value || value.IsNull()) return "";
  return value.as<std::string>();
}

// Finds the entry `name` in a kubeconfig list (clusters, users, contexts) and returns its body
// (the "cluster" / "user" / "context" map); nullopt when there is no such entry.
std::optional<YAML::Node> FindNamed(const YAML::Node& root, const char* list, const char* body,
                                    const std::string& name) {
  const YAML::Node entries = root[list];
  if (!entries || !entries.IsSequence()) return std::nullopt;
  for (const YAML::Node& entry : entries) {
    if (Scalar(entry, "name") == name) {
      const YAML::Node found = entry[body];
      if (found && found.IsMap()) return found;
      return YAML::Node(YAML::NodeType::Map);
    }
  }
  return std::nullopt;
}

// Context shared by one kubeconfig's loading steps, for error messages.
struct KubeconfigReader {
  std::string source;
  std::string base_dir;

  absl::Status Error(absl::StatusCode code, absl::string_view what) const {
    return absl::Status(code, absl::StrCat("kubeconfig ", source, ": ", what));
  }

  // A PEM that is either inline base64 (`data_key`) or a file (`file_key`); "" when neither.
  absl::StatusOr<std::string> Pem(const YAML::Node& node, const std::string& where,
                                  const char* data_key, const char* file_key) const {
    std::string data = Scalar(node, data_key);
    if (!data.empty()) {
      std::string compact;
      for (char c : data) {
        if (!absl::ascii_isspace(static_cast<unsigned char>(c))) compact.push_back(c);
      }
      std::string decoded;
      if (!absl::Base64Unescape(compact, &decoded)) {
        return Error(absl::StatusCode::kInvalidArgument,
                     absl::StrCat(where, ".", data_key, ": not valid base64"));
      }
      return decoded;
    }
    std::string file = Scalar(node, file_key);
    if (file.empty()) return std::string();
    absl::StatusOr<std::string> contents = ReadFile(Resolve(base_dir, file));
    if (!contents.ok()) {
      return Error(contents.status().code(),
                   absl::StrCat(where, ".", file_key, ": ", contents.status().message()));
    }
    return contents;
  }
};

// Checks the PEM material of a config so that a bad certificate fails at load, not at the first
// request. `source` prefixes the messages.
absl::Status ValidateTls(const Config& config, absl::string_view source) {
  if (!config.ca_pem.empty()) {
    absl::StatusOr<X509StorePtr> store = ParseCaBundlePem(config.ca_pem);
    if (!store.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": certificate authority: ", store.status().message()));
    }
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": a client certificate needs both a certificate and a key"));
  }
  if (!config.client_cert_pem.empty()) {
    absl::StatusOr<X509Ptr> cert = ParseCertificatePem(config.client_cert_pem);
    if (!cert.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": client certificate: ", cert.status().message()));
    }
    absl::StatusOr<EvpPkeyPtr> key = ParsePrivateKeyPem(config.client_key_pem);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": client key: ", key.status().message()));
    }
    if (!KeyMatchesCertificate(cert->get(), key->get())) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": client key does not match the client certificate"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Config> ParseKubeconfigNode(const YAML::Node& root, const KubeconfigReader& reader,
                                           const std::string& context_override) {
  if (!root || !root.IsMap()) {
    return reader.Error(absl::StatusCode::kInvalidArgument, "not a YAML map");
  }
  std::string context_name = context_override;
  if (context_name.empty()) context_name = Scalar(root, "current-context");
  if (context_name.empty()) {
    return reader.Error(absl::StatusCode::kInvalidArgument,
                        "current-context is not set (pass a context)");
  }
  std::optional<YAML::Node> found_context = FindNamed(root, "contexts", "context", context_name);
  if (!found_context.has_value()) {
    return reader.Error(absl::StatusCode::kNotFound,
                        absl::StrCat("context \"", context_name, "\" not found"));
  }
  const YAML::Node context = *found_context;
  std::string cluster_name = Scalar(context, "cluster");
  if (cluster_name.empty()) {
    return reader.Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("contexts[\"", context_name, "\"].context.cluster is not set"));
  }
  std::optional<YAML::Node> found_cluster = FindNamed(root, "clusters", "cluster", cluster_name);
  if (!found_cluster.has_value()) {
    return reader.Error(absl::StatusCode::kNotFound,
                        absl::StrCat("cluster \"", cluster_name, "\" (of context \"", context_name,
                                     "\") not found"));
  }
  const YAML::Node cluster = *found_cluster;
  std::string cluster_where = absl::StrCat("clusters[\"", cluster_name, "\"].cluster");

  Config config;
  config.source = absl::StrCat("kubeconfig ", reader.source);
  config.server = Scalar(cluster, "server");
  if (config.server.empty()) {
    return reader.Error(absl::StatusCode::kInvalidArgument,
                        absl::StrCat(cluster_where, ".server is not set"));
  }
  absl::StatusOr<ServerAddress> address = ParseServerUrl(config.server);
  if (!address.ok()) {
    return reader.Error(absl::StatusCode::kInvalidArgument,
                        absl::StrCat(cluster_where, ".server: ", address.status().message()));
  }
  if (const YAML::Node insecure = cluster["insecure-skip-tls-verify"];
      insecure && !insecure.IsNull()) {
    bool value = false;
    if (!YAML::convert<bool>::decode(insecure, value)) {
      return reader.Error(absl::StatusCode::kInvalidArgument,
                          absl::StrCat(cluster_where, ".insecure-skip-tls-verify: not a boolean"));
    }
    config.insecure_skip_tls_verify = value;
  }
  HPTRAIN_ASSIGN_OR_RETURN(
      config.ca_pem,
      reader.Pem(cluster, cluster_where, "certificate-authority-data", "certificate-authority"));
  if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    return reader.Error(absl::StatusCode::kInvalidArgument,
                        absl::StrCat(cluster_where,
                                     ": insecure-skip-tls-verify and a "
                                     "certificate authority exclude each other"));
  }

  std::string user_name = Scalar(context, "user");
  if (!user_name.empty()) {
    std::optional<YAML::Node> found_user = FindNamed(root, "users", "user", user_name);
    if (!found_user.has_value()) {
      return reader.Error(
          absl::StatusCode::kNotFound,
          absl::StrCat("user \"", user_name, "\" (of context \"", context_name, "\") not found"));
    }
    const YAML::Node user = *found_user;
    std::string user_where = absl::StrCat("users[\"", user_name, "\"].user");
    for (const char* unsupported : {"exec", "auth-provider"}) {
      if (user[unsupported]) {
        return reader.Error(absl::StatusCode::kUnimplemented,
                            absl::StrCat(user_where, ".", unsupported,
                                         " is not supported; use a token, tokenFile or a client "
                                         "certificate"));
      }
    }
    config.token = Scalar(user, "token");
    std::string token_file = Scalar(user, "tokenFile");
    if (!token_file.empty()) {
      config.token_file = Resolve(reader.base_dir, token_file);
      absl::StatusOr<std::string> token = ReadFile(config.token_file);
      if (!token.ok()) {
        return reader.Error(token.status().code(),
                            absl::StrCat(user_where, ".tokenFile: ", token.status().message()));
      }
      config.token = std::string(absl::StripAsciiWhitespace(*token));
    }
    HPTRAIN_ASSIGN_OR_RETURN(
        config.client_cert_pem,
        reader.Pem(user, user_where, "client-certificate-data", "client-certificate"));
    HPTRAIN_ASSIGN_OR_RETURN(config.client_key_pem,
                             reader.Pem(user, user_where, "client-key-data", "client-key"));
  }
  std::string ns = Scalar(context, "namespace");
  if (!ns.empty()) config.default_namespace = ns;
  HPTRAIN_RETURN_IF_ERROR(ValidateTls(config, absl::StrCat("kubeconfig ", reader.source)));
  return config;
}

}  // namespace

std::string DefaultUserAgent() { return absl::StrCat("hptrain-controller/", HPTRAIN_VERSION); }

absl::StatusOr<ServerAddress> ParseServerUrl(absl::string_view url) {
  ServerAddress address;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "https://")) {
    address.https = true;
    address.port = 443;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    address.https = false;
    address.port = 80;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url, "\" is not an http:// or https:// URL"));
  }
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    absl::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    address.base_path = std::string(path);
  }
  absl::string_view port_text;
  if (absl::ConsumePrefix(&authority, "[")) {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": unterminated IPv6 address"));
    }
    address.host = std::string(authority.substr(0, close));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad port"));
    }
    port_text = after;
  } else {
    size_t colon = authority.rfind(':');
    address.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (address.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", url, "\" has no host"));
  }
  if (!port_text.empty()) {
    int port = 0;
    if (!absl::SimpleAtoi(port_text, &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", url, "\": bad port \"", port_text, "\""));
    }
    address.port = port;
  }
  return address;
}

absl::StatusOr<Config> ParseKubeconfig(absl::string_view yaml, const std::string& base_dir,
                                       const std::string& context, const std::string& source) {
  KubeconfigReader reader{source, base_dir};
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return ParseKubeconfigNode(root, reader, context);
  } catch (const YAML::Exception& e) {
    return reader.Error(absl::StatusCode::kInvalidArgument, e.what());
  }
}

absl::StatusOr<Config> LoadKubeconfig(const std::string& path, const std::string& context) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat("kubeconfig ", text.status().message()));
  }
  return ParseKubeconfig(*text, DirName(path), context, path);
}

absl::StatusOr<Config> InClusterConfig(const InClusterOptions& options) {
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value == nullptr ? "" : value);
  };
  std::string host = options.host.empty() ? env("KUBERNETES_SERVICE_HOST") : options.host;
  std::string port = options.port.empty() ? env("KUBERNETES_SERVICE_PORT") : options.port;
  if (host.empty() || port.empty()) {
    return absl::FailedPreconditionError(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set "
        "(not running in a pod?)");
  }
  Config config;
  config.source = "in-cluster";
  config.server = absl::StrCat("https://", JoinHostPort(host, port));
  absl::StatusOr<ServerAddress> address = ParseServerUrl(config.server);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("in-cluster config: server: ", address.status().message()));
  }
  config.token_file = absl::StrCat(options.root, "/token");
  absl::StatusOr<std::string> token = ReadFile(config.token_file);
  if (!token.ok()) {
    return absl::Status(token.status().code(), absl::StrCat("in-cluster config: service-account "
                                                            "token ",
                                                            token.status().message()));
  }
  config.token = std::string(absl::StripAsciiWhitespace(*token));
  if (config.token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("in-cluster config: service-account token ", config.token_file, " is empty"));
  }
  absl::StatusOr<std::string> ca = ReadFile(absl::StrCat(options.root, "/ca.crt"));
  if (!ca.ok()) {
    return absl::Status(ca.status().code(),
                        absl::StrCat("in-cluster config: CA ", ca.status().message()));
  }
  config.ca_pem = *std::move(ca);
  absl::StatusOr<std::string> ns = ReadFile(absl::StrCat(options.root, "/namespace"));
  if (ns.ok() && !absl::StripAsciiWhitespace(*ns).empty()) {
    config.default_namespace = std::string(absl::StripAsciiWhitespace(*ns));
  }
  HPTRAIN_RETURN_IF_ERROR(ValidateTls(config, "in-cluster config"));
  return config;
}

absl::StatusOr<Config> LoadDefaultConfig(const std::string& kubeconfig_flag) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfig(kubeconfig_flag);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && env[0] != '\0') {
    std::vector<std::string> paths = absl::StrSplit(env, ':', absl::SkipEmpty());
    if (!paths.empty()) return LoadKubeconfig(paths.front());
  }
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host != nullptr && host[0]) {
    return InClusterConfig();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    std::string path = absl::StrCat(home, "/.kube/config");
    if (std::ifstream(path).good()) return LoadKubeconfig(path);
  }
  return absl::NotFoundError(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a pod, or create "
      "~/.kube/config");
}

}  // namespace hptrain::kube
