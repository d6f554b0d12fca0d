// Raw encoded-tensor layout: round trips of every encoding, the exact header bytes, and one test
// per validation rule asserting its message.
#include "runtime/comm/encoded_tensor.h"

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

// A valid buffer for `f` with deterministic contents (sparse indices 0, 2, 4, ...).
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
  return std::move(*buffer).Release();
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

TEST(EncodedTensorTest, EmptyTensorsOfEveryEncoding) {
  for (const EncodedHeaderFields& f :
       {Dense(Encoding::kDenseF32, 0), Dense(Encoding::kF16, 0), Dense(Encoding::kBF16, 0),
        Quantized(0, 8, 16), Sparse(0, 0)}) {
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

}  // namespace
}  // namespace hptrain::comm
