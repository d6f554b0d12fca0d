#include "controller/reconcile/reconciler.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/desired_objects.h"
#include "controller/reconcile/events.h"
#include "controller/reconcile/gang_restart.h"
#include "controller/reconcile/kube_time.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/observed_objects.h"
#include "controller/reconcile/parsed_job.h"
#include "controller/reconcile/pod_group.h"
#include "controller/reconcile/resume_record.h"
#include "controller/reconcile/run_policy.h"
#include "runtime/job/job_parser.h"

namespace hptrain::reconcile {
namespace {

constexpr char kPhasePending[] = "Pending";
constexpr char kPhaseRunning[] = "Running";
constexpr char kPhaseSucceeded[] = "Succeeded";
constexpr char kPhaseFailed[] = "Failed";
constexpr char kPhaseSuspended[] = "Suspended";

// One reconcile pass (reconciler.h, steps 1-11). Holds the new status and the Plan being built.
class Pass {
 public:
  Pass(const Observed& observed, const Options& options, absl::Time now)
      : observed_(observed), job_(observed.job), options_(options), now_(now) {}

  Plan Run();

 private:
  void Finished();
  void Fail(const std::string& reason, const std::string& message);
  void Suspend();
  void Succeed(const GangAssessment& gang);
  // A pod of the current gang failed (`exit_code` -1: lost, or no container exit code):
  // restart the gang, or fail the job, as runPolicy says.
  void Restart(const GangAssessment& gang, const job::RunPolicySpec& policy,
               const std::string& cause, int64_t exit_code);
  // The part of Restart that fails the job for good (restartPolicy Never, or ExitCode and a
  // bad-input or interrupted exit code); true when it did.
  bool FailsForGood(const job::RunPolicySpec& policy, const std::string& cause, int64_t exit_code);
  // Elastic jobs (reconciler.h): the below-minimum wait; true when it ran out and the gang
  // restarted (or the job failed).
  bool BelowMinimum(const ParsedJob& job, const GangAssessment& gang);
  // Elastic jobs: failed, lost and surplus worker pods, and the LOST / REMOVE requests.
  void ConvergeWorkers(const ParsedJob& job, const DesiredObjects& desired,
                       const std::vector<std::string>& names, const GangAssessment& gang);
  // Elastic jobs: status.membership and the MembershipChanged events.
  void RecordMembership();
  // Elastic jobs: a live worker pod of the current generation and spec whose name is not
  // desired (scaled down).
  bool Surplus(const ParsedJob& job, const std::vector<std::string>& names,
               const GangAssessment& gang, const PodView& pod) const;
  // The first desired pod that a running gang lost (deleted by hand, evicted, gone with its
  // node), or empty.
  std::string LostPod(const ParsedJob& job, const std::vector<std::string>& names,
                      const GangAssessment& gang) const;
  void Converge(const ParsedJob& job, const DesiredObjects& desired, const GangAssessment& gang);
  // Step 9's PodGroup: deletes owned PodGroups that are not the desired one, creates the desired
  // one when absent, and records its phase. True when the pods may be created: no PodGroup is
  // desired, or it exists as desired or is created by this Plan.
  bool ConvergePodGroup(const DesiredObjects& desired);
  void UpdatePhase(const ParsedJob& job, const DesiredObjects& desired, const GangAssessment& gang,
                   bool spec_changed);

  ConditionChange Set(const char* type, const char* status, const std::string& reason,
                      const std::string& message) {
    return SetCondition(&status_, {type, status, reason, message}, Generation(job_), now_);
  }
  // Running=False, only where a Running condition exists: a job that never ran has none.
  void NotRunning(const std::string& reason, const std::string& message) {
    if (FindCondition(status_, kConditionRunning) != nullptr) {
      Set(kConditionRunning, kFalse, reason, message);
    }
  }
  void Emit(const char* type, const std::string& reason, const std::string& message) {
    plan_.events.push_back({type, reason, message});
  }
  void SetOnce(const char* field, absl::Time when) {
    if (StringAt(status_, {field}).empty()) status_[field] = FormatKubeTime(when);
  }
  void DeletePod(const PodView& pod);
  // Deletes every live owned pod for which `keep` is false.
  template <typename Keep>
  void DeleteLivePodsExcept(Keep keep) {
    for (const PodView& pod : pods_.owned) {
      if (!pod.terminating && !keep(pod)) DeletePod(pod);
    }
  }
  void DeleteAllLivePods() {
    DeleteLivePodsExcept([](const PodView&) { return false; });
  }
  std::string JobNamespace(const Json& object) const {
    std::string ns = Namespace(object);
    return ns.empty() ? Namespace(job_) : ns;
  }

