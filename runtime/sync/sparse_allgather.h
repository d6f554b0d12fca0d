// SparseAllGather: the collective of the sparsifying strategies (topk, dgc). Every worker
// contributes (index, value) pairs of one buffer; each worker receives everyone's pairs
// (all-gather-v) and adds them into a dense buffer in rank order, so all workers end
// bit-identical. Blocks travel in one of two encodings of docs/wire_format.md and are validated
// on arrival (indices ascending and in range, sizes consistent) before anything is added:
//
//   kPairs    SPARSE: int32 index + float32 value, 8 bytes per pair (DGC's format)
//   kCompact  SPARSE_COMPACT: 16-bit offset within a block of 65536 elements + fp16 value,
//             4 bytes per pair, plus 4 bytes per block of the buffer
//
// Bytes per worker: the 8-byte size of every block over N-1 ring steps, plus
// Σ_{j ≠ right neighbour} (32 + 8·k_j) forwarded (kCompact: 32 + 4·ceil(n / 65536) + 4·k_j),
// i.e. about (N-1)·8k (kCompact (N-1)·4k) for k pairs per worker.
#ifndef HPTRAIN_RUNTIME_SYNC_SPARSE_ALLGATHER_H_
#define HPTRAIN_RUNTIME_SYNC_SPARSE_ALLGATHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/job/job_spec.h"
#include "runtime/sync/strategy_options.h"

namespace hptrain::sync {

enum class SparseWire { kPairs, kCompact };

// spec.strategy.sparseEncoding, which validation has checked: "compact" is kCompact, "pairs" (the
// default) kPairs.
SparseWire SparseWireOf(const StrategyOptions& options);

// Rounds `values` in place to what `wire` carries and sets rests[j] to what the rounding took off
// values[j] (before − after), for the caller to keep in its residual: kPairs leaves the values and
// every rest is 0; kCompact rounds each value to the nearest fp16, finite values clamped to ±65504
// first so that none becomes infinite. Inf and NaN stay as they are, with a rest of 0, as a sent
// value leaves nothing behind under kPairs.
void RoundForWire(SparseWire wire, std::vector<float>* values, std::vector<float>* rests);

// `indices` ascending in [0, n). On return `dense` (n floats) holds Σ over workers of their
// pairs; `wire_bytes` (optional) receives the size of this worker's encoded block. With kCompact
// the values are sent as fp16 (exact if they went through RoundForWire).
absl::Status SparseAllGatherSum(comm::Communicator& comm, SparseWire wire,
                                const std::vector<int32_t>& indices,
                                const std::vector<float>& values, int64_t n, float* dense,
                                size_t* wire_bytes = nullptr);

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_SPARSE_ALLGATHER_H_
