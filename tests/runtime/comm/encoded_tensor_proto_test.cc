// EncodedTensor messages and TensorChunk streams: round trips, and one test per validation rule.
#include "runtime/comm/encoded_tensor_proto.h"

#include <zlib.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::comm {
namespace {

using ::testing::HasSubstr;
using v1::EncodedTensor;
using v1::TensorChunk;

// A valid raw buffer for `f` (sparse indices 0, 2, 4, ...; SPARSE_COMPACT indices k·n / count, so
// spread over every block, with fp16 values 0x3c00 + k; quantized codes i mod 2^bits).
std::vector<uint8_t> Valid(const EncodedHeaderFields& f) {
  auto buffer = EncodedBuffer::Create(f);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (float* d = buffer->dense()) {
    for (int64_t i = 0; i < f.num_elements; ++i) d[i] = 0.5f * i - 3;
  }
  if (uint16_t* h = buffer->half()) {
    for (int64_t i = 0; i < f.num_elements; ++i) h[i] = static_cast<uint16_t>(0x3c00 + i);
  }
  if (float* m = buffer->meta()) {
    for (size_t b = 0; b < buffer->layout().meta_bytes / 8; ++b) {
      m[2 * b] = -1.0f - b;
      m[2 * b + 1] = 0.25f;
    }
    for (int64_t i = 0; i < f.num_elements; ++i) {
      const uint64_t bit = static_cast<uint64_t>(i) * f.bits;
      buffer->codes()[bit / 8] |= static_cast<uint8_t>((i % (1 << f.bits)) << (bit % 8));
    }
  }
  if (int32_t* idx = buffer->indices()) {
    for (int64_t k = 0; k < f.sparse_count; ++k) {
      idx[k] = static_cast<int32_t>(2 * k);
      buffer->values()[k] = 1.5f * k;
    }
  }
  if (uint32_t* counts = buffer->block_counts()) {
    for (int64_t k = 0; k < f.sparse_count; ++k) {
      const int64_t index = k * f.num_elements / f.sparse_count;
      ++counts[index / kSparseBlockElements];
      buffer->offsets()[k] = static_cast<uint16_t>(index % kSparseBlockElements);
      buffer->half_values()[k] = static_cast<uint16_t>(0x3c00 + k);
    }
  }
  return std::move(*buffer).Release();
}

std::vector<EncodedHeaderFields> EveryEncoding() {
  std::vector<EncodedHeaderFields> out;
  for (Encoding e : {Encoding::kDenseF32, Encoding::kF16, Encoding::kBF16}) {
    out.push_back({e, 0, ScaleMode::kNone, 100, 0, 0});
  }
  for (int bits : {1, 2, 4, 8}) {
    out.push_back({Encoding::kQuantized, bits, ScaleMode::kMinMax, 1001, 64, 0});
  }
  out.push_back({Encoding::kQuantized, 4, ScaleMode::kAbsMax, 7, 3, 0});
  out.push_back({Encoding::kSparse, 0, ScaleMode::kNone, 100, 0, 20});
  out.push_back({Encoding::kSparse, 0, ScaleMode::kNone, 0, 0, 0});
  out.push_back({Encoding::kSparseCompact, 0, ScaleMode::kNone, 100, 0, 20});
  out.push_back({Encoding::kSparseCompact, 0, ScaleMode::kNone, 100, 0, 0});
  out.push_back({Encoding::kSparseCompact, 0, ScaleMode::kNone, 0, 0, 0});
  // 3 blocks, the last of 5 elements, every one holding entries.
  out.push_back(
      {Encoding::kSparseCompact, 0, ScaleMode::kNone, 2 * kSparseBlockElements + 5, 0, 300});
  return out;
}

EncodedView ViewOf(const std::vector<uint8_t>& b) {
  auto view = DecodeEncoded(b.data(), b.size(), -1, kDefaultMaxEncodedElements);
  EXPECT_TRUE(view.ok()) << view.status();
  return *view;
}

// A valid message for `f`, as ToProto writes it.
EncodedTensor Message(const EncodedHeaderFields& f) {
  auto message = ToProto(ViewOf(Valid(f)));
  EXPECT_TRUE(message.ok()) << message.status();
  return *message;
}

void ExpectBadProto(const EncodedTensor& m, const std::string& text) {
  auto decoded = FromProto(m);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr(text));
  EXPECT_THAT(std::string(decoded.status().message()),
              ::testing::StartsWith("encoded tensor proto: "));
}

