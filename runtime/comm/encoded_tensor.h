// Encoded tensors: the raw byte layout collectives move (Gloo/NCCL all-gather of compressed
// gradients), with a builder for senders and a validating decoder for receivers.
//
// One contiguous little-endian buffer: a fixed 32-byte header followed by the payload
// (docs/wire_format.md has the full tables and byte formulas):
//
//   offset size field
//        0    4 magic 'HPTE' (bytes 48 50 54 45)
//        4    1 version (1)
//        5    1 encoding (Encoding below)
//        6    1 bits (QUANTIZED: 1, 2, 4 or 8; otherwise 0)
//        7    1 scale_mode (QUANTIZED: 1 MIN_MAX or 2 ABS_MAX; otherwise 0)
//        8    8 num_elements
//       16    4 bucket_size (QUANTIZED: > 0; otherwise 0)
//       20    4 sparse_count (SPARSE, SPARSE_COMPACT: ≤ num_elements; otherwise 0)
//       24    8 payload_bytes (= buffer size − 32 = what the fields imply)
//
//   payload: DENSE_F32  4n bytes of float32
//            F16, BF16  2n bytes of IEEE half / bfloat16 bits
//            QUANTIZED  ceil(n / bucket_size) × {float lo, float delta}, then ceil(n·bits / 8)
//                       bytes of codes: element i's code is bits [i·bits, (i+1)·bits) of a
//                       little-endian bit stream, bits past the last code 0;
//                       value_i = lo_b + code_i · delta_b, b = i / bucket_size (kernels/quantize)
//            SPARSE     sparse_count int32 indices (strictly ascending, in [0, n)), then
//                       sparse_count float32 values
//            SPARSE_COMPACT  the same entries in 4 bytes each: ceil(n / 65536) u32 counts, the
//                       entries in each block of 65536 elements; then sparse_count u16 offsets
//                       (index − 65536·block, strictly ascending within a block, blocks in
//                       order); then sparse_count fp16 values
//
// Decoding never trusts a size: every count is checked against the bytes present with
// overflow-checked arithmetic before anything is read, so a corrupt or hostile buffer yields a
// DataLoss error naming the field, never a read past the end. The payload starts at offset 32 and
// every section starts at a multiple of its element size from the buffer's start (4, or 2 for
// SPARSE_COMPACT's fp16 values), so a 4-byte-aligned buffer (anything from operator new,
// std::vector, std::string's heap storage) has aligned sections.
// The typed pointer accessors of EncodedView return nullptr when the payload is not 4-byte aligned;
// the `*_at()` accessors copy with memcpy and work at any alignment.
//
// Thread-safety: everything here is a pure function of its arguments or a value type; views are
// safe to read from several threads as long as nobody writes the underlying bytes.
#ifndef HPTRAIN_RUNTIME_COMM_ENCODED_TENSOR_H_
#define HPTRAIN_RUNTIME_COMM_ENCODED_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hptrain::comm {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the encoded tensor payload is read in place: little-endian hosts only");

inline constexpr uint32_t kEncodedMagic = 0x45545048;  // "HPTE" as a little-endian u32
inline constexpr uint8_t kEncodedVersion = 1;
inline constexpr size_t kEncodedHeaderBytes = 32;
// SPARSE_COMPACT addresses elements as (block, 16-bit offset) with blocks of this many elements.
inline constexpr int64_t kSparseBlockElements = int64_t{1} << 16;
// A generous default for DecodeEncoded's max_elements: 2^34 elements (64 GiB as float32).
inline constexpr int64_t kDefaultMaxEncodedElements = int64_t{1} << 34;

// Values are the wire values of the header's encoding byte (and of tensor.proto's oneof order).
enum class Encoding : uint8_t {
  kDenseF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kQuantized = 4,
  kSparse = 5,
  kSparseCompact = 6,
};

// True for the encodings that list (index, value) entries: SPARSE and SPARSE_COMPACT.
inline bool IsSparse(Encoding encoding) {
  return encoding == Encoding::kSparse || encoding == Encoding::kSparseCompact;
}

