// Properties of Reconcile over randomized observed states: determinism (also under reordered
// informer lists), creates never hit a taken name, deletes only hit live owned objects of the
// right uid (checked by the Cluster simulator), convergence to a Plan without writes, the
// restart counter moving at most once per failure and never backwards, the same outcome when the
// controller dies part-way through a Plan, and the state at the fixed point.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/desired_objects.h"
#include "controller/reconcile/gang_restart.h"
#include "controller/reconcile/kube_time.h"
#include "controller/reconcile/labels.h"
#include "controller/reconcile/observed_objects.h"
#include "controller/reconcile/parsed_job.h"
#include "controller/reconcile/reconciler.h"
#include "runtime/job/job_validate.h"
#include "tests/controller/reconcile/testing/cluster.h"
#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile {
namespace {

using testing::Cluster;

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[Int(0, static_cast<int>(items.size()) - 1)];
  }
  std::mt19937& engine() { return rng_; }

 private:
  std::mt19937 rng_;
};

struct Scenario {
  Observed observed;
  bool finished = false;
};

// A random but plausible world: a job part-way through its life, its objects in any state.
// `sharded`: a parameter-server strategy with 1 to 3 ps shards (draws nothing more otherwise, so
// the unsharded scenarios stay what they were).
Scenario MakeScenario(Random& r, bool sharded = false) {
  Scenario s;
  int replicas = r.Int(1, 3);
  Json job = testing::ShorthandJob(replicas);
  if (sharded) {
    std::string type = r.Pick<std::string>({"ps", "hps", "mp2"});
    job = testing::ShardedJob(type, r.Int(1, 3), replicas);
  }
  job["spec"]["runPolicy"] = {{"backoffLimit", r.Int(0, 3)}};
  if (r.Chance(0.2)) job["spec"]["runPolicy"]["suspend"] = true;
  if (r.Chance(0.2)) job["spec"]["runPolicy"]["activeDeadlineSeconds"] = r.Pick<int>({60, 7200});
  if (r.Chance(0.2)) job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 600;
  if (r.Chance(0.05)) job["spec"]["globalBatchSize"] = 0;  // invalid
  job["metadata"]["generation"] = r.Int(1, 3);

  const absl::Time now = testing::StartTime();
  if (r.Chance(0.7)) {
    Json status = {{"restarts", r.Int(0, 2)},
                   {"observedGeneration", r.Int(1, 3)},
                   {"phase", r.Pick<std::string>({"Pending", "Running", "Suspended"})}};
    if (r.Chance(0.5)) status["startTime"] = FormatKubeTime(now - absl::Minutes(r.Int(0, 200)));
    for (const char* type : {kConditionCreated, kConditionRunning, kConditionSuspended}) {
      if (r.Chance(0.4)) {
        SetCondition(&status, {type, r.Chance(0.5) ? kTrue : kFalse, "Test", ""}, 1,
                     now - absl::Hours(1));
      }
    }
    if (r.Chance(0.1)) {
      s.finished = true;
      const char* type = r.Chance(0.5) ? kConditionSucceeded : kConditionFailed;
      SetCondition(&status, {type, kTrue, "Test", ""}, 1, now - absl::Hours(1));
      status["completionTime"] = FormatKubeTime(now - absl::Minutes(r.Int(0, 20)));
    }
    job["status"] = status;
  }

  // Objects as some earlier spec and generation made them.
  Json made_from = job;
  bool old_spec = r.Chance(0.2);
  if (old_spec) made_from["spec"]["workers"]["replicas"] = r.Int(1, 3);
  if (sharded && r.Chance(0.2)) made_from["spec"]["ps"]["shards"] = r.Int(1, 3);
  absl::StatusOr<ParsedJob> parsed = ParseTrainingJob(made_from);
  if (parsed.ok()) {
    int64_t generation = r.Int(0, 3);
    DesiredObjects objects = *BuildDesiredObjects(*parsed, "old-token", generation, "");
    int uid = 0;
    auto place = [&](Json object) {
      object["metadata"]["uid"] = absl::StrCat("seed-uid-", ++uid);
      if (r.Chance(0.15)) object["metadata"]["deletionTimestamp"] = FormatKubeTime(now);
      return object;
    };
    for (Json pod : objects.pods) {
      if (!r.Chance(0.7)) continue;
      pod["status"] = {{"phase", r.Pick<std::string>({"Pending", "Running", "Running", "Succeeded",
                                                      "Failed", "Unknown", ""})}};
      if (r.Chance(0.1)) {
        pod["metadata"]["annotations"][kRestartGenerationAnnotation] =
            r.Pick<std::string>({"", "x", "0", "3"});
      }
      s.observed.pods.push_back(place(pod));
    }
    if (r.Chance(0.1)) {  // a worker of a larger, earlier spec
      Json extra = objects.pods.back();
      extra["metadata"]["name"] = WorkerPodName("mlp", 7);
      extra["status"] = {{"phase", "Running"}};
      s.observed.pods.push_back(place(extra));
    }
    if (r.Chance(0.8)) s.observed.secrets.push_back(place(objects.secret));
    if (r.Chance(0.8)) s.observed.services.push_back(place(objects.service));
    for (const Json& service : objects.ps_services) {
      if (r.Chance(0.8)) s.observed.services.push_back(place(service));
    }
  }
  if (r.Chance(0.05)) {  // left over from an earlier job of the same name
    s.observed.pods.push_back(
        {{"metadata",
          {{"name", WorkerPodName("mlp", 0)},
           {"uid", "foreign"},
           {"ownerReferences", Json::array({OwnerReference("mlp", "old-uid")})}}},
         {"status", {{"phase", "Failed"}}}});
    std::rotate(s.observed.pods.rbegin(), s.observed.pods.rbegin() + 1, s.observed.pods.rend());
    // keep a single object per name: drop our own pod of that name, if any
    auto end = std::remove_if(s.observed.pods.begin() + 1, s.observed.pods.end(),
                              [](const Json& p) { return Name(p) == WorkerPodName("mlp", 0); });
    s.observed.pods.erase(end, s.observed.pods.end());
  }
  s.observed.job = job;
  s.observed.token = "new-token";
  return s;
}

