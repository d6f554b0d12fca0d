// Raw encoded-tensor layout: round trips of every encoding, the exact header bytes, and one test
// per validation rule asserting its message.
#include "runtime/comm/encoded_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::comm {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

EncodedHeaderFields Dense(Encoding e, int64_t n) {
  EncodedHeaderFields f;
  f.encoding = e;
  f.num_elements = n;
  return f;
}

EncodedHeaderFields Quantized(int64_t n, int bits, int64_t bucket,
                              ScaleMode mode = ScaleMode::kMinMax) {
  EncodedHeaderFields f;
  f.encoding = Encoding::kQuantized;
  f.num_elements = n;
  f.bits = bits;
  f.bucket_size = bucket;
  f.scale_mode = mode;
  return f;
}

EncodedHeaderFields Sparse(int64_t n, int64_t count) {
  EncodedHeaderFields f;
  f.encoding = Encoding::kSparse;
  f.num_elements = n;
  f.sparse_count = count;
  return f;
}

EncodedHeaderFields SparseCompact(int64_t n, int64_t count) {
  EncodedHeaderFields f = Sparse(n, count);
  f.encoding = Encoding::kSparseCompact;
  return f;
}

// A valid buffer for `f` with deterministic contents (sparse indices k·n / count, so spread over
// every block; SPARSE_COMPACT values 0x3c00 + k).
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
    uint8_t* codes = buffer->codes();
    for (int64_t i = 0; i < f.num_elements; ++i) {
      const uint64_t bit = static_cast<uint64_t>(i) * f.bits;
      codes[bit / 8] |= static_cast<uint8_t>((i % (1 << f.bits)) << (bit % 8));
    }
  }
  if (int32_t* idx = buffer->indices()) {
    for (int64_t k = 0; k < f.sparse_count; ++k) {
      idx[k] = static_cast<int32_t>(k * f.num_elements / std::max<int64_t>(f.sparse_count, 1));
      buffer->values()[k] = 1.5f * k;
    }
  }
  if (uint32_t* counts = buffer->block_counts()) {
    for (int64_t k = 0; k < f.sparse_count; ++k) {
      const int64_t index = k * f.num_elements / std::max<int64_t>(f.sparse_count, 1);
      ++counts[index / kSparseBlockElements];
      buffer->offsets()[k] = static_cast<uint16_t>(index % kSparseBlockElements);
      buffer->half_values()[k] = static_cast<uint16_t>(0x3c00 + k);
    }
  }
  return std::move(*buffer).Release();
}

// A SPARSE_COMPACT buffer of n elements holding `indices` (ascending) with fp16 values 0x4000 + j;
// the block counts are derived from the indices. Not validated, so tests can corrupt it.
std::vector<uint8_t> Compact(int64_t n, const std::vector<int64_t>& indices) {
  const int64_t k = static_cast<int64_t>(indices.size());
  auto buffer = EncodedBuffer::Create(SparseCompact(n, k));
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  for (int64_t j = 0; j < k; ++j) {
    ++buffer->block_counts()[indices[j] / kSparseBlockElements];
    buffer->offsets()[j] = static_cast<uint16_t>(indices[j] % kSparseBlockElements);
    buffer->half_values()[j] = static_cast<uint16_t>(0x4000 + j);
  }
  return std::move(*buffer).Release();
}

// Where a SPARSE_COMPACT buffer of n elements keeps block `block`'s count and entry j's offset.
size_t CountAt(int64_t block) { return 32 + 4 * static_cast<size_t>(block); }
size_t OffsetAt(int64_t n, int64_t j) {
  return 32 + 4 * static_cast<size_t>((n + kSparseBlockElements - 1) / kSparseBlockElements) +
         2 * static_cast<size_t>(j);
}

// Overwrites a little-endian header field.
void Put(std::vector<uint8_t>* b, size_t offset, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) (*b)[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

absl::Status Decode(const std::vector<uint8_t>& b, int64_t expected = -1, int64_t max = kNoLimit) {
  return DecodeEncoded(b.data(), b.size(), expected, max).status();
}

// Asserts a DataLoss error whose message contains `text`.
void ExpectCorrupt(const std::vector<uint8_t>& b, const std::string& text, int64_t expected = -1,
                   int64_t max = kNoLimit) {
  const absl::Status s = Decode(b, expected, max);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("encoded tensor: "));
}