// How a QUANTIZED tensor's {lo, delta} were chosen. Both decode the same way
// (value = lo + code · delta); the mode is recorded for statistics and for re-encoding.
//   MIN_MAX: lo = bucket minimum, delta = (max − min) / (2^bits − 1).
//   ABS_MAX: lo = −max|x|, delta = 2·max|x| / (2^bits − 1) (symmetric around zero).
enum class ScaleMode : uint8_t {
  kNone = 0,  // every encoding except QUANTIZED
  kMinMax = 1,
  kAbsMax = 2,
};

// "DENSE_F32", "F16", "BF16", "QUANTIZED", "SPARSE", "SPARSE_COMPACT", or "UNKNOWN".
const char* EncodingName(Encoding encoding);

// What a sender chooses; everything else in the header follows from it.
struct EncodedHeaderFields {
  Encoding encoding = Encoding::kDenseF32;
  int bits = 0;                             // QUANTIZED: 1, 2, 4, 8; otherwise 0
  ScaleMode scale_mode = ScaleMode::kNone;  // QUANTIZED: kMinMax or kAbsMax; otherwise kNone
  int64_t num_elements = 0;
  int64_t bucket_size = 0;   // QUANTIZED: 1 .. 2^32−1; otherwise 0
  int64_t sparse_count = 0;  // SPARSE(_COMPACT): 0 .. min(num_elements, 2^32−1); otherwise 0
};

// Byte sizes of the payload sections implied by a header; sections not used by the encoding are 0.
// Sections follow each other in this order after the header.
struct EncodedLayout {
  size_t dense_bytes = 0;    // DENSE_F32: 4n; F16/BF16: 2n
  size_t meta_bytes = 0;     // QUANTIZED: 8 · ceil(n / bucket_size)
  size_t codes_bytes = 0;    // QUANTIZED: ceil(n · bits / 8)
  size_t blocks_bytes = 0;   // SPARSE_COMPACT: 4 · ceil(n / 65536) (per-block counts)
  size_t indices_bytes = 0;  // SPARSE: 4 · sparse_count; SPARSE_COMPACT: 2 · sparse_count
  size_t values_bytes = 0;   // SPARSE: 4 · sparse_count; SPARSE_COMPACT: 2 · sparse_count
  size_t payload_bytes() const {
    return dense_bytes + meta_bytes + codes_bytes + blocks_bytes + indices_bytes + values_bytes;
  }
};

// Checks `fields` against the rules DecodeEncoded applies to a header (bits, scale mode, bucket
// size, counts, num_elements ≤ max_elements, no size overflow) and returns the section sizes.
// Errors: InvalidArgument naming the field, e.g. "encoded tensor: bits is 3 for QUANTIZED, must be
// 1, 2, 4 or 8".
absl::StatusOr<EncodedLayout> ComputeLayout(const EncodedHeaderFields& fields,
                                            int64_t max_elements = kDefaultMaxEncodedElements);

// Total buffer bytes (header + payload) for `fields`, or 0 when ComputeLayout rejects them (with
// max_elements = INT64_MAX); 0 is never a valid size, since the header alone is 32 bytes.
size_t EncodedSize(const EncodedHeaderFields& fields);

// Writes the 32-byte header for `fields` into out[0, 32). The payload is not touched; the caller
// fills it (see EncodedBuffer for pointers to each section). Errors: InvalidArgument when `fields`
// are invalid (as ComputeLayout) or out_size != EncodedSize(fields).
absl::Status WriteHeader(const EncodedHeaderFields& fields, uint8_t* out, size_t out_size);

// The same 32 header bytes into header[0, 32), for a tensor whose payload is laid out elsewhere
// (device memory): no buffer size to check. Errors: InvalidArgument when `fields` are invalid (as
// ComputeLayout) or `header` is null.
absl::Status WriteHeaderBytes(const EncodedHeaderFields& fields, uint8_t* header);

// A validated, read-only view of an encoded tensor. It borrows the decoded buffer, which must
// outlive it and stay unchanged. Sections an encoding does not have are empty (their pointer
// accessors return nullptr). Indices count elements (i < num_elements), buckets (b <
// num_buckets()), blocks (b < num_blocks()) or sparse entries (k < sparse_count); the `*_at()`
// accessors do not range-check, like operator[].
struct EncodedView {
  Encoding encoding = Encoding::kDenseF32;
  int bits = 0;
  ScaleMode scale_mode = ScaleMode::kNone;
  int64_t num_elements = 0;
  int64_t bucket_size = 0;
  int64_t sparse_count = 0;
  const uint8_t* payload = nullptr;  // = buffer + 32
  size_t payload_bytes = 0;          // = buffer size − 32

