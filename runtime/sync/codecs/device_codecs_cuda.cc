// device_codecs.h on a CUDA build: the kernels of kernels/quantize and kernels/cast, enqueued on
// the collective's stream.
#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cast/cast.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/comm/nccl/cuda_check.h"
#include "runtime/sync/codecs/device_codecs.h"
#include "runtime/sync/codecs/quantize_codec.h"

namespace hptrain::sync {
namespace {

// `count` zeroed floats of device memory, or null for count 0.
absl::StatusOr<float*> ZeroedDeviceFloats(size_t count) {
  float* p = nullptr;
  if (count == 0) return p;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(float)));
  if (cudaError_t err = cudaMemset(p, 0, count * sizeof(float)); err != cudaSuccess) {
    cudaFree(p);
    return HPTRAIN_CUDA_STATUS(err, "cudaMemset");
  }
  return p;
}

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

absl::Status CheckChunkBytes(const char* what, size_t bytes, size_t expected, size_t count) {
  if (bytes == expected) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, " chunk of ", count, " elements must be ",
                                          expected, " bytes, got ", bytes));
}

// x += residual; residual = 0, for a residual of `size` floats (null: no error feedback).
absl::Status FoldInto(const char* what, float* residual, size_t size, float* x, size_t count,
                      void* stream) {
  if (residual == nullptr) return absl::OkStatus();
  if (count != size) {
    return absl::InternalError(absl::StrCat(what, ": folding ", count, " elements into a residual of ",
                                            size));
  }
  kernels::AddAndClearCuda(residual, x, count, stream);
  return absl::OkStatus();
}

absl::Status CheckResidualRange(const char* what, size_t offset, size_t count, size_t size) {
  if (offset + count <= size) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": chunk outside the error-feedback buffer"));
}

}  // namespace

// --- DeviceQuantizeCodec ------------------------------------------------------------------------

DeviceQuantizeCodec::DeviceQuantizeCodec(int bits, int64_t bucket_size, uint64_t seed, int rank)
    : seed_(seed), rank_(rank) {
  params_.bits = bits;
  params_.bucket_size = bucket_size;
  params_.scale = kernels::QuantizeParams::kMinMax;
  params_.rounding = kernels::QuantizeParams::kStochastic;
}

absl::StatusOr<std::unique_ptr<DeviceQuantizeCodec>> DeviceQuantizeCodec::Create(
    int bits, int64_t bucket_size, size_t residual_size, uint64_t seed, int rank) {
  std::unique_ptr<DeviceQuantizeCodec> codec(
      new DeviceQuantizeCodec(bits, bucket_size, seed, rank));
  HPTRAIN_RETURN_IF_ERROR(kernels::ValidateQuantizeParams(codec->params_));
  HPTRAIN_ASSIGN_OR_RETURN(codec->residual_, ZeroedDeviceFloats(residual_size));
  codec->residual_size_ = residual_size;
  return codec;
}

DeviceQuantizeCodec::~DeviceQuantizeCodec() {
  if (residual_ != nullptr) cudaFree(residual_);
  if (flags_ != nullptr) cudaFree(flags_);
}

absl::Status DeviceQuantizeCodec::set_bits(int bits) {
  kernels::QuantizeParams p = params_;
  p.bits = bits;
  HPTRAIN_RETURN_IF_ERROR(kernels::ValidateQuantizeParams(p));
  params_ = p;
  return absl::OkStatus();
}

absl::Status DeviceQuantizeCodec::FoldResidualInto(float* x, size_t count, void* stream) {
  return FoldInto("device quantize codec", residual_, residual_size_, x, count, stream);
}

size_t DeviceQuantizeCodec::EncodedBytes(size_t count) const {
  return QuantizedChunkBytes(count, params_);
}

absl::Status DeviceQuantizeCodec::BeginDevice(void* stream, int encodes) {
  stream_ = stream;
  flags_used_ = 0;
  if (encodes <= flag_capacity_) return absl::OkStatus();
  // No work of this codec is in flight between collectives: the old flags can go at once.
  if (flags_ != nullptr) cudaFree(flags_);
  flags_ = nullptr;
  flag_capacity_ = 0;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&flags_, sizeof(int) * encodes));
  flag_capacity_ = encodes;
  return absl::OkStatus();
}

absl::Status DeviceQuantizeCodec::Encode(const float* data, size_t count, size_t offset,
                                         uint64_t salt, uint8_t* out) {
  if (flags_used_ >= flag_capacity_) {
    return absl::InternalError("device quantize codec: more encodes than BeginDevice announced");
  }
  const kernels::QuantizeParams p = QuantizedChunkParams(params_, seed_, rank_, salt, step_);
  const int64_t n = static_cast<int64_t>(count);
  float* meta = reinterpret_cast<float*>(out);
  uint8_t* codes = out + QuantizedChunkMetaBytes(count, p);
  int* flag = flags_ + flags_used_++;
  if (residual_ == nullptr) {
    return kernels::QuantizeCudaAsync(data, n, p, meta, codes, flag, stream_);
  }
  HPTRAIN_RETURN_IF_ERROR(CheckResidualRange("device quantize codec", offset, count,
                                             residual_size_));
  return kernels::QuantizeWithErrorFeedbackCudaAsync(data, residual_ + offset, n, p, meta, codes,
                                                     flag, stream_);
}