TEST(EncodedTensorProtoTest, RoundTripEveryEncodingThroughSerialization) {
  for (const EncodedHeaderFields& f : EveryEncoding()) {
    const std::vector<uint8_t> raw = Valid(f);
    auto message = ToProto(ViewOf(raw), EncodedTensor::BFLOAT16, {1, f.num_elements, 1});
    ASSERT_TRUE(message.ok()) << message.status();
    EncodedTensor parsed;
    ASSERT_TRUE(parsed.ParseFromString(message->SerializeAsString()));
    auto decoded = FromProto(parsed);
    ASSERT_TRUE(decoded.ok()) << decoded.status() << " " << EncodingName(f.encoding);
    EXPECT_EQ(decoded->dtype, EncodedTensor::BFLOAT16);
    EXPECT_EQ(decoded->shape, (std::vector<int64_t>{1, f.num_elements, 1}));
    EXPECT_EQ(std::vector<uint8_t>(decoded->buffer.data(),
                                   decoded->buffer.data() + decoded->buffer.size()),
              raw)
        << EncodingName(f.encoding);
    EXPECT_EQ(decoded->view.payload, decoded->buffer.data() + 32);
    // Moving keeps the view valid.
    DecodedTensor moved = *std::move(decoded);
    EXPECT_EQ(moved.view.payload, moved.buffer.data() + 32);
  }
}

TEST(EncodedTensorProtoTest, SectionsGoWhereTheProtoSays) {
  const EncodedTensor q = Message({Encoding::kQuantized, 4, ScaleMode::kAbsMax, 1000, 512, 0});
  ASSERT_TRUE(q.has_quantized());
  EXPECT_EQ(q.quantized().bits(), 4u);
  EXPECT_EQ(q.quantized().bucket_size(), 512u);
  EXPECT_EQ(q.quantized().scale_mode(), EncodedTensor::Quantized::ABS_MAX);
  EXPECT_EQ(q.quantized().scales().size(), 16u);
  EXPECT_EQ(q.payload().size(), 500u);
  EXPECT_EQ(q.dtype(), EncodedTensor::FLOAT32);
  EXPECT_EQ(q.shape().size(), 1);
  const EncodedTensor s = Message({Encoding::kSparse, 0, ScaleMode::kNone, 100, 0, 20});
  EXPECT_EQ(s.sparse().indices().size(), 80u);
  EXPECT_EQ(s.payload().size(), 80u);
  EXPECT_TRUE(Message({Encoding::kF16, 0, ScaleMode::kNone, 3, 0, 0}).has_f16());
  // SPARSE_COMPACT: counts and offsets in the message, the fp16 values in the payload.
  const EncodedTensor c = Message({Encoding::kSparseCompact, 0, ScaleMode::kNone, 100, 0, 20});
  ASSERT_TRUE(c.has_sparse_compact());
  EXPECT_FALSE(c.has_sparse());
  EXPECT_EQ(c.sparse_compact().block_counts(), std::string("\x14\0\0\0", 4));  // 20 entries
  ASSERT_EQ(c.sparse_compact().offsets().size(), 40u);
  EXPECT_EQ(c.sparse_compact().offsets().substr(0, 6), std::string("\0\0\x05\0\x0a\0", 6));
  ASSERT_EQ(c.payload().size(), 40u);
  EXPECT_EQ(c.payload().substr(38), "\x13\x3c");  // value 19: 0x3c13
  const EncodedTensor wide =
      Message({Encoding::kSparseCompact, 0, ScaleMode::kNone, 2 * kSparseBlockElements + 5, 0, 3});
  EXPECT_EQ(wide.sparse_compact().block_counts().size(), 12u);
  EXPECT_EQ(wide.sparse_compact().offsets().size(), 6u);
  EXPECT_EQ(wide.payload().size(), 6u);
}