  const Observed& observed_;
  const Json& job_;
  const Options& options_;
  const absl::Time now_;
  Json old_status_;
  Json status_;
  ObservedPods pods_;
  Plan plan_;
};

Plan Pass::Run() {
  if (!job_.is_object() || IsTerminating(job_)) return plan_;  // step 1
  if (const Json* s = Find(job_, {"status"}); s != nullptr && s->is_object()) old_status_ = *s;
  if (!old_status_.is_object()) old_status_ = Json::object();
  status_ = old_status_;
  pods_ = ObservePods(observed_.pods, job_);

  if (IsConditionTrue(status_, kConditionSucceeded) || IsConditionTrue(status_, kConditionFailed)) {
    Finished();  // step 2
    return std::move(plan_);
  }

  // Step 3.
  status_["observedGeneration"] = Generation(job_);
  int64_t recorded_restarts = IntAt(status_, {"restarts"}, 0);
  status_["restarts"] = RestartsInForce(recorded_restarts, pods_);
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(job_);
  absl::StatusOr<DesiredObjects> desired = absl::UnknownError("not built");
  if (!job.ok()) {
    desired = job.status();
  } else {
    // A job suspended after it started resumes like a restarted gang.
    const bool after_suspension = FindCondition(status_, kConditionSuspended) != nullptr &&
                                  !StringAt(status_, {"startTime"}).empty();
    desired = BuildDesiredObjects(*job, observed_.token, IntAt(status_, {"restarts"}, 0),
                                  options_.default_image, after_suspension);
  }
  if (!desired.ok()) {
    Fail(kReasonInvalidSpec, std::string(desired.status().message()));
    if (status_ != old_status_) plan_.status = status_;
    return std::move(plan_);
  }

  // Step 4.
  const job::JobSpec& spec = job->spec;
  std::vector<std::string> names;
  for (const Json& pod : desired->pods) names.push_back(Name(pod));
  GangAssessment gang = AssessGang(recorded_restarts, pods_, names, job->spec_hash);
  const bool elastic = spec.elastic.enabled;
  // The pods whose failure or loss restarts the gang: all, or an elastic job's ps pods.
  std::vector<std::string> gang_names;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!elastic || Label(desired->pods[i], kRoleLabel) != kRoleWorker) {
      gang_names.push_back(names[i]);
    }
  }
  const PodView* gang_failed = gang.failed;
  if (elastic) {
    gang_failed = nullptr;
    for (const PodView* pod : gang.current) {
      if (pod->role != kRoleWorker && pod->phase == kPhaseFailed) {
        gang_failed = pod;
        break;
      }
    }
  }
  status_["replicas"] = spec.WorldSize();
  status_["desiredWorkers"] = spec.WorldSize();
  status_["selector"] = WorkerSelector(job->name);
  status_["strategy"] = spec.strategy.type;

