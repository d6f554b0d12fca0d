#include "runtime/ps/coordinator_client.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "runtime/base/status.h"
#include "runtime/ps/grpc_status.h"
#include "runtime/ps/tls_credentials.h"

namespace hptrain::ps {

namespace v1 = hptrain::v1;

CoordinatorClient::CoordinatorClient(const std::string& address, std::string token,
                                     std::chrono::milliseconds call_timeout,
                                     std::shared_ptr<grpc::ChannelCredentials> credentials)
    : address_(address), token_(std::move(token)), call_timeout_(call_timeout) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(
      address, credentials ? std::move(credentials) : DefaultChannelCredentials(), args);
  stub_ = v1::Coordinator::NewStub(channel_);
}

void CoordinatorClient::Prepare(grpc::ClientContext* context,
                                std::chrono::milliseconds timeout) const {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  context->AddMetadata(kAuthMetadataKey, "Bearer " + token_);
}

absl::Status CoordinatorClient::WaitUntilReachable(std::chrono::milliseconds timeout) {
  if (!channel_->WaitForConnected(std::chrono::system_clock::now() + timeout)) {
    return absl::UnavailableError(
        absl::StrCat("coordinator at ", address_, " not reachable within ", timeout.count(),
                     " ms"));
  }
  return absl::OkStatus();
}

// Runs one unary call with the token and a deadline, and names the coordinator on failure.
#define HPTRAIN_CALL(method, request, response, timeout)                                  \
  do {                                                                                    \
    grpc::ClientContext context;                                                          \
    Prepare(&context, (timeout));                                                         \
    absl::Status status = FromGrpc(stub_->method(&context, (request), (response)));       \
    if (!status.ok()) {                                                                   \
      return Annotate(status, absl::StrCat("coordinator ", address_, " " #method));       \
    }                                                                                     \
  } while (0)

absl::Status CoordinatorClient::Set(const std::string& key, const std::string& value) {
  v1::SetRequest request;
  request.set_key(key);
  request.set_value(value);
  v1::SetResponse response;
  HPTRAIN_CALL(Set, request, &response, call_timeout_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> CoordinatorClient::Get(const std::string& key,
                                                   std::chrono::milliseconds timeout) {
  v1::GetRequest request;
  request.set_key(key);
  request.set_timeout_ms(timeout.count());
  v1::GetResponse response;
  HPTRAIN_CALL(Get, request, &response, timeout + call_timeout_);
  return response.value();
}

absl::Status CoordinatorClient::Wait(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) {
  v1::WaitRequest request;
  for (const auto& key : keys) request.add_keys(key);
  request.set_timeout_ms(timeout.count());
  v1::WaitResponse response;
  HPTRAIN_CALL(Wait, request, &response, timeout + call_timeout_);
  return absl::OkStatus();
}

absl::StatusOr<v1::RegisterResponse> CoordinatorClient::Register(
    const v1::RegisterRequest& request) {
  v1::RegisterResponse response;
  HPTRAIN_CALL(Register, request, &response, call_timeout_);
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorClient::Heartbeat(int rank,
                                                                   int64_t membership_epoch) {
  v1::HeartbeatRequest request;
  request.set_rank(rank);
  request.set_membership_epoch(membership_epoch);
  v1::HeartbeatResponse response;
  HPTRAIN_CALL(Heartbeat, request, &response, call_timeout_);
  return response;
}

absl::StatusOr<v1::Allocation> CoordinatorClient::ChangeMembership(
    v1::MembershipChangeRequest::Kind kind, int slot, const std::string& reason, int64_t at_step) {
  v1::MembershipChangeRequest request;
  request.set_kind(kind);
  request.set_slot(slot);
  request.set_reason(reason);
  request.set_at_step(at_step);
  return ChangeMembership(request);
}

absl::StatusOr<v1::Allocation> CoordinatorClient::GetAllocation(std::optional<int64_t> step) {
  v1::GetAllocationRequest request;
  if (step.has_value()) {
    request.set_step(*step);
    request.set_at_step(true);
  }
  v1::Allocation response;
  HPTRAIN_CALL(GetAllocation, request, &response, call_timeout_);
  return response;
}

absl::StatusOr<v1::Allocation> CoordinatorClient::SetAllocation(
    const std::vector<int>& batch_sizes, int lead_steps) {
  v1::SetAllocationRequest request;
  for (int b : batch_sizes) request.add_batch_sizes(b);
  request.set_lead_steps(lead_steps);
  v1::Allocation response;
  HPTRAIN_CALL(SetAllocation, request, &response, call_timeout_);
  return response;
}

absl::Status CoordinatorClient::ReportProgress(const v1::ProgressReport& request) {
  v1::ReportResponse response;
  HPTRAIN_CALL(ReportProgress, request, &response, call_timeout_);
  return absl::OkStatus();
}

absl::Status CoordinatorClient::ReportEpoch(const v1::EpochReport& request) {
  v1::ReportResponse response;
  HPTRAIN_CALL(ReportEpoch, request, &response, call_timeout_);
  return absl::OkStatus();
}

absl::Status CoordinatorClient::ReportDone(int rank, bool ok, const std::string& message) {
  v1::DoneReport request;
  request.set_rank(rank);
  request.set_ok(ok);
  request.set_message(message);
  v1::ReportResponse response;
  HPTRAIN_CALL(ReportDone, request, &response, call_timeout_);
  return absl::OkStatus();
}

absl::StatusOr<v1::JobStatus> CoordinatorClient::GetJobStatus() {
  v1::GetJobStatusRequest request;
  v1::JobStatus response;
  HPTRAIN_CALL(GetJobStatus, request, &response, call_timeout_);
  return response;
}

absl::StatusOr<v1::Allocation> CoordinatorClient::ChangeMembership(
    const v1::MembershipChangeRequest& request) {
  v1::Allocation response;
  HPTRAIN_CALL(ChangeMembership, request, &response, call_timeout_);
  return response;
}

absl::Status CoordinatorClient::Shutdown() {
  v1::ShutdownRequest request;
  v1::ShutdownResponse response;
  HPTRAIN_CALL(Shutdown, request, &response, call_timeout_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read job token file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(buffer.str()));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": job token is empty"));
  return token;
}

}  // namespace hptrain::ps