TEST(EncodedTensorProtoTest, ScalarShape) {
  const std::vector<uint8_t> raw = Valid({Encoding::kDenseF32, 0, ScaleMode::kNone, 1, 0, 0});
  auto message = ToProto(ViewOf(raw), EncodedTensor::FLOAT32, {});
  ASSERT_TRUE(message.ok());
  EXPECT_TRUE(FromProto(*message).ok());
}

TEST(EncodedTensorProtoTest, ToProtoRejectsBadArguments) {
  const EncodedView view = ViewOf(Valid({Encoding::kDenseF32, 0, ScaleMode::kNone, 6, 0, 0}));
  auto status = [&](EncodedTensor::DType dtype, std::vector<int64_t> shape) {
    return ToProto(view, dtype, shape).status();
  };
  EXPECT_THAT(std::string(status(EncodedTensor::DTYPE_UNSPECIFIED, {6}).message()),
              HasSubstr("dtype 0"));
  EXPECT_THAT(std::string(status(EncodedTensor::FLOAT32, {2, 2}).message()),
              HasSubstr("shape has 4 elements, the view 6"));
  EXPECT_THAT(std::string(status(EncodedTensor::FLOAT32, {-2, -3}).message()),
              HasSubstr("shape dimension 0 is -2"));
  EncodedView lying = view;
  lying.payload_bytes = 8;
  EXPECT_THAT(std::string(ToProto(lying).status().message()),
              HasSubstr("view's payload is 8 bytes, its fields imply 24"));
}

TEST(EncodedTensorProtoValidationTest, DType) {
  EncodedTensor m = Message({Encoding::kDenseF32, 0, ScaleMode::kNone, 4, 0, 0});
  m.set_dtype(EncodedTensor::DTYPE_UNSPECIFIED);
  ExpectBadProto(m, "dtype is 0, must be 1 (FLOAT32), 2 (FLOAT16) or 3 (BFLOAT16)");
  m.set_dtype(static_cast<EncodedTensor::DType>(77));
  ExpectBadProto(m, "dtype is 77");
}

TEST(EncodedTensorProtoValidationTest, Shape) {
  EncodedTensor m = Message({Encoding::kDenseF32, 0, ScaleMode::kNone, 4, 0, 0});
  m.set_shape(0, -4);
  ExpectBadProto(m, "shape dimension 0 is -4, must be ≥ 0");
  m.clear_shape();
  for (int i = 0; i < 3; ++i) m.add_shape(int64_t{1} << 30);
  ExpectBadProto(m, "shape's element count overflows 64 bits");
  m.clear_shape();
  m.add_shape(int64_t{1} << 40);
  ExpectBadProto(m, "shape has 1099511627776 elements, above the limit 17179869184");
  // A zero dimension wins over an overflowing product: the tensor is empty, the payload is not.
  m.clear_shape();
  for (int64_t d : {int64_t{1} << 40, int64_t{1} << 40, int64_t{0}}) m.add_shape(d);
  ExpectBadProto(m, "payload is 16 bytes, DENSE_F32 of 0 elements needs 0");
}

TEST(EncodedTensorProtoValidationTest, EncodingMustBeSet) {
  EncodedTensor m = Message({Encoding::kDenseF32, 0, ScaleMode::kNone, 4, 0, 0});
  m.clear_encoding();
  ExpectBadProto(m, "no encoding set");
}

TEST(EncodedTensorProtoValidationTest, DensePayloadSize) {
  EncodedTensor m = Message({Encoding::kF16, 0, ScaleMode::kNone, 100, 0, 0});
  m.mutable_payload()->pop_back();
  ExpectBadProto(m, "payload is 199 bytes, F16 of 100 elements needs 200");
}

