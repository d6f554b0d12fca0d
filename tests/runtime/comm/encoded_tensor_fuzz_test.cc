// Deterministic fuzzing of the encoded-tensor decoders (seeded SplitMix64, > 10^5 inputs, < 10 s).
//
// Every raw input goes to DecodeEncoded() and to an independent reference validator written here
// from docs/wire_format.md with 128-bit arithmetic (so it cannot share an overflow bug); the two
// must agree on accept/reject, and every accepted view's sections must lie inside the buffer by the
// reference's own bounds. Buffers are copied into exact-size heap allocations, so under
// AddressSanitizer any read past the end is caught. Every accepted view is read completely.
// Inputs: truncations of valid encodings at every length, bit flips, header fields set to extreme
// values (2^63, 2^32 − 1, ...), counts off by a little with a consistent payload_bytes, random
// section contents, random bytes. Protobuf messages and chunk streams get the same treatment.
//
// Built with -DHPTRAIN_LIBFUZZER (clang -fsanitize=fuzzer), the same checks become a libFuzzer
// target: the first input byte picks raw, proto, or raw-behind-a-valid-frame decoding
// (tests/runtime/comm/CMakeLists.txt, option HPTRAIN_LIBFUZZER).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "runtime/base/splitmix64.h"
#include "runtime/comm/encoded_tensor.h"
#include "runtime/comm/encoded_tensor_proto.h"

