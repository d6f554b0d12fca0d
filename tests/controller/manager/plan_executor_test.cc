#include "controller/manager/plan_executor.h"

#include <string>
#include <vector>

#include "controller/kube/api_error.h"
#include "controller/kube/event_recorder.h"
#include "controller/kube/resource.h"
#include "gtest/gtest.h"
#include "tests/controller/manager/controller_fixture.h"

namespace hptrain::manager::testing {
namespace {

class PlanExecutorTest : public ControllerTest {
 protected:
  Json Pod(const std::string& name) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", kNs}}},
            {"spec", {{"containers", {{{"name", "c"}, {"image", "i"}}}}}}};
  }
  Json MustCreatePod(const std::string& name) {
    absl::StatusOr<Json> pod = server_->Create("pods", Pod(name));
    EXPECT_TRUE(pod.ok()) << pod.status();
    return pod.ok() ? *pod : Json();
  }
  reconcile::ObjectRef PodRef(const std::string& name, const std::string& uid) {
    return {"v1", "Pod", kNs, name, uid, ""};
  }
};

TEST_F(PlanExecutorTest, WritesStatusFirstThenDeletesThenCreates) {
  kube::EventRecorder recorder(controller_client_.get());
  PlanExecutor executor(controller_client_.get(), &recorder);
  Json job = CreateJob(MlpJob("mlp"));
  Json old_pod = MustCreatePod("old");
  server_->ClearRequestLog();

  reconcile::Plan plan;
  plan.status = Json{{"phase", "Pending"}};
  plan.deletes = {PodRef("old", old_pod["metadata"]["uid"])};
  plan.creates = {Pod("new")};
  plan.events = {{reconcile::kEventNormal, "Created", "made"}};
  ASSERT_TRUE(executor.Execute(job, plan).ok());
  EXPECT_EQ(Phase("mlp"), "Pending");
  EXPECT_FALSE(server_->Get("pods", kNs, "old").ok());
  EXPECT_TRUE(server_->Get("pods", kNs, "new").ok());
  std::vector<std::string> order;
  for (const auto& record : server_->RequestLog()) {
    if (record.resource != "events") order.push_back(record.verb + " " + record.resource);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"update trainingjobs", "delete pods",
                                             "create pods"}));
  EXPECT_TRUE(recorder.Flush(absl::Seconds(5)));
  EXPECT_EQ(Events("mlp", "Created").size(), 1u);
}

TEST_F(PlanExecutorTest, AStaleJobIsAConflictAndNothingElseIsDone) {
  PlanExecutor executor(controller_client_.get(), nullptr);
  Json job = CreateJob(MlpJob("mlp"));
  PatchSpec("mlp", {{"epochs", 2}});  // the job moves on; `job` is stale now
  reconcile::Plan plan;
  plan.status = Json{{"phase", "Running"}};
  plan.creates = {Pod("p")};
  absl::Status status = executor.Execute(job, plan);
  EXPECT_TRUE(kube::IsConflict(status)) << status;
  EXPECT_TRUE(Status("mlp").empty() || !Status("mlp").contains("phase"));
  EXPECT_FALSE(server_->Get("pods", kNs, "p").ok());
}

TEST_F(PlanExecutorTest, GoneAndTakenObjectsCountAsDone) {
  PlanExecutor executor(controller_client_.get(), nullptr);
  Json job = CreateJob(MlpJob("mlp"));
  Json replaced = MustCreatePod("replaced");
  MustCreatePod("exists");
  reconcile::Plan plan;
  plan.deletes = {PodRef("missing", "uid-1"), PodRef("replaced", "an-older-uid")};
  plan.creates = {Pod("exists")};
  EXPECT_TRUE(executor.Execute(job, plan).ok());
  // The uid precondition protected the newer pod of that name.
  EXPECT_TRUE(server_->Get("pods", kNs, "replaced").ok());

  ASSERT_TRUE(server_->Delete("trainingjobs", kNs, "mlp").ok());
  plan = reconcile::Plan();
  plan.status = Json{{"phase", "Running"}};
  plan.creates = {Pod("after-job-gone")};
  EXPECT_TRUE(executor.Execute(job, plan).ok());
  EXPECT_FALSE(server_->Get("pods", kNs, "after-job-gone").ok());
}

TEST_F(PlanExecutorTest, EventsSurviveAFailureAfterTheStatusWrite) {
  kube::EventRecorder recorder(controller_client_.get());
  PlanExecutor executor(controller_client_.get(), &recorder);
  Json job = CreateJob(MlpJob("mlp"));
  hptrain::testing::Fault fault;
  fault.verb = "create";
  fault.resource = "pods";
  fault.code = 500;
  server_->InjectFault(fault);
  reconcile::Plan plan;
  plan.status = Json{{"phase", "Pending"}};
  plan.creates = {Pod("p")};
  plan.events = {{reconcile::kEventWarning, "GangRestart", "pod failed"}};
  absl::Status status = executor.Execute(job, plan);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("create Pod team-a/p"), std::string::npos)
      << status;
  EXPECT_TRUE(recorder.Flush(absl::Seconds(5)));
  EXPECT_EQ(Events("mlp", "GangRestart").size(), 1u);
}

}  // namespace
}  // namespace hptrain::manager::testing
