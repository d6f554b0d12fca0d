#include "runtime/comm/encoded_tensor_proto.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hptrain::comm {
namespace {

using v1::EncodedTensor;

absl::Status BadProto(const std::string& why) {
  return absl::DataLossError(absl::StrCat("encoded tensor proto: ", why));
}

bool KnownDType(int dtype) {
  return dtype == EncodedTensor::FLOAT32 || dtype == EncodedTensor::FLOAT16 ||
         dtype == EncodedTensor::BFLOAT16;
}

// Product of the dimensions (1 for a scalar), or -1 with `why` set on a negative dimension or an
// overflow.
int64_t ShapeElements(const int64_t* dims, int count, std::string* why) {
  int64_t n = 1;
  bool overflow = false;
  for (int i = 0; i < count; ++i) {
    if (dims[i] < 0) {
      *why = absl::StrCat("shape dimension ", i, " is ", dims[i], ", must be ≥ 0");
      return -1;
    }
    if (!overflow && __builtin_mul_overflow(n, dims[i], &n)) overflow = true;
  }
  // A zero dimension makes the product 0 even when the others overflowed.
  if (std::find(dims, dims + count, 0) != dims + count) return 0;
  if (overflow) {
    *why = "shape's element count overflows 64 bits";
    return -1;
  }
  return n;
}

uint32_t Crc32(std::string_view data) {
  // zlib's crc32 takes a 32-bit length; chunks are far below that.
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

void SetBytes(std::string* out, const uint8_t* data, size_t bytes) {
  if (bytes > 0) out->assign(reinterpret_cast<const char*>(data), bytes);
}

}  // namespace

absl::StatusOr<EncodedTensor> ToProto(const EncodedView& view, EncodedTensor::DType dtype,
                                      const std::vector<int64_t>& shape) {
  auto invalid = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("ToProto: ", why));
  };
  if (!KnownDType(dtype)) return invalid(absl::StrCat("dtype ", static_cast<int>(dtype)));
  std::string why;
  const int64_t n = ShapeElements(shape.data(), static_cast<int>(shape.size()), &why);
  if (n < 0) return invalid(why);
  if (n != view.num_elements) {
    return invalid(absl::StrCat("shape has ", n, " elements, the view ", view.num_elements));
  }
  EncodedHeaderFields fields{view.encoding,     view.bits,        view.scale_mode,
                             view.num_elements, view.bucket_size, view.sparse_count};
  auto layout = ComputeLayout(fields, std::numeric_limits<int64_t>::max());
  if (!layout.ok()) return layout.status();
  if (layout->payload_bytes() != view.payload_bytes || (view.payload == nullptr && n > 0)) {
    return invalid(absl::StrCat("view's payload is ", view.payload_bytes,
                                " bytes, its fields imply ", layout->payload_bytes()));
  }

  EncodedTensor message;
  message.set_dtype(dtype);
  for (int64_t d : shape) message.add_shape(d);
  const uint8_t* p = view.payload;
  switch (view.encoding) {
    case Encoding::kDenseF32:
      message.mutable_dense_f32();
      SetBytes(message.mutable_payload(), p, layout->dense_bytes);
      break;
    case Encoding::kF16:
      message.mutable_f16();
      SetBytes(message.mutable_payload(), p, layout->dense_bytes);
      break;
    case Encoding::kBF16:
      message.mutable_bf16();
      SetBytes(message.mutable_payload(), p, layout->dense_bytes);
      break;
    case Encoding::kQuantized: {
      EncodedTensor::Quantized* q = message.mutable_quantized();
      q->set_bits(static_cast<uint32_t>(view.bits));
      q->set_bucket_size(static_cast<uint32_t>(view.bucket_size));
      q->set_scale_mode(view.scale_mode == ScaleMode::kAbsMax ? EncodedTensor::Quantized::ABS_MAX
                                                              : EncodedTensor::Quantized::MIN_MAX);
      SetBytes(q->mutable_scales(), p, layout->meta_bytes);
      SetBytes(message.mutable_payload(), p + layout->meta_bytes, layout->codes_bytes);
      break;
    }
    case Encoding::kSparse:
      SetBytes(message.mutable_sparse()->mutable_indices(), p, layout->indices_bytes);
      SetBytes(message.mutable_payload(), p + layout->indices_bytes, layout->values_bytes);
      break;
    case Encoding::kSparseCompact: {
      EncodedTensor::SparseCompact* c = message.mutable_sparse_compact();
      SetBytes(c->mutable_block_counts(), p, layout->blocks_bytes);
      SetBytes(c->mutable_offsets(), p + layout->blocks_bytes, layout->indices_bytes);
      SetBytes(message.mutable_payload(), p + layout->blocks_bytes + layout->indices_bytes,
               layout->values_bytes);
      break;
    }
  }
  return message;
}