namespace hptrain::comm {
namespace {

using u128 = unsigned __int128;
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

uint64_t Le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The reference validator. Returns true when the buffer is a valid encoded tensor; then
// `sections` holds [begin, end) byte offsets of every payload section.
struct Section {
  u128 begin, end;
};
bool ReferenceAccepts(const uint8_t* d, size_t size, int64_t expected, int64_t max,
                      std::vector<Section>* sections) {
  sections->clear();
  if (size < 32 || Le(d, 4) != 0x45545048 || d[4] != 1) return false;
  const unsigned encoding = d[5], bits = d[6], mode = d[7];
  const u128 n = Le(d + 8, 8), bucket = Le(d + 16, 4), count = Le(d + 20, 4), pb = Le(d + 24, 8);
  if (encoding < 1 || encoding > 6) return false;
  if (encoding == 4) {
    if (!(bits == 1 || bits == 2 || bits == 4 || bits == 8) || !(mode == 1 || mode == 2) ||
        bucket == 0) {
      return false;
    }
  } else if (bits != 0 || mode != 0 || bucket != 0) {
    return false;
  }
  if (n > static_cast<u128>(max)) return false;
  if (expected >= 0 && n != static_cast<u128>(expected)) return false;
  if (encoding == 5 || encoding == 6 ? count > n : count != 0) return false;
  u128 offset = 32;
  auto add = [&](u128 bytes) {
    sections->push_back({offset, offset + bytes});
    offset += bytes;
  };
  switch (encoding) {
    case 1:
      add(4 * n);
      break;
    case 2:
    case 3:
      add(2 * n);
      break;
    case 4:
      add(8 * ((n + bucket - 1) / bucket));
      add((n * bits + 7) / 8);
      break;
    case 5:
      add(4 * count);
      add(4 * count);
      break;
    case 6:  // blocks of 65536 elements: a u32 count each, then u16 offsets, then fp16 values
      add(4 * ((n + 65535) / 65536));
      add(2 * count);
      add(2 * count);
      break;
  }
  if (pb != size - 32 || offset != size) return false;
  if (encoding == 5) {
    int64_t previous = -1;
    for (u128 k = 0; k < count; ++k) {
      const int32_t index = static_cast<int32_t>(Le(d + 32 + 4 * static_cast<size_t>(k), 4));
      if (index <= previous || static_cast<u128>(index) >= n) return false;
      previous = index;
    }
  }
  if (encoding == 6) {
    const u128 blocks = (n + 65535) / 65536;
    const size_t offsets = static_cast<size_t>(32 + 4 * blocks);
    u128 entry = 0;
    for (u128 b = 0; b < blocks; ++b) {
      const u128 length = n - 65536 * b < 65536 ? n - 65536 * b : 65536;
      const u128 entries = Le(d + 32 + 4 * static_cast<size_t>(b), 4);
      if (entries > length || entry + entries > count) return false;
      int64_t previous = -1;
      for (const u128 end = entry + entries; entry < end; ++entry) {
        const int64_t at =
            static_cast<int64_t>(Le(d + offsets + 2 * static_cast<size_t>(entry), 2));
        if (at <= previous || static_cast<u128>(at) >= length) return false;
        previous = at;
      }
    }
    if (entry != count) return false;
  }
  if (encoding == 4) {
    for (u128 b = 0; 32 + 8 * b < (*sections)[0].end; ++b) {
      float lo, delta;
      std::memcpy(&lo, d + 32 + 8 * static_cast<size_t>(b), 4);
      std::memcpy(&delta, d + 36 + 8 * static_cast<size_t>(b), 4);
      if (!std::isfinite(lo) || !std::isfinite(delta) || delta < 0) return false;
    }
    const u128 used = n * bits;
    if (used % 8 != 0 && (d[size - 1] >> (used % 8)) != 0) return false;
  }
  return true;
}

// Decodes `bytes` (copied to an exact-size allocation) and checks it against the reference.
// Returns "" or a description of the first violation; `accepted` (optional) tells whether the
// decoder accepted the buffer.
std::string CheckRaw(const uint8_t* input, size_t size, int64_t expected, int64_t max,
                     bool* accepted = nullptr) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(copy.get(), input, size);
  const uint8_t* d = size > 0 ? copy.get() : nullptr;
  std::vector<Section> sections;
  const bool want = ReferenceAccepts(d, size, expected, max, &sections);
  auto view = DecodeEncoded(d, size, expected, max);
  if (accepted != nullptr) *accepted = view.ok();
  if (view.ok() != want) {
    return std::string(want ? "rejected a valid buffer: " + view.status().ToString()
                            : "accepted an invalid buffer");
  }
  if (!view.ok()) {
    const std::string message(view.status().message());
    if (view.status().code() != absl::StatusCode::kDataLoss) return "not DataLoss: " + message;
    if (message.rfind("encoded tensor: ", 0) != 0 || message.find('\n') != std::string::npos) {
      return "badly formed message: " + message;
    }
    return "";
  }
  const EncodedView& v = *view;
  if (v.payload != d + 32 || v.payload_bytes != size - 32) return "payload is not the rest";
  // The view's own section sizes must match the reference's bounds, which lie inside the buffer.
  const u128 end = size;
  for (const Section& s : sections) {
    if (s.begin > s.end || s.end > end) return "reference section outside the buffer";
  }
  switch (v.encoding) {
    case Encoding::kDenseF32:
    case Encoding::kF16:
    case Encoding::kBF16: {
      const size_t width = v.encoding == Encoding::kDenseF32 ? 4 : 2;
      if (sections[0].end - sections[0].begin != width * static_cast<u128>(v.num_elements)) {
        return "dense section size";
      }
      float sink = 0;
      for (int64_t i = 0; i < v.num_elements; ++i) {
        sink += width == 4 ? v.dense_at(i) : v.half_at(i);
      }
      (void)sink;
      break;
    }
    case Encoding::kQuantized: {
      if (v.codes() != d + static_cast<size_t>(sections[1].begin) ||
          v.meta_bytes() != sections[0].end - sections[0].begin ||
          v.codes_bytes() != sections[1].end - sections[1].begin) {
        return "quantized sections";
      }
      uint64_t sink = 0;
      for (int64_t b = 0; b < v.num_buckets(); ++b) sink += v.lo_at(b) < v.delta_at(b);
      for (int64_t i = 0; i < v.num_elements; ++i) {
        const uint32_t code = v.code_at(i);
        if (code >= (1u << v.bits)) return "code out of range";
        sink += code;
      }
      (void)sink;
      break;
    }
    case Encoding::kSparse: {
      if (4 * static_cast<u128>(v.sparse_count) != sections[0].end - sections[0].begin ||
          sections[1].end != end) {
        return "sparse sections";
      }
      float sink = 0;
      for (int64_t k = 0; k < v.sparse_count; ++k) {
        if (v.index_at(k) < 0 || v.index_at(k) >= v.num_elements) return "index out of range";
        if (k > 0 && v.index_at(k) <= v.index_at(k - 1)) return "indices not ascending";
        sink += v.value_at(k);
      }
      (void)sink;
      break;
    }
    case Encoding::kSparseCompact: {
      if (4 * static_cast<u128>(v.num_blocks()) != sections[0].end - sections[0].begin ||
          2 * static_cast<u128>(v.sparse_count) != sections[1].end - sections[1].begin ||
          sections[2].end != end) {
        return "sparse compact sections";
      }
      // The entries as indices: in range and strictly ascending across blocks, counts summing to
      // sparse_count.
      uint32_t sink = 0;
      int64_t entry = 0, previous = -1;
      for (int64_t b = 0; b < v.num_blocks(); ++b) {
        const int64_t entries = v.block_count_at(b);
        if (entries > v.sparse_count - entry) return "block counts above sparse_count";
        for (const int64_t stop = entry + entries; entry < stop; ++entry) {
          const int64_t index = b * kSparseBlockElements + v.offset_at(entry);
          if (index >= v.num_elements) return "compact index out of range";
          if (index <= previous) return "compact indices not ascending";
          previous = index;
          sink += v.half_value_at(entry);
        }
      }
      if (entry != v.sparse_count) return "block counts below sparse_count";
      (void)sink;
      break;
    }
  }
  if (v.aligned() && v.encoding == Encoding::kSparseCompact &&
      (reinterpret_cast<const uint8_t*>(v.block_counts()) != d + 32 ||
       reinterpret_cast<const uint8_t*>(v.offsets()) !=
           d + static_cast<size_t>(sections[1].begin) ||
       reinterpret_cast<const uint8_t*>(v.half_values() + v.sparse_count) != d + size)) {
    return "compact sections are not where the reference puts them";
  }
  if (v.aligned() && v.encoding == Encoding::kSparse && v.sparse_count > 0 &&
      reinterpret_cast<const uint8_t*>(v.values() + v.sparse_count) != d + size) {
    return "values do not end at the buffer's end";
  }
  return "";
}

// FromProto on a (possibly corrupt) message. Accepted results must be a valid raw buffer, and
// converting back must give the same message.
std::string CheckProto(const v1::EncodedTensor& message, int64_t max) {
  auto decoded = FromProto(message, max);
  if (!decoded.ok()) {
    const std::string text(decoded.status().message());
    if (decoded.status().code() != absl::StatusCode::kDataLoss) return "not DataLoss: " + text;
    if (text.rfind("encoded tensor proto: ", 0) != 0) return "badly formed message: " + text;
    return "";
  }
  const EncodedBuffer& buffer = decoded->buffer;
  std::string raw = CheckRaw(buffer.data(), buffer.size(), decoded->view.num_elements, max);
  if (!raw.empty()) return "FromProto result: " + raw;
  if (decoded->view.payload != buffer.data() + 32) return "view not into the buffer";
  auto back = ToProto(decoded->view, decoded->dtype, decoded->shape);
  if (!back.ok()) return "ToProto failed: " + back.status().ToString();
  v1::EncodedTensor known = message;
  known.DiscardUnknownFields();
  if (!google::protobuf::util::MessageDifferencer::Equals(*back, known)) {
    return "proto round trip differs";
  }
  return "";
}

std::string CheckProtoBytes(const uint8_t* data, size_t size, int64_t max) {
  v1::EncodedTensor message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return "";
  return CheckProto(message, max);
}

}  // namespace
}  // namespace hptrain::comm

