// sparse_device.h on a CUDA build: the kernels of kernels/topk and kernels/update on the device
// communicator's stream.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/topk/dgc.h"
#include "kernels/topk/topk.h"
#include "kernels/update/update.h"
#include "runtime/base/status.h"
#include "runtime/comm/encoded_tensor.h"
#include "runtime/comm/nccl/cuda_check.h"
#include "runtime/sync/codecs/device_codecs.h"
#include "runtime/sync/density_schedule.h"
#include "runtime/sync/device/device_split.h"
#include "runtime/sync/device/sparse_device.h"
#include "runtime/sync/small_tensors.h"
#include "runtime/sync/tensor_split.h"

namespace hptrain::sync {
namespace {

constexpr size_t kPairBytes = 8;  // SPARSE: int32 index + float32 value

// Device memory that frees itself; Reserve grows it (old contents lost), Zeroed allocates it.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMalloc(&data_, bytes));
    bytes_ = bytes;
    return absl::OkStatus();
  }
  absl::Status Zeroed(size_t bytes) {
    if (bytes == 0) return absl::OkStatus();
    HPTRAIN_RETURN_IF_ERROR(Reserve(bytes));
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemset(data_, 0, bytes));
    return absl::OkStatus();
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  uint8_t* bytes() const { return static_cast<uint8_t*>(data_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// The 32-byte header of a SPARSE block of `count` pairs over `n` elements, into out[0, 32).
absl::Status SparseHeader(int64_t n, int64_t count, uint8_t* out) {
  comm::EncodedHeaderFields fields;
  fields.encoding = comm::Encoding::kSparse;
  fields.num_elements = n;
  fields.sparse_count = count;
  return comm::WriteHeaderBytes(fields, out);
}

class CudaSparseReducer : public DeviceSparseReducer {
 public:
  CudaSparseReducer(comm::Communicator* comm, const Options& options)
      : comm_(comm), options_(options), stream_(comm->device_stream()) {}

  absl::Status Init(const GradientLayout& layout) {
    if (stream_ == nullptr) {
      return absl::InvalidArgumentError(
          "sparse exchange on the GPU needs a device communicator (nccl)");
    }
    HPTRAIN_ASSIGN_OR_RETURN(split_, DeviceSplit::Create(layout, kSmallTensorElements));
    const size_t buckets = layout.buckets.size();
    for (const auto& b : layout.buckets) model_elements_ += b.end - b.begin;
    r_.resize(buckets);
    u_.resize(buckets);
    v_.resize(buckets);
    small_u_.resize(buckets);
    codecs_.resize(buckets);
    const bool small_feedback = options_.dgc || options_.error_feedback;
    size_t max_small = 0, max_large = 0;
    for (size_t k = 0; k < buckets; ++k) {
      const int b = static_cast<int>(k);
      const size_t large = split_->large_count(b), small = split_->small_count(b);
      max_small = std::max(max_small, small);
      max_large = std::max(max_large, large);
      if (options_.dgc) {
        HPTRAIN_RETURN_IF_ERROR(u_[k].Zeroed(large * sizeof(float)));
        HPTRAIN_RETURN_IF_ERROR(v_[k].Zeroed(large * sizeof(float)));
        HPTRAIN_RETURN_IF_ERROR(small_u_[k].Zeroed(small * sizeof(float)));
      } else if (options_.error_feedback) {
        HPTRAIN_RETURN_IF_ERROR(r_[k].Zeroed(large * sizeof(float)));
      }
      if (small > 0) {
        // As SmallTensorExchange::Init: 4 bits, buckets of 512, seed + bucket.
        HPTRAIN_ASSIGN_OR_RETURN(codecs_[k],
                                 DeviceQuantizeCodec::Create(kSmallTensorBits, 512,
                                                             small_feedback ? small : 0,
                                                             options_.seed + k, comm_->rank()));
      }
    }
    if (options_.dgc) HPTRAIN_RETURN_IF_ERROR(scratch_.Zeroed(max_small * sizeof(float)));
    HPTRAIN_RETURN_IF_ERROR(
        block_.Reserve(comm::kEncodedHeaderBytes + kPairBytes * std::max<size_t>(max_large, 1)));
    HPTRAIN_RETURN_IF_ERROR(sizes_.Reserve(sizeof(uint64_t) * comm_->size()));
    return absl::OkStatus();
  }

  absl::Status Reduce(const StepInfo& step, int bucket, absl::Span<float> gradients,
                      double density, CompressionTally* tally) override {
    const size_t n = gradients.size();
    if (options_.dgc) HPTRAIN_RETURN_IF_ERROR(Clip(step, gradients));
    HPTRAIN_RETURN_IF_ERROR(split_->Split(bucket, gradients.data(), stream_));
    const size_t large = split_->large_count(bucket);
    const size_t small = split_->small_count(bucket);
    float* x = split_->large();
    float* s = split_->small();
    if (options_.dgc && small > 0) {
      // Small tensors: u = m·u + g (the scratch plays v, zeroed), and u is what gets summed.
      HPTRAIN_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(scratch_.as<float>(), 0, small * sizeof(float), stream()));
      kernels::DgcMomentumCorrectionCuda(s, static_cast<int64_t>(small), options_.momentum,
                                         small_u_[bucket].as<float>(), scratch_.as<float>(),
                                         stream_);
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s, small_u_[bucket].as<float>(),
                                                   small * sizeof(float),
                                                   cudaMemcpyDeviceToDevice, stream()));
    }
    float* u = u_[bucket].as<float>();
    float* v = v_[bucket].as<float>();
    float* r = r_[bucket].as<float>();  // null without error feedback (and for dgc)
    if (options_.dgc && large > 0) {
      kernels::DgcMomentumCorrectionCuda(x, static_cast<int64_t>(large), options_.momentum, u, v,
                                         stream_);
    }
    if (density >= kDenseAboveDensity) return FinishDense(bucket, gradients, tally);

    size_t wire = 0;
    if (large > 0) {
      HPTRAIN_RETURN_IF_ERROR(SendLarge(step, bucket, density, x, r, u, v, &wire));
    }
    size_t small_wire = 0;
    if (small > 0) {
      DeviceQuantizeCodec& codec = *codecs_[bucket];
      codec.set_step(step.step);
      HPTRAIN_RETURN_IF_ERROR(comm_->AllReduceSumCompressed(s, small, codec), "small tensors at ",
                              kSmallTensorBits, " bits");
      small_wire = codec.EncodedBytes(small);
    }
    HPTRAIN_RETURN_IF_ERROR(split_->Join(bucket, gradients.data(), stream_));
    tally->Add(4.0 * n, static_cast<double>(wire + small_wire));
    return absl::OkStatus();
  }

