// Resume on Kubernetes, end to end on the API server double: the controller's pods are played by
// real `hptrain ps` and `hptrain worker` processes started from each pod's own environment and
// the job's Secret. A worker dies after the first checkpoints; the controller restarts the gang
// with HPTRAIN_RESUME; the new workers continue from the checkpoint, the controller records the
// step they resumed from, and the job ends at the step count and with the parameters of an
// uninterrupted `hptrain run` of the same manifest, bit for bit.
#include <signal.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/promql/scrape.h"
#include "controller/reconcile/labels.h"
#include "gtest/gtest.h"
#include "tests/controller/manager/pod_processes.h"
#include "tests/controller/promql/test_server.h"

namespace hptrain::manager::testing {
namespace {

constexpr int kWorkers = 2;
constexpr int kStepsPerEpoch = 2048 / 64;
constexpr int kEpochs = 8;

// A checkpoint file (docs/checkpoint_format.md): its header and the bytes of its params section.
struct CheckpointFile {
  Json header;
  std::string params;
};

bool ReadCheckpoint(const std::string& path, CheckpointFile* out) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  if (bytes.size() < 16 || bytes.compare(0, 8, "HPTCKPT1") != 0) return false;
  uint64_t length = 0;
  std::memcpy(&length, bytes.data() + 8, 8);
  if (16 + length > bytes.size()) return false;
  out->header = Json::parse(bytes.substr(16, length), nullptr, false);
  if (!out->header.is_object()) return false;
  size_t offset = 16 + length;
  for (const Json& section : out->header.value("sections", Json::array())) {
    const size_t size = 4 * section.value("count", size_t{0});
    if (section.value("name", "") == "params") out->params = bytes.substr(offset, size);
    offset += size;
  }
  return !out->params.empty();
}

class ControllerResumeTest : public PodProcessTest {
 protected:
  // Starts the ps and the workers of the job's current pods, each with its pod's environment.
  void StartGang(const std::string& job) {
    const std::string job_file = Write("job.yaml", SecretValue(job, "job.yaml"));
    const std::string token_file = Write("token", SecretValue(job, "token"));
    const std::string port_file = absl::StrCat(dir_, "/ps.port.", ++gangs_);
    for (const Json& pod : Owned("pods", job)) {
      if (pod["metadata"]["labels"][reconcile::kRoleLabel] != reconcile::kRolePs) continue;
      Spawn({Binary("hptrain"), "ps", "--job", job_file, "--token-file", token_file, "--host",
             "127.0.0.1", "--port", "0", "--port-file", port_file, "--metrics-host", "127.0.0.1",
             "--metrics-port", "0", "--linger", "1"},
            PodEnv(pod));
    }
    int coordinator_port = 0;
    ASSERT_TRUE(WaitFor(
        [&] {
          std::ifstream in(port_file);
          return static_cast<bool>(in >> coordinator_port) && coordinator_port > 0;
        },
        absl::Seconds(30)));
    for (const Json& pod : Owned("pods", job)) {
      if (pod["metadata"]["labels"][reconcile::kRoleLabel] != reconcile::kRoleWorker) continue;
      const int rank = std::stoi(pod["metadata"]["labels"][reconcile::kRankLabel].get<std::string>());
      workers_[rank] = Spawn(
          {Binary("hptrain"), "worker", "--job", job_file, "--token-file", token_file,
           "--coordinator", absl::StrCat("127.0.0.1:", coordinator_port), "--bind", "127.0.0.1",
           "--metrics-host", "127.0.0.1", "--metrics-port", std::to_string(metrics_ports_[rank])},
          PodEnv(pod));
    }
    SetPods(job, "Running");
  }

  // The workers' metrics as the controller's reading would give them.
  reconcile::WorkerMetricsMap Read(const std::string& job) const {
    reconcile::WorkerMetricsMap out;
    for (int rank = 0; rank < kWorkers; ++rank) {
      absl::StatusOr<std::vector<promql::Sample>> samples = promql::ScrapeMetrics(
          absl::StrCat("http://127.0.0.1:", metrics_ports_[rank], "/metrics"),
          absl::Milliseconds(500));
      if (!samples.ok()) continue;
      reconcile::WorkerMetrics& m = out[reconcile::WorkerPodName(job, rank)];
      for (const promql::Sample& sample : *samples) {
        if (promql::NameOf(sample) == "hptrain_step") m.step = static_cast<int64_t>(sample.value);
        if (promql::NameOf(sample) == "hptrain_resumed_from_step") {
          m.resumed_from_step = static_cast<int64_t>(sample.value);
        }
      }
    }
    return out;
  }