absl::StatusOr<EncodedTensor> ToProto(const EncodedView& view) {
  return ToProto(view, EncodedTensor::FLOAT32, {view.num_elements});
}

absl::StatusOr<DecodedTensor> FromProto(const EncodedTensor& message, int64_t max_elements) {
  if (max_elements < 0) {
    return absl::InvalidArgumentError(absl::StrCat("FromProto: max_elements is ", max_elements));
  }
  if (!KnownDType(message.dtype())) {
    return BadProto(absl::StrCat("dtype is ", static_cast<int>(message.dtype()),
                                 ", must be 1 (FLOAT32), 2 (FLOAT16) or 3 (BFLOAT16)"));
  }
  std::string why;
  const int64_t n = ShapeElements(message.shape().data(), message.shape_size(), &why);
  if (n < 0) return BadProto(why);
  if (n > max_elements) {
    return BadProto(absl::StrCat("shape has ", n, " elements, above the limit ", max_elements));
  }

  EncodedHeaderFields fields;
  fields.num_elements = n;
  switch (message.encoding_case()) {
    case EncodedTensor::kDenseF32:
      fields.encoding = Encoding::kDenseF32;
      break;
    case EncodedTensor::kF16:
      fields.encoding = Encoding::kF16;
      break;
    case EncodedTensor::kBf16:
      fields.encoding = Encoding::kBF16;
      break;
    case EncodedTensor::kQuantized: {
      const EncodedTensor::Quantized& q = message.quantized();
      fields.encoding = Encoding::kQuantized;
      // Values above 8 are rejected by ComputeLayout; clamp so the int cannot wrap negative.
      fields.bits = static_cast<int>(std::min<uint32_t>(q.bits(), 1u << 30));
      fields.bucket_size = q.bucket_size();
      if (q.scale_mode() == EncodedTensor::Quantized::MIN_MAX) {
        fields.scale_mode = ScaleMode::kMinMax;
      } else if (q.scale_mode() == EncodedTensor::Quantized::ABS_MAX) {
        fields.scale_mode = ScaleMode::kAbsMax;
      } else {
        return BadProto(absl::StrCat("quantized.scale_mode is ", static_cast<int>(q.scale_mode()),
                                     ", must be 1 (MIN_MAX) or 2 (ABS_MAX)"));
      }
      if (!q.zero_points().empty()) {
        return BadProto(absl::StrCat("quantized.zero_points is ", q.zero_points().size(),
                                     " bytes, must be empty (reserved)"));
      }
      break;
    }
    case EncodedTensor::kSparse: {
      const std::string& indices = message.sparse().indices();
      if (indices.size() % 4 != 0) {
        return BadProto(
            absl::StrCat("sparse.indices is ", indices.size(), " bytes, not a multiple of 4"));
      }
      fields.encoding = Encoding::kSparse;
      fields.sparse_count = static_cast<int64_t>(indices.size() / 4);
      break;
    }
    case EncodedTensor::kSparseCompact: {
      const std::string& offsets = message.sparse_compact().offsets();
      if (offsets.size() % 2 != 0) {
        return BadProto(absl::StrCat("sparse_compact.offsets is ", offsets.size(),
                                     " bytes, not a multiple of 2"));
      }
      fields.encoding = Encoding::kSparseCompact;
      fields.sparse_count = static_cast<int64_t>(offsets.size() / 2);
      break;
    }
    case EncodedTensor::ENCODING_NOT_SET:
      return BadProto("no encoding set");
  }

  // Sizes first, allocation second: the fields alone must not make us allocate what the message
  // does not hold (a shape of 2^35 elements with an empty payload).
  auto layout = ComputeLayout(fields, max_elements);
  if (!layout.ok()) return BadProto(std::string(layout.status().message()));
  const std::string context =
      absl::StrCat(EncodingName(fields.encoding), " of ", n, " elements",
                   fields.encoding == Encoding::kQuantized
                       ? absl::StrCat(" (", fields.bits, " bits, bucket ", fields.bucket_size, ")")
                       : "");
  struct Piece {
    const std::string* bytes;
    size_t expected;
    const char* what;
  };
  std::vector<Piece> pieces;
  switch (fields.encoding) {
    case Encoding::kDenseF32:
    case Encoding::kF16:
    case Encoding::kBF16:
      pieces = {{&message.payload(), layout->dense_bytes, "payload"}};
      break;
    case Encoding::kQuantized:
      pieces = {{&message.quantized().scales(), layout->meta_bytes, "quantized.scales"},
                {&message.payload(), layout->codes_bytes, "payload (codes)"}};
      break;
    case Encoding::kSparse:
      pieces = {{&message.sparse().indices(), layout->indices_bytes, "sparse.indices"},
                {&message.payload(), layout->values_bytes, "payload (values)"}};
      break;
    case Encoding::kSparseCompact:
      pieces = {
          {&message.sparse_compact().block_counts(), layout->blocks_bytes,
           "sparse_compact.block_counts"},
          {&message.sparse_compact().offsets(), layout->indices_bytes, "sparse_compact.offsets"},
          {&message.payload(), layout->values_bytes, "payload (values)"}};
      break;
  }
  for (const Piece& piece : pieces) {
    if (piece.bytes->size() != piece.expected) {
      const std::string with_indices =
          IsSparse(fields.encoding) ? absl::StrCat(" with ", fields.sparse_count, " entries") : "";
      return BadProto(absl::StrCat(piece.what, " is ", piece.bytes->size(), " bytes, ", context,
                                   with_indices, " needs ", piece.expected));
    }
  }

  auto buffer = EncodedBuffer::Create(fields, max_elements);
  if (!buffer.ok()) return BadProto(std::string(buffer.status().message()));
  uint8_t* out = buffer->data() + kEncodedHeaderBytes;
  for (const Piece& piece : pieces) {
    if (piece.expected > 0) std::memcpy(out, piece.bytes->data(), piece.expected);
    out += piece.expected;
  }

  DecodedTensor result;
  result.dtype = message.dtype();
  result.shape.assign(message.shape().begin(), message.shape().end());
  result.buffer = *std::move(buffer);
  auto view = result.buffer.Finish(max_elements);
  if (!view.ok()) {
    return absl::Status(view.status().code(),
                        absl::StrCat("encoded tensor proto: ", view.status().message()));
  }
  result.view = *view;
  return result;
}