  // Step 5.
  std::optional<absl::Time> deadline = DeadlineOf(spec.run_policy.active_deadline_seconds, status_);
  if (deadline.has_value() && now_ >= *deadline) {
    Fail(kReasonDeadlineExceeded, absl::StrCat("the job ran past runPolicy.activeDeadlineSeconds (",
                                               spec.run_policy.active_deadline_seconds, "s since ",
                                               StringAt(status_, {"startTime"}), ")"));
  } else if (spec.run_policy.suspend) {  // step 6
    Suspend();
  } else {
    if (IsConditionTrue(status_, kConditionSuspended)) {
      Set(kConditionSuspended, kFalse, kReasonResumed,
          "runPolicy.suspend is false: the pods are recreated");
      Emit(kEventNormal, kReasonResumed, "runPolicy.suspend is false: recreating the pods");
      NotRunning(kReasonPodsNotRunning, "the job was resumed; its pods are being created");
    }
    bool all_succeeded = spec.WorldSize() > 0;
    for (size_t i = 0; i < names.size(); ++i) {
      if (Label(desired->pods[i], kRoleLabel) != kRoleWorker) continue;  // the ps pods
      const PodView* pod = pods_.Owned(names[i]);
      bool current = pod != nullptr &&
                     std::find(gang.current.begin(), gang.current.end(), pod) != gang.current.end();
      all_succeeded = all_succeeded && current && pod->phase == kPhaseSucceeded;
    }
    if (all_succeeded) {
      Succeed(gang);  // step 7
    } else if (gang_failed != nullptr) {  // step 8
      std::string cause = absl::StrCat("pod ", gang_failed->name, " failed");
      if (std::string why = FailureSummary(*gang_failed->object); !why.empty()) {
        absl::StrAppend(&cause, " (", why, ")");
      }
      Restart(gang, spec.run_policy, cause, FailedExitCode(*gang_failed->object));
    } else if (std::string lost = LostPod(*job, gang_names, gang); !lost.empty()) {
      Restart(gang, spec.run_policy,
              absl::StrCat("pod ", lost, " of the running gang was deleted or lost"), -1);
    } else if (elastic && BelowMinimum(*job, gang)) {
      // The gang restarted (or the job failed).
    } else {
      if (elastic) ConvergeWorkers(*job, *desired, names, gang);
      if (StringAt(status_, {"phase"}) != kPhaseFailed) {
        Converge(*job, *desired, gang);  // steps 9 and 10
      }
    }
  }

  if (elastic) RecordMembership();
  if (elastic && StringAt(status_, {"phase"}) != kPhaseFailed &&
      StringAt(status_, {"phase"}) != kPhaseSucceeded && !spec.run_policy.suspend) {
    RequeueAt(now_ + options_.membership_poll, now_, &plan_.requeue_after);
  }
  if (StringAt(status_, {"phase"}) != kPhaseFailed) {
    deadline = DeadlineOf(spec.run_policy.active_deadline_seconds, status_);
    if (deadline.has_value()) RequeueAt(*deadline, now_, &plan_.requeue_after);
  }
  if (StringAt(status_, {"phase"}) == kPhaseSucceeded) {
    if (auto expiry = TtlExpiryOf(spec.run_policy.ttl_seconds_after_finished, status_)) {
      RequeueAt(*expiry, now_, &plan_.requeue_after);
    }
  }
  PlannedPods planned;
  for (const Json& object : plan_.creates) {
    if (StringAt(object, {"kind"}) == "Pod") planned.creating.insert(Name(object));
  }
  for (const ObjectRef& ref : plan_.deletes) {
    if (ref.kind == "Pod") planned.deleting.insert(ref.name);
  }
  UpdateWorkerStatus(*job, pods_, gang, planned, observed_.worker_metrics, &status_);
  if (StringAt(status_, {"phase"}) == kPhaseRunning) {
    RecordResume(*job, gang, observed_.worker_metrics, &status_, &plan_.events);
  }
  if (status_ != old_status_) plan_.status = status_;  // step 11
  return std::move(plan_);
}

void Pass::DeletePod(const PodView& pod) {
  plan_.deletes.push_back({"v1", "Pod", JobNamespace(*pod.object), pod.name, pod.uid, ""});
}

void Pass::Finished() {
  bool succeeded = IsConditionTrue(status_, kConditionSucceeded);
  // A succeeded job keeps its finished workers, a failed one its failed pods (their logs and
  // exit status, for `kubectl logs` and `describe`), until the job itself is deleted.
  DeleteLivePodsExcept([succeeded](const PodView& pod) {
    return succeeded ? pod.role == kRoleWorker && pod.phase == kPhaseSucceeded
                     : pod.phase == kPhaseFailed;
  });
  int64_t ttl = TtlSecondsOf(job_);
  std::optional<absl::Time> expiry = TtlExpiryOf(ttl, status_);
  if (!expiry.has_value()) return;
  if (now_ < *expiry) {
    RequeueAt(*expiry, now_, &plan_.requeue_after);
    return;
  }
  plan_.delete_job =
      ObjectRef{job::kApiVersion, job::kKind, Namespace(job_), Name(job_), Uid(job_), ""};
  Emit(kEventNormal, kReasonTtlExpired,
       absl::StrCat("runPolicy.ttlSecondsAfterFinished (", ttl, "s) passed since the job ",
                    succeeded ? "succeeded" : "failed", " at ",
                    StringAt(status_, {"completionTime"}), ": deleting it"));
}

