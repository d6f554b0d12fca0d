#include "controller/reconcile/parsed_job.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "controller/reconcile/desired_objects.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/pod_paths.h"
#include "controller/reconcile/reserved_env.h"
#include "controller/reconcile/rewritten_container.h"
#include "runtime/base/status.h"
#include "runtime/job/job_parser.h"

namespace hptrain::reconcile {
namespace {

// Stands in for a file name in the runtime parser's messages; stripped again below, since a
// condition message needs only "<field path>: <reason>".
constexpr char kSource[] = "trainingjob";

constexpr char kVolcanoScheduler[] = "volcano";
constexpr char kSchedulerPluginsScheduler[] = "scheduler-plugins-scheduler";

absl::Status Invalid(absl::string_view path, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason));
}

// The manifest as the runtime parser reads it (parsed_job.h). `with_run_policy` keeps
// spec.runPolicy, which the controller parses but the pods do not get.
Json RuntimeManifest(const Json& object, bool with_run_policy) {
  Json metadata = Json::object();
  metadata["name"] = Name(object);
  std::string ns = Namespace(object);
  if (!ns.empty()) metadata["namespace"] = ns;
  Json spec = Json::object();
  if (const Json* s = Find(object, {"spec"}); s != nullptr) spec = *s;
  if (spec.is_object() && !with_run_policy) spec.erase("runPolicy");
  return Json{{"apiVersion", StringAt(object, {"apiVersion"})},
              {"kind", StringAt(object, {"kind"})},
              {"metadata", std::move(metadata)},
              {"spec", std::move(spec)}};
}

// The pods' scheduler and gang marker, from the spec the runtime parser read and validated.
void ReadScheduling(ParsedJob* job) {
  job->scheduler_name = job->spec.scheduler_name;
  const job::GangSchedulingSpec& gang = job->spec.gang_scheduling;
  if (!gang.enabled) return;
  job->gang = gang.provider == "scheduler-plugins" ? GangScheduler::kSchedulerPlugins
                                                   : GangScheduler::kVolcano;
  if (job->scheduler_name.empty()) {
    job->scheduler_name = job->gang == GangScheduler::kVolcano ? kVolcanoScheduler
                                                               : kSchedulerPluginsScheduler;
  }
}

// A template as JSON: an empty object when absent.
Json TemplateAt(const Json& object, std::initializer_list<absl::string_view> path) {
  const Json* value = Find(object, path);
  return value != nullptr && value->is_object() ? *value : Json::object();
}

