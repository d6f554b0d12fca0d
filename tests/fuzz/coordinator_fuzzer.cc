// libFuzzer target: the coordinator's request handlers (runtime/ps/coordinator_service.h) called
// directly, without a network, on requests decoded from the input (fuzz_input.h records: the
// selector picks the handler, its high bit sends a wrong token instead of the job's). A fresh
// coordinator for a job of 3 ranks in 2 groups takes each input's calls in order; waits are capped
// at 0 ms. Every call must return a status (never crash or hang), every refused token must be
// UNAUTHENTICATED and counted, and the job status must stay consistent: its world size, groups and
// an allocation that sums to the global batch.
#include <grpcpp/test/server_context_test_spouse.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "proto/hptrain/v1/coordinator.pb.h"
#include "runtime/ps/coordinator_service.h"
#include "runtime/ps/grpc_status.h"
#include "tests/fuzz/fuzz_input.h"

namespace hptrain::fuzz {
namespace {

constexpr char kToken[] = "job-token";
constexpr int kGlobalBatch = 96;
constexpr int kCalls = 12;

ps::CoordinatorConfig Config() {
  ps::CoordinatorConfig config;
  config.job = "fuzz";
  config.strategy = "ssgd";
  config.token = kToken;
  config.groups = {"fast", "fast", "slow"};
  config.allocation = {32, 32, 32};
  config.global_batch = kGlobalBatch;
  config.max_wait = std::chrono::milliseconds(0);
  return config;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "coordinator fuzz: %s\n", what.c_str());
  std::abort();
}

// Parses `payload` into a Request and calls `handler` with a context carrying `token`.
template <typename Request, typename Response, typename Handler>
grpc::Status Call(ps::CoordinatorService& service, Handler handler, const std::string& payload,
                  const std::string& token, bool* parsed) {
  Request request;
  *parsed = request.ParseFromString(payload);
  if (!*parsed) return grpc::Status::OK;
  grpc::ServerContext context;
  grpc::testing::ServerContextTestSpouse spouse(&context);
  spouse.AddClientMetadata(ps::kAuthMetadataKey, "Bearer " + token);
  Response response;
  return (service.*handler)(&context, &request, &response);
}

void Run(const uint8_t* data, size_t size) {
  ps::CoordinatorService service(Config());
  int rejected = 0;
  service.set_on_rejected([&rejected](const std::string&) { ++rejected; });
  int wrong_tokens = 0;
  for (const Record& record : Records(data, size)) {
    const bool wrong = (record.selector & 0x80) != 0;
    const std::string token = wrong ? "not-the-token" : kToken;
    bool parsed = false;
    grpc::Status status;
    using S = ps::CoordinatorService;
    namespace v1 = hptrain::v1;
    const std::string& p = record.payload;
    switch ((record.selector & 0x7f) % kCalls) {
      case 0:
        status = Call<v1::SetRequest, v1::SetResponse>(service, &S::Set, p, token, &parsed);
        break;
      case 1:
        status = Call<v1::GetRequest, v1::GetResponse>(service, &S::Get, p, token, &parsed);
        break;
      case 2:
        status = Call<v1::WaitRequest, v1::WaitResponse>(service, &S::Wait, p, token, &parsed);
        break;
      case 3:
        status = Call<v1::RegisterRequest, v1::RegisterResponse>(service, &S::Register, p, token,
                                                                 &parsed);
        break;
      case 4:
        status = Call<v1::HeartbeatRequest, v1::HeartbeatResponse>(service, &S::Heartbeat, p, token,
                                                                   &parsed);
        break;
      case 5:
        status = Call<v1::GetAllocationRequest, v1::Allocation>(service, &S::GetAllocation, p,
                                                                token, &parsed);
        break;
      case 6:
        status = Call<v1::SetAllocationRequest, v1::Allocation>(service, &S::SetAllocation, p,
                                                                token, &parsed);
        break;
      case 7:
        status = Call<v1::ProgressReport, v1::ReportResponse>(service, &S::ReportProgress, p, token,
                                                              &parsed);
        break;
      case 8:
        status =
            Call<v1::EpochReport, v1::ReportResponse>(service, &S::ReportEpoch, p, token, &parsed);
        break;
      case 9:
        status =
            Call<v1::DoneReport, v1::ReportResponse>(service, &S::ReportDone, p, token, &parsed);
        break;
      case 10:
        status = Call<v1::GetJobStatusRequest, v1::JobStatus>(service, &S::GetJobStatus, p, token,
                                                              &parsed);
        break;
      default:
        status = Call<v1::ShutdownRequest, v1::ShutdownResponse>(service, &S::Shutdown, p, token,
                                                                 &parsed);
        break;
    }
    if (!parsed) continue;
    if (wrong) {
      ++wrong_tokens;
      if (status.error_code() != grpc::StatusCode::UNAUTHENTICATED) {
        Fail("a call with a wrong token was not refused");
      }
    }
  }
  if (rejected != wrong_tokens) Fail("a refused call was not counted");
  const v1::JobStatus snapshot = service.Snapshot();
  if (snapshot.world_size() != 3 || snapshot.groups_size() != 3) Fail("the job's shape changed");
  const auto& sizes = snapshot.allocation().batch_sizes();
  if (sizes.size() != 3 || std::accumulate(sizes.begin(), sizes.end(), 0) != kGlobalBatch) {
    Fail("the allocation in force does not split the global batch over the ranks");
  }
}

// A worker's life: rendezvous, registration, allocation, progress, an epoch, done; and a rebalance
// and a wrong token on the way.
void WriteSeeds(const std::string& dir) {
  namespace v1 = hptrain::v1;
  auto record = [](int selector, const google::protobuf::Message& m) {
    return Record{static_cast<uint8_t>(selector), m.SerializeAsString()};
  };
  v1::SetRequest set;
  set.set_key("gloo/0");
  set.set_value("127.0.0.1:4000");
  v1::GetRequest get;
  get.set_key("gloo/0");
  v1::WaitRequest wait;
  wait.add_keys("gloo/0");
  wait.add_keys("gloo/1");
  wait.set_timeout_ms(10);
  v1::RegisterRequest reg;
  reg.set_rank(2);
  reg.set_group("slow");
  reg.set_metrics_address("127.0.0.1:9090");
  reg.set_hostname("host");
  reg.set_pid(42);
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_rank(2);
  v1::GetAllocationRequest allocation;
  allocation.set_step(3);
  allocation.set_at_step(true);
  v1::SetAllocationRequest rebalance;
  for (int b : {40, 40, 16}) rebalance.add_batch_sizes(b);
  rebalance.set_lead_steps(2);
  v1::ProgressReport progress;
  progress.set_rank(2);
  progress.set_step(5);
  progress.set_steps_per_epoch(10);
  progress.set_train_loss(0.5);
  progress.set_samples_per_second(100);
  progress.set_batch_size(32);
  v1::EpochReport epoch;
  epoch.set_epoch(0);
  epoch.set_test_accuracy(0.8);
  epoch.set_step(10);
  epoch.set_epochs_done(1);
  v1::DoneReport done;
  done.set_rank(2);
  done.set_ok(true);
  v1::GetJobStatusRequest job_status;
  v1::ShutdownRequest shutdown;
  WriteSeed(dir, "worker-life",
            Encode({record(0, set), record(1, get), record(2, wait), record(3, reg),
                    record(4, heartbeat), record(5, allocation), record(7, progress),
                    record(8, epoch), record(9, done), record(10, job_status)}));
  WriteSeed(dir, "rebalance",
            Encode({record(3, reg), record(6, rebalance), record(5, allocation),
                    record(7, progress), record(10, job_status)}));
  WriteSeed(dir, "wrong-token",
            Encode({record(0x80 | 3, reg), record(0x80 | 10, job_status), record(3, reg)}));
  WriteSeed(dir, "shutdown", Encode({record(11, shutdown), record(4, heartbeat), record(2, wait)}));
  v1::DoneReport failed;
  failed.set_rank(0);
  failed.set_ok(false);
  failed.set_message("out of memory");
  v1::RegisterRequest bad_rank;
  bad_rank.set_rank(7);
  bad_rank.set_group("fast");
  WriteSeed(dir, "failure",
            Encode({record(3, bad_rank), record(9, failed), record(10, job_status)}));
}

}  // namespace
}  // namespace hptrain::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hptrain::fuzz::MaybeWriteSeeds(hptrain::fuzz::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hptrain::fuzz::Run(data, size);
  return 0;
}
