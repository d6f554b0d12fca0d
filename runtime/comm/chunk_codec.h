// ChunkCodec: how a compressed collective turns a run of floats into bytes on the wire and back.
//
// A codec is stateful per worker: it may keep an error-feedback residual for every element of the
// buffer it serves, addressed by the element offset the collective passes in. Encoded sizes
// depend only on the element count (EncodedBytes), so a receiver always knows how many bytes to
// expect; variable-size encodings (sparse) use all-gather-v instead.
//
// Device codecs (on_device() true) take device pointers and enqueue their kernels on a stream
// instead of running them: a collective on device buffers (NcclCommunicator) calls
// BeginDevice(stream, encodes) before the first Encode (at most `encodes` Encode calls follow),
// then Encode/Decode in stream order, and FinishDevice() once the stream has drained, which
// reports what Encode could not (a non-finite value). Host codecs ignore both calls.
//
// Thread-safety: one collective at a time uses a codec.
#ifndef HPTRAIN_RUNTIME_COMM_CHUNK_CODEC_H_
#define HPTRAIN_RUNTIME_COMM_CHUNK_CODEC_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace hptrain::comm {

class ChunkCodec {
 public:
  virtual ~ChunkCodec() = default;

  // Bytes Encode writes for `count` elements.
  virtual size_t EncodedBytes(size_t count) const = 0;

  // Encodes `count` floats of `data`, which are elements [offset, offset + count) of the
  // collective's buffer; `salt` distinguishes the encodings of one element within one collective
  // (the ring step), so stochastic rounding draws fresh random numbers at every hop.
  // InvalidArgument on values the codec cannot represent faithfully (NaN, Inf).
  virtual absl::Status Encode(const float* data, size_t count, size_t offset, uint64_t salt,
                              uint8_t* out) = 0;

  // out = decode(in); acc += decode(in). `bytes` must equal EncodedBytes(count).
  virtual absl::Status Decode(const uint8_t* in, size_t bytes, size_t count, float* out) = 0;
  virtual absl::Status DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                        float* acc) = 0;

  // See the top of this file. `stream` is a cudaStream_t.
  virtual bool on_device() const { return false; }
  virtual absl::Status BeginDevice(void* /*stream*/, int /*encodes*/) { return absl::OkStatus(); }
  virtual absl::Status FinishDevice() { return absl::OkStatus(); }
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_CHUNK_CODEC_H_