#ifdef HPTRAIN_LIBFUZZER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // data[0] picks the mode and the element limit. Mode 2 forces magic, version and a consistent
  // payload_bytes, so the fuzzer spends its time on the fields behind them.
  const int64_t limits[] = {hptrain::comm::kNoLimit, 1 << 20, 100};
  const int64_t max = limits[(data[0] / 3) % 3];
  std::string failure;
  switch (data[0] % 3) {
    case 0:
      failure = hptrain::comm::CheckRaw(data + 1, size - 1, -1, max);
      break;
    case 1:
      failure = hptrain::comm::CheckProtoBytes(data + 1, size - 1, max);
      break;
    case 2: {
      std::vector<uint8_t> b(data + 1, data + size);
      if (b.size() >= 32) {
        const uint64_t payload = b.size() - 32;
        std::memcpy(b.data(), "HPTE\x01", 5);
        for (int i = 0; i < 8; ++i) b[24 + i] = static_cast<uint8_t>(payload >> (8 * i));
      }
      failure = hptrain::comm::CheckRaw(b.data(), b.size(), -1, max);
      break;
    }
  }
  if (!failure.empty()) {
    std::fprintf(stderr, "encoded tensor fuzz: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}

#else  // gtest: the deterministic campaign

#include "gtest/gtest.h"

namespace hptrain::comm {
namespace {

// Valid encodings of every kind and a spread of sizes, with random contents.
std::vector<std::vector<uint8_t>> Seeds(SplitMix64& rng) {
  std::vector<EncodedHeaderFields> all;
  for (int64_t n : {0, 1, 5, 64, 257}) {
    for (Encoding e : {Encoding::kDenseF32, Encoding::kF16, Encoding::kBF16}) {
      all.push_back({e, 0, ScaleMode::kNone, n, 0, 0});
    }
    for (int bits : {1, 2, 4, 8}) {
      for (int64_t bucket : {1, 3, 64, 1000}) {
        all.push_back({Encoding::kQuantized, bits,
                       rng.Below(2) ? ScaleMode::kMinMax : ScaleMode::kAbsMax, n, bucket, 0});
      }
    }
    for (int64_t count : {int64_t{0}, int64_t{1}, n / 3, n}) {
      if (count > n) continue;
      all.push_back({Encoding::kSparse, 0, ScaleMode::kNone, n, 0, count});
      all.push_back({Encoding::kSparseCompact, 0, ScaleMode::kNone, n, 0, count});
    }
  }
  // SPARSE_COMPACT over several blocks, the last one short, few entries (so seeds stay small).
  for (int64_t n : {kSparseBlockElements, kSparseBlockElements + 3, 2 * kSparseBlockElements + 5}) {
    for (int64_t count : {0, 1, 7, 100}) {
      all.push_back({Encoding::kSparseCompact, 0, ScaleMode::kNone, n, 0, count});
    }
  }
  std::vector<std::vector<uint8_t>> seeds;
  for (const EncodedHeaderFields& f : all) {
    auto buffer = EncodedBuffer::Create(f);
    EXPECT_TRUE(buffer.ok());
    uint8_t* payload = buffer->data() + 32;
    for (size_t i = 0; i < buffer->size() - 32; ++i) payload[i] = static_cast<uint8_t>(rng.Next());
    if (float* meta = buffer->meta()) {
      for (size_t b = 0; b < buffer->layout().meta_bytes / 4; ++b) {
        meta[b] = static_cast<float>(std::fabs(rng.Symmetric()) * 10);
      }
      const uint64_t used = static_cast<uint64_t>(f.num_elements) * f.bits;
      if (used % 8) buffer->codes()[used / 8] &= static_cast<uint8_t>((1u << (used % 8)) - 1);
    }
    if (int32_t* idx = buffer->indices()) {
      // count distinct ascending indices out of n: selection sampling.
      int64_t chosen = 0;
      for (int64_t i = 0; i < f.num_elements && chosen < f.sparse_count; ++i) {
        if (rng.Below(f.num_elements - i) < static_cast<uint64_t>(f.sparse_count - chosen)) {
          idx[chosen++] = static_cast<int32_t>(i);
        }
      }
    }
    if (uint32_t* counts = buffer->block_counts()) {
      // The same sampling, written as per-block counts and offsets (values stay random).
      std::memset(counts, 0, buffer->layout().blocks_bytes);
      int64_t chosen = 0;
      for (int64_t i = 0; i < f.num_elements && chosen < f.sparse_count; ++i) {
        if (rng.Below(f.num_elements - i) < static_cast<uint64_t>(f.sparse_count - chosen)) {
          ++counts[i / kSparseBlockElements];
          buffer->offsets()[chosen++] = static_cast<uint16_t>(i % kSparseBlockElements);
        }
      }
    }
    EXPECT_TRUE(buffer->Finish().ok()) << buffer->Finish().status();
    seeds.push_back(std::move(*buffer).Release());
  }
  return seeds;
}

void Put(std::vector<uint8_t>* b, size_t offset, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) (*b)[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t Extreme(SplitMix64& rng) {
  static const uint64_t kValues[] = {0,
                                     1,
                                     2,
                                     3,
                                     7,
                                     8,
                                     255,
                                     256,
                                     (uint64_t{1} << 31) - 1,
                                     uint64_t{1} << 31,
                                     (uint64_t{1} << 32) - 1,
                                     uint64_t{1} << 32,
                                     uint64_t{1} << 61,
                                     uint64_t{1} << 62,
                                     (uint64_t{1} << 63) - 1,
                                     uint64_t{1} << 63,
                                     ~uint64_t{0},
                                     ~uint64_t{0} / 4 + 1,
                                     ~uint64_t{0} / 8 + 1};
  const size_t k = rng.Below(sizeof(kValues) / sizeof(kValues[0]) + 1);
  return k < sizeof(kValues) / sizeof(kValues[0]) ? kValues[k] : rng.Next();
}

class EncodedTensorFuzzTest : public ::testing::Test {
 protected:
  // Runs one raw input with a random expectation and limit; counts inputs and accepted ones.
  void Raw(const std::vector<uint8_t>& b) {
    static const int64_t kLimits[] = {kNoLimit, int64_t{1} << 34, 1 << 20, 300, 64, 0};
    const int64_t max = kLimits[rng_.Below(6)];
    int64_t expected = -1;
    if (b.size() >= 16 && rng_.Below(4) == 0) {
      expected = static_cast<int64_t>(Le(b.data() + 8, 8) & 0x7fffffffffffffff);
      if (rng_.Below(4) == 0 && expected < kNoLimit) expected += 1;
    }
    Raw(b, expected, max);
  }
  void Raw(const std::vector<uint8_t>& b, int64_t expected, int64_t max) {
    bool accepted = false;
    const std::string failure = CheckRaw(b.data(), b.size(), expected, max, &accepted);
    ASSERT_EQ(failure, "") << "input " << inputs_ << " of " << b.size() << " bytes";
    ++inputs_;
    if (accepted) ++accepted_;
  }

  SplitMix64 rng_{0x5eed'e4c0'de00'0001};
  int64_t inputs_ = 0;
  int64_t accepted_ = 0;
};

TEST_F(EncodedTensorFuzzTest, CorruptedRawBuffers) {
  const std::vector<std::vector<uint8_t>> seeds = Seeds(rng_);
  ASSERT_GT(seeds.size(), 100u);

  // 1. Every seed as is, and truncated at every length, and with trailing bytes.
  for (const std::vector<uint8_t>& seed : seeds) {
    Raw(seed);
    for (size_t len = 0; len < seed.size(); ++len) {
      Raw(std::vector<uint8_t>(seed.begin(), seed.begin() + len));
    }
    for (int extra = 1; extra <= 8; ++extra) {
      std::vector<uint8_t> longer = seed;
      longer.resize(seed.size() + extra, static_cast<uint8_t>(rng_.Next()));
      Raw(longer);
    }
  }
  const int64_t after_truncation = inputs_;

  // 2. Random bit flips, 1 to 8 of them, anywhere.
  for (int iter = 0; iter < 30000; ++iter) {
    std::vector<uint8_t> b = seeds[rng_.Below(seeds.size())];
    const int flips = 1 + static_cast<int>(rng_.Below(8));
    for (int f = 0; f < flips; ++f) {
      // Half the flips hit the header, where the sizes live.
      const size_t at = rng_.Below(2) ? rng_.Below(32) : rng_.Below(b.size());
      b[at] ^= static_cast<uint8_t>(1u << rng_.Below(8));
    }
    Raw(b);
  }

  // 3. Header fields set to extreme values; half the time payload_bytes is kept consistent with
  //    the buffer, so the implied-size and content checks are reached.
  for (int iter = 0; iter < 30000; ++iter) {
    std::vector<uint8_t> b = seeds[rng_.Below(seeds.size())];
    const int fields = 1 + static_cast<int>(rng_.Below(3));
    for (int f = 0; f < fields; ++f) {
      const uint64_t value = Extreme(rng_);
      switch (rng_.Below(7)) {
        case 0:  // num_elements
          Put(&b, 8, value, 8);
          break;
        case 1:  // bucket_size
          Put(&b, 16, value, 4);
          break;
        case 2:  // sparse_count
          Put(&b, 20, value, 4);
          break;
        case 3:  // payload_bytes
          Put(&b, 24, value, 8);
          break;
        case 4:  // encoding (0 and 7 are unknown)
          b[5] = static_cast<uint8_t>(value % 8);
          break;
        case 5:  // bits
          b[6] = static_cast<uint8_t>(value % 10);
          break;
        case 6:  // scale_mode
          b[7] = static_cast<uint8_t>(value % 4);
          break;
      }
    }
    if (rng_.Below(2)) Put(&b, 24, b.size() - 32, 8);
    Raw(b);
  }

  // 3b. Counts that wrap around to the true payload size in unchecked 64-bit arithmetic
  //     (4·(n + 2^62) = 4n mod 2^64, n·bits, 8·buckets), with no element limit to stop them.
  for (const std::vector<uint8_t>& seed : seeds) {
    const uint64_t n = Le(seed.data() + 8, 8);
    const uint64_t bucket = Le(seed.data() + 16, 4);
    for (int shift = 56; shift <= 63; ++shift) {
      for (uint64_t add : {uint64_t{1} << shift, (uint64_t{1} << shift) * (bucket ? bucket : 1)}) {
        std::vector<uint8_t> b = seed;
        Put(&b, 8, n + add, 8);
        Raw(b, -1, kNoLimit);
      }
    }
  }

  // 4. Wrong counts: num_elements / sparse_count / bucket_size off by a little, payload_bytes
  //    consistent, sometimes with the buffer resized to what a naive decoder would expect.
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> b = seeds[rng_.Below(seeds.size())];
    const int64_t delta = static_cast<int64_t>(rng_.Below(9)) - 4;
    const size_t field = rng_.Below(3) == 0 ? 16 : (rng_.Below(2) ? 8 : 20);
    const int width = field == 8 ? 8 : 4;
    Put(&b, field, Le(b.data() + field, width) + delta, width);
    if (rng_.Below(2)) {
      const size_t grow = rng_.Below(17);
      const size_t shrink = rng_.Below(std::min<size_t>(b.size() - 32, 16) + 1);
      b.resize(b.size() + grow - shrink);
    }
    Put(&b, 24, b.size() - 32, 8);
    Raw(b);
  }

  // 5. Section contents: random words in sparse indices or quantization metadata, NaN/Inf
  //    patterns, padding bits.
  for (int iter = 0; iter < 15000; ++iter) {
    std::vector<uint8_t> b = seeds[rng_.Below(seeds.size())];
    if (b.size() <= 32) continue;
    static const uint32_t kWords[] = {0x7fc00000, 0x7f800000, 0xff800000, 0x80000000, 0xbf800000,
                                      0xffffffff, 0x7fffffff, 0,          1};
    const size_t words = (b.size() - 32) / 4;
    if (words == 0) {
      b.back() ^= static_cast<uint8_t>(1u << rng_.Below(8));
    } else {
      const size_t at = 32 + 4 * rng_.Below(words);
      Put(&b, at, rng_.Below(2) ? kWords[rng_.Below(9)] : rng_.Next(), 4);
    }
    Raw(b);
  }

  // 5b. SPARSE_COMPACT contents: a block count off by a little, an entry moved to another block
  //     (the sum kept), an offset set to a block edge or to its neighbour's, two offsets swapped.
  std::vector<const std::vector<uint8_t>*> compact;
  for (const std::vector<uint8_t>& seed : seeds) {
    if (seed[5] == static_cast<uint8_t>(Encoding::kSparseCompact) && seed.size() > 36) {
      compact.push_back(&seed);
    }
  }
  ASSERT_GT(compact.size(), 15u);
  const int64_t accepted_before_compact = accepted_;
  int64_t compact_inputs = 0;
  for (int iter = 0; iter < 15000; ++iter) {
    std::vector<uint8_t> b = *compact[rng_.Below(compact.size())];
    const int64_t n = static_cast<int64_t>(Le(b.data() + 8, 8));
    const int64_t k = static_cast<int64_t>(Le(b.data() + 20, 4));
    const int64_t blocks = (n + kSparseBlockElements - 1) / kSparseBlockElements;
    const size_t offsets = 32 + 4 * static_cast<size_t>(blocks);
    const int64_t block = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(blocks)));
    const size_t count_at = 32 + 4 * static_cast<size_t>(block);
    switch (rng_.Below(k > 0 ? 4 : 1)) {
      case 0:  // one count off by −2 .. +2 (0 included: the seed itself)
        Put(&b, count_at, Le(b.data() + count_at, 4) + rng_.Below(5) - 2, 4);
        break;
      case 1: {  // one entry from one block to another
        const int64_t to = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(blocks)));
        Put(&b, count_at, Le(b.data() + count_at, 4) - 1, 4);
        Put(&b, 32 + 4 * static_cast<size_t>(to), Le(b.data() + 32 + 4 * to, 4) + 1, 4);
        break;
      }
      case 2: {  // one offset to an edge: 0, the last one, past the short block, its neighbours'
        const size_t j = offsets + 2 * rng_.Below(static_cast<uint64_t>(k));
        const uint64_t last = static_cast<uint64_t>(
            std::min<int64_t>(n - block * kSparseBlockElements, kSparseBlockElements) - 1);
        const uint64_t kEdges[] = {0,
                                   last,
                                   last + 1,
                                   65535,
                                   Le(b.data() + (j > offsets ? j - 2 : j), 2),
                                   Le(b.data() + std::min(j + 2, offsets + 2 * (k - 1)), 2),
                                   rng_.Below(65536)};
        Put(&b, j, kEdges[rng_.Below(sizeof(kEdges) / sizeof(kEdges[0]))], 2);
        break;
      }
      case 3: {  // two neighbouring offsets swapped
        if (k < 2) continue;
        const size_t j = offsets + 2 * rng_.Below(static_cast<uint64_t>(k - 1));
        std::swap(b[j], b[j + 2]);
        std::swap(b[j + 1], b[j + 3]);
        break;
      }
    }
    Raw(b, -1, kNoLimit);
    ++compact_inputs;
  }
  // Both outcomes occur: the mutations reach every content check and some keep a valid buffer.
  const int64_t compact_accepted = accepted_ - accepted_before_compact;
  EXPECT_GT(compact_accepted, 1000);
  EXPECT_LT(compact_accepted, compact_inputs - 5000);

  // 6. Random bytes: fully random, and behind a valid magic and version.
  for (int iter = 0; iter < 15000; ++iter) {
    std::vector<uint8_t> b(rng_.Below(200));
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng_.Next());
    if (b.size() >= 32 && rng_.Below(4) != 0) {
      Put(&b, 0, kEncodedMagic, 4);
      b[4] = 1;
      b[5] = static_cast<uint8_t>(1 + rng_.Below(6));
      if (rng_.Below(2)) Put(&b, 24, b.size() - 32, 8);
    }
    Raw(b);
  }

  EXPECT_GE(inputs_, 100000);
  EXPECT_GT(after_truncation, 10000);
  EXPECT_GT(accepted_, 1000);  // the campaign reaches the content checks, not only the header
  RecordProperty("inputs", static_cast<int>(inputs_));
  std::printf("raw inputs: %lld, accepted: %lld; SPARSE_COMPACT contents: %lld, accepted: %lld\n",
              static_cast<long long>(inputs_), static_cast<long long>(accepted_),
              static_cast<long long>(compact_inputs), static_cast<long long>(compact_accepted));
}