  int64_t num_buckets() const {
    if (encoding != Encoding::kQuantized || bucket_size <= 0) return 0;
    return num_elements / bucket_size + (num_elements % bucket_size != 0);
  }
  size_t meta_bytes() const { return static_cast<size_t>(num_buckets()) * 8; }
  // SPARSE_COMPACT: the number of 65536-element blocks, ceil(n / 65536); otherwise 0.
  int64_t num_blocks() const {
    if (encoding != Encoding::kSparseCompact) return 0;
    return num_elements / kSparseBlockElements + (num_elements % kSparseBlockElements != 0);
  }
  size_t codes_bytes() const {
    return encoding == Encoding::kQuantized
               ? static_cast<size_t>((static_cast<uint64_t>(num_elements) * bits + 7) / 8)
               : 0;
  }
  // True when the payload is 4-byte aligned, i.e. the typed pointer accessors are usable.
  bool aligned() const { return reinterpret_cast<uintptr_t>(payload) % 4 == 0; }

  // Typed sections, or nullptr when the encoding has no such section or !aligned().
  const float* dense() const { return Typed<float>(encoding == Encoding::kDenseF32, 0); }
  const uint16_t* half() const {  // F16 or BF16 bit patterns
    return Typed<uint16_t>(encoding == Encoding::kF16 || encoding == Encoding::kBF16, 0);
  }
  const float* meta() const {  // {lo, delta} per bucket
    return Typed<float>(encoding == Encoding::kQuantized, 0);
  }
  const uint8_t* codes() const {  // bytes: no alignment needed
    return encoding == Encoding::kQuantized ? payload + meta_bytes() : nullptr;
  }
  const int32_t* indices() const { return Typed<int32_t>(encoding == Encoding::kSparse, 0); }
  const float* values() const {
    return Typed<float>(encoding == Encoding::kSparse, SparseValuesOffset());
  }
  // SPARSE_COMPACT: entries per block, offsets within their block, fp16 value bits.
  const uint32_t* block_counts() const {
    return Typed<uint32_t>(encoding == Encoding::kSparseCompact, 0);
  }
  const uint16_t* offsets() const {
    return Typed<uint16_t>(encoding == Encoding::kSparseCompact, CompactOffsetsOffset());
  }
  const uint16_t* half_values() const {
    return Typed<uint16_t>(encoding == Encoding::kSparseCompact, CompactValuesOffset());
  }