// Asserts a DataLoss error whose whole message is "encoded tensor: " + `text`.
void ExpectCorruptExactly(const std::vector<uint8_t>& b, const std::string& text) {
  const absl::Status s = Decode(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(std::string(s.message()), "encoded tensor: " + text);
}

TEST(EncodedTensorTest, HeaderBytesAreTheDocumentedLayout) {
  const std::vector<uint8_t> b = Valid(Quantized(1000, 4, 512, ScaleMode::kAbsMax));
  ASSERT_EQ(b.size(), 32u + 16 + 500);
  const std::vector<uint8_t> header(b.begin(), b.begin() + 32);
  const std::vector<uint8_t> expected = {
      'H',  'P',  'T', 'E', 1, 4, 4, 2,   // magic, version, QUANTIZED, 4 bits, ABS_MAX
      0xe8, 0x03, 0,   0,   0, 0, 0, 0,   // num_elements 1000
      0x00, 0x02, 0,   0,                 // bucket_size 512
      0,    0,    0,   0,                 // sparse_count 0
      0x04, 0x02, 0,   0,   0, 0, 0, 0};  // payload_bytes 516 = 2 buckets · 8 + 500
  EXPECT_EQ(header, expected);
}

TEST(EncodedTensorTest, EncodedSizeFollowsTheFormulas) {
  EXPECT_EQ(EncodedSize(Dense(Encoding::kDenseF32, 1000)), 32u + 4000);
  EXPECT_EQ(EncodedSize(Dense(Encoding::kF16, 1000)), 32u + 2000);
  EXPECT_EQ(EncodedSize(Dense(Encoding::kBF16, 3)), 32u + 6);
  EXPECT_EQ(EncodedSize(Quantized(1000, 4, 512)), 32u + 2 * 8 + 500);
  EXPECT_EQ(EncodedSize(Quantized(1001, 1, 1000)), 32u + 2 * 8 + 126);
  EXPECT_EQ(EncodedSize(Quantized(5, 2, 2)), 32u + 3 * 8 + 2);
  EXPECT_EQ(EncodedSize(Sparse(1000, 37)), 32u + 37 * 8);
  // SPARSE_COMPACT: 4 bytes per block of 65536 elements, then 2 + 2 bytes per entry.
  EXPECT_EQ(EncodedSize(SparseCompact(1000, 37)), 32u + 4 + 148);
  EXPECT_EQ(EncodedSize(SparseCompact(65536, 0)), 32u + 4);
  EXPECT_EQ(EncodedSize(SparseCompact(65537, 1)), 32u + 8 + 4);
  EXPECT_EQ(EncodedSize(SparseCompact(65536 * 2 + 5, 10)), 32u + 3 * 4 + 40);
  EXPECT_EQ(EncodedSize(SparseCompact(0, 0)), 32u);
  EXPECT_EQ(EncodedSize(SparseCompact(10, 11)), 0u);  // invalid
  EXPECT_EQ(EncodedSize(Dense(Encoding::kDenseF32, 0)), 32u);
  EXPECT_EQ(EncodedSize(Quantized(10, 3, 4)), 0u);  // invalid
}

TEST(EncodedTensorTest, DenseF32RoundTrip) {
  const std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 1000));
  auto view = DecodeEncoded(b.data(), b.size(), 1000, 1000);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->encoding, Encoding::kDenseF32);
  EXPECT_EQ(view->num_elements, 1000);
  EXPECT_EQ(view->payload, b.data() + 32);
  EXPECT_EQ(view->payload_bytes, 4000u);
  ASSERT_NE(view->dense(), nullptr);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(view->dense()[i], 0.5f * i - 3);
    EXPECT_EQ(view->dense_at(i), 0.5f * i - 3);
  }
  EXPECT_EQ(view->half(), nullptr);
  EXPECT_EQ(view->meta(), nullptr);
  EXPECT_EQ(view->codes(), nullptr);
  EXPECT_EQ(view->indices(), nullptr);
}

TEST(EncodedTensorTest, HalfRoundTrips) {
  for (Encoding e : {Encoding::kF16, Encoding::kBF16}) {
    const std::vector<uint8_t> b = Valid(Dense(e, 77));
    auto view = DecodeEncoded(b.data(), b.size(), 77, kNoLimit);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->encoding, e);
    ASSERT_NE(view->half(), nullptr);
    EXPECT_EQ(view->dense(), nullptr);
    for (int i = 0; i < 77; ++i) {
      EXPECT_EQ(view->half()[i], 0x3c00 + i);
      EXPECT_EQ(view->half_at(i), 0x3c00 + i);
    }
  }
}

TEST(EncodedTensorTest, QuantizedRoundTripEveryBitWidth) {
  for (int bits : {1, 2, 4, 8}) {
    for (int64_t n : {0, 1, 7, 1000, 1001}) {
      for (int64_t bucket : {1, 3, 512}) {
        const std::vector<uint8_t> b = Valid(Quantized(n, bits, bucket, ScaleMode::kAbsMax));
        auto view = DecodeEncoded(b.data(), b.size(), n, kNoLimit);
        ASSERT_TRUE(view.ok()) << view.status() << " bits " << bits << " n " << n;
        EXPECT_EQ(view->bits, bits);
        EXPECT_EQ(view->bucket_size, bucket);
        EXPECT_EQ(view->scale_mode, ScaleMode::kAbsMax);
        const int64_t buckets = (n + bucket - 1) / bucket;
        EXPECT_EQ(view->num_buckets(), buckets);
        EXPECT_EQ(view->codes(), view->payload + 8 * buckets);
        EXPECT_EQ(view->codes_bytes(), static_cast<size_t>((n * bits + 7) / 8));
        for (int64_t k = 0; k < buckets; ++k) {
          EXPECT_EQ(view->lo_at(k), -1.0f - k);
          EXPECT_EQ(view->meta()[2 * k], -1.0f - k);
          EXPECT_EQ(view->delta_at(k), 0.25f);
        }
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(view->code_at(i), i % (1 << bits)) << i;
      }
    }
  }
}

