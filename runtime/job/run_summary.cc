#include "runtime/job/run_summary.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::job {
namespace {

// ordered_json keeps docs/design.md's key order, which is what a person reading the file expects.
using Json = nlohmann::ordered_json;

std::string FieldName(const std::string& where, const char* key) {
  return where.empty() ? std::string(key) : absl::StrCat(where, ".", key);
}

absl::Status FieldError(const std::string& where, const char* key, const char* problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("run summary: ", FieldName(where, key), ": ", problem));
}

absl::StatusOr<const Json*> Field(const Json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return FieldError(where, key, "missing");
  return &*it;
}

absl::Status Read(const Json& object, const char* key, const std::string& where, int64_t* out) {
  HPTRAIN_ASSIGN_OR_RETURN(const Json* value, Field(object, key, where));
  if (value->is_number_unsigned()) {
    const auto u = value->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return FieldError(where, key, "out of range");
    }
    *out = static_cast<int64_t>(u);
    return absl::OkStatus();
  }
  if (!value->is_number_integer()) return FieldError(where, key, "expected an integer");
  *out = value->get<int64_t>();
  return absl::OkStatus();
}

absl::Status Read(const Json& object, const char* key, const std::string& where, int* out) {
  int64_t wide = 0;
  HPTRAIN_RETURN_IF_ERROR(Read(object, key, where, &wide));
  if (wide < INT_MIN || wide > INT_MAX) return FieldError(where, key, "out of range");
  *out = static_cast<int>(wide);
  return absl::OkStatus();
}

absl::Status Read(const Json& object, const char* key, const std::string& where, double* out) {
  HPTRAIN_ASSIGN_OR_RETURN(const Json* value, Field(object, key, where));
  if (value->is_null()) {  // how a non-finite value was written
    *out = std::numeric_limits<double>::quiet_NaN();
    return absl::OkStatus();
  }
  if (!value->is_number()) return FieldError(where, key, "expected a number");
  *out = value->get<double>();
  return absl::OkStatus();
}

absl::Status Read(const Json& object, const char* key, const std::string& where, std::string* out) {
  HPTRAIN_ASSIGN_OR_RETURN(const Json* value, Field(object, key, where));
  if (!value->is_string()) return FieldError(where, key, "expected a string");
  *out = value->get<std::string>();
  return absl::OkStatus();
}

absl::StatusOr<const Json*> ReadObject(const Json& parent, const char* key,
                                       const std::string& where) {
  HPTRAIN_ASSIGN_OR_RETURN(const Json* value, Field(parent, key, where));
  if (!value->is_object()) return FieldError(where, key, "expected an object");
  return value;
}

absl::StatusOr<const Json*> ReadArray(const Json& parent, const char* key,
                                      const std::string& where) {
  HPTRAIN_ASSIGN_OR_RETURN(const Json* value, Field(parent, key, where));
  if (!value->is_array()) return FieldError(where, key, "expected an array");
  return value;
}

// The optional "worker_test_accuracy" of `object`: its per-rank list.
absl::Status ReadWorkerAccuracies(const Json& object, const std::string& where,
                                  WorkerAccuracies* out) {
  constexpr const char* kKey = "worker_test_accuracy";
  if (!object.contains(kKey)) return absl::OkStatus();
  HPTRAIN_ASSIGN_OR_RETURN(const Json* spread, ReadObject(object, kKey, where));
  const std::string inner = FieldName(where, kKey);
  HPTRAIN_ASSIGN_OR_RETURN(const Json* ranks, ReadArray(*spread, "ranks", inner));
  for (size_t i = 0; i < ranks->size(); ++i) {
    const Json& value = (*ranks)[i];
    if (value.is_null()) {
      out->push_back(std::numeric_limits<double>::quiet_NaN());
    } else if (value.is_number()) {
      out->push_back(value.get<double>());
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("run summary: ", inner, ".ranks[", i, "]: expected a number"));
    }
  }
  return absl::OkStatus();
}

// The optional "metrics" object of `object`, in its order.
absl::Status ReadMetrics(const Json& object, const std::string& where, NamedMetrics* out) {
  constexpr const char* kKey = "metrics";
  if (!object.contains(kKey)) return absl::OkStatus();
  HPTRAIN_ASSIGN_OR_RETURN(const Json* metrics, ReadObject(object, kKey, where));
  const std::string inner = FieldName(where, kKey);
  for (auto it = metrics->begin(); it != metrics->end(); ++it) {
    double v = 0;
    HPTRAIN_RETURN_IF_ERROR(Read(*metrics, it.key().c_str(), inner, &v));
    out->emplace_back(it.key(), v);
  }
  return absl::OkStatus();
}