Cluster ClusterFor(const Scenario& s) {
  Cluster c(s.observed.job);
  c.observed() = s.observed;
  return c;
}

int64_t RecordedRestarts(const Json& job) { return IntAt(job, {"status", "restarts"}, 0); }

// Whether a live, current pod (gang_restart.h) failed in the initial state.
bool CurrentFailure(const Observed& o) {
  absl::StatusOr<ParsedJob> job = ParseTrainingJob(o.job);
  if (!job.ok()) return false;
  ObservedPods pods = ObservePods(o.pods, o.job);
  std::vector<std::string> names;
  for (int i = 0; i < job::PsShardCount(job->spec); ++i) names.push_back(PsPodName("mlp", i));
  for (int i = 0; i < job->spec.WorldSize(); ++i) names.push_back(WorkerPodName("mlp", i));
  GangAssessment gang = AssessGang(RecordedRestarts(o.job), pods, names, job->spec_hash);
  if (gang.failed != nullptr) return true;
  // A gang that ran in full and lost a pod (gone, or being deleted) fails as well.
  if (StringAt(o.job, {"status", "phase"}) != "Running" || !gang.stale.empty()) return false;
  for (const std::string& name : names) {
    const PodView* pod = pods.Owned(name);
    if (pod == nullptr) return true;
    if (pod->terminating && pod->restart_generation == gang.restarts &&
        pod->spec_hash == job->spec_hash) {
      return true;
    }
  }
  return false;
}

void CheckCreatesAreFree(const Observed& o, const Plan& plan) {
  for (const Json& object : plan.creates) {
    const std::vector<Json>& list = StringAt(object, {"kind"}) == "Pod"       ? o.pods
                                    : StringAt(object, {"kind"}) == "Service" ? o.services
                                                                              : o.secrets;
    for (const Json& existing : list) {
      EXPECT_NE(Name(existing), Name(object)) << "creates a taken name";
    }
  }
}

constexpr int kScenarios = 400;