absl::StatusOr<std::vector<v1::TensorChunk>> SplitIntoChunks(std::string_view name,
                                                             std::string_view bytes,
                                                             size_t max_chunk_bytes) {
  if (max_chunk_bytes == 0 || max_chunk_bytes > kMaxChunkDataBytes) {
    return absl::InvalidArgumentError(absl::StrCat("SplitIntoChunks: max_chunk_bytes is ",
                                                   max_chunk_bytes, ", must be in [1, ",
                                                   kMaxChunkDataBytes, "]"));
  }
  if (name.size() > kMaxChunkNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("SplitIntoChunks: name is ", name.size(),
                                                   " bytes, the limit is ", kMaxChunkNameBytes));
  }
  std::vector<v1::TensorChunk> chunks;
  size_t offset = 0;
  do {
    const size_t size = std::min(max_chunk_bytes, bytes.size() - offset);
    v1::TensorChunk& chunk = chunks.emplace_back();
    chunk.set_name(std::string(name));
    chunk.set_total_bytes(static_cast<int64_t>(bytes.size()));
    chunk.set_offset(static_cast<int64_t>(offset));
    chunk.set_data(std::string(bytes.substr(offset, size)));
    chunk.set_crc32(Crc32(chunk.data()));
    offset += size;
  } while (offset < bytes.size());
  return chunks;
}

absl::Status ChunkAssembler::Fail(int64_t index, const std::string& why) {
  status_ = absl::DataLossError(absl::StrCat("tensor chunk ", index, " of \"", name_, "\": ", why));
  bytes_.clear();
  return status_;
}

