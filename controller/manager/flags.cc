#include "controller/manager/flags.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#ifndef HPTRAIN_VERSION
#define HPTRAIN_VERSION "dev"
#endif

namespace hptrain::manager {
namespace {

enum class Kind { kString, kInt, kBool, kList };

struct FlagDef {
  const char* name;
  const char* env;  // read by ParseControllerFlags; null for --kubeconfig (see flags.h)
  const char* value;  // the value's placeholder in --help
  Kind kind;
  const char* help;
  std::function<absl::Status(ControllerFlags*, const std::string&)> set;
};

absl::Status SetInt(const char* name, const std::string& text, int* out) {
  if (!absl::SimpleAtoi(text, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected an integer, got \"", text, "\""));
  }
  return absl::OkStatus();
}

absl::Status SetBool(const char* name, const std::string& text, bool* out) {
  std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "1") {
    *out = true;
  } else if (lower == "false" || lower == "0") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected true or false, got \"", text, "\""));
  }
  return absl::OkStatus();
}

void AppendList(const std::string& text, std::vector<std::string>* out) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out->emplace_back(absl::StripAsciiWhitespace(part));
  }
}

std::vector<FlagDef> Definitions() {
  using F = ControllerFlags;
  auto str = [](std::string F::*field) {
    return [field](F* f, const std::string& v) {
      f->*field = v;
      return absl::OkStatus();
    };
  };
  return {
      {"kubeconfig", nullptr, "PATH", Kind::kString,
       "kubeconfig file to reach the API server with; without it and $KUBECONFIG: the pod's "
       "service account when KUBERNETES_SERVICE_HOST is set, else ~/.kube/config",
       str(&F::kubeconfig)},
      {"namespace", "HPTRAIN_NAMESPACE", "NS[,NS...]", Kind::kList,
       "namespaces to watch TrainingJobs in; repeatable or comma-separated; empty = all",
       [](F* f, const std::string& v) {
         AppendList(v, &f->namespaces);
         return absl::OkStatus();
       }},
      {"leader-elect", "HPTRAIN_LEADER_ELECT", "", Kind::kBool,
       "reconcile only while holding the Lease, so that replicas can stand by",
       [](F* f, const std::string& v) { return SetBool("leader-elect", v, &f->leader_elect); }},
      {"leader-election-namespace", "HPTRAIN_LEADER_ELECTION_NAMESPACE", "NS", Kind::kString,
       "namespace of the Lease; default: $POD_NAMESPACE, else the kubeconfig context's or the "
       "service account's namespace",
       str(&F::leader_election_namespace)},
      {"leader-election-id", "HPTRAIN_LEADER_ELECTION_ID", "NAME", Kind::kString,
       "name of the Lease (default hptrain-controller)", str(&F::leader_election_id)},
      {"metrics-address", "HPTRAIN_METRICS_ADDRESS", "[HOST]:PORT", Kind::kString,
       "where /metrics is served (default :8080; 0 disables)", str(&F::metrics_address)},
      {"health-address", "HPTRAIN_HEALTH_ADDRESS", "[HOST]:PORT", Kind::kString,
       "where /healthz and /readyz are served (default :8081; 0 disables); ready once the "
       "caches have synced",
       str(&F::health_address)},
      {"webhook-address", "HPTRAIN_WEBHOOK_ADDRESS", "[HOST]:PORT", Kind::kString,
       "where the validating admission webhook for TrainingJobs is served over HTTPS (POST "
       "/validate-trainingjob; default 0: not served; the chart uses :9443)",
       str(&F::webhook_address)},
      {"webhook-cert-dir", "HPTRAIN_WEBHOOK_CERT_DIR", "DIR", Kind::kString,
       "the webhook's serving certificate: DIR/tls.crt and DIR/tls.key, reloaded when they "
       "change (default /etc/hptrain/webhook)",
       str(&F::webhook_cert_dir)},
      {"prometheus-url", "HPTRAIN_PROMETHEUS_URL", "URL", Kind::kString,
       "Prometheus to read worker throughput from for rebalancing (http:// or https://); "
       "default: each worker pod's /metrics, read directly",
       str(&F::prometheus_url)},
      {"workers", "HPTRAIN_WORKERS", "N", Kind::kInt,
       "TrainingJobs reconciled in parallel (default 2)",
       [](F* f, const std::string& v) { return SetInt("workers", v, &f->workers); }},
      {"default-image", "HPTRAIN_DEFAULT_IMAGE", "IMAGE", Kind::kString,
       "image of pods whose template names none (default hptrain/runtime:<version>)",
       str(&F::default_image)},
      {"default-image-pull-policy", "HPTRAIN_DEFAULT_IMAGE_PULL_POLICY", "POLICY", Kind::kString,
       "imagePullPolicy of the default image (Always, IfNotPresent or Never; default: "
       "Kubernetes' rule), unless the pod template sets one",
       str(&F::default_image_pull_policy)},
      {"default-image-pull-secrets", "HPTRAIN_DEFAULT_IMAGE_PULL_SECRETS", "NAME[,NAME...]",
       Kind::kList,
       "imagePullSecrets of pods that run the default image, unless the pod template sets "
       "some; each Secret must exist in the job's namespace; repeatable or comma-separated",
       [](F* f, const std::string& v) {
         AppendList(v, &f->default_image_pull_secrets);
         return absl::OkStatus();
       }},
  };
}