void CheckDeterministicAndOrderIndependent(uint32_t seed, bool sharded) {
  Random r(seed);
  for (int i = 0; i < kScenarios; ++i) {
    SCOPED_TRACE(::testing::Message() << "scenario " << i);
    Scenario s = MakeScenario(r, sharded);
    Options options;
    Plan plan = Reconcile(s.observed, options, testing::StartTime());
    EXPECT_EQ(Reconcile(s.observed, options, testing::StartTime()), plan);
    Observed shuffled = s.observed;
    std::shuffle(shuffled.pods.begin(), shuffled.pods.end(), r.engine());
    if (sharded) std::shuffle(shuffled.services.begin(), shuffled.services.end(), r.engine());
    EXPECT_EQ(Reconcile(shuffled, options, testing::StartTime()), plan) << plan.DebugString();
    CheckCreatesAreFree(s.observed, plan);
  }
}

void CheckConvergesAndCountsEachFailureOnce(uint32_t seed, bool sharded) {
  Random r(seed);
  // How many scenarios reached each kind of outcome: the generator must exercise them all.
  std::map<std::string, int> outcomes;
  for (int i = 0; i < kScenarios; ++i) {
    SCOPED_TRACE(::testing::Message() << "scenario " << i);
    Scenario s = MakeScenario(r, sharded);
    Cluster c = ClusterFor(s);
    const int64_t before = RestartsInForce(RecordedRestarts(s.observed.job),
                                           ObservePods(s.observed.pods, s.observed.job));
    const bool failure = CurrentFailure(s.observed);
    const Json initial_status = c.job().value("status", Json());

    // Settle by hand to check every intermediate Plan too.
    int64_t last = before;
    bool settled = false;
    for (int pass = 0; pass < 10 && !settled; ++pass) {
      Plan plan = c.Reconcile();
      CheckCreatesAreFree(c.observed(), plan);
      if (plan.status.has_value()) {
        if (!s.finished) {
          int64_t now_restarts = IntAt(*plan.status, {"restarts"}, 0);
          EXPECT_GE(now_restarts, last) << "the restart counter went backwards";
          last = now_restarts;
        } else {
          ADD_FAILURE() << "a finished job's status was rewritten";
        }
      }
      if (plan.NoWrites()) {
        if (!c.AnyTerminating()) settled = true;
        c.FinishDeletions();
        continue;
      }
      c.Apply(plan);
    }
    ASSERT_TRUE(settled) << "no fixed point; last plan:\n" << c.Reconcile().DebugString();
    if (s.finished) {
      EXPECT_EQ(c.job().value("status", Json()), initial_status);
      continue;
    }
    // A failure of the current gang counts exactly once, unless something else ended or
    // paused the gang first (suspension, the deadline, success, an invalid spec).
    const Json& status = c.job()["status"];
    const int64_t after = RecordedRestarts(c.job());
    const Json* failed = FindCondition(status, kConditionFailed);
    bool preempted = c.job()["spec"]["runPolicy"].value("suspend", false) ||
                     IsConditionTrue(status, kConditionSucceeded) ||
                     (failed != nullptr && StringAt(*failed, {"reason"}) != "BackoffLimitExceeded");
    if (after > before) ++outcomes["restart counted"];
    if (failure && after == before) ++outcomes["failure preempted"];
    // A failure past backoffLimit fails the job without counting a restart that never happens.
    const bool exhausted =
        failed != nullptr && StringAt(*failed, {"reason"}) == "BackoffLimitExceeded";
    if (preempted) {
      EXPECT_GE(after, before);
      EXPECT_LE(after, before + (failure ? 1 : 0));
    } else if (exhausted) {
      EXPECT_EQ(after, before);
    } else {
      EXPECT_EQ(after, before + (failure ? 1 : 0));
    }

    // The fixed point of a job that runs: the whole current gang exists.
    std::string phase = StringAt(status, {"phase"});
    bool foreign = false;
    for (const Json& pod : c.observed().pods) foreign |= !IsControlledBy(pod, c.job());
    ++outcomes[phase];
    if (foreign) ++outcomes["foreign"];
    if (phase == "Failed" || phase == "Succeeded" || phase == "Suspended") {
      for (const Json& pod : c.observed().pods) {
        // A succeeded job keeps its succeeded workers, a failed one its failed pods.
        bool kept = phase == "Succeeded" ? Label(pod, kRoleLabel) == kRoleWorker &&
                                               StringAt(pod, {"status", "phase"}) == "Succeeded"
                                         : phase == "Failed" &&
                                               StringAt(pod, {"status", "phase"}) == "Failed";
        EXPECT_TRUE(kept || !IsControlledBy(pod, c.job())) << Name(pod) << " left behind";
      }
      continue;
    }
    if (foreign) continue;
    absl::StatusOr<ParsedJob> job = ParseTrainingJob(c.job());
    ASSERT_TRUE(job.ok());
    const int shards = job::PsShardCount(job->spec);
    EXPECT_EQ(c.PodNames().size(), static_cast<size_t>(job->spec.WorldSize() + shards));
    for (const std::string& name : c.PodNames()) {
      const Json& pod = *c.Pod(name);
      EXPECT_EQ(Annotation(pod, kRestartGenerationAnnotation), absl::StrCat(after)) << name;
      EXPECT_EQ(Annotation(pod, kSpecHashAnnotation), job->spec_hash) << name;
    }
    EXPECT_EQ(Annotation(*c.Object("Secret", SecretName("mlp")), kSpecHashAnnotation),
              job->spec_hash);
    EXPECT_NE(c.Object("Service", "mlp"), nullptr);
    // One Service per shard with a parameter server, and no Service of a shard no longer wanted.
    const bool ps = job::UsesParameterServer(job->spec.strategy.type);
    EXPECT_EQ(c.observed().services.size(), static_cast<size_t>(ps ? shards + 1 : 1));
    for (int shard = 0; ps && shard < shards; ++shard) {
      EXPECT_NE(c.Object("Service", PsServiceName("mlp", shard)), nullptr) << shard;
    }
  }
  for (const char* outcome : {"restart counted", "failure preempted", "Pending", "Failed",
                              "Succeeded", "Suspended", "foreign"}) {
    EXPECT_GE(outcomes[outcome], 5) << outcome;
  }
}

