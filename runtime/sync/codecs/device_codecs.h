// Device twins of QuantizeCodec and HalfCodec, for the compressed ring on the NCCL back end
// (NcclCommunicator::AllReduceSumCompressed): the same encodings on device buffers, byte for
// byte, since the CUDA kernels of kernels/quantize and kernels/cast are the CPU kernels' twins.
//
// Encode and decode enqueue their kernels on the stream the collective passes to BeginDevice and
// return before the work has run (chunk_codec.h); the error-feedback residual lives in device
// memory on the device current when the codec is created. A non-finite gradient (or a bucket
// whose range overflows) is reported by FinishDevice as InvalidArgument, after the collective.
//
// In a build without the CUDA kernels (device_codecs_none.cc) Create returns Unimplemented.
#ifndef HPTRAIN_RUNTIME_SYNC_CODECS_DEVICE_CODECS_H_
#define HPTRAIN_RUNTIME_SYNC_CODECS_DEVICE_CODECS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/quantize/quantize.h"
#include "runtime/comm/chunk_codec.h"

namespace hptrain::sync {

// QuantizeCodec's twin: bits in {1, 2, 4, 8}, stochastic rounding keyed like QuantizeCodec's.
class DeviceQuantizeCodec : public comm::ChunkCodec {
 public:
  // `residual_size` > 0 enables error feedback over that many elements (device memory, zeroed).
  static absl::StatusOr<std::unique_ptr<DeviceQuantizeCodec>> Create(int bits, int64_t bucket_size,
                                                                     size_t residual_size,
                                                                     uint64_t seed, int rank);
  ~DeviceQuantizeCodec() override;
  DeviceQuantizeCodec(const DeviceQuantizeCodec&) = delete;
  DeviceQuantizeCodec& operator=(const DeviceQuantizeCodec&) = delete;

  void set_step(int64_t step) { step_ = step; }
  // Another bit width in {1, 2, 4, 8} for the next collectives (quantized with bits dynamic);
  // InvalidArgument otherwise. The residual carries over.
  absl::Status set_bits(int bits);
  int bits() const { return params_.bits; }
  // Error feedback owed back, on `stream`: x += residual, then the residual is zeroed
  // (asynchronous). Nothing without error feedback; `count` must be the residual's size.
  absl::Status FoldResidualInto(float* x, size_t count, void* stream);

  size_t EncodedBytes(size_t count) const override;
  absl::Status Encode(const float* data, size_t count, size_t offset, uint64_t salt,
                      uint8_t* out) override;
  absl::Status Decode(const uint8_t* in, size_t bytes, size_t count, float* out) override;
  absl::Status DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                float* acc) override;
  bool on_device() const override { return true; }
  absl::Status BeginDevice(void* stream, int encodes) override;
  absl::Status FinishDevice() override;

 private:
  DeviceQuantizeCodec(int bits, int64_t bucket_size, uint64_t seed, int rank);

  kernels::QuantizeParams params_;
  uint64_t seed_;
  int rank_;
  int64_t step_ = 0;
  float* residual_ = nullptr;  // device, residual_size_ floats (null: no error feedback)
  size_t residual_size_ = 0;
  int* flags_ = nullptr;  // device: one error flag per Encode of the current collective
  int flag_capacity_ = 0;
  int flags_used_ = 0;
  void* stream_ = nullptr;
};

// HalfCodec's twin: fp16 on the wire, with optional error feedback.
class DeviceHalfCodec : public comm::ChunkCodec {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceHalfCodec>> Create(size_t residual_size);
  ~DeviceHalfCodec() override;
  DeviceHalfCodec(const DeviceHalfCodec&) = delete;
  DeviceHalfCodec& operator=(const DeviceHalfCodec&) = delete;

  // As DeviceQuantizeCodec::FoldResidualInto.
  absl::Status FoldResidualInto(float* x, size_t count, void* stream);

  size_t EncodedBytes(size_t count) const override { return 2 * count; }
  absl::Status Encode(const float* data, size_t count, size_t offset, uint64_t salt,
                      uint8_t* out) override;
  absl::Status Decode(const uint8_t* in, size_t bytes, size_t count, float* out) override;
  absl::Status DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                float* acc) override;
  bool on_device() const override { return true; }
  absl::Status BeginDevice(void* stream, int encodes) override;
  absl::Status FinishDevice() override;

 private:
  DeviceHalfCodec() = default;

  float* residual_ = nullptr;  // device (null: no error feedback)
  size_t residual_size_ = 0;
  int* flag_ = nullptr;        // device: set by any Encode of the collective that saw a non-finite
  void* stream_ = nullptr;
};

}  // namespace hptrain::sync

#endif  // HPTRAIN_RUNTIME_SYNC_CODECS_DEVICE_CODECS_H_