Json MetricsJson(const NamedMetrics& metrics) {
  Json object = Json::object();
  for (const auto& [name, value] : metrics) object[name] = value;
  return object;
}

// {"min", "max", "mean", "ranks"} of non-empty `accuracies`.
Json WorkerAccuraciesJson(const WorkerAccuracies& accuracies) {
  const AccuracySpread spread = SpreadOf(accuracies);
  return Json{{"min", spread.min},
              {"max", spread.max},
              {"mean", spread.mean},
              {"ranks", accuracies}};
}

absl::Status ReadEpoch(const Json& object, const std::string& where, EpochSummary* out) {
  HPTRAIN_RETURN_IF_ERROR(Read(object, "epoch", where, &out->epoch));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "test_accuracy", where, &out->test_accuracy));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "train_loss", where, &out->train_loss));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "wall_seconds", where, &out->wall_seconds));
  if (object.contains("elapsed_seconds")) {
    HPTRAIN_RETURN_IF_ERROR(Read(object, "elapsed_seconds", where, &out->elapsed_seconds));
  }
  HPTRAIN_RETURN_IF_ERROR(ReadMetrics(object, where, &out->metrics));
  return ReadWorkerAccuracies(object, where, &out->worker_test_accuracy);
}

absl::Status ReadEvaluation(const Json& object, const std::string& where, EvaluationSummary* out) {
  HPTRAIN_RETURN_IF_ERROR(Read(object, "step", where, &out->step));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "epochs", where, &out->epochs));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "test_accuracy", where, &out->test_accuracy));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "test_loss", where, &out->test_loss));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "elapsed_seconds", where, &out->elapsed_seconds));
  HPTRAIN_RETURN_IF_ERROR(ReadMetrics(object, where, &out->metrics));
  return ReadWorkerAccuracies(object, where, &out->worker_test_accuracy);
}

absl::Status ReadRank(const Json& object, const std::string& where, RankSummary* out) {
  HPTRAIN_RETURN_IF_ERROR(Read(object, "rank", where, &out->rank));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "group", where, &out->group));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "bytes_sent", where, &out->bytes_sent));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "bytes_received", where, &out->bytes_received));
  if (object.contains("ps_bytes_sent")) {  // summaries written before the parameter server
    HPTRAIN_RETURN_IF_ERROR(Read(object, "ps_bytes_sent", where, &out->ps_bytes_sent));
    HPTRAIN_RETURN_IF_ERROR(Read(object, "ps_bytes_received", where, &out->ps_bytes_received));
  }
  HPTRAIN_RETURN_IF_ERROR(Read(object, "batch_size", where, &out->batch_size));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "compute_seconds", where, &out->compute_seconds));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "comm_seconds", where, &out->comm_seconds));
  if (object.contains("exposed_comm_seconds")) {  // summaries written before the scheduler
    HPTRAIN_RETURN_IF_ERROR(
        Read(object, "exposed_comm_seconds", where, &out->exposed_comm_seconds));
  }
  if (object.contains("exchanges")) {  // summaries written before gossip
    HPTRAIN_RETURN_IF_ERROR(Read(object, "exchanges", where, &out->exchanges));
  }
  if (object.contains("threshold")) {  // summaries written before gossip reported θ
    HPTRAIN_RETURN_IF_ERROR(Read(object, "threshold", where, &out->threshold));
  }
  return absl::OkStatus();
}

// The array of integers `key` of `object`.
absl::Status ReadInts(const Json& object, const char* key, const std::string& where,
                      std::vector<int>* out) {
  HPTRAIN_ASSIGN_OR_RETURN(const Json* list, ReadArray(object, key, where));
  for (size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("run summary: ", FieldName(where, key), "[", i, "]: expected an integer"));
    }
    out->push_back((*list)[i].get<int>());
  }
  return absl::OkStatus();
}

absl::Status ReadMembershipChange(const Json& object, const std::string& where,
                                  MembershipChangeSummary* out) {
  HPTRAIN_RETURN_IF_ERROR(Read(object, "epoch", where, &out->epoch));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "reason", where, &out->reason));
  HPTRAIN_RETURN_IF_ERROR(ReadInts(object, "slots", where, &out->slots));
  HPTRAIN_RETURN_IF_ERROR(ReadInts(object, "members", where, &out->members));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "effective_step", where, &out->effective_step));
  HPTRAIN_RETURN_IF_ERROR(Read(object, "unix_seconds", where, &out->unix_seconds));
  return Read(object, "detail", where, &out->detail);
}