void Pass::Fail(const std::string& reason, const std::string& message) {
  status_["phase"] = kPhaseFailed;
  SetOnce("completionTime", now_);
  if (Set(kConditionFailed, kTrue, reason, message) == ConditionChange::kTransition) {
    Emit(kEventWarning, reason, message);
  }
  NotRunning(reason, message);
  // The failed pods stay (their logs say why); Finished() keeps them on later passes.
  DeleteLivePodsExcept([](const PodView& pod) { return pod.phase == kPhaseFailed; });
  if (auto expiry = TtlExpiryOf(TtlSecondsOf(job_), status_)) {
    RequeueAt(*expiry, now_, &plan_.requeue_after);
  }
}

void Pass::Suspend() {
  DeleteAllLivePods();
  status_["phase"] = kPhaseSuspended;
  const std::string message =
      "runPolicy.suspend is true: the pods are deleted; restarts and startTime are kept";
  if (Set(kConditionSuspended, kTrue, kReasonSuspended, message) == ConditionChange::kTransition) {
    Emit(kEventNormal, kReasonSuspended, "runPolicy.suspend is true: deleting the pods");
  }
  NotRunning(kReasonSuspended, message);
}

void Pass::Succeed(const GangAssessment& gang) {
  status_["phase"] = kPhaseSucceeded;
  SetOnce("completionTime", now_);
  int64_t workers = IntAt(status_, {"desiredWorkers"}, 0);
  std::string message = absl::StrCat("all ", workers, " workers finished successfully");
  if (Set(kConditionSucceeded, kTrue, kReasonSucceeded, message) == ConditionChange::kTransition) {
    Emit(kEventNormal, kReasonSucceeded, message);
  }
  NotRunning(kReasonSucceeded, message);
  DeleteLivePodsExcept([&gang](const PodView& pod) {
    return pod.role == kRoleWorker && pod.phase == kPhaseSucceeded &&
           std::find(gang.current.begin(), gang.current.end(), &pod) != gang.current.end();
  });
}

std::string Pass::LostPod(const ParsedJob& job, const std::vector<std::string>& names,
                          const GangAssessment& gang) const {
  // Only a gang that ran in full at this generation can lose a pod: before that a missing pod
  // is one still being created, and a spec change makes the pods stale, not lost.
  if (StringAt(old_status_, {"phase"}) != kPhaseRunning || !gang.stale.empty()) return "";
  for (const std::string& name : names) {
    const PodView* pod = pods_.Owned(name);
    if (pod == nullptr) return name;
    if (pod->terminating && pod->restart_generation == gang.restarts &&
        pod->spec_hash == job.spec_hash) {
      return name;
    }
  }
  return "";
}

bool Pass::FailsForGood(const job::RunPolicySpec& policy, const std::string& cause,
                        int64_t exit_code) {
  if (policy.restart_policy == "Never") {
    Fail(kReasonPodFailed, absl::StrCat(cause, "; runPolicy.restartPolicy is Never"));
    return true;
  }
  if (policy.restart_policy == "ExitCode" && (exit_code == 2 || exit_code == 130)) {
    Fail(kReasonBadInput,
         absl::StrCat(cause, ": exit code ", exit_code,
                      exit_code == 2 ? " means bad input (the job file, its data or flags), "
                                       "which no restart can fix"
                                     : " means the run was interrupted",
                      "; runPolicy.restartPolicy is ExitCode (OnFailure retries every failure)"));
    return true;
  }
  return false;
}