TEST(EncodedTensorProtoValidationTest, QuantizedFields) {
  const EncodedTensor good = Message({Encoding::kQuantized, 4, ScaleMode::kMinMax, 1000, 512, 0});
  EncodedTensor m = good;
  m.mutable_quantized()->set_bits(3);
  ExpectBadProto(m, "bits is 3 for QUANTIZED, must be 1, 2, 4 or 8");
  m = good;
  m.mutable_quantized()->set_bits(0xffffffffu);
  ExpectBadProto(m, "for QUANTIZED, must be 1, 2, 4 or 8");
  m = good;
  m.mutable_quantized()->set_bucket_size(0);
  ExpectBadProto(m, "bucket_size is 0 for QUANTIZED, must be > 0");
  m = good;
  m.mutable_quantized()->set_scale_mode(EncodedTensor::Quantized::SCALE_MODE_UNSPECIFIED);
  ExpectBadProto(m, "quantized.scale_mode is 0, must be 1 (MIN_MAX) or 2 (ABS_MAX)");
  m = good;
  m.mutable_quantized()->set_zero_points("\x01");
  ExpectBadProto(m, "quantized.zero_points is 1 bytes, must be empty (reserved)");
}

TEST(EncodedTensorProtoValidationTest, QuantizedSectionSizes) {
  const EncodedTensor good = Message({Encoding::kQuantized, 4, ScaleMode::kMinMax, 1000, 512, 0});
  EncodedTensor m = good;
  // Moving 8 bytes from scales to payload keeps the total, but each section is checked.
  m.mutable_quantized()->mutable_scales()->resize(8);
  m.mutable_payload()->append(8, '\0');
  ExpectBadProto(m,
                 "quantized.scales is 8 bytes, QUANTIZED of 1000 elements (4 bits, bucket 512) "
                 "needs 16");
  // A huge shape with an empty payload is refused before anything is allocated.
  m = Message({Encoding::kDenseF32, 0, ScaleMode::kNone, 4, 0, 0});
  m.set_shape(0, int64_t{1} << 50);
  EXPECT_THAT(std::string(FromProto(m, std::numeric_limits<int64_t>::max()).status().message()),
              HasSubstr("payload is 16 bytes, DENSE_F32 of 1125899906842624 elements needs "
                        "4503599627370496"));
  m = good;
  m.mutable_payload()->resize(100);
  ExpectBadProto(m,
                 "payload (codes) is 100 bytes, QUANTIZED of 1000 elements (4 bits, bucket "
                 "512) needs 500");
}

