// MembershipClient: what the controller asks an elastic job's coordinator (docs/elastic.md,
// proto/hptrain/v1/coordinator.proto), behind an interface the tests fake:
//   Read    GetJobStatus: the membership epoch, its members (slots in rank order) and the
//           changes so far (reconcile::CoordinatorMembership), for status.membership, the
//           MembershipChanged events and the below-minimum count;
//   Change  ChangeMembership: REMOVE (a scaled-down slot leaves at a step boundary) or LOST (its
//           pod failed or is gone), best effort.
// Every call carries the job token (the job's Secret) as `authorization: Bearer <token>`.
//
// NewGrpcMembershipClient reaches the coordinator over gRPC, plaintext, at the ps pod's
// in-cluster name (port 29400, as the pods do) unless `address` says otherwise; it keeps one
// channel per job and bounds each call by `timeout`. It does not speak TLS: for a job with
// spec.security.tls the coordinator cannot be read, and the reconciler acts as when it is
// unreachable (reconcile/reconciler.h, "Elastic jobs").
//
// Thread-safety: implementations are called from the controller's worker threads, concurrently
// for different jobs.
#ifndef HPTRAIN_CONTROLLER_MANAGER_MEMBERSHIP_CLIENT_H_
#define HPTRAIN_CONTROLLER_MANAGER_MEMBERSHIP_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/reconcile/elastic.h"
#include "nlohmann/json.hpp"
#include "proto/hptrain/v1/coordinator.pb.h"

namespace hptrain::manager {

class MembershipClient {
 public:
  virtual ~MembershipClient() = default;
  // The membership of `job`'s coordinator; an error when it cannot be reached or read.
  virtual absl::StatusOr<reconcile::CoordinatorMembership> Read(const nlohmann::json& job,
                                                                const std::string& token) = 0;
  virtual absl::Status Change(const nlohmann::json& job, const std::string& token,
                              const reconcile::MembershipRequest& request) = 0;
};

// The membership part of a coordinator's JobStatus.
reconcile::CoordinatorMembership MembershipOf(const v1::JobStatus& status);
// The ChangeMembership request for `request`.
v1::MembershipChangeRequest ChangeRequestOf(const reconcile::MembershipRequest& request);

// `address` (empty: the ps pod's DNS name) gives host:port of a job's coordinator.
std::unique_ptr<MembershipClient> NewGrpcMembershipClient(
    std::function<std::string(const nlohmann::json& job)> address, absl::Duration timeout);

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_MEMBERSHIP_CLIENT_H_