void Pass::Restart(const GangAssessment& gang, const job::RunPolicySpec& policy,
                   const std::string& cause, int64_t exit_code) {
  if (FailsForGood(policy, cause, exit_code)) return;
  const int64_t restarts = gang.restarts + 1;
  const int backoff_limit = policy.backoff_limit;
  if (restarts > backoff_limit) {
    // status.restarts keeps counting the restarts that happened: at most backoffLimit.
    Fail(kReasonBackoffLimitExceeded,
         absl::StrCat(cause, " after ", gang.restarts, " gang restarts; runPolicy.backoffLimit is ",
                      backoff_limit));
    return;
  }
  status_["restarts"] = restarts;
  DeleteAllLivePods();
  status_["phase"] = kPhasePending;
  std::string message = absl::StrCat(cause, "; restarting all pods (restart ", restarts,
                                     " of at most ", backoff_limit, ")");
  NotRunning(kReasonGangRestart, message);
  Emit(kEventWarning, kReasonGangRestart, message);
}

void Pass::Converge(const ParsedJob& job, const DesiredObjects& desired,
                    const GangAssessment& gang) {
  const bool elastic = job.spec.elastic.enabled;
  std::vector<std::string> names;
  for (const Json& pod : desired.pods) names.push_back(Name(pod));
  bool spec_changed = false;
  for (const PodView* pod : gang.stale) {
    if (elastic && Surplus(job, names, gang, *pod)) continue;  // ConvergeWorkers' business
    DeletePod(*pod);
    spec_changed = spec_changed || pod->spec_hash != job.spec_hash;
  }

  const Json* secret = nullptr;
  NameState secret_state = LookupName(observed_.secrets, SecretName(job.name), job_, &secret);
  bool secret_ready = false;
  if (secret_state == NameState::kOwned) {
    if (Annotation(*secret, kSpecHashAnnotation) != job.spec_hash) {
      spec_changed = true;
      plan_.deletes.push_back(
          {"v1", "Secret", JobNamespace(*secret), Name(*secret), Uid(*secret), ""});
    } else if (elastic && Annotation(*secret, kManifestHashAnnotation) != job.manifest_hash &&
               pods_.owned.empty()) {
      // Only the replica count changed, and no worker holds the token any more.
      plan_.deletes.push_back(
          {"v1", "Secret", JobNamespace(*secret), Name(*secret), Uid(*secret), ""});
    } else {
      secret_ready = true;
    }
  } else if (secret_state == NameState::kFree && !observed_.token.empty()) {
    plan_.creates.push_back(desired.secret);
    secret_ready = true;
  }
  // The headless Service, then one per parameter-server shard. An owned Service that is not
  // desired any more (fewer shards, or a strategy without a parameter server) is deleted.
  std::vector<const Json*> services = {&desired.service};
  for (const Json& service : desired.ps_services) services.push_back(&service);
  std::vector<ObjectRef> unwanted;
  for (const Json& observed : observed_.services) {
    if (!IsControlledBy(observed, job_) || IsTerminating(observed)) continue;
    bool wanted = std::any_of(services.begin(), services.end(),
                              [&](const Json* s) { return Name(*s) == Name(observed); });
    if (!wanted) {
      unwanted.push_back(
          {"v1", "Service", JobNamespace(observed), Name(observed), Uid(observed), ""});
    }
  }
  // By name, so that the Plan does not depend on the informer's order.
  std::sort(unwanted.begin(), unwanted.end(),
            [](const ObjectRef& a, const ObjectRef& b) { return a.name < b.name; });
  plan_.deletes.insert(plan_.deletes.end(), unwanted.begin(), unwanted.end());
  for (const Json* service : services) {
    if (LookupName(observed_.services, Name(*service), job_) == NameState::kFree) {
      plan_.creates.push_back(*service);
    }
  }

  const bool pod_group_ready = ConvergePodGroup(desired);

  // A new gang starts only once the old one is gone (reconciler.h, step 9).
  bool old_gang_gone =
      gang.stale.empty() && std::none_of(pods_.owned.begin(), pods_.owned.end(),
                                         [](const PodView& p) { return p.terminating; });
  if (elastic) {
    // Workers come and go one by one: only another gang's pods hold the new ones back (a name
    // still held by a terminating pod is skipped below, and taken next time).
    old_gang_gone = std::none_of(pods_.owned.begin(), pods_.owned.end(), [&](const PodView& p) {
      return p.restart_generation != gang.restarts || p.spec_hash != job.spec_hash;
    });
  }
  std::vector<std::string> created;
  if (secret_ready && old_gang_gone && pod_group_ready) {
    for (const Json& pod : desired.pods) {
      if (pods_.IsTaken(Name(pod))) continue;
      plan_.creates.push_back(pod);
      created.push_back(Name(pod));
    }
  }
  if (!created.empty() && !IsConditionTrue(status_, kConditionCreated)) {
    std::string message =
        absl::StrCat("created the ps pod, ", job.spec.WorldSize(), " worker pods, Service ",
                     ServiceName(job.name), " and Secret ", SecretName(job.name));
    if (!desired.ps_services.empty()) {
      const size_t shards = desired.ps_services.size();
      std::string names = ServiceName(job.name);
      for (const Json& service : desired.ps_services) absl::StrAppend(&names, ", ", Name(service));
      message =
          absl::StrCat("created ", shards == 1 ? "the ps pod" : absl::StrCat(shards, " ps pods"),
                       ", ", job.spec.WorldSize(), " worker pods, Services ", names, " and Secret ",
                       SecretName(job.name));
    }
    Set(kConditionCreated, kTrue, kReasonCreated, message);
    Emit(kEventNormal, kReasonCreated, message);
    // Checkpoints asked for, but where no later gang can read them.
    if (!job.spec.checkpoint.path.empty() && job.spec.checkpoint.volume_yaml.empty()) {
      Emit(kEventWarning, kReasonNoSharedCheckpoint,
           "spec.checkpoint.volume is not set: the checkpoint stays in the pod that wrote it, "
           "so a gang restart starts training over from step 0");
    }
  }
  if (spec_changed && Generation(job_) != IntAt(old_status_, {"observedGeneration"}, -1)) {
    Emit(kEventNormal, kReasonSpecChanged,
         absl::StrCat("the spec changed (generation ", Generation(job_),
                      "): recreating the pods with it; this is not counted as a restart"));
  }
  UpdatePhase(job, desired, gang, spec_changed);
}

