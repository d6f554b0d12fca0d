// CPU collectives over a Transport, one file per algorithm:
//   ring_allreduce.cc  RingAllReduceSum  reduce-scatter then all-gather around the ring
//   compressed_ring_allreduce.cc        the same ring with encoded chunks (ChunkCodec)
//   allgather.cc       RingAllGather     every rank ends with every rank's block
//                      RingAllGatherV    the same with a block size per rank
//   broadcast.cc       Broadcast         root's buffer to everyone (chain)
//
// Byte cost per rank (S = payload bytes, N ranks), as counted by Transport's counters:
//   all-reduce: sends and receives 2(N-1)/N · S (chunk rounding aside)
//   all-gather: sends and receives (N-1) · block
//   all-gather-v: the sizes' all-gather (8 bytes per rank per step) plus Σ_{j≠r} block_j
//   broadcast:  root sends S; every other rank receives S and all but the last forward it.
// All ranks must call the same collectives in the same order with the same sizes; `tag` separates
// concurrent traffic and is advanced by the callers (Communicator does this).
// Results are bit-identical on every rank: each chunk is summed once, in ring order, and copied.
#ifndef HPTRAIN_RUNTIME_COMM_COLLECTIVES_H_
#define HPTRAIN_RUNTIME_COMM_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/comm/chunk_codec.h"
#include "runtime/comm/transport.h"

namespace hptrain::comm {

// In-place sum of `count` floats over all ranks.
absl::Status RingAllReduceSum(Transport& transport, float* data, size_t count, uint64_t tag);

// The bytes RingAllReduceSum of `count` floats sends and receives on rank `rank` of `size`, as
// the transport counts them: the chunks of its 2(N-1) steps (0 for one rank or no elements).
void RingAllReduceBytes(size_t count, int size, int rank, int64_t* sent, int64_t* received);

// `recv` (size() * block_bytes) receives every rank's `block_bytes` of `send`, in rank order.
absl::Status RingAllGather(Transport& transport, const void* send, void* recv, size_t block_bytes,
                           uint64_t tag);

// Every rank contributes `send_bytes` (which may differ between ranks); on return blocks[j]
// holds rank j's bytes. Sizes are exchanged first, so receivers never guess a length.
absl::Status RingAllGatherV(Transport& transport, const void* send, size_t send_bytes,
                            std::vector<std::string>* blocks, uint64_t tag);

// In-place sum like RingAllReduceSum, with every chunk encoded by `codec` on the wire (see
// compressed_ring_allreduce.cc for the protocol and its byte cost).
absl::Status CompressedRingAllReduceSum(Transport& transport, float* data, size_t count,
                                        ChunkCodec& codec, uint64_t tag);

// Copies `bytes` of `data` on `root` into `data` on every rank.
absl::Status Broadcast(Transport& transport, void* data, size_t bytes, int root, uint64_t tag);

// Position `x` on a ring of `n` ranks: x mod n in [0, n), also for negative x (r - s).
inline int RingIndex(int x, int n) { return (x % n + n) % n; }

// The [begin, end) element range of chunk `index` when `count` elements are split into `parts`
// nearly equal chunks (the first count % parts chunks get one more element).
void ChunkRange(size_t count, int parts, int index, size_t* begin, size_t* end);

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_COLLECTIVES_H_