  // memcpy accessors: correct at any alignment.
  float dense_at(int64_t i) const { return Load<float>(payload + 4 * i); }
  uint16_t half_at(int64_t i) const { return Load<uint16_t>(payload + 2 * i); }
  float lo_at(int64_t bucket) const { return Load<float>(payload + 8 * bucket); }
  float delta_at(int64_t bucket) const { return Load<float>(payload + 8 * bucket + 4); }
  uint32_t code_at(int64_t i) const {
    const uint64_t bit = static_cast<uint64_t>(i) * bits;  // bits divides 8: never spans bytes
    return (codes()[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
  }
  int32_t index_at(int64_t k) const { return Load<int32_t>(payload + 4 * k); }
  float value_at(int64_t k) const { return Load<float>(payload + SparseValuesOffset() + 4 * k); }
  uint32_t block_count_at(int64_t block) const { return Load<uint32_t>(payload + 4 * block); }
  uint16_t offset_at(int64_t k) const {
    return Load<uint16_t>(payload + CompactOffsetsOffset() + 2 * k);
  }
  uint16_t half_value_at(int64_t k) const {
    return Load<uint16_t>(payload + CompactValuesOffset() + 2 * k);
  }

 private:
  template <typename T>
  static T Load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  size_t SparseValuesOffset() const { return static_cast<size_t>(sparse_count) * 4; }
  size_t CompactOffsetsOffset() const { return static_cast<size_t>(num_blocks()) * 4; }
  size_t CompactValuesOffset() const {
    return CompactOffsetsOffset() + static_cast<size_t>(sparse_count) * 2;
  }
  template <typename T>
  const T* Typed(bool present, size_t offset) const {
    if (!present || !aligned()) return nullptr;
    return reinterpret_cast<const T*>(payload + offset);
  }
};

// Validates `size` bytes at `data` as an encoded tensor and returns a view into them.
// `expected_elements`: the element count the caller expects, or -1 for any. `max_elements`: the
// largest num_elements accepted (bounds what a hostile header can make the caller allocate).
// Checks, in order: size ≥ 32, magic, version, known encoding, bits, scale_mode, bucket_size,
// num_elements ≤ max_elements and == expected_elements, sparse_count, payload_bytes == size − 32,
// payload_bytes == the size the fields imply (overflow-checked), SPARSE indices strictly ascending
// and in [0, n), SPARSE_COMPACT block counts within their blocks and summing to sparse_count with
// offsets strictly ascending and inside their block, QUANTIZED metadata finite with delta ≥ 0 and
// the code bits past element n zero. Nothing past data[size) is read, at any input. Errors:
// DataLoss with a one-line message naming the field, e.g. "encoded tensor: payload is 100 bytes,
// header implies 4096 (QUANTIZED, 1000 elements, 4 bits, bucket 512)"; InvalidArgument for bad
// arguments (data null with size > 0, max_elements < 0). Values are not checked: gradients may
// legitimately hold inf/NaN, which loss scaling relies on detecting.
absl::StatusOr<EncodedView> DecodeEncoded(const uint8_t* data, size_t size,
                                          int64_t expected_elements, int64_t max_elements);

// Owns an encoded tensor under construction: Create() sizes the buffer, writes the header and
// zero-fills the payload; the sender writes the sections through the typed pointers (valid until
// the buffer is moved from or destroyed; storage comes from operator new, so it is aligned), then
// Finish() validates the whole buffer as a receiver would. The bytes (data(), size()) are what
// goes on the wire.
class EncodedBuffer {
 public:
  EncodedBuffer() = default;

  // Errors: InvalidArgument as ComputeLayout.
  static absl::StatusOr<EncodedBuffer> Create(const EncodedHeaderFields& fields,
                                              int64_t max_elements = kDefaultMaxEncodedElements);

  const EncodedHeaderFields& fields() const { return fields_; }
  const EncodedLayout& layout() const { return layout_; }
  const uint8_t* data() const { return bytes_.data(); }
  uint8_t* data() { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

  // Writable sections; nullptr when the encoding has no such section.
  float* dense() { return Section<float>(Is(Encoding::kDenseF32), 0); }
  uint16_t* half() { return Section<uint16_t>(Is(Encoding::kF16) || Is(Encoding::kBF16), 0); }
  float* meta() { return Section<float>(Is(Encoding::kQuantized), 0); }
  uint8_t* codes() { return Section<uint8_t>(Is(Encoding::kQuantized), layout_.meta_bytes); }
  int32_t* indices() { return Section<int32_t>(Is(Encoding::kSparse), 0); }
  float* values() { return Section<float>(Is(Encoding::kSparse), layout_.indices_bytes); }
  uint32_t* block_counts() { return Section<uint32_t>(Is(Encoding::kSparseCompact), 0); }
  uint16_t* offsets() {
    return Section<uint16_t>(Is(Encoding::kSparseCompact), layout_.blocks_bytes);
  }
  uint16_t* half_values() {
    return Section<uint16_t>(Is(Encoding::kSparseCompact),
                             layout_.blocks_bytes + layout_.indices_bytes);
  }

  // DecodeEncoded(data(), size(), fields().num_elements, max_elements): the view a receiver gets.
  absl::StatusOr<EncodedView> Finish(int64_t max_elements = kDefaultMaxEncodedElements) const;

  // Moves the bytes out; the buffer is left empty.
  std::vector<uint8_t> Release() && { return std::move(bytes_); }

 private:
  bool Is(Encoding e) const { return fields_.encoding == e; }
  template <typename T>
  T* Section(bool present, size_t offset) {
    if (!present || bytes_.empty()) return nullptr;
    return reinterpret_cast<T*>(bytes_.data() + kEncodedHeaderBytes + offset);
  }

  EncodedHeaderFields fields_;
  EncodedLayout layout_;
  std::vector<uint8_t> bytes_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_ENCODED_TENSOR_H_