// Reads the array `key` of `root`, each element an object, with `read` (ReadEpoch, ...).
template <typename T>
absl::Status ReadList(const Json& root, const char* key,
                      absl::Status (*read)(const Json&, const std::string&, T*),
                      std::vector<T>* out) {
  HPTRAIN_ASSIGN_OR_RETURN(const Json* list, ReadArray(root, key, ""));
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& element = (*list)[i];
    const std::string where = absl::StrCat(key, "[", i, "]");
    if (!element.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("run summary: ", where, ": expected an object"));
    }
    HPTRAIN_RETURN_IF_ERROR(read(element, where, &out->emplace_back()));
  }
  return absl::OkStatus();
}

absl::Status ReadSummary(const Json& root, RunSummary* out) {
  if (!root.is_object()) return absl::InvalidArgumentError("run summary: expected a JSON object");
  const std::string top;
  HPTRAIN_RETURN_IF_ERROR(Read(root, "job", top, &out->job));
  HPTRAIN_RETURN_IF_ERROR(Read(root, "strategy", top, &out->strategy));
  if (root.contains("strategy_decision")) {
    HPTRAIN_RETURN_IF_ERROR(Read(root, "strategy_decision", top, &out->strategy_decision));
  }
  if (root.contains("task")) {  // summaries written before tasks lack both
    HPTRAIN_RETURN_IF_ERROR(Read(root, "task", top, &out->task));
    HPTRAIN_RETURN_IF_ERROR(Read(root, "metric", top, &out->metric));
  }
  HPTRAIN_RETURN_IF_ERROR(Read(root, "workers", top, &out->workers));
  HPTRAIN_RETURN_IF_ERROR(Read(root, "epochs", top, &out->epochs));
  HPTRAIN_RETURN_IF_ERROR(Read(root, "steps", top, &out->steps));
  HPTRAIN_RETURN_IF_ERROR(Read(root, "wall_seconds", top, &out->wall_seconds));
  HPTRAIN_RETURN_IF_ERROR(Read(root, "samples_per_second", top, &out->samples_per_second));

  HPTRAIN_ASSIGN_OR_RETURN(const Json* final_metrics, ReadObject(root, "final", top));
  HPTRAIN_RETURN_IF_ERROR(
      Read(*final_metrics, "test_accuracy", "final", &out->final.test_accuracy));
  HPTRAIN_RETURN_IF_ERROR(Read(*final_metrics, "test_loss", "final", &out->final.test_loss));
  HPTRAIN_RETURN_IF_ERROR(Read(*final_metrics, "train_loss", "final", &out->final.train_loss));
  HPTRAIN_RETURN_IF_ERROR(ReadMetrics(*final_metrics, "final", &out->final.metrics));
  HPTRAIN_RETURN_IF_ERROR(
      ReadWorkerAccuracies(*final_metrics, "final", &out->final.worker_test_accuracy));

  HPTRAIN_RETURN_IF_ERROR(ReadList(root, "per_epoch", ReadEpoch, &out->per_epoch));
  if (root.contains("evaluations")) {  // summaries written before it existed lack it
    HPTRAIN_RETURN_IF_ERROR(ReadList(root, "evaluations", ReadEvaluation, &out->evaluations));
  }
  if (root.contains("membership_changes") || root.contains("worker_restarts")) {
    out->elastic = true;
    HPTRAIN_RETURN_IF_ERROR(
        ReadList(root, "membership_changes", ReadMembershipChange, &out->membership_changes));
    HPTRAIN_RETURN_IF_ERROR(ReadInts(root, "worker_restarts", "", &out->worker_restarts));
  }
  return ReadList(root, "ranks", ReadRank, &out->ranks);
}

}  // namespace