TEST_F(EncodedTensorFuzzTest, CorruptedProtoMessages) {
  const std::vector<std::vector<uint8_t>> seeds = Seeds(rng_);
  std::vector<std::string> messages;
  for (const std::vector<uint8_t>& seed : seeds) {
    auto view = DecodeEncoded(seed.data(), seed.size(), -1, kNoLimit);
    ASSERT_TRUE(view.ok());
    auto message = ToProto(*view);
    ASSERT_TRUE(message.ok());
    ASSERT_EQ(CheckProto(*message, kNoLimit), "");
    messages.push_back(message->SerializeAsString());
  }
  int parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string m = messages[rng_.Below(messages.size())];
    switch (rng_.Below(3)) {
      case 0:  // bit flips
        for (int f = 0; f < 1 + static_cast<int>(rng_.Below(4)); ++f) {
          m[rng_.Below(m.size())] ^= static_cast<char>(1u << rng_.Below(8));
        }
        break;
      case 1:  // truncation
        m.resize(rng_.Below(m.size() + 1));
        break;
      case 2:  // a field appended: later fields override earlier ones in protobuf
        // dtype 0; shape 127; shape 2^35 − 1; quantized.bits 3; quantized.bucket_size 0;
        // quantized.scale_mode 0; quantized.zero_points "\x07"; sparse.indices of 1 byte;
        // payload "\0"; dense_f32 set; packed shape [5]; sparse_compact.offsets of 1 byte and of
        // one entry; sparse_compact.block_counts [1]; payload of one fp16 value.
        static const std::string kFields[] = {std::string("\x08\x00", 2),
                                              std::string("\x10\x7f", 2),
                                              std::string("\x10\xff\xff\xff\xff\x7f", 6),
                                              std::string("\x32\x02\x08\x03", 4),
                                              std::string("\x32\x02\x10\x00", 4),
                                              std::string("\x32\x02\x18\x00", 4),
                                              std::string("\x32\x03\x2a\x01\x07", 5),
                                              std::string("\x3a\x03\x0a\x01\x00", 5),
                                              std::string("\x42\x01\x00", 3),
                                              std::string("\x1a\x00", 2),
                                              std::string("\x12\x01\x05", 3),
                                              std::string("\x4a\x03\x12\x01\x00", 5),
                                              std::string("\x4a\x04\x12\x02\x03\x00", 6),
                                              std::string("\x4a\x06\x0a\x04\x01\x00\x00\x00", 8),
                                              std::string("\x42\x02\x00\x3c", 4)};
        m += kFields[rng_.Below(sizeof(kFields) / sizeof(kFields[0]))];
        break;
    }
    v1::EncodedTensor message;
    if (!message.ParseFromString(m)) continue;
    ++parsed;
    const int64_t max = rng_.Below(2) ? kNoLimit : 300;
    ASSERT_EQ(CheckProto(message, max), "") << "iteration " << iter;
  }
  EXPECT_GT(parsed, 5000);
}