TEST(EncodedTensorProtoValidationTest, QuantizedContentGoesThroughTheRawChecks) {
  EncodedTensor m = Message({Encoding::kQuantized, 8, ScaleMode::kMinMax, 10, 4, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(m.mutable_quantized()->mutable_scales()->data() + 4, &nan, 4);
  ExpectBadProto(m, "encoded tensor: quantization metadata of bucket 0 is not finite");
}

TEST(EncodedTensorProtoValidationTest, SparseSections) {
  const EncodedTensor good = Message({Encoding::kSparse, 0, ScaleMode::kNone, 100, 0, 20});
  EncodedTensor m = good;
  m.mutable_sparse()->mutable_indices()->pop_back();
  ExpectBadProto(m, "sparse.indices is 79 bytes, not a multiple of 4");
  m = good;
  m.mutable_payload()->resize(76);
  ExpectBadProto(m,
                 "payload (values) is 76 bytes, SPARSE of 100 elements with 20 entries needs 80");
  m = good;
  m.mutable_sparse()->mutable_indices()->append(4 * 81, '\0');
  ExpectBadProto(m, "sparse_count 101 exceeds num_elements 100");
  m = good;
  (*m.mutable_sparse()->mutable_indices())[4] = 0;  // index 1 becomes 0: not ascending
  ExpectBadProto(m, "encoded tensor: sparse index 0 at position 1 is not above the previous");
}

TEST(EncodedTensorProtoValidationTest, SparseCompactSections) {
  const EncodedTensor good = Message({Encoding::kSparseCompact, 0, ScaleMode::kNone, 100, 0, 20});
  EncodedTensor m = good;
  m.mutable_sparse_compact()->mutable_offsets()->pop_back();
  ExpectBadProto(m, "sparse_compact.offsets is 39 bytes, not a multiple of 2");
  // The offsets' length sets sparse_count, so one entry less shows in the payload's size.
  m = good;
  m.mutable_sparse_compact()->mutable_offsets()->resize(38);
  ExpectBadProto(m,
                 "payload (values) is 40 bytes, SPARSE_COMPACT of 100 elements with 19 entries "
                 "needs 38");
  m = good;
  m.mutable_sparse_compact()->mutable_block_counts()->append(4, '\0');
  ExpectBadProto(m,
                 "sparse_compact.block_counts is 8 bytes, SPARSE_COMPACT of 100 elements with 20 "
                 "entries needs 4");
  m = good;
  m.mutable_sparse_compact()->clear_block_counts();
  ExpectBadProto(m,
                 "sparse_compact.block_counts is 0 bytes, SPARSE_COMPACT of 100 elements with 20 "
                 "entries needs 4");
  // One block more in the shape needs one count more.
  m = good;
  m.set_shape(0, kSparseBlockElements + 1);
  ExpectBadProto(m,
                 "sparse_compact.block_counts is 4 bytes, SPARSE_COMPACT of 65537 elements with 20 "
                 "entries needs 8");
  m = good;
  m.mutable_payload()->resize(38);
  ExpectBadProto(m,
                 "payload (values) is 38 bytes, SPARSE_COMPACT of 100 elements with 20 entries "
                 "needs 40");
  m = good;
  m.mutable_payload()->append(2, '\0');
  ExpectBadProto(m,
                 "payload (values) is 42 bytes, SPARSE_COMPACT of 100 elements with 20 entries "
                 "needs 40");
  m = good;
  m.mutable_sparse_compact()->mutable_offsets()->append(2 * 81, '\0');
  ExpectBadProto(m, "sparse_count 101 exceeds num_elements 100");
}

TEST(EncodedTensorProtoValidationTest, SparseCompactContentGoesThroughTheRawChecks) {
  const EncodedTensor good = Message({Encoding::kSparseCompact, 0, ScaleMode::kNone, 100, 0, 20});
  EncodedTensor m = good;
  (*m.mutable_sparse_compact()->mutable_block_counts())[0] = 19;
  ExpectBadProto(m, "encoded tensor: sparse block counts add up to 19, sparse_count is 20");
  m = good;
  (*m.mutable_sparse_compact()->mutable_block_counts())[0] = 21;
  ExpectBadProto(m, "encoded tensor: sparse block counts exceed sparse_count 20 at block 0");
  m = good;
  (*m.mutable_sparse_compact()->mutable_block_counts())[1] = 1;  // 256 + 20
  ExpectBadProto(m, "encoded tensor: sparse block 0 lists 276 entries, but has 100 elements");
  m = good;
  (*m.mutable_sparse_compact()->mutable_offsets())[2] = 0;  // offsets 0, 0, 10, ...
  ExpectBadProto(m,
                 "encoded tensor: sparse offset 0 at position 1 is not above the previous offset "
                 "0 in block 0 (offsets must be strictly ascending)");
  m = good;
  (*m.mutable_sparse_compact()->mutable_offsets())[38] = 100;  // the last offset, 95
  ExpectBadProto(m, "encoded tensor: sparse offset 100 at position 19 is outside block 0's 100");
}

// ---- Chunks ----

std::string Bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  return s;
}

std::vector<TensorChunk> Split(const std::string& bytes, size_t max = kMaxChunkDataBytes) {
  auto chunks = SplitIntoChunks("layer1.weight", bytes, max);
  EXPECT_TRUE(chunks.ok()) << chunks.status();
  return *chunks;
}

void ExpectBadChunks(const std::vector<TensorChunk>& chunks, const std::string& text,
                     int64_t max_total = kDefaultMaxChunkedBytes) {
  auto bytes = ReassembleChunks(chunks, max_total);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr(text));
}

