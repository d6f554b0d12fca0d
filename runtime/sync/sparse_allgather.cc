#include "runtime/sync/sparse_allgather.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "runtime/comm/encoded_tensor.h"

namespace hptrain::sync {

absl::Status SparseAllGatherSum(comm::Communicator& comm, const std::vector<int32_t>& indices,
                                const std::vector<float>& values, int64_t n, float* dense,
                                size_t* wire_bytes) {
  comm::EncodedHeaderFields fields;
  fields.encoding = comm::Encoding::kSparse;
  fields.num_elements = n;
  fields.sparse_count = static_cast<int64_t>(indices.size());
  HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedBuffer block, comm::EncodedBuffer::Create(fields));
  std::memcpy(block.indices(), indices.data(), indices.size() * sizeof(int32_t));
  std::memcpy(block.values(), values.data(), values.size() * sizeof(float));
  if (wire_bytes != nullptr) *wire_bytes = block.size();

  std::vector<std::string> blocks;
  HPTRAIN_RETURN_IF_ERROR(comm.AllGatherV(block.data(), block.size(), &blocks),
                          "sparse all-gather");
  std::memset(dense, 0, static_cast<size_t>(n) * sizeof(float));
  for (size_t j = 0; j < blocks.size(); ++j) {
    const auto* data = reinterpret_cast<const uint8_t*>(blocks[j].data());
    HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedView view,
                             comm::DecodeEncoded(data, blocks[j].size(), n, n));
    if (view.encoding != comm::Encoding::kSparse) {
      return absl::DataLossError(absl::StrCat("sparse all-gather: rank ", j, " sent ",
                                              comm::EncodingName(view.encoding)));
    }
    for (int64_t k = 0; k < view.sparse_count; ++k) dense[view.index_at(k)] += view.value_at(k);
  }
  return absl::OkStatus();
}

}  // namespace hptrain::sync