  int gangs_ = 0;
  std::vector<int> metrics_ports_ = {promql::testing::UnusedPort(),
                                     promql::testing::UnusedPort()};
  Subprocess* workers_[kWorkers] = {nullptr, nullptr};
};

TEST_F(ControllerResumeTest, AWorkerLostAfterACheckpointResumesAndEndsAsAnUninterruptedRun) {
  const std::string checkpoint = absl::StrCat(dir_, "/ckpt/resume.ckpt");
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", dir_, "/ckpt ", dir_, "/ref").c_str()), 0);
  Json job = MlpJob("resume", kWorkers);
  job["spec"]["epochs"] = kEpochs;
  job["spec"]["threads"] = 1;
  job["spec"]["checkpoint"] = {{"path", checkpoint},
                               {"intervalSteps", 10},
                               {"volume", {{"emptyDir", Json::object()}}}};
  ControllerOptions options = FastOptions();
  options.resync_period = absl::Milliseconds(200);
  options.worker_metrics = [this](const Json& j) { return Read(j["metadata"]["name"]); };
  StartController(std::move(options), controller_client_.get());
  CreateJob(job);
  ASSERT_TRUE(WaitFor([&] { return PodNames("resume").size() == kWorkers + 1; }));
  ASSERT_NO_FATAL_FAILURE(StartGang("resume"));

  // The first checkpoint lands; the gang is frozen there and worker 1 dies (an OOM kill, say).
  ASSERT_TRUE(WaitFor([&] { return access(checkpoint.c_str(), R_OK) == 0; }, absl::Seconds(60)))
      << workers_[0]->stderr_text();
  for (auto& process : processes_) process->Signal(SIGSTOP);
  CheckpointFile saved;
  ASSERT_TRUE(ReadCheckpoint(checkpoint, &saved));
  const int64_t saved_step = saved.header.value("step", int64_t{-1});
  ASSERT_GE(saved_step, 10);
  ASSERT_LT(saved_step, kEpochs * kStepsPerEpoch) << "the run ended before it could be cut";
  for (auto& process : processes_) process->Signal(SIGKILL);
  for (auto& process : processes_) process->Wait(absl::Seconds(10));
  processes_.clear();
  SetPod("resume-worker-1", "Failed");

  // A new gang, every worker of it with HPTRAIN_RESUME.
  ASSERT_TRUE(WaitFor([&] {
    std::vector<Json> pods = Owned("pods", "resume");
    if (Status("resume").value("restarts", 0) != 1 || pods.size() != kWorkers + 1) return false;
    for (const Json& pod : pods) {
      if (pod["metadata"]["annotations"][reconcile::kRestartGenerationAnnotation] != "1") {
        return false;
      }
    }
    return true;
  })) << Status("resume").dump();
  for (const Json& pod : Owned("pods", "resume")) {
    const std::vector<std::string> env = PodEnv(pod);
    const bool resumes = std::find(env.begin(), env.end(), "HPTRAIN_RESUME=1") != env.end();
    EXPECT_EQ(resumes, pod["metadata"]["labels"][reconcile::kRoleLabel] == reconcile::kRoleWorker)
        << pod["metadata"]["name"];
  }
  ASSERT_NO_FATAL_FAILURE(StartGang("resume"));

  // The controller records where the new gang resumed.
  ASSERT_TRUE(WaitFor([&] { return Status("resume").contains("resume"); }, absl::Seconds(60)))
      << Status("resume").dump();
  const Json resumed = Status("resume")["resume"];
  EXPECT_EQ(resumed["restart"], 1);
  const int64_t resumed_step = resumed.value("step", int64_t{-1});
  EXPECT_GE(resumed_step, saved_step);  // a later checkpoint may have landed before the freeze
  EXPECT_EQ(resumed_step % 10, 0);
  ASSERT_TRUE(WaitFor([&] { return !Events("resume", "CheckpointRestored").empty(); }));
  EXPECT_EQ(Events("resume", "CheckpointRestored")[0].value("message", ""),
            absl::StrCat("gang restart 1 resumed training from step ", resumed_step,
                         " (checkpoint ", checkpoint, ")"));

  for (int rank = 0; rank < kWorkers; ++rank) {
    std::optional<int> code = workers_[rank]->Wait(absl::Seconds(120));
    ASSERT_TRUE(code.has_value()) << "worker " << rank << " did not finish";
    EXPECT_EQ(*code, 0) << workers_[rank]->stderr_text();
  }
  SetPods("resume", "Succeeded", "worker");
  EXPECT_TRUE(WaitFor([&] { return Phase("resume") == "Succeeded"; })) << Status("resume").dump();

  // The same manifest run without interruption by `hptrain run`.
  const std::string reference = absl::StrCat(dir_, "/ref/reference.ckpt");
  std::string out;
  std::string err;
  std::optional<int> code = RunToCompletion(
      {Binary("hptrain"), "run", Write("reference.yaml", SecretValue("resume", "job.yaml")),
       "--quiet", "--set", absl::StrCat("spec.checkpoint.path=", reference)},
      &out, &err, {}, {}, absl::Seconds(180));
  ASSERT_EQ(code, 0) << err;
  CheckpointFile restarted;
  CheckpointFile uninterrupted;
  ASSERT_TRUE(ReadCheckpoint(checkpoint, &restarted));
  ASSERT_TRUE(ReadCheckpoint(reference, &uninterrupted));
  EXPECT_EQ(restarted.header.value("step", -1), kEpochs * kStepsPerEpoch);
  EXPECT_EQ(restarted.header.value("step", -1), uninterrupted.header.value("step", -2));
  EXPECT_TRUE(restarted.params == uninterrupted.params)
      << "the resumed job's final parameters differ from the uninterrupted run's";
}

}  // namespace
}  // namespace hptrain::manager::testing
