#include "runtime/ps/ps_wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"

namespace hptrain::ps {

absl::StatusOr<std::string> SerializeTensors(const std::vector<std::vector<uint8_t>>& tensors) {
  v1::EncodedTensorList list;
  for (const std::vector<uint8_t>& raw : tensors) {
    HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedView view,
                             comm::DecodeEncoded(raw.data(), raw.size(), -1,
                                                 comm::kDefaultMaxEncodedElements));
    HPTRAIN_ASSIGN_OR_RETURN(*list.add_tensors(), comm::ToProto(view));
  }
  std::string bytes;
  if (!list.SerializeToString(&bytes)) return absl::InternalError("serializing tensors failed");
  return bytes;
}

absl::StatusOr<std::vector<std::vector<uint8_t>>> ParseTensors(const std::string& bytes,
                                                               const char* what) {
  v1::EncodedTensorList list;
  if (!list.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(what, ": the tensors do not parse"));
  }
  std::vector<std::vector<uint8_t>> tensors;
  for (const v1::EncodedTensor& t : list.tensors()) {
    absl::StatusOr<comm::DecodedTensor> decoded = comm::FromProto(t);
    if (!decoded.ok()) {
      return absl::DataLossError(absl::StrCat(what, ": ", decoded.status().message()));
    }
    tensors.push_back(std::move(decoded->buffer).Release());
  }
  return tensors;
}

absl::StatusOr<std::string> SerializeSections(
    const std::map<std::string, std::vector<float>>& sections) {
  v1::ShardStateSections message;
  for (const auto& [name, values] : sections) {
    comm::EncodedHeaderFields fields;
    fields.num_elements = static_cast<int64_t>(values.size());
    HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedBuffer buffer, comm::EncodedBuffer::Create(fields));
    if (!values.empty()) std::memcpy(buffer.dense(), values.data(), values.size() * sizeof(float));
    HPTRAIN_ASSIGN_OR_RETURN(comm::EncodedView view, buffer.Finish());
    message.add_names(name);
    HPTRAIN_ASSIGN_OR_RETURN(*message.add_tensors(), comm::ToProto(view));
  }
  std::string bytes;
  if (!message.SerializeToString(&bytes)) return absl::InternalError("serializing state failed");
  return bytes;
}

absl::StatusOr<std::map<std::string, std::vector<float>>> ParseSections(const std::string& bytes,
                                                                        const char* what) {
  v1::ShardStateSections message;
  if (!message.ParseFromString(bytes) || message.names_size() != message.tensors_size()) {
    return absl::DataLossError(absl::StrCat(what, ": the state sections do not parse"));
  }
  std::map<std::string, std::vector<float>> sections;
  for (int i = 0; i < message.names_size(); ++i) {
    absl::StatusOr<comm::DecodedTensor> decoded = comm::FromProto(message.tensors(i));
    if (!decoded.ok()) {
      return absl::DataLossError(absl::StrCat(what, ": section \"", message.names(i), "\": ",
                                              decoded.status().message()));
    }
    const comm::EncodedView& view = decoded->view;
    if (view.encoding != comm::Encoding::kDenseF32) {
      return absl::DataLossError(
          absl::StrCat(what, ": section \"", message.names(i), "\" is not DENSE_F32"));
    }
    std::vector<float>& out = sections[message.names(i)];
    out.resize(static_cast<size_t>(view.num_elements));
    for (int64_t k = 0; k < view.num_elements; ++k) out[k] = view.dense_at(k);
  }
  return sections;
}

int64_t PayloadBytes(const std::vector<std::vector<uint8_t>>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (t.size() >= comm::kEncodedHeaderBytes) {
      total += static_cast<int64_t>(t.size() - comm::kEncodedHeaderBytes);
    }
  }
  return total;
}

}  // namespace hptrain::ps
