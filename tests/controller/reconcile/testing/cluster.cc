#include "tests/controller/reconcile/testing/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/reconcile/kube_time.h"
#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile::testing {

absl::Time StartTime() { return absl::FromUnixSeconds(1800000000); }

Cluster::Cluster(Json job, absl::Time now) : now_(now) {
  observed_.job = std::move(job);
  observed_.token = "s3cret-token";
}

Plan Cluster::Reconcile() const { return hptrain::reconcile::Reconcile(observed_, options_, now_); }

std::vector<Json>* Cluster::ListOf(const std::string& kind) {
  if (kind == "Pod") return &observed_.pods;
  if (kind == "Service") return &observed_.services;
  if (kind == "Secret") return &observed_.secrets;
  if (kind == "PodGroup") return &observed_.pod_groups;
  ADD_FAILURE() << "unexpected kind " << kind;
  return nullptr;
}

Json* Cluster::Object(const std::string& kind, const std::string& name,
                      const std::string& api_version) {
  std::vector<Json>* list = ListOf(kind);
  if (list == nullptr) return nullptr;
  for (Json& object : *list) {
    if (Name(object) == name &&
        (api_version.empty() || StringAt(object, {"apiVersion"}) == api_version)) {
      return &object;
    }
  }
  return nullptr;
}

Json* Cluster::Pod(const std::string& name) { return Object("Pod", name); }

std::vector<std::string> Cluster::PodNames() const {
  std::vector<std::string> names;
  for (const Json& pod : observed_.pods) names.push_back(Name(pod));
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> Cluster::RestartGenerations() {
  std::vector<std::string> out;
  for (const std::string& name : PodNames()) {
    out.push_back(Annotation(*Pod(name), "hptrain.io/restart-generation"));
  }
  return out;
}

void Cluster::Apply(const Plan& plan, bool status, size_t deletes, size_t creates) {
  if (status && plan.status.has_value()) observed_.job["status"] = *plan.status;
  for (size_t i = 0; i < plan.deletes.size() && i < deletes; ++i) {
    const ObjectRef& ref = plan.deletes[i];
    Json* object = Object(ref.kind, ref.name, ref.api_version);
    if (object == nullptr) {
      ADD_FAILURE() << "delete of missing " << ref.kind << " " << ref.name;
      continue;
    }
    EXPECT_EQ(ref.uid, Uid(*object)) << "delete precondition of " << ref.name;
    EXPECT_FALSE(IsTerminating(*object)) << "deleted twice: " << ref.name;
    (*object)["metadata"]["deletionTimestamp"] = FormatKubeTime(now_);
    if (ref.kind == "Pod" && StringAt(*object, {"status", "phase"}) == "Running") {
      (*object)["status"]["phase"] = "Failed";  // killed by its deletion
    }
  }
  for (size_t i = 0; i < plan.creates.size() && i < creates; ++i) {
    Json object = plan.creates[i];
    std::string kind = StringAt(object, {"kind"});
    if (Object(kind, Name(object), StringAt(object, {"apiVersion"})) != nullptr) {
      ADD_FAILURE() << "create of existing " << kind << " " << Name(object);
      continue;
    }
    object["metadata"]["uid"] = absl::StrCat("uid-", next_uid_++);
    object["metadata"]["resourceVersion"] = absl::StrCat(1000 + next_uid_);
    object["metadata"]["creationTimestamp"] = FormatKubeTime(now_);
    if (kind == "Pod") object["status"] = {{"phase", "Pending"}};
    ListOf(kind)->push_back(std::move(object));
  }
  bool complete = status && deletes >= plan.deletes.size() && creates >= plan.creates.size();
  if (!complete) return;
  events_.insert(events_.end(), plan.events.begin(), plan.events.end());
  if (plan.delete_job.has_value()) {
    EXPECT_EQ(plan.delete_job->uid, Uid(observed_.job));
    job_deleted_ = true;
    observed_.job["metadata"]["deletionTimestamp"] = FormatKubeTime(now_);
  }
}

void Cluster::FinishDeletions() {
  for (std::vector<Json>* list :
       {&observed_.pods, &observed_.services, &observed_.secrets, &observed_.pod_groups}) {
    list->erase(
        std::remove_if(list->begin(), list->end(), [](const Json& o) { return IsTerminating(o); }),
        list->end());
  }
}

bool Cluster::AnyTerminating() const {
  for (const std::vector<Json>* list :
       {&observed_.pods, &observed_.services, &observed_.secrets, &observed_.pod_groups}) {
    for (const Json& o : *list) {
      if (IsTerminating(o)) return true;
    }
  }
  return false;
}

int Cluster::Settle(int max_passes) {
  for (int pass = 1; pass <= max_passes; ++pass) {
    Plan plan = Reconcile();
    if (plan.NoWrites()) {
      if (!AnyTerminating()) return pass;
      FinishDeletions();
      continue;
    }
    Apply(plan);
  }
  ADD_FAILURE() << "no fixed point after " << max_passes << " passes; last plan:\n"
                << Reconcile().DebugString();
  return max_passes + 1;
}

void Cluster::SetPodPhase(const std::string& name, const std::string& phase) {
  Json* pod = Pod(name);
  if (pod == nullptr) {
    ADD_FAILURE() << "no pod " << name;
    return;
  }
  (*pod)["status"]["phase"] = phase;
  bool running = phase == "Running";
  (*pod)["status"]["conditions"] =
      Json::array({{{"type", "Ready"}, {"status", running ? "True" : "False"}}});
  if (running || phase == "Succeeded" || phase == "Failed") {
    (*pod)["spec"]["nodeName"] = absl::StrCat("node-", Name(*pod).size() % 3);
  }
}

void Cluster::SetAllPods(const std::string& phase) {
  for (const std::string& name : PodNames()) {
    if (!IsTerminating(*Pod(name))) SetPodPhase(name, phase);
  }
}

void Cluster::FailPod(const std::string& name, const std::string& reason, int exit_code) {
  SetPodPhase(name, "Failed");
  Json* pod = Pod(name);
  if (pod == nullptr) return;
  (*pod)["status"]["containerStatuses"] =
      Json::array({{{"name", "worker"},
                    {"state", {{"terminated", {{"reason", reason}, {"exitCode", exit_code}}}}}}});
}

}  // namespace hptrain::reconcile::testing
