// Encoded tensors over gRPC: conversion between the raw layout (encoded_tensor.h) and the
// hptrain.v1.EncodedTensor message, and the ≤ 4 MiB TensorChunk pieces a large message is streamed
// in (docs/wire_format.md).
//
// Receiving a tensor:
//   1. ChunkAssembler::Add() each TensorChunk as it arrives (or ReassembleChunks() on all of them):
//      name, total and offset must agree and each chunk's CRC-32 must match its data.
//   2. Parse the bytes as an EncodedTensor and FromProto() it: every section is checked against the
//      sizes its fields imply and the result goes through DecodeEncoded(), the same checks a
//      collective's receiver applies. ReassembleEncodedTensor() does 1 and 2.
// Sending is the reverse: ToProto(), serialize, SplitIntoChunks() (SplitEncodedTensor() does all).
//
// Errors from received data are DataLoss naming the field or chunk; errors in the caller's own
// arguments are InvalidArgument. Nothing here blocks. Functions are thread-compatible; a
// ChunkAssembler is used by one thread at a time.
//
// This library (hptrain_comm_wire) is the only part of runtime/comm that depends on protobuf.
#ifndef HPTRAIN_RUNTIME_COMM_ENCODED_TENSOR_PROTO_H_
#define HPTRAIN_RUNTIME_COMM_ENCODED_TENSOR_PROTO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/hptrain/v1/tensor.pb.h"
#include "runtime/comm/encoded_tensor.h"

namespace hptrain::comm {

// gRPC's default maximum message size; no TensorChunk message is larger.
inline constexpr size_t kMaxChunkMessageBytes = size_t{4} << 20;
// Default and largest `data` per chunk: 4 KiB are left for the other fields (a name of at most
// kMaxChunkNameBytes, two int64, the CRC and the field tags), so a whole chunk is ≤ 4 MiB.
inline constexpr size_t kMaxChunkDataBytes = kMaxChunkMessageBytes - 4096;
inline constexpr size_t kMaxChunkNameBytes = 1024;
// Default bound on a reassembled byte string (64 GiB), checked against the first chunk's total.
inline constexpr int64_t kDefaultMaxChunkedBytes = int64_t{1} << 36;

// Copies the sections of `view` into a new message with the given logical dtype and shape.
// Errors: InvalidArgument when dtype is DTYPE_UNSPECIFIED or unknown, a dimension is negative,
// the shape's product differs from view.num_elements, or the view's fields and payload_bytes
// disagree (a hand-built view; views from DecodeEncoded always agree).
absl::StatusOr<v1::EncodedTensor> ToProto(const EncodedView& view, v1::EncodedTensor::DType dtype,
                                          const std::vector<int64_t>& shape);

// As above for a flat FLOAT32 tensor: shape {view.num_elements}.
absl::StatusOr<v1::EncodedTensor> ToProto(const EncodedView& view);

// A tensor received as a message, in the raw layout. `view` points into `buffer`: the type is
// move-only, and moving keeps the view valid (the bytes do not move).
struct DecodedTensor {
  v1::EncodedTensor::DType dtype = v1::EncodedTensor::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  EncodedBuffer buffer;
  EncodedView view;

  DecodedTensor() = default;
  DecodedTensor(DecodedTensor&&) = default;
  DecodedTensor& operator=(DecodedTensor&&) = default;
  DecodedTensor(const DecodedTensor&) = delete;
  DecodedTensor& operator=(const DecodedTensor&) = delete;
};

// Validates `message` and rebuilds the raw layout from it. Checks: dtype known, dimensions ≥ 0
// and their product ≤ max_elements without overflow, an encoding set, the encoding's fields as
// in the raw header (bits, scale_mode, bucket_size), zero_points empty, each section exactly the
// size the fields imply (scales 8·buckets, codes ceil(n·bits/8), indices a multiple of 4 and as
// long as the values), then all of DecodeEncoded() on the result (sparse indices ascending and in
// range, scales finite). Errors: DataLoss, "encoded tensor proto: ..." naming the field.
absl::StatusOr<DecodedTensor> FromProto(const v1::EncodedTensor& message,
                                        int64_t max_elements = kDefaultMaxEncodedElements);

// Splits `bytes` into chunks of at most max_chunk_bytes of data each, in order, every chunk named
// `name` and carrying total_bytes, its offset and the CRC-32 of its data. Empty `bytes` give one
// chunk with empty data. Errors: InvalidArgument when max_chunk_bytes is 0 or above
// kMaxChunkDataBytes, or the name is longer than kMaxChunkNameBytes.
absl::StatusOr<std::vector<v1::TensorChunk>> SplitIntoChunks(
    std::string_view name, std::string_view bytes, size_t max_chunk_bytes = kMaxChunkDataBytes);

// Reassembles a byte string from its chunks as they arrive, validating each one on arrival:
// the first has offset 0 and 0 ≤ total_bytes ≤ max_total_bytes; every chunk has the first one's
// name and total_bytes, starts where the previous one ended (a dropped, repeated or reordered
// chunk is caught here), carries 1 .. kMaxChunkMessageBytes bytes of data (0 only for the single
// chunk of an empty string) that stay within total_bytes, and its crc32 matches. Memory grows with
// the data received, never with a claimed total. After the first error every Add() and Finish()
// return that error.
class ChunkAssembler {
 public:
  explicit ChunkAssembler(int64_t max_total_bytes = kDefaultMaxChunkedBytes)
      : max_total_bytes_(max_total_bytes) {}

  // Errors: DataLoss, 'tensor chunk 3 of "layer1.weight": ...'.
  absl::Status Add(const v1::TensorChunk& chunk);
  // True once chunks covering all total_bytes have been added.
  bool complete() const { return status_.ok() && chunks_ > 0 && received() == total_; }
  // The whole byte string; the assembler is left empty. Errors: the first Add() error, or DataLoss
  // when no chunk arrived or the last ones are missing.
  absl::StatusOr<std::string> Finish() &&;

 private:
  int64_t received() const { return static_cast<int64_t>(bytes_.size()); }
  absl::Status Fail(int64_t index, const std::string& why);

  int64_t max_total_bytes_;
  absl::Status status_;
  int64_t chunks_ = 0;
  std::string name_;
  int64_t total_ = 0;
  std::string bytes_;
};

// ChunkAssembler over `chunks` in the given order, then Finish().
absl::StatusOr<std::string> ReassembleChunks(const std::vector<v1::TensorChunk>& chunks,
                                             int64_t max_total_bytes = kDefaultMaxChunkedBytes);

// Serializes `message` and splits it; errors as SplitIntoChunks, or Internal when serialization
// fails (a message above 2 GiB).
absl::StatusOr<std::vector<v1::TensorChunk>> SplitEncodedTensor(
    std::string_view name, const v1::EncodedTensor& message,
    size_t max_chunk_bytes = kMaxChunkDataBytes);

// ReassembleChunks, parse as an EncodedTensor (DataLoss when it does not parse), FromProto.
// The byte string may hold at most 16 bytes per allowed element plus 64 KiB.
absl::StatusOr<DecodedTensor> ReassembleEncodedTensor(
    const std::vector<v1::TensorChunk>& chunks, int64_t max_elements = kDefaultMaxEncodedElements);

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_ENCODED_TENSOR_PROTO_H_