TEST(EncodedTensorTest, SparseRoundTrip) {
  const std::vector<uint8_t> b = Valid(Sparse(1000, 37));
  auto view = DecodeEncoded(b.data(), b.size(), -1, kNoLimit);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->sparse_count, 37);
  ASSERT_NE(view->indices(), nullptr);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(view->values()), b.data() + 32 + 37 * 4);
  for (int k = 0; k < 37; ++k) {
    EXPECT_EQ(view->indices()[k], k * 1000 / 37);
    EXPECT_EQ(view->index_at(k), k * 1000 / 37);
    EXPECT_EQ(view->values()[k], 1.5f * k);
    EXPECT_EQ(view->value_at(k), 1.5f * k);
  }
  // Every element present, and none.
  EXPECT_TRUE(Decode(Valid(Sparse(10, 10))).ok());
  EXPECT_TRUE(Decode(Valid(Sparse(10, 0))).ok());
  EXPECT_TRUE(Decode(Valid(Sparse(0, 0))).ok());
}

TEST(EncodedTensorTest, SparseCompactLayout) {
  auto layout = ComputeLayout(SparseCompact(65536 * 2 + 5, 10));
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->blocks_bytes, 3u * 4);  // 3 blocks, the last of 5 elements
  EXPECT_EQ(layout->indices_bytes, 20u);
  EXPECT_EQ(layout->values_bytes, 20u);
  EXPECT_EQ(layout->dense_bytes + layout->meta_bytes + layout->codes_bytes, 0u);
  EXPECT_EQ(layout->payload_bytes(), 52u);
  // The header: encoding 6, sparse_count k, payload_bytes 4 + 2k + 2k.
  const std::vector<uint8_t> b = Valid(SparseCompact(1000, 37));
  ASSERT_EQ(b.size(), 32u + 4 + 148);
  EXPECT_EQ(b[5], 6);
  EXPECT_EQ(b[20], 37);
  EXPECT_EQ(b[24], 152);
  EXPECT_EQ(std::string(EncodingName(Encoding::kSparseCompact)), "SPARSE_COMPACT");
  EXPECT_TRUE(IsSparse(Encoding::kSparseCompact));
  EXPECT_TRUE(IsSparse(Encoding::kSparse));
  EXPECT_FALSE(IsSparse(Encoding::kF16));
}

TEST(EncodedTensorTest, SparseCompactRoundTripAcrossBlocks) {
  // 4 blocks: full, full (empty), full, and a short last one of 5 elements.
  const int64_t n = 3 * kSparseBlockElements + 5;
  const std::vector<int64_t> indices = {0,      1,      1000,   65535,  // block 0
                                        131072, 131073, 196607,         // block 2
                                        196608, 196612};                // block 3: offsets 0, 4
  const std::vector<uint32_t> counts = {4, 0, 3, 2};
  auto buffer = EncodedBuffer::Create(SparseCompact(n, 9));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->indices(), nullptr);
  EXPECT_EQ(buffer->values(), nullptr);
  EXPECT_EQ(buffer->half(), nullptr);
  ASSERT_NE(buffer->block_counts(), nullptr);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(buffer->block_counts()), buffer->data() + 32);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(buffer->offsets()), buffer->data() + 32 + 16);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(buffer->half_values()), buffer->data() + 32 + 16 + 18);
  for (int b = 0; b < 4; ++b) buffer->block_counts()[b] = counts[b];
  for (int j = 0; j < 9; ++j) {
    buffer->offsets()[j] = static_cast<uint16_t>(indices[j] % kSparseBlockElements);
    buffer->half_values()[j] = static_cast<uint16_t>(0x3c00 + 3 * j);
  }
  auto view = buffer->Finish();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->encoding, Encoding::kSparseCompact);
  EXPECT_EQ(view->num_elements, n);
  EXPECT_EQ(view->sparse_count, 9);
  EXPECT_EQ(view->num_blocks(), 4);
  EXPECT_EQ(view->payload_bytes, 16u + 18 + 18);
  ASSERT_TRUE(view->aligned());
  ASSERT_NE(view->block_counts(), nullptr);
  ASSERT_NE(view->offsets(), nullptr);
  ASSERT_NE(view->half_values(), nullptr);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(view->block_counts()), view->payload);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(view->offsets()), view->payload + 16);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(view->half_values()), view->payload + 16 + 18);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(view->half_values() + 9),
            buffer->data() + buffer->size());
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(view->block_counts()[b], counts[b]);
    EXPECT_EQ(view->block_count_at(b), counts[b]);
  }
  // Walking the blocks gives back the indices.
  std::vector<int64_t> walked;
  int64_t j = 0;
  for (int64_t b = 0; b < view->num_blocks(); ++b) {
    for (const int64_t end = j + view->block_count_at(b); j < end; ++j) {
      EXPECT_EQ(view->offsets()[j], view->offset_at(j));
      walked.push_back(b * kSparseBlockElements + view->offset_at(j));
    }
  }
  EXPECT_EQ(walked, indices);
  for (int k = 0; k < 9; ++k) {
    EXPECT_EQ(view->half_values()[k], 0x3c00 + 3 * k);
    EXPECT_EQ(view->half_value_at(k), 0x3c00 + 3 * k);
  }
  // The other encodings' sections are absent.
  EXPECT_EQ(view->indices(), nullptr);
  EXPECT_EQ(view->values(), nullptr);
  EXPECT_EQ(view->dense(), nullptr);
  EXPECT_EQ(view->half(), nullptr);
  EXPECT_EQ(view->meta(), nullptr);
  EXPECT_EQ(view->codes(), nullptr);
  EXPECT_EQ(view->num_buckets(), 0);
}