 private:
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_); }

  // dgc.cc's Clip, with the norm taken on the device.
  absl::Status Clip(const StepInfo& step, absl::Span<float> gradients) {
    const double bound = options_.clip_norm;
    if (bound <= 0 || step.local_batch <= 0 || gradients.empty() || model_elements_ == 0) {
      return absl::OkStatus();
    }
    const double share = std::sqrt(static_cast<double>(gradients.size()) / model_elements_);
    const double max_norm = step.local_batch *
                            kernels::DgcLocalClipNorm(static_cast<float>(bound), comm_->size()) *
                            share;
    return kernels::ClipToNormCuda(gradients.data(), static_cast<int64_t>(gradients.size()),
                                   static_cast<float>(max_norm), nullptr, stream_);
  }

  // Density ≥ 0.5: everything owed folded in, then ssgd's fp32 all-reduce of the bucket.
  absl::Status FinishDense(int bucket, absl::Span<float> gradients, CompressionTally* tally) {
    const size_t large = split_->large_count(bucket);
    const size_t small = split_->small_count(bucket);
    float* x = split_->large();
    if (options_.dgc) {
      if (large > 0) {
        HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x, v_[bucket].as<float>(),
                                                     large * sizeof(float),
                                                     cudaMemcpyDeviceToDevice, stream()));
        if (options_.masking) {
          HPTRAIN_CUDA_RETURN_IF_ERROR(
              cudaMemsetAsync(u_[bucket].as<float>(), 0, large * sizeof(float), stream()));
        }
        HPTRAIN_CUDA_RETURN_IF_ERROR(
            cudaMemsetAsync(v_[bucket].as<float>(), 0, large * sizeof(float), stream()));
      }
    } else if (options_.error_feedback && large > 0) {
      kernels::AddAndClearCuda(r_[bucket].as<float>(), x, large, stream_);
    }
    if (small > 0) {
      HPTRAIN_RETURN_IF_ERROR(codecs_[bucket]->FoldResidualInto(split_->small(), small, stream_));
    }
    HPTRAIN_RETURN_IF_ERROR(split_->Join(bucket, gradients.data(), stream_));
    tally->Add(4.0 * gradients.size(), 4.0 * gradients.size());
    return comm_->AllReduceSum(gradients.data(), gradients.size());
  }

  // Steps 3 and 4 of the file comment for the large tensors x (L elements); on return x holds
  // the sum of every rank's pairs and *wire this rank's block size.
  absl::Status SendLarge(const StepInfo& step, int bucket, double density, float* x, float* r,
                         float* u, float* v, size_t* wire) {
    const int64_t n = static_cast<int64_t>(split_->large_count(bucket));
    int64_t count = 0;
    kernels::ThresholdSelection selection;
    if (options_.dgc) {
      kernels::DgcThresholdOptions threshold;
      threshold.density = density;
      absl::StatusOr<kernels::ThresholdSelection> selected =
          kernels::DgcSelectCuda(v, n, threshold, options_.seed + bucket, step.step, stream_);
      HPTRAIN_RETURN_IF_ERROR(selected.status(), "DGC threshold on the GPU");
      selection = *selected;
      count = selection.count;
    } else {
      if (r != nullptr) kernels::AddAndClearCuda(r, x, static_cast<size_t>(n), stream_);
      count = kernels::DgcTargetCount(n, density);
    }
    const size_t block_bytes = comm::kEncodedHeaderBytes + kPairBytes * count;
    HPTRAIN_RETURN_IF_ERROR(block_.Reserve(block_bytes));
    uint8_t header[comm::kEncodedHeaderBytes];
    HPTRAIN_RETURN_IF_ERROR(SparseHeader(n, count, header));
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(block_.bytes(), header, sizeof(header),
                                                 cudaMemcpyHostToDevice, stream()));
    auto* indices = reinterpret_cast<int32_t*>(block_.bytes() + comm::kEncodedHeaderBytes);
    auto* values = reinterpret_cast<float*>(block_.bytes() + comm::kEncodedHeaderBytes +
                                            sizeof(int32_t) * count);
    if (options_.dgc) {
      absl::StatusOr<int64_t> packed =
          kernels::PackSelectionCuda(v, n, selection, indices, values, count, stream_);
      HPTRAIN_RETURN_IF_ERROR(packed.status(), "DGC selection on the GPU");
      if (*packed != count) {
        return absl::InternalError(absl::StrCat("DGC on the GPU packed ", *packed,
                                                " elements, the selection counted ", count));
      }
      kernels::DgcMaskSelectedCuda(indices, count, options_.masking ? u : nullptr, v, stream_);
    } else {
      HPTRAIN_RETURN_IF_ERROR(kernels::TopKExactCuda(x, n, count, indices, values, stream_),
                              "top-k on the GPU");
      if (r != nullptr) {  // r = x where not sent, 0 where sent
        HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(r, x, sizeof(float) * n,
                                                     cudaMemcpyDeviceToDevice, stream()));
        kernels::DgcMaskSelectedCuda(indices, count, nullptr, r, stream_);
      }
    }
    *wire = block_bytes;
    HPTRAIN_RETURN_IF_ERROR(GatherSum(n, count, x), options_.dgc ? "DGC" : "top-k",
                            " exchange of ", count, " of ", n, " elements");
    return absl::OkStatus();
  }

  // Every rank's block (this one's in block_, `count` pairs) summed into x (n floats).
  absl::Status GatherSum(int64_t n, int64_t count, float* x) {
    const int ranks = comm_->size();
    const int rank = comm_->rank();
    // 1. The sizes, all-gathered on the device.
    uint64_t* sizes_device = sizes_.as<uint64_t>();
    const uint64_t mine = comm::kEncodedHeaderBytes + kPairBytes * count;
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sizes_device + rank, &mine, sizeof(mine),
                                                 cudaMemcpyHostToDevice, stream()));
    HPTRAIN_RETURN_IF_ERROR(comm_->AllGather(sizes_device + rank, sizes_device, sizeof(uint64_t)),
                            "block sizes");
    std::vector<uint64_t> sizes64(ranks);
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sizes64.data(), sizes_device,
                                                 sizeof(uint64_t) * ranks,
                                                 cudaMemcpyDeviceToHost, stream()));
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
    std::vector<size_t> sizes(ranks);
    std::vector<int64_t> counts(ranks);
    std::vector<size_t> offsets(ranks + 1, 0);
    for (int j = 0; j < ranks; ++j) {
      const uint64_t size = sizes64[j];
      if (size < comm::kEncodedHeaderBytes || (size - comm::kEncodedHeaderBytes) % kPairBytes != 0 ||
          (size - comm::kEncodedHeaderBytes) / kPairBytes > static_cast<uint64_t>(n)) {
        return absl::DataLossError(absl::StrCat("rank ", j, " announced a block of ", size,
                                                " bytes, not a SPARSE block over ", n,
                                                " elements"));
      }
      sizes[j] = static_cast<size_t>(size);
      counts[j] = static_cast<int64_t>((size - comm::kEncodedHeaderBytes) / kPairBytes);
      offsets[j + 1] = offsets[j] + sizes[j];
    }
    // 2. The blocks, back to back in rank order.
    HPTRAIN_RETURN_IF_ERROR(gathered_.Reserve(offsets[ranks]));
    HPTRAIN_RETURN_IF_ERROR(comm_->AllGatherVInto(block_.bytes(), sizes, gathered_.bytes()));
    // 3. Every header as its size says it must be.
    std::vector<uint8_t> headers(comm::kEncodedHeaderBytes * ranks);
    for (int j = 0; j < ranks; ++j) {
      HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          headers.data() + comm::kEncodedHeaderBytes * j, gathered_.bytes() + offsets[j],
          comm::kEncodedHeaderBytes, cudaMemcpyDeviceToHost, stream()));
    }
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
    for (int j = 0; j < ranks; ++j) {
      uint8_t expected[comm::kEncodedHeaderBytes];
      HPTRAIN_RETURN_IF_ERROR(SparseHeader(n, counts[j], expected));
      if (std::memcmp(expected, headers.data() + comm::kEncodedHeaderBytes * j,
                      sizeof(expected)) != 0) {
        return absl::DataLossError(absl::StrCat("rank ", j, "'s block header is not that of a "
                                                "SPARSE block of ", counts[j], " pairs over ", n,
                                                " elements"));
      }
    }
    // 4. The sum, rank after rank (indices checked first).
    HPTRAIN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x, 0, sizeof(float) * n, stream()));
    for (int j = 0; j < ranks; ++j) {
      const uint8_t* block = gathered_.bytes() + offsets[j] + comm::kEncodedHeaderBytes;
      HPTRAIN_RETURN_IF_ERROR(
          kernels::ScatterAddCheckedCuda(reinterpret_cast<const int32_t*>(block),
                                         reinterpret_cast<const float*>(block +
                                                                        sizeof(int32_t) * counts[j]),
                                         counts[j], x, n, stream_),
          "block of rank ", j);
    }
    return absl::OkStatus();
  }

  comm::Communicator* comm_;
  const Options options_;
  void* stream_;
  size_t model_elements_ = 0;
  std::unique_ptr<DeviceSplit> split_;
  std::vector<DeviceMemory> r_, u_, v_, small_u_;  // per bucket (empty when unused)
  std::vector<std::unique_ptr<DeviceQuantizeCodec>> codecs_;  // per bucket with small tensors
  DeviceMemory scratch_;   // dgc: the small tensors' stand-in for v
  DeviceMemory block_;     // this rank's SPARSE block
  DeviceMemory sizes_;     // every rank's block size
  DeviceMemory gathered_;  // every rank's block
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceSparseReducer>> DeviceSparseReducer::Create(
    const GradientLayout& layout, comm::Communicator* comm, const Options& options) {
  if (comm == nullptr) {
    return absl::InvalidArgumentError("sparse exchange on the GPU without a device communicator");
  }
  auto reducer = std::make_unique<CudaSparseReducer>(comm, options);
  HPTRAIN_RETURN_IF_ERROR(reducer->Init(layout), "sparse exchange on the GPU");
  return reducer;
}

}  // namespace hptrain::sync