bool Pass::Surplus(const ParsedJob& job, const std::vector<std::string>& names,
                   const GangAssessment& gang, const PodView& pod) const {
  return pod.role == kRoleWorker && !pod.terminating && pod.restart_generation == gang.restarts &&
         pod.spec_hash == job.spec_hash &&
         std::find(names.begin(), names.end(), pod.name) == names.end();
}

void Pass::ConvergeWorkers(const ParsedJob& job, const DesiredObjects& desired,
                           const std::vector<std::string>& names, const GangAssessment& gang) {
  const std::optional<CoordinatorMembership>& membership = observed_.membership;
  auto member = [&](int slot) { return membership.has_value() && membership->IsMember(slot); };
  // LOST is for a job that runs: before that (start-up, a restarted gang) nobody trains yet.
  const bool running = StringAt(old_status_, {"phase"}) == kPhaseRunning;
  for (const Json& pod : desired.pods) {
    if (Label(pod, kRoleLabel) != kRoleWorker) continue;
    int slot = -1;
    if (!absl::SimpleAtoi(Label(pod, kRankLabel), &slot)) continue;
    const PodView* view = pods_.Owned(Name(pod));
    const bool current = view != nullptr && !view->terminating &&
                         view->restart_generation == gang.restarts &&
                         view->spec_hash == job.spec_hash;
    if (current && view->phase == kPhaseFailed) {
      const std::string why = FailureSummary(*view->object);
      std::string cause = absl::StrCat("pod ", view->name, " failed");
      if (!why.empty()) absl::StrAppend(&cause, " (", why, ")");
      if (FailsForGood(job.spec.run_policy, cause, FailedExitCode(*view->object))) return;
      DeletePod(*view);
      Emit(kEventWarning, kReasonWorkerReplaced,
           absl::StrCat(cause, ": replacing it alone (spec.elastic); the other workers go on"));
      if (member(slot)) {
        plan_.membership.push_back(
            {MembershipRequest::Kind::kLost, slot, why.empty() ? "pod failed" : why});
      }
    } else if (running && !current && member(slot) &&
               (view == nullptr ||
                (view->terminating && view->restart_generation == gang.restarts))) {
      plan_.membership.push_back(
          {MembershipRequest::Kind::kLost, slot, "pod deleted or lost"});
    }
  }
  // Scaled down: the surplus workers leave at a step boundary, then their pods go.
  for (const PodView& pod : pods_.owned) {
    if (!Surplus(job, names, gang, pod)) continue;
    const bool left = pod.phase == kPhaseSucceeded || pod.phase == kPhaseFailed ||
                      !membership.has_value() || !member(pod.rank);
    if (left) {
      DeletePod(pod);
    } else {
      plan_.membership.push_back({MembershipRequest::Kind::kRemove, pod.rank, "scaled down"});
    }
  }
}