TEST(EncodedTensorTest, SparseCompactEdgeCases) {
  // Every element present: full blocks and a short last block, each count equal to its length.
  EXPECT_TRUE(Decode(Valid(SparseCompact(kSparseBlockElements, kSparseBlockElements))).ok());
  EXPECT_TRUE(
      Decode(Valid(SparseCompact(kSparseBlockElements + 1, kSparseBlockElements + 1))).ok());
  EXPECT_TRUE(Decode(Valid(SparseCompact(10, 10))).ok());
  EXPECT_TRUE(Decode(Valid(SparseCompact(1000, 37))).ok());
  EXPECT_TRUE(Decode(Valid(SparseCompact(3 * kSparseBlockElements + 5, 1000))).ok());
  // None: every count 0.
  EXPECT_TRUE(Decode(Valid(SparseCompact(10, 0))).ok());
  EXPECT_TRUE(Decode(Valid(SparseCompact(2 * kSparseBlockElements, 0))).ok());
  // Offsets restart in each block: 65535 then 0 is ascending as indices (65535, 65536).
  EXPECT_TRUE(Decode(Compact(kSparseBlockElements + 1, {65535, 65536})).ok());
  EXPECT_TRUE(Decode(Compact(2 * kSparseBlockElements, {100, 65536 + 3})).ok());
  // A SPARSE view has no compact sections.
  const std::vector<uint8_t> s = Valid(Sparse(100, 10));
  auto view = DecodeEncoded(s.data(), s.size(), 100, kNoLimit);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->num_blocks(), 0);
  EXPECT_EQ(view->block_counts(), nullptr);
  EXPECT_EQ(view->offsets(), nullptr);
  EXPECT_EQ(view->half_values(), nullptr);
  auto sparse = EncodedBuffer::Create(Sparse(100, 10));
  ASSERT_TRUE(sparse.ok());
  EXPECT_EQ(sparse->block_counts(), nullptr);
  EXPECT_EQ(sparse->offsets(), nullptr);
  EXPECT_EQ(sparse->half_values(), nullptr);
}

TEST(EncodedTensorTest, EmptyTensorsOfEveryEncoding) {
  for (const EncodedHeaderFields& f :
       {Dense(Encoding::kDenseF32, 0), Dense(Encoding::kF16, 0), Dense(Encoding::kBF16, 0),
        Quantized(0, 8, 16), Sparse(0, 0), SparseCompact(0, 0)}) {
    const std::vector<uint8_t> b = Valid(f);
    EXPECT_EQ(b.size(), 32u);
    EXPECT_TRUE(Decode(b, 0).ok()) << EncodingName(f.encoding);
  }
}

TEST(EncodedTensorTest, UnalignedBufferUsesMemcpyAccessors) {
  const std::vector<uint8_t> b = Valid(Sparse(100, 10));
  std::vector<uint8_t> shifted(b.size() + 1);
  std::memcpy(shifted.data() + 1, b.data(), b.size());
  auto view = DecodeEncoded(shifted.data() + 1, b.size(), 100, kNoLimit);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_FALSE(view->aligned());
  EXPECT_EQ(view->indices(), nullptr);
  EXPECT_EQ(view->values(), nullptr);
  EXPECT_EQ(view->index_at(9), 90);
  EXPECT_EQ(view->value_at(9), 13.5f);
}

TEST(EncodedTensorTest, UnalignedSparseCompactUsesMemcpyAccessors) {
  const int64_t n = kSparseBlockElements + 7;
  const std::vector<uint8_t> b = Compact(n, {3, 65535, 65536 + 6});
  for (size_t shift : {1, 2, 3}) {
    std::vector<uint8_t> shifted(b.size() + shift);
    std::memcpy(shifted.data() + shift, b.data(), b.size());
    auto view = DecodeEncoded(shifted.data() + shift, b.size(), n, kNoLimit);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_FALSE(view->aligned());
    EXPECT_EQ(view->block_counts(), nullptr);
    EXPECT_EQ(view->offsets(), nullptr);
    EXPECT_EQ(view->half_values(), nullptr);
    EXPECT_EQ(view->num_blocks(), 2);
    EXPECT_EQ(view->block_count_at(0), 2u);
    EXPECT_EQ(view->block_count_at(1), 1u);
    EXPECT_EQ(view->offset_at(0), 3);
    EXPECT_EQ(view->offset_at(1), 65535);
    EXPECT_EQ(view->offset_at(2), 6);
    EXPECT_EQ(view->half_value_at(0), 0x4000);
    EXPECT_EQ(view->half_value_at(2), 0x4002);
  }
}

