#include "runtime/sync/sparse_allgather.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cast/cast.h"
#include "runtime/base/status.h"
#include "runtime/comm/encoded_tensor.h"

namespace hptrain::sync {
namespace {

using kernels::kHalfMax;

absl::StatusOr<comm::EncodedBuffer> Encode(SparseWire wire, const std::vector<int32_t>& indices,
                                           const std::vector<float>& values, int64_t n) {
  comm::EncodedHeaderFields fields;
  fields.encoding =
      wire == SparseWire::kCompact ? comm::Encoding::kSparseCompact : comm::Encoding::kSparse;
  fields.num_elements = n;
  fields.sparse_count = static_cast<int64_t>(indices.size());
  HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedBuffer block, comm::EncodedBuffer::Create(fields));
  const int64_t k = fields.sparse_count;
  if (wire == SparseWire::kPairs) {
    std::memcpy(block.indices(), indices.data(), k * sizeof(int32_t));
    std::memcpy(block.values(), values.data(), k * sizeof(float));
    return block;
  }
  uint32_t* counts = block.block_counts();  // zero-filled by Create
  uint16_t* offsets = block.offsets();
  for (int64_t j = 0; j < k; ++j) {
    ++counts[indices[j] / comm::kSparseBlockElements];
    offsets[j] = static_cast<uint16_t>(indices[j] % comm::kSparseBlockElements);
  }
  kernels::FloatToHalf(values.data(), k, block.half_values());
  return block;
}

struct Scratch {
  std::vector<uint16_t> halves;
  std::vector<float> values;
};

// dense[index] += value for every entry of a validated SPARSE or SPARSE_COMPACT view.
void Accumulate(const comm::EncodedView& view, Scratch* scratch, float* dense) {
  const int64_t k = view.sparse_count;
  if (view.encoding == comm::Encoding::kSparse) {
    for (int64_t j = 0; j < k; ++j) dense[view.index_at(j)] += view.value_at(j);
    return;
  }
  scratch->halves.resize(k);
  scratch->values.resize(k);
  for (int64_t j = 0; j < k; ++j) scratch->halves[j] = view.half_value_at(j);
  kernels::HalfToFloat(scratch->halves.data(), k, scratch->values.data());
  int64_t j = 0;
  for (int64_t b = 0; b < view.num_blocks(); ++b) {
    float* base = dense + b * comm::kSparseBlockElements;
    for (const int64_t end = j + view.block_count_at(b); j < end; ++j) {
      base[view.offset_at(j)] += scratch->values[j];
    }
  }
}

}  // namespace

SparseWire SparseWireOf(const StrategyOptions& options) {
  return options.String("sparseEncoding") == "compact" ? SparseWire::kCompact : SparseWire::kPairs;
}

void RoundForWire(SparseWire wire, std::vector<float>* values, std::vector<float>* rests) {
  const int64_t k = static_cast<int64_t>(values->size());
  rests->assign(k, 0.0f);
  if (wire == SparseWire::kPairs || k == 0) return;
  std::vector<float>& v = *values;
  std::vector<float>& rest = *rests;
  for (int64_t j = 0; j < k; ++j) {
    if (!std::isfinite(v[j])) continue;  // sent as it is, its rest 0
    rest[j] = v[j];
    v[j] = std::clamp(v[j], -kHalfMax, kHalfMax);
  }
  std::vector<uint16_t> halves(k);
  kernels::FloatToHalf(v.data(), k, halves.data());
  kernels::HalfToFloat(halves.data(), k, v.data());
  for (int64_t j = 0; j < k; ++j) {
    if (std::isfinite(v[j])) rest[j] -= v[j];  // finite before, so finite after: ≤ 65504
  }
}

absl::Status SparseAllGatherSum(comm::Communicator& comm, SparseWire wire,
                                const std::vector<int32_t>& indices,
                                const std::vector<float>& values, int64_t n, float* dense,
                                size_t* wire_bytes) {
  HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedBuffer block, Encode(wire, indices, values, n));
  if (wire_bytes != nullptr) *wire_bytes = block.size();

  std::vector<std::string> blocks;
  HPTRAIN_RETURN_IF_ERROR(comm.AllGatherV(block.data(), block.size(), &blocks),
                          "sparse all-gather");
  std::memset(dense, 0, static_cast<size_t>(n) * sizeof(float));
  const comm::Encoding expected = block.fields().encoding;
  Scratch scratch;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const auto* data = reinterpret_cast<const uint8_t*>(blocks[j].data());
    HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedView view,
                             comm::DecodeEncoded(data, blocks[j].size(), n, n));
    if (view.encoding != expected) {
      return absl::DataLossError(absl::StrCat("sparse all-gather: rank ", j, " sent ",
                                              comm::EncodingName(view.encoding), ", expected ",
                                              comm::EncodingName(expected)));
    }
    Accumulate(view, &scratch, dense);
  }
  return absl::OkStatus();
}

}  // namespace hptrain::sync
