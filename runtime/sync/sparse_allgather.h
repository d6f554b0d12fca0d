// SparseAllGather: the collective of the sparsifying strategies (topk, dgc). Every worker
// contributes (index, value) pairs of one buffer; each worker receives everyone's pairs
// (all-gather-v) and adds them into a dense buffer in rank order, so all workers end
// bit-identical. Blocks travel in the SPARSE encoding of docs/wire_format.md and are validated on
// arrival (indices ascending and in range, sizes consistent) before anything is added.
//
// Bytes per worker: the 8-byte size of every block over N-1 ring steps, plus
// Σ_{j ≠ right neighbour} (32 + 8·k_j) forwarded, i.e. about (N-1)·8k for k pairs per worker.
#ifndef HPTRAIN_RUNTIME_SYNC_SPARSE_ALLGATHER_H_
#define HPTRAIN_RUNTIME_SYNC_SPARSE_ALLGATHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/communicator.h"

namespace hptrain::sync {

// `indices` ascending in [0, n). On return `dense` (n floats) holds Σ over workers of their
// pairs; `wire_bytes` (optional) receives the size of this worker's encoded block.
absl::Status SparseAllGatherSum(comm::Communicator& comm, const std::vector<int32_t>& indices,
                                const std::vector<float>& values, int64_t n, float* dense,
                                size_t* wire_bytes = nullptr);

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_SPARSE_ALLGATHER_H_