TEST(EncodedTensorTest, BuilderFinishReturnsTheReceiversView) {
  auto buffer = EncodedBuffer::Create(Sparse(8, 2));
  ASSERT_TRUE(buffer.ok());
  buffer->indices()[0] = 3;
  buffer->indices()[1] = 3;  // not ascending
  EXPECT_EQ(buffer->Finish().status().code(), absl::StatusCode::kDataLoss);
  buffer->indices()[1] = 7;
  auto view = buffer->Finish();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->payload, buffer->data() + 32);
  EXPECT_EQ(buffer->dense(), nullptr);
  EXPECT_EQ(buffer->codes(), nullptr);
}

// ---- Validation: one test per rule, each asserting its message. ----

TEST(EncodedTensorValidationTest, ShorterThanHeader) {
  std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 4));
  b.resize(31);
  ExpectCorrupt(b, "buffer is 31 bytes, shorter than the 32-byte header");
  EXPECT_EQ(DecodeEncoded(nullptr, 0, -1, 10).status().code(), absl::StatusCode::kDataLoss);
}

TEST(EncodedTensorValidationTest, BadArguments) {
  EXPECT_EQ(DecodeEncoded(nullptr, 40, -1, 10).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 4));
  EXPECT_THAT(std::string(Decode(b, -1, -1).message()), HasSubstr("max_elements is -1"));
}

TEST(EncodedTensorValidationTest, Magic) {
  std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 4));
  b[3] = 'X';
  ExpectCorrupt(b, "bad magic 0x58545048, expected 0x45545048 ('HPTE')");
}

TEST(EncodedTensorValidationTest, Version) {
  std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 4));
  b[4] = 2;
  ExpectCorrupt(b, "unsupported version 2, this build reads version 1");
}

TEST(EncodedTensorValidationTest, UnknownEncoding) {
  std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 4));
  b[5] = 0;
  ExpectCorrupt(b, "unknown encoding 0");
  b[5] = 9;
  ExpectCorrupt(b, "unknown encoding 9");
  b[5] = 7;  // the first value past SPARSE_COMPACT
  ExpectCorruptExactly(b,
                       "unknown encoding 7 (known: 1 DENSE_F32, 2 F16, 3 BF16, 4 QUANTIZED, "
                       "5 SPARSE, 6 SPARSE_COMPACT)");
}

TEST(EncodedTensorValidationTest, QuantizedBits) {
  std::vector<uint8_t> b = Valid(Quantized(100, 4, 10));
  for (uint8_t bits : {0, 3, 16, 255}) {
    b[6] = bits;
    ExpectCorrupt(b, "bits is " + std::to_string(bits) + " for QUANTIZED, must be 1, 2, 4 or 8");
  }
}

TEST(EncodedTensorValidationTest, BitsMustBeZeroOtherwise) {
  std::vector<uint8_t> b = Valid(Dense(Encoding::kF16, 4));
  b[6] = 4;
  ExpectCorrupt(b, "bits is 4 for F16, must be 0");
  std::vector<uint8_t> c = Valid(SparseCompact(100, 4));
  c[6] = 1;
  ExpectCorruptExactly(c, "bits is 1 for SPARSE_COMPACT, must be 0");
  c[6] = 0;
  c[7] = 2;
  ExpectCorruptExactly(c, "scale_mode is 2 for SPARSE_COMPACT, must be 0");
}

TEST(EncodedTensorValidationTest, ScaleMode) {
  std::vector<uint8_t> b = Valid(Quantized(100, 4, 10));
  b[7] = 0;
  ExpectCorrupt(b, "scale_mode is 0 for QUANTIZED, must be 1 (MIN_MAX) or 2 (ABS_MAX)");
  b[7] = 3;
  ExpectCorrupt(b, "scale_mode is 3 for QUANTIZED");
  std::vector<uint8_t> d = Valid(Dense(Encoding::kDenseF32, 4));
  d[7] = 1;
  ExpectCorrupt(d, "scale_mode is 1 for DENSE_F32, must be 0");
}

TEST(EncodedTensorValidationTest, BucketSize) {
  std::vector<uint8_t> b = Valid(Quantized(100, 4, 10));
  Put(&b, 16, 0, 4);
  ExpectCorrupt(b, "bucket_size is 0 for QUANTIZED, must be > 0");
  std::vector<uint8_t> s = Valid(Sparse(100, 4));
  Put(&s, 16, 7, 4);
  ExpectCorrupt(s, "bucket_size is 7 for SPARSE, must be 0");
  std::vector<uint8_t> c = Valid(SparseCompact(100, 4));
  Put(&c, 16, 7, 4);
  ExpectCorruptExactly(c, "bucket_size is 7 for SPARSE_COMPACT, must be 0");
}