TEST(EncodedChunksTest, SplitAndReassemble) {
  const std::string bytes = Bytes(10 << 20);
  const std::vector<TensorChunk> chunks = Split(bytes);
  ASSERT_EQ(chunks.size(), 3u);
  for (const TensorChunk& c : chunks) {
    EXPECT_LE(c.ByteSizeLong(), kMaxChunkMessageBytes);
    EXPECT_EQ(c.total_bytes(), 10 << 20);
    EXPECT_EQ(c.crc32(), crc32(0, reinterpret_cast<const Bytef*>(c.data().data()),
                               static_cast<uInt>(c.data().size())));
  }
  EXPECT_EQ(chunks[1].offset(), static_cast<int64_t>(kMaxChunkDataBytes));
  auto back = ReassembleChunks(chunks);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);
}

TEST(EncodedChunksTest, WholeChunkMessageStaysUnderFourMiBWithTheLongestName) {
  auto chunks =
      SplitIntoChunks(std::string(kMaxChunkNameBytes, 'n'), Bytes(kMaxChunkDataBytes + 1));
  ASSERT_TRUE(chunks.ok());
  for (const TensorChunk& c : *chunks) EXPECT_LE(c.ByteSizeLong(), kMaxChunkMessageBytes);
}

TEST(EncodedChunksTest, EmptyBytesAreOneEmptyChunk) {
  const std::vector<TensorChunk> chunks = Split("");
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(chunks[0].data().empty());
  auto back = ReassembleChunks(chunks);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->empty());
}