bool Pass::BelowMinimum(const ParsedJob& job, const GangAssessment& gang) {
  const job::ElasticSpec& elastic = job.spec.elastic;
  const Json* condition = FindCondition(status_, kConditionBelowMinReplicas);
  const bool waiting = condition != nullptr && StringAt(*condition, {"status"}) == kTrue;
  // The wait starts only while the job runs: a gang starting up is not below anything yet.
  if (!waiting && StringAt(old_status_, {"phase"}) != kPhaseRunning) return false;
  int members = 0;
  const char* what = "members";
  if (observed_.membership.has_value()) {
    members = static_cast<int>(observed_.membership->members.size());
  } else {
    what = "ready workers";
    for (const PodView* pod : gang.current) {
      if (pod->role == kRoleWorker && pod->phase == kPhaseRunning && pod->ready) ++members;
    }
  }
  if (members >= elastic.min_replicas) {
    if (waiting) {
      Set(kConditionBelowMinReplicas, kFalse, kReasonMinReplicasMet,
          absl::StrCat(members, " ", what, ", at least spec.elastic.minReplicas (",
                       elastic.min_replicas, ")"));
    }
    return false;
  }
  const std::string below = absl::StrCat(members, " ", what, ", below spec.elastic.minReplicas (",
                                         elastic.min_replicas, ")");
  Set(kConditionBelowMinReplicas, kTrue, kReasonBelowMinReplicas,
      absl::StrCat(below, ": the gang restarts after spec.elastic.joinTimeoutSeconds (",
                   elastic.join_timeout_seconds, "s) unless workers join"));
  condition = FindCondition(status_, kConditionBelowMinReplicas);
  std::optional<absl::Time> since =
      ParseKubeTime(StringAt(*condition, {"lastTransitionTime"}));
  const absl::Time due = since.value_or(now_) + absl::Seconds(elastic.join_timeout_seconds);
  if (now_ < due) {
    RequeueAt(due, now_, &plan_.requeue_after);
    return false;
  }
  const std::string cause =
      absl::StrCat(below, " for more than spec.elastic.joinTimeoutSeconds (",
                   elastic.join_timeout_seconds, "s)");
  Set(kConditionBelowMinReplicas, kFalse, kReasonGangRestart, cause);
  Restart(gang, job.spec.run_policy, cause, -1);
  return true;
}

void Pass::RecordMembership() {
  if (!observed_.membership.has_value()) return;
  const CoordinatorMembership& m = *observed_.membership;
  const int64_t recorded = IntAt(old_status_, {"membership", "epoch"}, 0);
  status_["membership"] = Json{{"epoch", m.epoch}, {"members", m.members}};
  if (m.epoch <= recorded) return;  // nothing new, or a restarted coordinator
  bool newest_told = false;
  for (const MembershipChangeView& change : m.changes) {
    if (change.epoch <= recorded || change.epoch > m.epoch) continue;
    const bool newest = change.epoch == m.epoch;
    newest_told = newest_told || newest;
    Emit(kEventNormal, kReasonMembershipChanged,
         MembershipEventMessage(change, newest ? m.members : std::vector<int>{}));
  }
  if (!newest_told) {
    MembershipChangeView change;
    change.epoch = m.epoch;
    Emit(kEventNormal, kReasonMembershipChanged, MembershipEventMessage(change, m.members));
  }
}