TEST(EncodedTensorValidationTest, NumElementsLimit) {
  std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 100));
  ExpectCorrupt(b, "num_elements 100 exceeds the limit 99", -1, 99);
  Put(&b, 8, uint64_t{1} << 63, 8);
  ExpectCorrupt(b, "num_elements 9223372036854775808 exceeds the limit 9223372036854775807");
}

TEST(EncodedTensorValidationTest, ExpectedElements) {
  const std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 100));
  ExpectCorrupt(b, "num_elements is 100, expected 101", 101);
  EXPECT_TRUE(Decode(b, 100).ok());
}

TEST(EncodedTensorValidationTest, SparseCount) {
  std::vector<uint8_t> b = Valid(Sparse(10, 4));
  Put(&b, 20, 11, 4);
  ExpectCorrupt(b, "sparse_count 11 exceeds num_elements 10");
  std::vector<uint8_t> d = Valid(Dense(Encoding::kDenseF32, 10));
  Put(&d, 20, 1, 4);
  ExpectCorrupt(d, "sparse_count is 1 for DENSE_F32, must be 0");
  std::vector<uint8_t> c = Valid(SparseCompact(10, 4));
  Put(&c, 20, 11, 4);
  ExpectCorruptExactly(c, "sparse_count 11 exceeds num_elements 10");
  Put(&c, 20, 0xffffffff, 4);
  Put(&c, 8, uint64_t{1} << 33, 8);
  ExpectCorrupt(c, "payload is 20 bytes, header implies");  // 2^32 − 1 is a valid count
}

TEST(EncodedTensorValidationTest, HeaderPayloadBytesVersusBufferSize) {
  std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 10));
  b.pop_back();
  ExpectCorrupt(b, "header says payload_bytes is 40, but 39 bytes follow the header");
  b.push_back(0);
  b.push_back(0);
  ExpectCorrupt(b, "header says payload_bytes is 40, but 41 bytes follow the header");
}

TEST(EncodedTensorValidationTest, PayloadVersusImpliedSize) {
  std::vector<uint8_t> b = Valid(Quantized(1000, 4, 512));
  b.resize(32 + 100);
  Put(&b, 24, 100, 8);
  const absl::Status s = Decode(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(),
            "encoded tensor: payload is 100 bytes, header implies 516 (QUANTIZED, 1000 elements, "
            "4 bits, bucket 512)");
  std::vector<uint8_t> s2 = Valid(Sparse(100, 5));
  Put(&s2, 20, 4, 4);
  ExpectCorrupt(s2, "payload is 40 bytes, header implies 32 (SPARSE, 100 elements, 4 entries)");
  // SPARSE_COMPACT: 4 bytes per block + 4 per entry. One entry less, or one block more.
  std::vector<uint8_t> c = Valid(SparseCompact(100, 5));  // 4 + 10 + 10
  Put(&c, 20, 4, 4);
  ExpectCorruptExactly(c,
                       "payload is 24 bytes, header implies 20 (SPARSE_COMPACT, 100 elements, 4 "
                       "entries)");
  c = Valid(SparseCompact(100, 5));
  Put(&c, 8, kSparseBlockElements + 1, 8);
  ExpectCorruptExactly(c,
                       "payload is 24 bytes, header implies 28 (SPARSE_COMPACT, 65537 elements, 5 "
                       "entries)");
  c = Valid(SparseCompact(100, 5));
  c.pop_back();
  ExpectCorruptExactly(c, "header says payload_bytes is 24, but 23 bytes follow the header");
}

TEST(EncodedTensorValidationTest, HugeCountsDoNotOverflowIntoSmallSizes) {
  // 4 · 2^62 wraps to 0 in 64 bits: an unchecked product would accept an empty payload.
  std::vector<uint8_t> b = Valid(Dense(Encoding::kDenseF32, 0));
  Put(&b, 8, uint64_t{1} << 62, 8);
  ExpectCorrupt(b,
                "payload size implied by the header overflows 64 bits (DENSE_F32, "
                "4611686018427387904 elements)");
  // n·bits wraps for n near 2^63 with 8 bits.
  std::vector<uint8_t> q = Valid(Quantized(0, 8, 1));
  Put(&q, 8, (uint64_t{1} << 63) - 1, 8);
  Put(&q, 16, 0xffffffff, 4);
  ExpectCorrupt(q, "overflows 64 bits (QUANTIZED");
  // Large but representable: reported as a size mismatch.
  std::vector<uint8_t> h = Valid(Dense(Encoding::kF16, 0));
  Put(&h, 8, uint64_t{1} << 61, 8);
  ExpectCorrupt(h, "payload is 0 bytes, header implies 4611686018427387904 (F16");
  // SPARSE_COMPACT's largest size, 4 · ceil((2^63 − 1) / 2^16) = 2^49, cannot overflow.
  std::vector<uint8_t> c = Valid(SparseCompact(0, 0));
  Put(&c, 8, (uint64_t{1} << 63) - 1, 8);
  ExpectCorruptExactly(c,
                       "payload is 0 bytes, header implies 562949953421312 (SPARSE_COMPACT, "
                       "9223372036854775807 elements, 0 entries)");
}