TEST(EncodedChunksTest, SplitRejectsBadArguments) {
  EXPECT_EQ(SplitIntoChunks("x", "abc", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(SplitIntoChunks("x", "abc", kMaxChunkDataBytes + 1).status().message()),
              HasSubstr("max_chunk_bytes is 4190209"));
  EXPECT_THAT(std::string(SplitIntoChunks(std::string(1025, 'n'), "abc").status().message()),
              HasSubstr("name is 1025 bytes, the limit is 1024"));
}

TEST(EncodedChunksTest, EncodedTensorThroughChunks) {
  const EncodedHeaderFields f{Encoding::kQuantized, 2, ScaleMode::kMinMax, 3000000, 100, 0};
  const std::vector<uint8_t> raw = Valid(f);
  auto message = ToProto(ViewOf(raw));
  ASSERT_TRUE(message.ok());
  auto chunks = SplitEncodedTensor("grad", *message, 256 << 10);
  ASSERT_TRUE(chunks.ok());
  EXPECT_GT(chunks->size(), 1u);
  auto decoded = ReassembleEncodedTensor(*chunks);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(
      std::vector<uint8_t>(decoded->buffer.data(), decoded->buffer.data() + decoded->buffer.size()),
      raw);
  // Reassembled bytes that are not a message.
  auto junk = SplitIntoChunks("grad", "\xff\xff\xff", 2);
  EXPECT_THAT(std::string(ReassembleEncodedTensor(*junk).status().message()),
              HasSubstr("3 reassembled bytes do not parse as EncodedTensor"));
  // The element limit bounds the bytes accepted before parsing.
  EXPECT_THAT(std::string(ReassembleEncodedTensor(*chunks, 1000).status().message()),
              HasSubstr("total_bytes is"));
}

TEST(EncodedChunksValidationTest, NoChunks) { ExpectBadChunks({}, "no chunk arrived"); }

TEST(EncodedChunksValidationTest, DroppedChunk) {
  std::vector<TensorChunk> chunks = Split(Bytes(1000), 100);
  chunks.erase(chunks.begin() + 4);
  ExpectBadChunks(chunks,
                  "tensor chunk 4 of \"layer1.weight\": offset is 500, expected 400 (a "
                  "chunk is missing, repeated or out of order)");
  chunks = Split(Bytes(1000), 100);
  chunks.erase(chunks.begin());
  ExpectBadChunks(chunks, "tensor chunk 0 of \"layer1.weight\": offset is 100, expected 0");
}

TEST(EncodedChunksValidationTest, MissingLastChunks) {
  std::vector<TensorChunk> chunks = Split(Bytes(1000), 100);
  chunks.resize(7);
  ExpectBadChunks(chunks, "7 chunks end at byte 700 of 1000 (the last chunks are missing)");
}

TEST(EncodedChunksValidationTest, ReorderedAndRepeatedChunks) {
  std::vector<TensorChunk> chunks = Split(Bytes(1000), 100);
  std::swap(chunks[2], chunks[3]);
  ExpectBadChunks(chunks, "tensor chunk 2 of \"layer1.weight\": offset is 300, expected 200");
  chunks = Split(Bytes(1000), 100);
  chunks.insert(chunks.begin() + 3, chunks[2]);
  ExpectBadChunks(chunks, "tensor chunk 3 of \"layer1.weight\": offset is 200, expected 300");
}

TEST(EncodedChunksValidationTest, Crc) {
  std::vector<TensorChunk> chunks = Split(Bytes(1000), 100);
  (*chunks[5].mutable_data())[17] ^= 1;
  ExpectBadChunks(chunks, "tensor chunk 5 of \"layer1.weight\": crc32 is 0x");
  chunks = Split(Bytes(1000), 100);
  chunks[0].set_crc32(chunks[0].crc32() + 1);
  ExpectBadChunks(chunks, ", the data's is 0x");
}

TEST(EncodedChunksValidationTest, NameAndTotalConsistent) {
  std::vector<TensorChunk> chunks = Split(Bytes(1000), 100);
  chunks[3].set_name("layer2.weight");
  ExpectBadChunks(chunks,
                  "tensor chunk 3 of \"layer1.weight\": name is \"layer2.weight\", "
                  "earlier chunks say \"layer1.weight\"");
  chunks = Split(Bytes(1000), 100);
  chunks[9].set_total_bytes(2000);
  ExpectBadChunks(chunks, "total_bytes is 2000, earlier chunks say 1000");
}

TEST(EncodedChunksValidationTest, Total) {
  std::vector<TensorChunk> chunks = Split(Bytes(1000), 100);
  for (TensorChunk& c : chunks) c.set_total_bytes(-1);
  ExpectBadChunks(chunks, "total_bytes is -1, must be in [0, ");
  ExpectBadChunks(Split(Bytes(1000), 100), "total_bytes is 1000, must be in [0, 999]", 999);
}

TEST(EncodedChunksValidationTest, DataPastTotalEmptyOrOversized) {
  std::vector<TensorChunk> chunks = Split(Bytes(1000), 100);
  for (TensorChunk& c : chunks) c.set_total_bytes(950);
  ExpectBadChunks(chunks,
                  "tensor chunk 9 of \"layer1.weight\": data is 100 bytes at offset 900, "
                  "past total_bytes 950");
  chunks = Split(Bytes(1000), 100);
  chunks[4].clear_data();
  chunks[4].set_crc32(0);
  ExpectBadChunks(chunks, "tensor chunk 4 of \"layer1.weight\": data is empty");
  TensorChunk big;
  big.set_total_bytes(int64_t{8} << 20);
  big.set_data(std::string(kMaxChunkMessageBytes + 1, 'x'));
  ExpectBadChunks({big}, "data is 4194305 bytes, above the 4194304-byte limit");
}

TEST(EncodedChunksValidationTest, ChunkAfterTheLast) {
  std::vector<TensorChunk> chunks = Split("");
  chunks.push_back(chunks[0]);
  ExpectBadChunks(chunks, "tensor chunk 1 of \"layer1.weight\": arrived after the last chunk");
}

TEST(EncodedChunksValidationTest, AssemblerKeepsItsFirstError) {
  std::vector<TensorChunk> chunks = Split(Bytes(300), 100);
  ChunkAssembler assembler;
  EXPECT_TRUE(assembler.Add(chunks[0]).ok());
  EXPECT_FALSE(assembler.Add(chunks[2]).ok());
  const absl::Status again = assembler.Add(chunks[1]);
  EXPECT_THAT(std::string(again.message()), HasSubstr("offset is 200, expected 100"));
  EXPECT_FALSE(assembler.complete());
  EXPECT_EQ(std::move(assembler).Finish().status(), again);
}

}  // namespace
}  // namespace hptrain::comm