absl::Status ChunkAssembler::Add(const v1::TensorChunk& chunk) {
  if (!status_.ok()) return status_;
  const int64_t index = chunks_;
  if (index == 0) {
    name_ = chunk.name();
    total_ = chunk.total_bytes();
    if (total_ < 0 || total_ > max_total_bytes_) {
      return Fail(index, absl::StrCat("total_bytes is ", total_, ", must be in [0, ",
                                      max_total_bytes_, "]"));
    }
  } else {
    if (complete()) return Fail(index, "arrived after the last chunk");
    if (chunk.name() != name_) {
      return Fail(index, absl::StrCat("name is \"", chunk.name(), "\", earlier chunks say \"",
                                      name_, "\""));
    }
    if (chunk.total_bytes() != total_) {
      return Fail(index, absl::StrCat("total_bytes is ", chunk.total_bytes(),
                                      ", earlier chunks say ", total_));
    }
  }
  if (chunk.offset() != received()) {
    return Fail(index, absl::StrCat("offset is ", chunk.offset(), ", expected ", received(),
                                    " (a chunk is missing, repeated or out of order)"));
  }
  const int64_t size = static_cast<int64_t>(chunk.data().size());
  if (size > static_cast<int64_t>(kMaxChunkMessageBytes)) {
    return Fail(index, absl::StrCat("data is ", size, " bytes, above the ", kMaxChunkMessageBytes,
                                    "-byte limit"));
  }
  if (size > total_ - received()) {
    return Fail(index, absl::StrCat("data is ", size, " bytes at offset ", received(),
                                    ", past total_bytes ", total_));
  }
  if (size == 0 && total_ != 0) return Fail(index, "data is empty");
  const uint32_t crc = Crc32(chunk.data());
  if (crc != chunk.crc32()) {
    return Fail(index, absl::StrCat("crc32 is 0x", absl::Hex(chunk.crc32(), absl::kZeroPad8),
                                    ", the data's is 0x", absl::Hex(crc, absl::kZeroPad8)));
  }
  bytes_.append(chunk.data());
  ++chunks_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChunkAssembler::Finish() && {
  if (!status_.ok()) return status_;
  if (chunks_ == 0) return absl::DataLossError("tensor chunks: no chunk arrived");
  if (received() != total_) {
    return absl::DataLossError(absl::StrCat("tensor chunks of \"", name_, "\": ", chunks_,
                                            " chunks end at byte ", received(), " of ", total_,
                                            " (the last chunks are missing)"));
  }
  chunks_ = 0;
  return std::move(bytes_);
}

absl::StatusOr<std::string> ReassembleChunks(const std::vector<v1::TensorChunk>& chunks,
                                             int64_t max_total_bytes) {
  ChunkAssembler assembler(max_total_bytes);
  for (const v1::TensorChunk& chunk : chunks) {
    absl::Status added = assembler.Add(chunk);
    if (!added.ok()) return added;
  }
  return std::move(assembler).Finish();
}

absl::StatusOr<std::vector<v1::TensorChunk>> SplitEncodedTensor(std::string_view name,
                                                                const EncodedTensor& message,
                                                                size_t max_chunk_bytes) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    return absl::InternalError("SplitEncodedTensor: the message does not serialize (over 2 GiB?)");
  }
  return SplitIntoChunks(name, bytes, max_chunk_bytes);
}

absl::StatusOr<DecodedTensor> ReassembleEncodedTensor(const std::vector<v1::TensorChunk>& chunks,
                                                      int64_t max_elements) {
  if (max_elements < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReassembleEncodedTensor: max_elements is ", max_elements));
  }
  // At most 9 bytes per element (QUANTIZED with bucket 1 and 8 bits), plus field overhead.
  const int64_t max_bytes = max_elements > (std::numeric_limits<int64_t>::max() - 65536) / 16
                                ? std::numeric_limits<int64_t>::max()
                                : max_elements * 16 + 65536;
  auto bytes = ReassembleChunks(chunks, max_bytes);
  if (!bytes.ok()) return bytes.status();
  EncodedTensor message;
  if (!message.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat("encoded tensor proto: ", bytes->size(),
                                            " reassembled bytes do not parse as EncodedTensor"));
  }
  return FromProto(message, max_elements);
}

}  // namespace hptrain::comm