TEST(EncodedTensorValidationTest, SparseIndicesInRange) {
  std::vector<uint8_t> b = Valid(Sparse(10, 3));
  Put(&b, 32 + 8, 10, 4);
  ExpectCorrupt(b, "sparse index 10 at position 2 is outside [0, 10)");
  Put(&b, 32, 0xffffffff, 4);
  ExpectCorrupt(b, "sparse index -1 at position 0 is outside [0, 10)");
}

TEST(EncodedTensorValidationTest, SparseIndicesStrictlyAscending) {
  std::vector<uint8_t> b = Valid(Sparse(10, 3));  // indices 0, 3, 6
  Put(&b, 32 + 8, 3, 4);
  ExpectCorrupt(b, "sparse index 3 at position 2 is not above the previous index 3");
  Put(&b, 32 + 8, 1, 4);
  ExpectCorrupt(b, "sparse index 1 at position 2 is not above the previous index 3");
}

TEST(EncodedTensorValidationTest, SparseCompactBlockCountWithinBlock) {
  // A full block holds at most 65536 entries, the short last block its length.
  const int64_t n = 2 * kSparseBlockElements + 5;
  std::vector<uint8_t> b = Compact(n, {1, 2, 65536, 131072});
  Put(&b, CountAt(0), 65537, 4);
  ExpectCorruptExactly(b, "sparse block 0 lists 65537 entries, but has 65536 elements");
  b = Compact(n, {1, 2, 65536, 131072});
  Put(&b, CountAt(2), 6, 4);
  ExpectCorruptExactly(b, "sparse block 2 lists 6 entries, but has 5 elements");
  // Checked before the sum: a count of 2^32 − 1 names the block, not the total.
  b = Compact(10, {4});
  Put(&b, CountAt(0), 0xffffffff, 4);
  ExpectCorruptExactly(b, "sparse block 0 lists 4294967295 entries, but has 10 elements");
  // Equal to the length is fine (every element listed).
  EXPECT_TRUE(Decode(Compact(n, {1, 131072, 131073, 131074, 131075, 131076})).ok());
}

TEST(EncodedTensorValidationTest, SparseCompactCountsExceedSparseCount) {
  const int64_t n = 2 * kSparseBlockElements + 5;
  std::vector<uint8_t> b = Compact(n, {1, 2, 65536});  // counts 2, 1, 0
  Put(&b, CountAt(2), 1, 4);
  ExpectCorruptExactly(b, "sparse block counts exceed sparse_count 3 at block 2");
  b = Compact(n, {1, 2, 65536});
  Put(&b, CountAt(0), 4, 4);
  ExpectCorruptExactly(b, "sparse block counts exceed sparse_count 3 at block 0");
  b = Compact(1000, {});
  Put(&b, CountAt(0), 1, 4);
  ExpectCorruptExactly(b, "sparse block counts exceed sparse_count 0 at block 0");
}

TEST(EncodedTensorValidationTest, SparseCompactCountsAddUpToLess) {
  const int64_t n = 2 * kSparseBlockElements + 5;
  std::vector<uint8_t> b = Compact(n, {1, 2, 65536});  // counts 2, 1, 0
  Put(&b, CountAt(1), 0, 4);
  ExpectCorruptExactly(b, "sparse block counts add up to 2, sparse_count is 3");
  Put(&b, CountAt(0), 0, 4);
  ExpectCorruptExactly(b, "sparse block counts add up to 0, sparse_count is 3");
  // Moving an entry to another block keeps the sum; then the offsets decide.
  b = Compact(n, {1, 2, 65536});
  Put(&b, CountAt(0), 1, 4);
  Put(&b, CountAt(1), 2, 4);  // block 1 now holds offsets 2 and 0: not ascending
  ExpectCorruptExactly(b,
                       "sparse offset 0 at position 2 is not above the previous offset 2 in "
                       "block 1 (offsets must be strictly ascending)");
}

TEST(EncodedTensorValidationTest, SparseCompactOffsetInsideBlock) {
  const int64_t n = 2 * kSparseBlockElements + 5;  // the last block has 5 elements
  std::vector<uint8_t> b = Compact(n, {1, 65536, 131072 + 4});
  Put(&b, OffsetAt(n, 2), 5, 2);
  ExpectCorruptExactly(b, "sparse offset 5 at position 2 is outside block 2's 5 elements");
  Put(&b, OffsetAt(n, 2), 65535, 2);
  ExpectCorruptExactly(b, "sparse offset 65535 at position 2 is outside block 2's 5 elements");
  // A tensor of one short block.
  std::vector<uint8_t> c = Compact(10, {0, 9});
  Put(&c, OffsetAt(10, 1), 10, 2);
  ExpectCorruptExactly(c, "sparse offset 10 at position 1 is outside block 0's 10 elements");
}

