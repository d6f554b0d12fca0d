#include "runtime/ps/ps_connection.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/ps/ps_wire.h"

namespace hptrain::ps {

int64_t StateBytes(const ShardState& state) {
  int64_t total = 0;
  for (const auto& [name, values] : state.sections) total += 4 * static_cast<int64_t>(values.size());
  return total;
}

void PsConnection::set_membership_epoch(int64_t epoch) {
  epoch_ = epoch;
  cancelled_ = false;
}

absl::Status PsConnection::CancelledCall(int shard, const char* call) {
  return absl::CancelledError(absl::StrCat("parameter server shard ", shard, " ", call,
                                           ": cancelled at a change of members"));
}

absl::Status LocalPsConnection::Init(int shard, int rank, const ShardLayoutInfo& layout,
                                     const ShardState& state) {
  if (cancelled()) return CancelledCall(shard, "Init");
  ShardLayoutInfo stamped = layout;
  stamped.membership_epoch = membership_epoch();
  HPTRAIN_RETURN_IF_ERROR(stores_[shard]->Init(rank, stamped, state));
  CountSent(StateBytes(state));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LocalPsConnection::Push(int shard, const PushInfo& push,
                                                const std::vector<std::vector<uint8_t>>& tensors) {
  if (cancelled()) return CancelledCall(shard, "Push");
  PushInfo stamped = push;
  stamped.membership_epoch = membership_epoch();
  HPTRAIN_ASSIGN_OR_RETURN(int64_t version, stores_[shard]->Push(stamped, tensors));
  CountSent(PayloadBytes(tensors));
  return version;
}

absl::StatusOr<PullResult> LocalPsConnection::Pull(int shard, int rank, int64_t min_version,
                                                   int bits) {
  if (cancelled()) return CancelledCall(shard, "Pull");
  absl::StatusOr<PullResult> result = stores_[shard]->Pull(
      rank, min_version, bits, timeout_, membership_epoch(), cancelled_flag());
  if (!result.ok()) {
    if (cancelled()) return CancelledCall(shard, "Pull");
    return result.status();
  }
  CountReceived(PayloadBytes(result->tensors));
  return result;
}

absl::StatusOr<ShardState> LocalPsConnection::GetState(int shard, int64_t version) {
  if (cancelled()) return CancelledCall(shard, "GetState");
  absl::StatusOr<ShardState> state =
      stores_[shard]->GetState(version, timeout_, cancelled_flag());
  if (!state.ok()) {
    if (cancelled()) return CancelledCall(shard, "GetState");
    return state.status();
  }
  CountReceived(StateBytes(*state));
  return state;
}

void LocalPsConnection::CancelPending() {
  set_cancelled(true);
  for (ParamStore* store : stores_) store->WakeWaiters();
}

}  // namespace hptrain::ps