absl::Status DeviceQuantizeCodec::Decode(const uint8_t* in, size_t bytes, size_t count,
                                         float* out) {
  HPTRAIN_RETURN_IF_ERROR(CheckChunkBytes("quantized", bytes, EncodedBytes(count), count));
  kernels::DequantizeCuda(reinterpret_cast<const float*>(in),
                          in + QuantizedChunkMetaBytes(count, params_),
                          static_cast<int64_t>(count), params_, out, stream_);
  return absl::OkStatus();
}

absl::Status DeviceQuantizeCodec::DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                                   float* acc) {
  HPTRAIN_RETURN_IF_ERROR(CheckChunkBytes("quantized", bytes, EncodedBytes(count), count));
  kernels::DequantizeAccumulateCuda(reinterpret_cast<const float*>(in),
                                    in + QuantizedChunkMetaBytes(count, params_),
                                    static_cast<int64_t>(count), params_, acc, stream_);
  return absl::OkStatus();
}

absl::Status DeviceQuantizeCodec::FinishDevice() {
  if (flags_used_ == 0) return absl::OkStatus();
  std::vector<int> flags(flags_used_);
  HPTRAIN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(flags.data(), flags_, sizeof(int) * flags_used_, cudaMemcpyDeviceToHost));
  for (int f : flags) {
    if (f != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "quantized encoding at ", params_.bits, " bits on the GPU: ",
          (f & 1) ? "a gradient element is not finite (NaN or Inf)"
                  : "a bucket's range overflows float"));
    }
  }
  return absl::OkStatus();
}

// --- DeviceHalfCodec ----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<DeviceHalfCodec>> DeviceHalfCodec::Create(size_t residual_size) {
  std::unique_ptr<DeviceHalfCodec> codec(new DeviceHalfCodec());
  HPTRAIN_ASSIGN_OR_RETURN(codec->residual_, ZeroedDeviceFloats(residual_size));
  codec->residual_size_ = residual_size;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&codec->flag_, sizeof(int)));
  return codec;
}

DeviceHalfCodec::~DeviceHalfCodec() {
  if (residual_ != nullptr) cudaFree(residual_);
  if (flag_ != nullptr) cudaFree(flag_);
}

absl::Status DeviceHalfCodec::FoldResidualInto(float* x, size_t count, void* stream) {
  return FoldInto("device half codec", residual_, residual_size_, x, count, stream);
}

absl::Status DeviceHalfCodec::BeginDevice(void* stream, int) {
  stream_ = stream;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flag_, 0, sizeof(int), AsStream(stream)));
  return absl::OkStatus();
}

absl::Status DeviceHalfCodec::Encode(const float* data, size_t count, size_t offset, uint64_t,
                                     uint8_t* out) {
  float* residual = nullptr;
  if (residual_ != nullptr) {
    HPTRAIN_RETURN_IF_ERROR(CheckResidualRange("device half codec", offset, count,
                                               residual_size_));
    residual = residual_ + offset;
  }
  kernels::FloatToHalfWithErrorFeedbackCuda(data, residual, static_cast<int64_t>(count),
                                            reinterpret_cast<uint16_t*>(out), flag_, stream_);
  return absl::OkStatus();
}

absl::Status DeviceHalfCodec::Decode(const uint8_t* in, size_t bytes, size_t count, float* out) {
  HPTRAIN_RETURN_IF_ERROR(CheckChunkBytes("fp16", bytes, EncodedBytes(count), count));
  kernels::HalfToFloatCuda(reinterpret_cast<const uint16_t*>(in), static_cast<int64_t>(count),
                           out, stream_);
  return absl::OkStatus();
}

absl::Status DeviceHalfCodec::DecodeAccumulate(const uint8_t* in, size_t bytes, size_t count,
                                               float* acc) {
  HPTRAIN_RETURN_IF_ERROR(CheckChunkBytes("fp16", bytes, EncodedBytes(count), count));
  kernels::HalfAccumulateCuda(reinterpret_cast<const uint16_t*>(in), static_cast<int64_t>(count),
                              acc, stream_);
  return absl::OkStatus();
}

absl::Status DeviceHalfCodec::FinishDevice() {
  int flag = 0;
  HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpy(&flag, flag_, sizeof(int), cudaMemcpyDeviceToHost));
  if (flag != 0) {
    return absl::InvalidArgumentError("fp16 encoding on the GPU: a gradient element is not finite");
  }
  return absl::OkStatus();
}

}  // namespace hptrain::sync