bool Pass::ConvergePodGroup(const DesiredObjects& desired) {
  bool ready = !desired.pod_group.has_value();
  bool taken = false;  // the desired name is held (by this job's PodGroup or another's)
  for (const Json& observed : observed_.pod_groups) {
    const bool same_kind = desired.pod_group.has_value() &&
                           StringAt(observed, {"apiVersion"}) ==
                               StringAt(*desired.pod_group, {"apiVersion"}) &&
                           Name(observed) == Name(*desired.pod_group);
    if (same_kind) taken = true;
    if (IsTerminating(observed)) continue;
    if (!IsControlledBy(observed, job_)) {
      // One the user made before the controller made them (with the marker's name): the pods
      // join it as it is.
      if (same_kind) {
        ready = true;
        status_["podGroupPhase"] = PodGroupPhase(observed);
      }
      continue;
    }
    if (same_kind && PodGroupMatches(observed, *desired.pod_group)) {
      ready = true;
      status_["podGroupPhase"] = PodGroupPhase(observed);
      continue;
    }
    plan_.deletes.push_back({StringAt(observed, {"apiVersion"}), kPodGroupKind,
                             JobNamespace(observed), Name(observed), Uid(observed), ""});
  }
  if (desired.pod_group.has_value() && !taken) {
    plan_.creates.push_back(*desired.pod_group);
    status_["podGroupPhase"] = "";  // not looked at by the scheduler yet
    ready = true;
  }
  if (!desired.pod_group.has_value()) status_.erase("podGroupPhase");
  return ready;
}

void Pass::UpdatePhase(const ParsedJob& job, const DesiredObjects& desired,
                       const GangAssessment& gang, bool spec_changed) {
  size_t running = 0;
  for (const PodView* pod : gang.current) {
    if (pod->phase == kPhaseRunning || pod->phase == kPhaseSucceeded) ++running;
  }
  if (job.spec.elastic.enabled) {
    // Every ps pod and minReplicas workers (reconciler.h, "Elastic jobs").
    size_t ps = 0;
    size_t ps_running = 0;
    size_t workers = 0;
    size_t workers_running = 0;
    for (const Json& pod : desired.pods) {
      const bool worker = Label(pod, kRoleLabel) == kRoleWorker;
      (worker ? workers : ps) += 1;
      const PodView* view = pods_.Owned(Name(pod));
      const bool up = view != nullptr && !view->terminating &&
                      std::find(gang.current.begin(), gang.current.end(), view) !=
                          gang.current.end() &&
                      (view->phase == kPhaseRunning || view->phase == kPhaseSucceeded);
      if (up) (worker ? workers_running : ps_running) += 1;
    }
    const size_t needed =
        std::min(workers, static_cast<size_t>(std::max(job.spec.elastic.min_replicas, 1)));
    if (ps_running == ps && workers_running >= needed && workers_running > 0) {
      status_["phase"] = kPhaseRunning;
      SetOnce("startTime", now_);
      std::string message = absl::StrCat(
          workers_running, " of ", workers, " workers are running (spec.elastic.minReplicas ",
          job.spec.elastic.min_replicas, ")");
      if (Set(kConditionRunning, kTrue, kReasonRunning, message) ==
          ConditionChange::kTransition) {
        Emit(kEventNormal, kReasonRunning, message);
      }
      return;
    }
    status_["phase"] = kPhasePending;
    if (IsConditionTrue(status_, kConditionRunning)) {
      Set(kConditionRunning, kFalse, spec_changed ? kReasonSpecChanged : kReasonPodsNotRunning,
          absl::StrCat(workers_running, " of ", workers, " workers and ", ps_running, " of ", ps,
                       " ps pods are running"));
    }
    return;
  }
  // gang.current holds only desired names, one pod per name.
  if (running == desired.pods.size()) {
    status_["phase"] = kPhaseRunning;
    SetOnce("startTime", now_);
    std::string message = absl::StrCat("all ", running, " pods are running");
    if (Set(kConditionRunning, kTrue, kReasonRunning, message) == ConditionChange::kTransition) {
      Emit(kEventNormal, kReasonRunning, message);
    }
    return;
  }
  status_["phase"] = kPhasePending;
  if (IsConditionTrue(status_, kConditionRunning)) {
    Set(kConditionRunning, kFalse, spec_changed ? kReasonSpecChanged : kReasonPodsNotRunning,
        absl::StrCat(running, " of ", desired.pods.size(), " pods are running"));
  }
}

}  // namespace

Plan Reconcile(const Observed& observed, const Options& options, absl::Time now) {
  return Pass(observed, options, now).Run();
}

}  // namespace hptrain::reconcile