TEST_F(EncodedTensorFuzzTest, DroppedReorderedAndCorruptedChunks) {
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes(rng_.Below(4000), '\0');
    for (char& c : bytes) c = static_cast<char>(rng_.Next());
    auto split = SplitIntoChunks("t", bytes, 1 + rng_.Below(1500));
    ASSERT_TRUE(split.ok());
    std::vector<v1::TensorChunk> chunks = *split;
    auto intact = ReassembleChunks(chunks);
    ASSERT_TRUE(intact.ok()) << intact.status();
    ASSERT_EQ(*intact, bytes);

    const size_t k = rng_.Below(chunks.size());
    switch (rng_.Below(9)) {
      case 0:  // drop one
        chunks.erase(chunks.begin() + k);
        break;
      case 1: {  // swap two different ones
        if (chunks.size() < 2) continue;
        const size_t j = (k + 1 + rng_.Below(chunks.size() - 1)) % chunks.size();
        std::swap(chunks[k], chunks[j]);
        break;
      }
      case 2: {  // repeat one, anywhere at or after its place
        const v1::TensorChunk copy = chunks[k];
        chunks.insert(chunks.begin() + k + rng_.Below(chunks.size() - k + 1), copy);
        break;
      }
      case 3:  // flip a data bit
        if (chunks[k].data().empty()) continue;
        (*chunks[k].mutable_data())[rng_.Below(chunks[k].data().size())] ^=
            static_cast<char>(1u << rng_.Below(8));
        break;
      case 4:  // wrong crc
        chunks[k].set_crc32(chunks[k].crc32() ^ static_cast<uint32_t>(1 + rng_.Below(0xffffffff)));
        break;
      case 5:  // wrong offset
        chunks[k].set_offset(chunks[k].offset() + static_cast<int64_t>(1 + rng_.Below(100)));
        break;
      case 6:  // wrong total in one chunk (or in all: the data no longer fits)
        if (rng_.Below(2)) {
          chunks[k].set_total_bytes(static_cast<int64_t>(Extreme(rng_) | 1) ^
                                    chunks[k].total_bytes());
        } else {
          for (auto& c : chunks) c.set_total_bytes(c.total_bytes() - 1);
        }
        break;
      case 7:  // another name (a lone chunk's name has nothing to disagree with)
        if (chunks.size() < 2) continue;
        chunks[k].set_name("u");
        break;
      case 8:  // truncated data
        if (chunks[k].data().empty()) continue;
        chunks[k].mutable_data()->pop_back();
        break;
    }
    auto damaged = ReassembleChunks(chunks);
    ASSERT_FALSE(damaged.ok()) << "iteration " << iter << ": damage went unnoticed";
    ASSERT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace hptrain::comm

#endif  // HPTRAIN_LIBFUZZER