// One --help entry: `left` in a 36-column field, `text` word-wrapped to 100 columns beside it;
// a `left` too long for the field gets a line of its own.
void AppendHelpEntry(std::string left, const std::string& text, std::string* out) {
  constexpr size_t kIndent = 37;
  constexpr size_t kWidth = 100;
  if (left.size() >= kIndent) {
    absl::StrAppend(out, left, "\n");
    left.clear();
  }
  left.resize(kIndent, ' ');
  std::string line = left;
  bool first_word = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!first_word && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(out, line, "\n");
      line = std::string(kIndent, ' ');
      first_word = true;
    }
    if (!first_word) line += ' ';
    absl::StrAppend(&line, word);
    first_word = false;
  }
  absl::StrAppend(out, line, "\n");
}

// A DNS-1123 subdomain, what Kubernetes accepts as a Secret's name. Checked here so that a typo
// fails at start-up rather than in every pod the controller creates.
bool IsSecretName(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') return false;
    }
  }
  return true;
}

absl::Status Check(const ControllerFlags& flags) {
  if (flags.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers: must be at least 1, got ", flags.workers));
  }
  absl::StatusOr<std::optional<ListenAddress>> metrics =
      ParseListenAddress("--metrics-address", flags.metrics_address);
  if (!metrics.ok()) return metrics.status();
  absl::StatusOr<std::optional<ListenAddress>> health =
      ParseListenAddress("--health-address", flags.health_address);
  if (!health.ok()) return health.status();
  absl::StatusOr<std::optional<ListenAddress>> webhook =
      ParseListenAddress("--webhook-address", flags.webhook_address);
  if (!webhook.ok()) return webhook.status();
  if (!flags.prometheus_url.empty() && !absl::StartsWith(flags.prometheus_url, "http://") &&
      !absl::StartsWith(flags.prometheus_url, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prometheus-url: expected an http:// or https:// URL, got \"", flags.prometheus_url,
        "\""));
  }
  if (flags.leader_election_id.empty()) {
    return absl::InvalidArgumentError("--leader-election-id: must not be empty");
  }
  const std::string& policy = flags.default_image_pull_policy;
  if (!policy.empty() && policy != "Always" && policy != "IfNotPresent" && policy != "Never") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--default-image-pull-policy: expected Always, IfNotPresent or Never, got \"", policy,
        "\""));
  }
  for (const std::string& secret : flags.default_image_pull_secrets) {
    if (!IsSecretName(secret)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--default-image-pull-secrets: \"", secret,
          "\" is not a Secret name (lowercase letters, digits, '-' and '.', at most 253)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string DefaultImage() { return absl::StrCat("hptrain/runtime:", HPTRAIN_VERSION); }

absl::StatusOr<ControllerFlags> ParseControllerFlags(const std::vector<std::string>& args,
                                                     const EnvLookup& env) {
  ControllerFlags flags;
  std::vector<FlagDef> defs = Definitions();
  std::vector<bool> seen(defs.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--") || arg == "--") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument \"", arg, "\" (flags only; see ", kProgramName, " --help)"));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    size_t index = 0;
    while (index < defs.size() && name != defs[index].name) ++index;
    if (index == defs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see ", kProgramName, " --help)"));
    }
    const FlagDef& def = defs[index];
    if (!value.has_value()) {
      if (def.kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    seen[index] = true;
    absl::Status status = def.set(&flags, *value);
    if (!status.ok()) return status;
  }
  for (size_t index = 0; index < defs.size(); ++index) {
    const FlagDef& def = defs[index];
    if (seen[index] || def.env == nullptr) continue;
    std::optional<std::string> value = env(def.env);
    if (!value.has_value()) continue;
    absl::Status status = def.set(&flags, *value);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("$", def.env, ": ", status.message()));
    }
  }
  if (flags.default_image.empty()) flags.default_image = DefaultImage();
  if (flags.help) return flags;
  absl::Status status = Check(flags);
  if (!status.ok()) return status;
  return flags;
}

std::string ControllerHelp() {
  std::string out = absl::StrCat(
      "usage: ", kProgramName, " [flags]\n\n",
      "The hptrain operator: watches TrainingJobs (hptrain.io/v1alpha1) and runs each as a ps\n"
      "pod, worker pods, a headless Service and a Secret, keeping status, gang restarts, run\n"
      "policy and suspension in step. SIGTERM or SIGINT stops it cleanly (exit 0); bad flags or\n"
      "configuration exit 2.\n\nflags:\n");
  for (const FlagDef& def : Definitions()) {
    std::string left = absl::StrCat("  --", def.name);
    if (*def.value != '\0') absl::StrAppend(&left, " ", def.value);
    AppendHelpEntry(left,
                    absl::StrCat(def.help, " [$", def.env == nullptr ? "KUBECONFIG" : def.env, "]"),
                    &out);
  }
  AppendHelpEntry("  --help, -h", "this text", &out);
  return out;
}

absl::StatusOr<std::optional<ListenAddress>> ParseListenAddress(absl::string_view flag,
                                                                absl::string_view address) {
  if (address == "0") return std::optional<ListenAddress>();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", why, " in \"", address, "\" (expected [HOST]:PORT or 0)"));
  };
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  absl::string_view host = address.substr(0, colon);
  absl::string_view port_text = address.substr(colon + 1);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return bad("unclosed [");
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) return bad("bad port");
  ListenAddress out;
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  out.port = port;
  return std::optional<ListenAddress>(std::move(out));
}

}  // namespace hptrain::manager
