#include "runtime/ps/ps_connection.h"

#include "runtime/base/status.h"
#include "runtime/ps/ps_wire.h"

namespace hptrain::ps {

int64_t StateBytes(const ShardState& state) {
  int64_t total = 0;
  for (const auto& [name, values] : state.sections) total += 4 * static_cast<int64_t>(values.size());
  return total;
}

absl::Status LocalPsConnection::Init(int shard, int rank, const ShardLayoutInfo& layout,
                                     const ShardState& state) {
  HPTRAIN_RETURN_IF_ERROR(stores_[shard]->Init(rank, layout, state));
  CountSent(StateBytes(state));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LocalPsConnection::Push(int shard, const PushInfo& push,
                                                const std::vector<std::vector<uint8_t>>& tensors) {
  HPTRAIN_ASSIGN_OR_RETURN(int64_t version, stores_[shard]->Push(push, tensors));
  CountSent(PayloadBytes(tensors));
  return version;
}

absl::StatusOr<PullResult> LocalPsConnection::Pull(int shard, int rank, int64_t min_version,
                                                   int bits) {
  HPTRAIN_ASSIGN_OR_RETURN(PullResult result,
                           stores_[shard]->Pull(rank, min_version, bits, timeout_));
  CountReceived(PayloadBytes(result.tensors));
  return result;
}

absl::StatusOr<ShardState> LocalPsConnection::GetState(int shard, int64_t version) {
  HPTRAIN_ASSIGN_OR_RETURN(ShardState state, stores_[shard]->GetState(version, timeout_));
  CountReceived(StateBytes(state));
  return state;
}

}  // namespace hptrain::ps