void CheckControllerKilledMidPlanEndsTheSame(uint32_t seed, bool sharded) {
  Random r(seed);
  for (int i = 0; i < kScenarios; ++i) {
    SCOPED_TRACE(::testing::Message() << "scenario " << i);
    Scenario s = MakeScenario(r, sharded);
    Cluster full = ClusterFor(s);
    full.Settle(10);

    Cluster killed = ClusterFor(s);
    Plan plan = killed.Reconcile();
    bool status = r.Chance(0.5);
    size_t deletes = status ? r.Int(0, static_cast<int>(plan.deletes.size())) : 0;
    size_t creates =
        deletes == plan.deletes.size() ? r.Int(0, static_cast<int>(plan.creates.size())) : 0;
    killed.Apply(plan, status, deletes, creates);
    killed.Settle(10);

    EXPECT_EQ(IntAt(killed.job(), {"status", "restarts"}, 0),
              IntAt(full.job(), {"status", "restarts"}, 0));
    EXPECT_EQ(StringAt(killed.job(), {"status", "phase"}),
              StringAt(full.job(), {"status", "phase"}));
    EXPECT_EQ(killed.PodNames(), full.PodNames());
    EXPECT_EQ(killed.RestartGenerations(), full.RestartGenerations());
  }
}

TEST(FixedPointTest, DeterministicAndOrderIndependent) {
  CheckDeterministicAndOrderIndependent(20270115, /*sharded=*/false);
}

TEST(FixedPointTest, ConvergesAndCountsEachFailureOnce) {
  CheckConvergesAndCountsEachFailureOnce(7, /*sharded=*/false);
}

TEST(FixedPointTest, ControllerKilledMidPlanEndsTheSame) {
  CheckControllerKilledMidPlanEndsTheSame(99, /*sharded=*/false);
}

// The same properties for jobs with 1 to 3 parameter-server shards and their Services.
TEST(FixedPointTest, ShardedDeterministicAndOrderIndependent) {
  CheckDeterministicAndOrderIndependent(20270116, /*sharded=*/true);
}

TEST(FixedPointTest, ShardedConvergesAndCountsEachFailureOnce) {
  CheckConvergesAndCountsEachFailureOnce(9, /*sharded=*/true);
}

TEST(FixedPointTest, ShardedControllerKilledMidPlanEndsTheSame) {
  CheckControllerKilledMidPlanEndsTheSame(100, /*sharded=*/true);
}

}  // namespace
}  // namespace hptrain::reconcile
