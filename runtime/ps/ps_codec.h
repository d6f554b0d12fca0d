// How tensors are encoded between workers and the parameter server (docs/algorithms.md §5b (3)):
//   push: a worker's summed gradient, per model tensor: DENSE_F32 at 32 bits, F16 at 16 bits, or
//         QUANTIZED at 2, 4, 8 bits with one bucket per tensor (lo = min, Δ = (max − min)/(2^b − 1),
//         8 bytes) and stochastic rounding; error feedback keeps what rounding took off for the
//         next push.
//   pull: the PS's parameters (DENSE_F32) or, at fewer bits, Q(w − w̃) for the PS's mirror w̃ of the
//         worker's copy, rounded to nearest; both sides then add the decoded delta with the same
//         kernel (AccumulateDecoded), so the worker's copy and the mirror stay bit-identical.
// Tensors under kMinQuantizedElements elements always travel as DENSE_F32 (pushed gradients and
// pulled parameters): their scale would cost more than it saves and they are the sensitive ones
// (biases, normalisation).
// Bytes (the payload of each encoded tensor, what the counters count): 4n dense, 2n F16,
// 8 + ceil(n·b/8) quantized.
#ifndef HPTRAIN_RUNTIME_PS_PS_CODEC_H_
#define HPTRAIN_RUNTIME_PS_PS_CODEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/encoded_tensor.h"

namespace hptrain::ps {

inline constexpr int64_t kMinQuantizedElements = 1024;

// True for 2, 4, 8, 16, 32.
bool ValidPsBits(int bits);

// The bits a tensor of n elements travels at when the worker asks for `bits`.
inline int EffectiveBits(int bits, int64_t n) { return n < kMinQuantizedElements ? 32 : bits; }

// Payload bytes of one tensor of n elements at `bits` (after EffectiveBits).
int64_t PsPayloadBytes(int64_t n, int bits);

// Encodes a gradient of n elements at EffectiveBits(bits, n). With a residual (n floats, or
// nullptr for none) the residual is added first and left holding what rounding took off
// (error feedback). `seed` and `step` select the stochastic-rounding stream.
absl::StatusOr<std::vector<uint8_t>> EncodeGradient(const float* gradient, float* residual,
                                                    int64_t n, int bits, uint64_t seed,
                                                    uint64_t step);

// Encodes n values as DENSE_F32 (MP²'s pushed and fresh parameter values).
absl::StatusOr<std::vector<uint8_t>> EncodeValues(const float* values, int64_t n);

// Encodes what the worker must do to its copy of a tensor of n elements: at EffectiveBits 32 the
// parameters `w` (and mirror := w), otherwise the rounded delta w − mirror, after which mirror +=
// the decoded delta (ApplyPulled's arithmetic).
absl::StatusOr<std::vector<uint8_t>> EncodeForPull(const float* w, float* mirror, int64_t n,
                                                   int bits);

// out[0, n) = the decoded values (dense, F16 or QUANTIZED).
void DecodeInto(const comm::EncodedView& view, float* out);

// What a pulled tensor does to the worker's copy: DENSE_F32 replaces it, F16 and QUANTIZED
// deltas are added. Returns false for other encodings (the caller rejects them first).
bool ApplyPulled(const comm::EncodedView& view, float* copy);

// Validates bytes as an encoded tensor of n elements in one of the PS encodings (DENSE_F32, F16,
// QUANTIZED with one bucket). Errors: DataLoss naming `what`.
absl::StatusOr<comm::EncodedView> DecodePsTensor(const std::vector<uint8_t>& bytes, int64_t n,
                                                 const char* what);

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PS_CODEC_H_