double MetricValue(const NamedMetrics& metrics, const std::string& name) {
  for (const auto& [metric, value] : metrics) {
    if (metric == name) return value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

AccuracySpread SpreadOf(const WorkerAccuracies& accuracies) {
  AccuracySpread spread{accuracies.front(), accuracies.front(), 0};
  double sum = 0;
  for (double a : accuracies) {
    spread.min = std::min(spread.min, a);
    spread.max = std::max(spread.max, a);
    sum += a;
  }
  spread.mean = sum / static_cast<double>(accuracies.size());
  return spread;
}

std::string RunSummaryToJson(const RunSummary& summary) {
  // nlohmann writes NaN and infinities as null; RunSummaryFromJson reads null back as NaN.
  Json root;
  root["job"] = summary.job;
  root["strategy"] = summary.strategy;
  if (!summary.strategy_decision.empty()) root["strategy_decision"] = summary.strategy_decision;
  root["task"] = summary.task;
  root["metric"] = summary.metric;
  root["workers"] = summary.workers;
  root["epochs"] = summary.epochs;
  root["steps"] = summary.steps;
  root["wall_seconds"] = summary.wall_seconds;
  root["samples_per_second"] = summary.samples_per_second;
  root["final"] = Json{{"test_accuracy", summary.final.test_accuracy},
                       {"test_loss", summary.final.test_loss},
                       {"train_loss", summary.final.train_loss},
                       {"metrics", MetricsJson(summary.final.metrics)}};
  if (!summary.final.worker_test_accuracy.empty()) {
    root["final"]["worker_test_accuracy"] =
        WorkerAccuraciesJson(summary.final.worker_test_accuracy);
  }
  Json per_epoch = Json::array();
  for (const EpochSummary& e : summary.per_epoch) {
    per_epoch.push_back(Json{{"epoch", e.epoch},
                             {"test_accuracy", e.test_accuracy},
                             {"train_loss", e.train_loss},
                             {"wall_seconds", e.wall_seconds},
                             {"elapsed_seconds", e.elapsed_seconds},
                             {"metrics", MetricsJson(e.metrics)}});
    if (!e.worker_test_accuracy.empty()) {
      per_epoch.back()["worker_test_accuracy"] = WorkerAccuraciesJson(e.worker_test_accuracy);
    }
  }
  root["per_epoch"] = std::move(per_epoch);
  Json evaluations = Json::array();
  for (const EvaluationSummary& e : summary.evaluations) {
    evaluations.push_back(Json{{"step", e.step},
                               {"epochs", e.epochs},
                               {"test_accuracy", e.test_accuracy},
                               {"test_loss", e.test_loss},
                               {"elapsed_seconds", e.elapsed_seconds},
                               {"metrics", MetricsJson(e.metrics)}});
    if (!e.worker_test_accuracy.empty()) {
      evaluations.back()["worker_test_accuracy"] = WorkerAccuraciesJson(e.worker_test_accuracy);
    }
  }
  root["evaluations"] = std::move(evaluations);
  Json ranks = Json::array();
  for (const RankSummary& r : summary.ranks) {
    ranks.push_back(Json{{"rank", r.rank},
                         {"group", r.group},
                         {"bytes_sent", r.bytes_sent},
                         {"bytes_received", r.bytes_received},
                         {"batch_size", r.batch_size},
                         {"compute_seconds", r.compute_seconds},
                         {"comm_seconds", r.comm_seconds},
                         {"exposed_comm_seconds", r.exposed_comm_seconds},
                         {"ps_bytes_sent", r.ps_bytes_sent},
                         {"ps_bytes_received", r.ps_bytes_received}});
    if (summary.strategy == "gossip") {
      ranks.back()["exchanges"] = r.exchanges;
      ranks.back()["threshold"] = r.threshold;
    }
  }
  root["ranks"] = std::move(ranks);
  if (summary.elastic) {
    Json changes = Json::array();
    for (const MembershipChangeSummary& c : summary.membership_changes) {
      changes.push_back(Json{{"epoch", c.epoch},
                             {"reason", c.reason},
                             {"slots", c.slots},
                             {"members", c.members},
                             {"effective_step", c.effective_step},
                             {"unix_seconds", c.unix_seconds},
                             {"detail", c.detail}});
    }
    root["membership_changes"] = std::move(changes);
    root["worker_restarts"] = summary.worker_restarts;
  }
  if (!summary.timeline.empty()) {
    Json timeline = Json::array();
    for (const ProgressPoint& p : summary.timeline) {
      timeline.push_back(Json{{"elapsed_seconds", p.elapsed_seconds},
                              {"step", p.step},
                              {"batch_sizes", p.batch_sizes},
                              {"rank_steps", p.rank_steps},
                              {"compute_seconds", p.compute_seconds}});
    }
    root["timeline"] = std::move(timeline);
  }
  // Replace invalid UTF-8 in names rather than throw: a summary must always be writable.
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

absl::StatusOr<RunSummary> RunSummaryFromJson(std::string_view json) {
  Json root;
  try {  // nlohmann throws; the exception stops at this adapter
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("run summary: ", e.what()));
  }
  RunSummary summary;
  HPTRAIN_RETURN_IF_ERROR(ReadSummary(root, &summary));
  return summary;
}

}  // namespace hptrain::job
