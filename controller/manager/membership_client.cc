#include "controller/manager/membership_client.h"

#include <chrono>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "controller/kube/object_meta.h"
#include "controller/reconcile/labels.h"
#include "grpcpp/grpcpp.h"
#include "proto/hptrain/v1/coordinator.grpc.pb.h"
#include "runtime/ps/grpc_status.h"

namespace hptrain::manager {
namespace {

std::string DefaultAddress(const nlohmann::json& job) {
  const std::string name = kube::NameOf(job);
  return absl::StrCat(reconcile::PsPodName(name), ".", reconcile::ServiceName(name), ".",
                      kube::NamespaceOf(job), ".svc:", reconcile::kCoordinatorPort);
}

class GrpcMembershipClient : public MembershipClient {
 public:
  GrpcMembershipClient(std::function<std::string(const nlohmann::json&)> address,
                       absl::Duration timeout)
      : address_(std::move(address)), timeout_(timeout) {}

  absl::StatusOr<reconcile::CoordinatorMembership> Read(const nlohmann::json& job,
                                                        const std::string& token) override {
    v1::JobStatus status;
    absl::Status result = Call(job, token, &v1::Coordinator::Stub::GetJobStatus,
                               v1::GetJobStatusRequest(), &status, "GetJobStatus");
    if (!result.ok()) return result;
    return MembershipOf(status);
  }

  absl::Status Change(const nlohmann::json& job, const std::string& token,
                      const reconcile::MembershipRequest& request) override {
    v1::Allocation allocation;
    return Call(job, token, &v1::Coordinator::Stub::ChangeMembership, ChangeRequestOf(request),
                &allocation,
                absl::StrCat("ChangeMembership ", reconcile::KindName(request.kind), " slot ",
                             request.slot));
  }

 private:
  void Prepare(const std::string& token, grpc::ClientContext* context) const {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_)));
    context->AddMetadata(ps::kAuthMetadataKey, "Bearer " + token);
  }

  // One call of the job's coordinator with the job token; an error names the coordinator and
  // `what`.
  template <typename Request, typename Response, typename Method>
  absl::Status Call(const nlohmann::json& job, const std::string& token, Method method,
                    const Request& request, Response* response, const std::string& what) {
    std::string where;
    std::shared_ptr<v1::Coordinator::Stub> stub = StubFor(job, &where);
    grpc::ClientContext context;
    Prepare(token, &context);
    absl::Status result = ps::FromGrpc(((*stub).*method)(&context, request, response));
    if (!result.ok()) {
      return absl::Status(result.code(),
                          absl::StrCat("coordinator ", where, " ", what, ": ", result.message()));
    }
    return absl::OkStatus();
  }

  // One channel per job (by key), rebuilt when its address changes.
  std::shared_ptr<v1::Coordinator::Stub> StubFor(const nlohmann::json& job, std::string* where) {
    *where = address_ ? address_(job) : DefaultAddress(job);
    absl::MutexLock lock(&mu_);
    Entry& entry = stubs_[kube::KeyOf(job)];
    if (entry.stub == nullptr || entry.address != *where) {
      entry.address = *where;
      entry.stub = std::shared_ptr<v1::Coordinator::Stub>(v1::Coordinator::NewStub(
          grpc::CreateChannel(*where, grpc::InsecureChannelCredentials())));
    }
    return entry.stub;
  }

  struct Entry {
    std::string address;
    std::shared_ptr<v1::Coordinator::Stub> stub;
  };
  const std::function<std::string(const nlohmann::json&)> address_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::map<std::string, Entry> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

reconcile::CoordinatorMembership MembershipOf(const v1::JobStatus& status) {
  reconcile::CoordinatorMembership out;
  out.epoch = status.membership_epoch();
  out.members.assign(status.members().begin(), status.members().end());
  for (const v1::MembershipChange& change : status.membership_changes()) {
    reconcile::MembershipChangeView view;
    view.epoch = change.epoch();
    view.reason = change.reason();
    view.slots.assign(change.slots().begin(), change.slots().end());
    view.detail = change.detail();
    out.changes.push_back(std::move(view));
  }
  return out;
}

v1::MembershipChangeRequest ChangeRequestOf(const reconcile::MembershipRequest& request) {
  v1::MembershipChangeRequest out;
  out.set_kind(request.kind == reconcile::MembershipRequest::Kind::kLost
                   ? v1::MembershipChangeRequest::LOST
                   : v1::MembershipChangeRequest::REMOVE);
  out.set_slot(request.slot);
  out.set_reason(request.reason);
  return out;
}

std::unique_ptr<MembershipClient> NewGrpcMembershipClient(
    std::function<std::string(const nlohmann::json& job)> address, absl::Duration timeout) {
  return std::make_unique<GrpcMembershipClient>(std::move(address), timeout);
}

}  // namespace hptrain::manager