absl::Status CheckNames(const ParsedJob& job) {
  // The headless Service is named after the job, and Service names are DNS-1035 labels.
  if (job.name.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(job.name[0]))) {
    return Invalid("metadata.name",
                   absl::StrCat("\"", job.name, "\" must start with a letter (it names the job's ",
                                "headless Service)"));
  }
  int world = job.spec.Slots();
  if (job.spec.elastic.enabled && job.spec.elastic.max_replicas > 0) {
    world = std::max(world, job.spec.elastic.max_replicas);
  }
  std::string longest = WorkerPodName(job.name, world > 0 ? world - 1 : 0);
  if (longest.size() > 63) {
    return Invalid("metadata.name",
                   absl::StrCat("too long: pod name \"", longest, "\" has ", longest.size(),
                                " characters, and a pod's hostname may have at most 63"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string SpecHash(absl::string_view manifest) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : manifest) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", hash);
}

absl::StatusOr<ParsedJob> ParseTrainingJob(const Json& object) {
  if (!object.is_object()) return absl::InvalidArgumentError("document: must be a map");
  absl::StatusOr<job::JobSpec> spec =
      job::ParseJobText(DumpJson(RuntimeManifest(object, /*with_run_policy=*/true)), {}, kSource);
  if (!spec.ok()) {
    std::string message(spec.status().message());
    absl::string_view text = message;
    absl::ConsumePrefix(&text, absl::StrCat(kSource, ": "));
    return absl::Status(spec.status().code(), text);
  }

  ParsedJob job;
  job.name = Name(object);
  job.ns = spec->ns;
  job.uid = Uid(object);
  job.generation = Generation(object);
  job.spec = *std::move(spec);
  job.manifest = DumpJson(RuntimeManifest(object, /*with_run_policy=*/false), 2) + "\n";
  job.manifest_hash = SpecHash(job.manifest);
  job.spec_hash = job.manifest_hash;
  if (job.spec.elastic.enabled) {
    // The replica count is the elastic job's to change while it runs (reconciler.h).
    Json scaled = RuntimeManifest(object, /*with_run_policy=*/false);
    Json& spec_json = scaled["spec"];
    if (spec_json.contains("workers") && spec_json["workers"].is_object()) {
      spec_json["workers"].erase("replicas");
    }
    if (spec_json.contains("workerGroups") && spec_json["workerGroups"].is_array()) {
      for (Json& group : spec_json["workerGroups"]) {
        if (group.is_object()) group.erase("replicas");
      }
    }
    job.spec_hash = SpecHash(DumpJson(scaled, 2) + "\n");
  }
  ReadScheduling(&job);
  HPTRAIN_RETURN_IF_ERROR(CheckNames(job));
  HPTRAIN_RETURN_IF_ERROR(CheckPodPaths(job.spec));
  if (job.spec.security.tls.enabled && job.spec.security.tls.secret_name.empty()) {
    // `hptrain run` makes a certificate per run; on a cluster the pods mount the user's.
    return absl::InvalidArgumentError(
        "spec.security.tls.secretName: required on Kubernetes (a Secret with tls.crt, tls.key "
        "and ca.crt, e.g. from cert-manager)");
  }
  if (job.spec.security.tls.enabled && job.spec.rebalance.enabled) {
    return absl::InvalidArgumentError(
        "spec.rebalance.enabled: not supported with spec.security.tls on Kubernetes yet (the "
        "controller sets allocations on the coordinator, and does not read the job's TLS Secret)");
  }

  // The parser kept the templates as YAML text; the same templates as JSON come straight from
  // the object, at the paths the parser read them from.
  const Json* workers = Find(object, {"spec", "workers"});
  if (workers != nullptr && !workers->is_null()) {
    job.workers_shorthand = true;
    job.worker_templates.push_back(TemplateAt(object, {"spec", "workers", "template"}));
  } else {
    const Json* groups = Find(object, {"spec", "workerGroups"});
    for (size_t i = 0; groups != nullptr && groups->is_array() && i < groups->size(); ++i) {
      job.worker_templates.push_back(TemplateAt((*groups)[i], {"template"}));
    }
  }
  if (job.worker_templates.size() != job.spec.worker_groups.size()) {
    return absl::InternalError("worker templates do not match the parsed worker groups");
  }
  const Json* ps = Find(object, {"spec", "ps", "template"});
  if (ps != nullptr && ps->is_object()) job.ps_template = *ps;
  for (size_t g = 0; g < job.worker_templates.size(); ++g) {
    const std::string path = WorkerTemplatePath(job, g);
    HPTRAIN_RETURN_IF_ERROR(CheckRewrittenContainer(job.worker_templates[g], kRoleWorker,
                                                    job.spec.trainer.set(), path));
    HPTRAIN_RETURN_IF_ERROR(CheckReservedEnv(job.worker_templates[g], path));
  }
  if (!job.ps_template.is_null()) {
    HPTRAIN_RETURN_IF_ERROR(CheckRewrittenContainer(job.ps_template, kRolePs,
                                                    /*runs_trainer=*/false, "spec.ps.template"));
    HPTRAIN_RETURN_IF_ERROR(CheckReservedEnv(job.ps_template, "spec.ps.template"));
  }
  return job;
}

}  // namespace hptrain::reconcile
