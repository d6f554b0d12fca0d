// CoordinatorClient: a worker's, the launcher's or the controller's handle on a job coordinator.
//
// Attaches the job token to every call and bounds each call with a deadline. It is also the
// KeyValueStore that the communicator's rendezvous runs on. Thread-safe (gRPC stubs are).
#ifndef HPTRAIN_RUNTIME_PS_COORDINATOR_CLIENT_H_
#define HPTRAIN_RUNTIME_PS_COORDINATOR_CLIENT_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "proto/hptrain/v1/coordinator.grpc.pb.h"
#include "runtime/comm/kv_store.h"

namespace hptrain::ps {

class CoordinatorClient : public comm::KeyValueStore {
 public:
  // Creates a channel to `address` (host:port); does not connect yet. `credentials`: the
  // channel's (e.g. a job's TLS, tls_credentials.h); null = the process's default.
  CoordinatorClient(const std::string& address, std::string token,
                    std::chrono::milliseconds call_timeout = std::chrono::seconds(10),
                    std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

  // Waits until the coordinator answers; Unavailable after `timeout`.
  absl::Status WaitUntilReachable(std::chrono::milliseconds timeout);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;

  absl::StatusOr<hptrain::v1::RegisterResponse> Register(const hptrain::v1::RegisterRequest&);
  // `membership_epoch`: the epoch the worker trains in (elastic jobs).
  absl::StatusOr<hptrain::v1::HeartbeatResponse> Heartbeat(int rank, int64_t membership_epoch = 0);
  // The newest allocation, or with `step` the one in force at that global step (and the promise
  // that later changes take effect after it; see GetAllocationRequest).
  absl::StatusOr<hptrain::v1::Allocation> GetAllocation(std::optional<int64_t> step = std::nullopt);
  absl::StatusOr<hptrain::v1::Allocation> SetAllocation(const std::vector<int>& batch_sizes,
                                                        int lead_steps);
  absl::Status ReportProgress(const hptrain::v1::ProgressReport&);
  absl::Status ReportEpoch(const hptrain::v1::EpochReport&);
  absl::Status ReportDone(int rank, bool ok, const std::string& message);
  absl::StatusOr<hptrain::v1::JobStatus> GetJobStatus();
  // Elastic jobs: removes a member or reports one lost (MembershipChangeRequest); the allocation
  // the change leads to. The coordinator's error (e.g. FailedPrecondition for a slot that is not
  // a member) is returned as is.
  absl::StatusOr<hptrain::v1::Allocation> ChangeMembership(
      const hptrain::v1::MembershipChangeRequest&);
  // The same, from its fields: removes `slot` at a step boundary (REMOVE, not before `at_step`) or drops it at
  // once (LOST); `reason` is for logs and events.
  absl::StatusOr<hptrain::v1::Allocation> ChangeMembership(
      hptrain::v1::MembershipChangeRequest::Kind kind, int slot, const std::string& reason,
      int64_t at_step = 0);
  absl::Status Shutdown();

 private:
  void Prepare(grpc::ClientContext* context, std::chrono::milliseconds timeout) const;

  std::string address_;
  std::string token_;
  std::chrono::milliseconds call_timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<hptrain::v1::Coordinator::Stub> stub_;
};

// Reads a job token from `path` (trailing whitespace removed); errors name the file.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_COORDINATOR_CLIENT_H_
