// DeviceSparseReducer: the gradient exchange of the sparsifying strategies (topk, dgc) on a GPU
// bucket, over the job's device communicator (NCCL), with no copy to the host. Each step is the
// CPU route's (topk.cc, dgc.cc, small_tensors.h, sparse_allgather.h) with the CUDA twins of the
// kernels, so the selections, the wire blocks and the byte counts are the same:
//
//   1. dgc with clipNorm: local clipping of the bucket (ClipToNormCuda).
//   2. The bucket's small tensors (< 4096 elements) and large ones are split apart (DeviceSplit).
//   3. Large tensors, topk: x += r (error feedback), the exact top-k of |x| (TopKExactCuda),
//      r = x except where sent. dgc: u = m·u + g, v = v + u, DGC's sampled threshold on v
//      (DgcSelectCuda, PackSelectionCuda), then u and v cleared where sent (masking).
//   4. The (index, value) pairs are written as one SPARSE block (docs/wire_format.md: the 32-byte
//      header, int32 indices, float32 values) in device memory; every rank's block size goes
//      round in an all-gather of 8 bytes, the blocks in the ring all-gather-v of
//      Communicator::AllGatherVInto; each arriving header is checked against the size it came
//      with and the indices against the buffer (ScatterAddCheckedCuda) before the pairs are added
//      into the zeroed large tensors, rank after rank, so every rank ends bit-identical.
//   5. Small tensors: dgc first runs their plain momentum (u = m·u + g, u is sent); then the
//      4-bit compressed ring with error feedback (DeviceQuantizeCodec over NCCL).
//   6. At density ≥ 0.5 (the dense end of a warm-up, density 1.0) the residual or v is folded
//      into the large tensors, the small tensors' residual into them, and the whole bucket is
//      all-reduced in fp32: exactly ssgd.
// The SPARSE_COMPACT encoding (sparseEncoding: compact) has no device route: such a job stages
// through host memory over Gloo (job::ExchangesOnDevice).
//
// Host waits per bucket: the selection's count (DgcSelectCuda, TopKExactCuda), the block sizes,
// the headers, each block's index check, and the end of the bucket. State (r; u and v; the small
// tensors' momentum and codec residual) lives in device memory on the current device.
//
// In a build without CUDA (sparse_device_none.cc) Create returns Unimplemented.
#ifndef HPTRAIN_RUNTIME_SYNC_DEVICE_SPARSE_DEVICE_H_
#define HPTRAIN_RUNTIME_SYNC_DEVICE_SPARSE_DEVICE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/comm/communicator.h"
#include "runtime/sync/strategy.h"

namespace hptrain::sync {

class DeviceSparseReducer {
 public:
  struct Options {
    bool dgc = false;            // false: topk
    bool error_feedback = true;  // topk: keep what was not sent (dgc always keeps v)
    float momentum = 0.0f;       // dgc: m
    bool masking = true;         // dgc: clear u where sent
    double clip_norm = 0.0;      // dgc: the global bound T of local clipping, 0 off
    uint64_t seed = 0;           // the job's seed (sampling, stochastic rounding)
  };

  // `comm` is the device communicator (its device_stream() orders every kernel); it must outlive
  // the reducer.
  static absl::StatusOr<std::unique_ptr<DeviceSparseReducer>> Create(const GradientLayout& layout,
                                                                     comm::Communicator* comm,
                                                                     const Options& options);
  virtual ~DeviceSparseReducer() = default;

  // One bucket of summed gradients in device memory, at `density`; on return the bucket holds
  // the sum over the workers of what they sent, as the CPU route leaves it. Adds the bucket's
  // fp32 and wire bytes to `tally`.
  virtual absl::Status Reduce(const StepInfo& step, int bucket, absl::Span<float> gradients,
                              double density, CompressionTally* tally) = 0;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_DEVICE_SPARSE_DEVICE_H_
