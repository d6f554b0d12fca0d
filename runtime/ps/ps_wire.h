// The parameter server's messages on the wire (proto/hptrain/v1/ps.proto): conversions between
// the raw encoded tensors and state sections the ParamStore works on and their proto forms, and
// the "header, then ≤ 4 MiB chunks" streams every PS call uses. Everything received is validated
// (encoded_tensor_proto.h's checks); errors are DataLoss naming the call.
#ifndef HPTRAIN_RUNTIME_PS_PS_WIRE_H_
#define HPTRAIN_RUNTIME_PS_PS_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/hptrain/v1/ps.pb.h"
#include "runtime/comm/encoded_tensor_proto.h"
#include "runtime/ps/param_store.h"

namespace hptrain::ps {

// Raw encoded tensors ↔ a serialized EncodedTensorList.
absl::StatusOr<std::string> SerializeTensors(const std::vector<std::vector<uint8_t>>& tensors);
absl::StatusOr<std::vector<std::vector<uint8_t>>> ParseTensors(const std::string& bytes,
                                                               const char* what);

// State sections (float vectors by name) ↔ a serialized ShardStateSections.
absl::StatusOr<std::string> SerializeSections(
    const std::map<std::string, std::vector<float>>& sections);
absl::StatusOr<std::map<std::string, std::vector<float>>> ParseSections(const std::string& bytes,
                                                                        const char* what);

// Payload bytes (without the 32-byte headers) of raw encoded tensors.
int64_t PayloadBytes(const std::vector<std::vector<uint8_t>>& tensors);

// Writes `header` as the first message, then `bytes` in chunks, through anything with
// Write(const Message&) (a gRPC writer or stream). Message is a ps.proto request/response with a
// `header` and a `chunk` in its oneof. Returns false when a write fails (the peer is gone).
template <typename Message, typename Header, typename Writer>
absl::Status WriteChunked(Writer* writer, const Header& header, const std::string& bytes,
                          const char* what) {
  Message first;
  *first.mutable_header() = header;
  if (!writer->Write(first)) return absl::UnavailableError(absl::StrCat(what, ": stream closed"));
  absl::StatusOr<std::vector<v1::TensorChunk>> chunks = comm::SplitIntoChunks(what, bytes);
  if (!chunks.ok()) return chunks.status();
  for (v1::TensorChunk& chunk : *chunks) {
    Message m;
    *m.mutable_chunk() = std::move(chunk);
    if (!writer->Write(m)) return absl::UnavailableError(absl::StrCat(what, ": stream closed"));
  }
  return absl::OkStatus();
}

// Reads a header message, then chunks until the byte string is complete, through anything with
// Read(Message*). Errors: DataLoss when the header is missing or a chunk is bad or missing.
template <typename Message, typename Header, typename Reader>
absl::Status ReadChunked(Reader* reader, Header* header, std::string* bytes, const char* what) {
  Message m;
  if (!reader->Read(&m) || !m.has_header()) {
    return absl::DataLossError(absl::StrCat(what, ": the stream does not start with a header"));
  }
  *header = m.header();
  comm::ChunkAssembler assembler;
  while (!assembler.complete()) {
    if (!reader->Read(&m)) {
      return absl::DataLossError(absl::StrCat(what, ": the stream ended before its last chunk"));
    }
    if (!m.has_chunk()) {
      return absl::DataLossError(absl::StrCat(what, ": a second header inside the stream"));
    }
    if (absl::Status s = assembler.Add(m.chunk()); !s.ok()) {
      return absl::DataLossError(absl::StrCat(what, ": ", s.message()));
    }
  }
  absl::StatusOr<std::string> whole = std::move(assembler).Finish();
  if (!whole.ok()) return whole.status();
  *bytes = *std::move(whole);
  return absl::OkStatus();
}

}  // namespace hptrain::ps

#endif  // HPTRAIN_RUNTIME_PS_PS_WIRE_H_