TEST(EncodedTensorValidationTest, SparseCompactOffsetsStrictlyAscending) {
  const int64_t n = 2 * kSparseBlockElements + 5;
  std::vector<uint8_t> b = Compact(n, {3, 7, 9, 65536 + 10, 65536 + 20});
  Put(&b, OffsetAt(n, 1), 3, 2);  // equal
  ExpectCorruptExactly(b,
                       "sparse offset 3 at position 1 is not above the previous offset 3 in "
                       "block 0 (offsets must be strictly ascending)");
  b = Compact(n, {3, 7, 9, 65536 + 10, 65536 + 20});
  Put(&b, OffsetAt(n, 4), 2, 2);  // descending, in the second block
  ExpectCorruptExactly(b,
                       "sparse offset 2 at position 4 is not above the previous offset 10 in "
                       "block 1 (offsets must be strictly ascending)");
}

TEST(EncodedTensorValidationTest, QuantizedMetadataFinite) {
  std::vector<uint8_t> b = Valid(Quantized(10, 8, 4));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(b.data() + 32 + 8, &nan, 4);
  ExpectCorrupt(b, "quantization metadata of bucket 1 is not finite (lo nan, delta 0.25)");
  b = Valid(Quantized(10, 8, 4));
  std::memcpy(b.data() + 32 + 16 + 4, &inf, 4);
  ExpectCorrupt(b, "quantization metadata of bucket 2 is not finite (lo -3, delta inf)");
}

TEST(EncodedTensorValidationTest, QuantizedDeltaNotNegative) {
  std::vector<uint8_t> b = Valid(Quantized(10, 8, 4));
  const float negative = -0.5f;
  std::memcpy(b.data() + 32 + 4, &negative, 4);
  ExpectCorrupt(b, "quantization delta of bucket 0 is negative (-0.5)");
}

TEST(EncodedTensorValidationTest, QuantizedPaddingBitsZero) {
  std::vector<uint8_t> b = Valid(Quantized(5, 2, 8));  // 10 code bits: 6 padding bits
  b.back() |= 0x40;
  ExpectCorrupt(b, "padding bits after the last code are not zero (last byte 0x4");
}

TEST(EncodedTensorValidationTest, BuilderRejectsBadFields) {
  auto check = [](const EncodedHeaderFields& f, const std::string& text) {
    auto layout = ComputeLayout(f);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(layout.status().message()), HasSubstr(text));
    EXPECT_FALSE(EncodedBuffer::Create(f).ok());
    EXPECT_EQ(EncodedSize(f), 0u);
  };
  check(Dense(Encoding::kDenseF32, -1), "num_elements is -1, must be ≥ 0");
  check(Quantized(10, 5, 4), "bits is 5 for QUANTIZED");
  check(Quantized(10, 4, 0), "bucket_size is 0 for QUANTIZED");
  check(Quantized(10, 4, int64_t{1} << 32), "bucket_size is 4294967296, must be < 2^32");
  check(Quantized(10, 4, 4, ScaleMode::kNone), "scale_mode is 0 for QUANTIZED");
  check(Sparse(int64_t{1} << 33, int64_t{1} << 32), "sparse_count is 4294967296, must be < 2^32");
  check(Sparse(3, 4), "sparse_count 4 exceeds num_elements 3");
  check(Sparse(3, -1), "sparse_count is -1");
  check(SparseCompact(3, 4), "sparse_count 4 exceeds num_elements 3");
  check(SparseCompact(int64_t{1} << 33, int64_t{1} << 32),
        "sparse_count is 4294967296, must be < 2^32");
  check(SparseCompact(3, -1), "sparse_count is -1");
  check(EncodedHeaderFields{static_cast<Encoding>(7)}, "unknown encoding 7");
  EXPECT_THAT(std::string(ComputeLayout(Dense(Encoding::kF16, 11), 10).status().message()),
              HasSubstr("num_elements 11 exceeds the limit 10"));
}

TEST(EncodedTensorValidationTest, WriteHeaderChecksTheBufferSize) {
  std::vector<uint8_t> b(32 + 39);
  const absl::Status s = WriteHeader(Dense(Encoding::kDenseF32, 10), b.data(), b.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("buffer is 71 bytes, the fields need 72"));
  b.resize(72);
  EXPECT_TRUE(WriteHeader(Dense(Encoding::kDenseF32, 10), b.data(), b.size()).ok());
  EXPECT_TRUE(Decode(b, 10).ok());
  EXPECT_FALSE(WriteHeader(Dense(Encoding::kDenseF32, 10), nullptr, 72).ok());
}

// The header alone (a payload laid out elsewhere) is WriteHeader's first 32 bytes.
TEST(EncodedTensorValidationTest, WriteHeaderBytesIsWriteHeadersHeader) {
  const EncodedHeaderFields fields = SparseCompact(70000, 5);
  std::vector<uint8_t> whole(EncodedSize(fields));
  ASSERT_TRUE(WriteHeader(fields, whole.data(), whole.size()).ok());
  uint8_t header[kEncodedHeaderBytes];
  ASSERT_TRUE(WriteHeaderBytes(fields, header).ok());
  EXPECT_TRUE(std::equal(header, header + kEncodedHeaderBytes, whole.begin()));
  EXPECT_EQ(WriteHeaderBytes(SparseCompact(3, -1), header).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteHeaderBytes(fields, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hptrain::comm
