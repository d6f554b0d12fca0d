#include "runtime/comm/encoded_tensor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace hptrain::comm {
namespace {

static_assert(sizeof(size_t) == 8, "sizes are computed in 64 bits and stored in size_t");

// Header fields widened to 64 bits, so the rules below apply alike to a header read off the wire
// and to fields a sender passes (whose ints may be negative or too large for the header).
struct Fields {
  uint64_t encoding;
  uint64_t bits;
  uint64_t scale_mode;
  uint64_t num_elements;
  uint64_t bucket_size;
  uint64_t sparse_count;
};

bool KnownEncoding(uint64_t e) {
  return e >= static_cast<uint64_t>(Encoding::kDenseF32) &&
         e <= static_cast<uint64_t>(Encoding::kSparseCompact);
}

std::string Name(uint64_t encoding) {
  return KnownEncoding(encoding) ? EncodingName(static_cast<Encoding>(encoding))
                                 : absl::StrCat("encoding ", encoding);
}

// "(QUANTIZED, 1000 elements, 4 bits, bucket 512)": the fields that determine the payload size.
std::string Describe(const Fields& f) {
  std::string s = absl::StrCat("(", Name(f.encoding), ", ", f.num_elements, " elements");
  if (f.encoding == static_cast<uint64_t>(Encoding::kQuantized)) {
    absl::StrAppend(&s, ", ", f.bits, " bits, bucket ", f.bucket_size);
  } else if (f.encoding == static_cast<uint64_t>(Encoding::kSparse) ||
             f.encoding == static_cast<uint64_t>(Encoding::kSparseCompact)) {
    absl::StrAppend(&s, ", ", f.sparse_count, " entries");
  }
  return s + ")";
}

// Checks the fields that do not depend on the payload and computes the section sizes with
// overflow checks (a count near 2^64 must not wrap into a small size). Returns "" on success,
// otherwise the reason, without the "encoded tensor: " prefix.
std::string CheckFields(const Fields& f, uint64_t max_elements, EncodedLayout* layout) {
  if (!KnownEncoding(f.encoding)) {
    return absl::StrCat("unknown encoding ", f.encoding, " (known: 1 DENSE_F32, 2 F16, 3 BF16, ",
                        "4 QUANTIZED, 5 SPARSE, 6 SPARSE_COMPACT)");
  }
  const Encoding e = static_cast<Encoding>(f.encoding);
  const bool quantized = e == Encoding::kQuantized;
  if (quantized) {
    if (f.bits != 1 && f.bits != 2 && f.bits != 4 && f.bits != 8) {
      return absl::StrCat("bits is ", f.bits, " for QUANTIZED, must be 1, 2, 4 or 8");
    }
    if (f.scale_mode != static_cast<uint64_t>(ScaleMode::kMinMax) &&
        f.scale_mode != static_cast<uint64_t>(ScaleMode::kAbsMax)) {
      return absl::StrCat("scale_mode is ", f.scale_mode,
                          " for QUANTIZED, must be 1 (MIN_MAX) or 2 (ABS_MAX)");
    }
    if (f.bucket_size == 0) return "bucket_size is 0 for QUANTIZED, must be > 0";
    if (f.bucket_size > std::numeric_limits<uint32_t>::max()) {
      return absl::StrCat("bucket_size is ", f.bucket_size, ", must be < 2^32");
    }
  } else {
    if (f.bits != 0) {
      return absl::StrCat("bits is ", f.bits, " for ", Name(f.encoding), ", must be 0");
    }
    if (f.scale_mode != 0) {
      return absl::StrCat("scale_mode is ", f.scale_mode, " for ", Name(f.encoding), ", must be 0");
    }
    if (f.bucket_size != 0) {
      return absl::StrCat("bucket_size is ", f.bucket_size, " for ", Name(f.encoding),
                          ", must be 0");
    }
  }
  if (f.num_elements > max_elements) {
    return absl::StrCat("num_elements ", f.num_elements, " exceeds the limit ", max_elements);
  }
  if (IsSparse(e)) {
    if (f.sparse_count > f.num_elements) {
      return absl::StrCat("sparse_count ", f.sparse_count, " exceeds num_elements ",
                          f.num_elements);
    }
    if (f.sparse_count > std::numeric_limits<uint32_t>::max()) {
      return absl::StrCat("sparse_count is ", f.sparse_count, ", must be < 2^32");
    }
  } else if (f.sparse_count != 0) {
    return absl::StrCat("sparse_count is ", f.sparse_count, " for ", Name(f.encoding),
                        ", must be 0");
  }

  const std::string overflow =
      absl::StrCat("payload size implied by the header overflows 64 bits ", Describe(f));
  const uint64_t n = f.num_elements;
  EncodedLayout l;
  uint64_t total = 0;
  switch (e) {
    case Encoding::kDenseF32:
      if (__builtin_mul_overflow(n, uint64_t{4}, &l.dense_bytes)) return overflow;
      total = l.dense_bytes;
      break;
    case Encoding::kF16:
    case Encoding::kBF16:
      if (__builtin_mul_overflow(n, uint64_t{2}, &l.dense_bytes)) return overflow;
      total = l.dense_bytes;
      break;
    case Encoding::kQuantized: {
      const uint64_t buckets = n / f.bucket_size + (n % f.bucket_size != 0);
      uint64_t code_bits = 0;
      if (__builtin_mul_overflow(buckets, uint64_t{8}, &l.meta_bytes) ||
          __builtin_mul_overflow(n, f.bits, &code_bits)) {
        return overflow;
      }
      l.codes_bytes = code_bits / 8 + (code_bits % 8 != 0);
      if (__builtin_add_overflow(l.meta_bytes, l.codes_bytes, &total)) return overflow;
      break;
    }
    case Encoding::kSparse:  // sparse_count < 2^32: cannot overflow
      l.indices_bytes = f.sparse_count * 4;
      l.values_bytes = f.sparse_count * 4;
      total = l.indices_bytes + l.values_bytes;
      break;
    case Encoding::kSparseCompact:  // n ≤ 2^64 − 1, so 4·ceil(n / 2^16) < 2^50
      l.blocks_bytes = 4 * (n / kSparseBlockElements + (n % kSparseBlockElements != 0));
      l.indices_bytes = f.sparse_count * 2;
      l.values_bytes = f.sparse_count * 2;
      total = l.blocks_bytes + l.indices_bytes + l.values_bytes;
      break;
  }
  uint64_t with_header = 0;
  if (__builtin_add_overflow(total, uint64_t{kEncodedHeaderBytes}, &with_header)) return overflow;
  *layout = l;
  return "";
}

uint64_t LoadLE(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void StoreLE(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

absl::Status Invalid(const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("encoded tensor: ", why));
}
absl::Status Corrupt(const std::string& why) {
  return absl::DataLossError(absl::StrCat("encoded tensor: ", why));
}

// SPARSE_COMPACT's content: each block's count fits the block, the counts add up to
// sparse_count, and within a block the offsets are strictly ascending and inside it. The section
// sizes were checked against the bytes present, and the running total is checked before the
// offsets of a block are read, so no read leaves the payload.
absl::Status CheckCompactEntries(const EncodedView& view) {
  const int64_t blocks = view.num_blocks();
  int64_t entry = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t length =
        std::min(kSparseBlockElements, view.num_elements - b * kSparseBlockElements);
    const int64_t count = view.block_count_at(b);
    if (count > length) {
      return Corrupt(absl::StrCat("sparse block ", b, " lists ", count, " entries, but has ",
                                  length, " elements"));
    }
    if (count > view.sparse_count - entry) {
      return Corrupt(absl::StrCat("sparse block counts exceed sparse_count ", view.sparse_count,
                                  " at block ", b));
    }
    int64_t previous = -1;
    for (int64_t end = entry + count; entry < end; ++entry) {
      const int64_t offset = view.offset_at(entry);
      if (offset >= length) {
        return Corrupt(absl::StrCat("sparse offset ", offset, " at position ", entry,
                                    " is outside block ", b, "'s ", length, " elements"));
      }
      if (offset <= previous) {
        return Corrupt(absl::StrCat("sparse offset ", offset, " at position ", entry,
                                    " is not above the previous offset ", previous, " in block ", b,
                                    " (offsets must be strictly ascending)"));
      }
      previous = offset;
    }
  }
  if (entry != view.sparse_count) {
    return Corrupt(absl::StrCat("sparse block counts add up to ", entry, ", sparse_count is ",
                                view.sparse_count));
  }
  return absl::OkStatus();
}

// Sender-side fields to the widened form; negative ints become huge so the range checks catch them.
absl::StatusOr<Fields> Widen(const EncodedHeaderFields& f) {
  if (f.bits < 0) return Invalid(absl::StrCat("bits is ", f.bits, ", must be ≥ 0"));
  if (f.num_elements < 0) {
    return Invalid(absl::StrCat("num_elements is ", f.num_elements, ", must be ≥ 0"));
  }
  if (f.bucket_size < 0) {
    return Invalid(absl::StrCat("bucket_size is ", f.bucket_size, ", must be ≥ 0"));
  }
  if (f.sparse_count < 0) {
    return Invalid(absl::StrCat("sparse_count is ", f.sparse_count, ", must be ≥ 0"));
  }
  return Fields{static_cast<uint64_t>(f.encoding),    static_cast<uint64_t>(f.bits),
                static_cast<uint64_t>(f.scale_mode),  static_cast<uint64_t>(f.num_elements),
                static_cast<uint64_t>(f.bucket_size), static_cast<uint64_t>(f.sparse_count)};
}

}  // namespace

const char* EncodingName(Encoding encoding) {
  switch (encoding) {
    case Encoding::kDenseF32:
      return "DENSE_F32";
    case Encoding::kF16:
      return "F16";
    case Encoding::kBF16:
      return "BF16";
    case Encoding::kQuantized:
      return "QUANTIZED";
    case Encoding::kSparse:
      return "SPARSE";
    case Encoding::kSparseCompact:
      return "SPARSE_COMPACT";
  }
  return "UNKNOWN";
}

absl::StatusOr<EncodedLayout> ComputeLayout(const EncodedHeaderFields& fields,
                                            int64_t max_elements) {
  if (max_elements < 0) return Invalid(absl::StrCat("max_elements is ", max_elements));
  auto wide = Widen(fields);
  if (!wide.ok()) return wide.status();
  EncodedLayout layout;
  const std::string why = CheckFields(*wide, static_cast<uint64_t>(max_elements), &layout);
  if (!why.empty()) return Invalid(why);
  return layout;
}

size_t EncodedSize(const EncodedHeaderFields& fields) {
  auto layout = ComputeLayout(fields, std::numeric_limits<int64_t>::max());
  return layout.ok() ? kEncodedHeaderBytes + layout->payload_bytes() : 0;
}

namespace {

// The 32 header bytes of `fields`, whose payload is `payload` bytes, into out[0, 32).
void StoreHeader(const EncodedHeaderFields& fields, size_t payload, uint8_t* out) {
  StoreLE(out + 0, kEncodedMagic, 4);
  out[4] = kEncodedVersion;
  out[5] = static_cast<uint8_t>(fields.encoding);
  out[6] = static_cast<uint8_t>(fields.bits);
  out[7] = static_cast<uint8_t>(fields.scale_mode);
  StoreLE(out + 8, static_cast<uint64_t>(fields.num_elements), 8);
  StoreLE(out + 16, static_cast<uint64_t>(fields.bucket_size), 4);
  StoreLE(out + 20, static_cast<uint64_t>(fields.sparse_count), 4);
  StoreLE(out + 24, payload, 8);
}

}  // namespace

absl::Status WriteHeader(const EncodedHeaderFields& fields, uint8_t* out, size_t out_size) {
  auto layout = ComputeLayout(fields, std::numeric_limits<int64_t>::max());
  if (!layout.ok()) return layout.status();
  const size_t payload = layout->payload_bytes();
  if (out == nullptr) return Invalid("WriteHeader: output buffer is null");
  if (out_size < kEncodedHeaderBytes || out_size - kEncodedHeaderBytes != payload) {
    return Invalid(absl::StrCat("WriteHeader: buffer is ", out_size, " bytes, the fields need ",
                                kEncodedHeaderBytes + payload));
  }
  StoreHeader(fields, payload, out);
  return absl::OkStatus();
}

absl::Status WriteHeaderBytes(const EncodedHeaderFields& fields, uint8_t* header) {
  auto layout = ComputeLayout(fields, std::numeric_limits<int64_t>::max());
  if (!layout.ok()) return layout.status();
  if (header == nullptr) return Invalid("WriteHeaderBytes: output buffer is null");
  StoreHeader(fields, layout->payload_bytes(), header);
  return absl::OkStatus();
}

absl::StatusOr<EncodedView> DecodeEncoded(const uint8_t* data, size_t size,
                                          int64_t expected_elements, int64_t max_elements) {
  if (max_elements < 0) return Invalid(absl::StrCat("max_elements is ", max_elements));
  if (data == nullptr && size > 0) return Invalid("data is null");
  if (size < kEncodedHeaderBytes) {
    return Corrupt(absl::StrCat("buffer is ", size, " bytes, shorter than the ",
                                kEncodedHeaderBytes, "-byte header"));
  }
  const uint64_t magic = LoadLE(data, 4);
  if (magic != kEncodedMagic) {
    return Corrupt(absl::StrCat("bad magic 0x", absl::Hex(magic, absl::kZeroPad8),
                                ", expected 0x45545048 ('HPTE')"));
  }
  if (data[4] != kEncodedVersion) {
    return Corrupt(absl::StrCat("unsupported version ", static_cast<int>(data[4]),
                                ", this build reads version ", static_cast<int>(kEncodedVersion)));
  }
  const Fields f{
      data[5], data[6], data[7], LoadLE(data + 8, 8), LoadLE(data + 16, 4), LoadLE(data + 20, 4)};
  const uint64_t header_payload = LoadLE(data + 24, 8);

  EncodedLayout layout;
  const std::string why = CheckFields(f, static_cast<uint64_t>(max_elements), &layout);
  if (!why.empty()) return Corrupt(why);
  if (expected_elements >= 0 && f.num_elements != static_cast<uint64_t>(expected_elements)) {
    return Corrupt(
        absl::StrCat("num_elements is ", f.num_elements, ", expected ", expected_elements));
  }
  const size_t payload = size - kEncodedHeaderBytes;
  if (header_payload != payload) {
    return Corrupt(absl::StrCat("header says payload_bytes is ", header_payload, ", but ", payload,
                                " bytes follow the header"));
  }
  if (layout.payload_bytes() != payload) {
    return Corrupt(absl::StrCat("payload is ", payload, " bytes, header implies ",
                                layout.payload_bytes(), " ", Describe(f)));
  }

  EncodedView view;
  view.encoding = static_cast<Encoding>(f.encoding);
  view.bits = static_cast<int>(f.bits);
  view.scale_mode = static_cast<ScaleMode>(f.scale_mode);
  view.num_elements = static_cast<int64_t>(f.num_elements);
  view.bucket_size = static_cast<int64_t>(f.bucket_size);
  view.sparse_count = static_cast<int64_t>(f.sparse_count);
  view.payload = data + kEncodedHeaderBytes;
  view.payload_bytes = payload;

  // Content: the sizes are now known to match the bytes present, so these reads stay inside.
  if (view.encoding == Encoding::kSparse) {
    int64_t previous = -1;
    for (int64_t k = 0; k < view.sparse_count; ++k) {
      const int64_t index = view.index_at(k);
      if (index < 0 || index >= view.num_elements) {
        return Corrupt(absl::StrCat("sparse index ", index, " at position ", k, " is outside [0, ",
                                    view.num_elements, ")"));
      }
      if (index <= previous) {
        return Corrupt(absl::StrCat("sparse index ", index, " at position ", k,
                                    " is not above the previous index ", previous,
                                    " (indices must be strictly ascending)"));
      }
      previous = index;
    }
  } else if (view.encoding == Encoding::kSparseCompact) {
    absl::Status entries = CheckCompactEntries(view);
    if (!entries.ok()) return entries;
  } else if (view.encoding == Encoding::kQuantized) {
    for (int64_t b = 0; b < view.num_buckets(); ++b) {
      const float lo = view.lo_at(b);
      const float delta = view.delta_at(b);
      if (!std::isfinite(lo) || !std::isfinite(delta)) {
        return Corrupt(absl::StrCat("quantization metadata of bucket ", b, " is not finite (lo ",
                                    lo, ", delta ", delta, ")"));
      }
      if (delta < 0) {
        return Corrupt(
            absl::StrCat("quantization delta of bucket ", b, " is negative (", delta, ")"));
      }
    }
    // Writers zero the bits past the last code (kernels/quantize does); anything else there is
    // corruption, and checking keeps one byte string per tensor.
    const uint64_t used_bits = static_cast<uint64_t>(view.num_elements) * view.bits;
    if (used_bits % 8 != 0) {
      const uint8_t last = view.codes()[view.codes_bytes() - 1];
      if ((last >> (used_bits % 8)) != 0) {
        return Corrupt(absl::StrCat("padding bits after the last code are not zero (last byte 0x",
                                    absl::Hex(last, absl::kZeroPad2), ")"));
      }
    }
  }
  return view;
}

absl::StatusOr<EncodedBuffer> EncodedBuffer::Create(const EncodedHeaderFields& fields,
                                                    int64_t max_elements) {
  auto layout = ComputeLayout(fields, max_elements);
  if (!layout.ok()) return layout.status();
  EncodedBuffer buffer;
  buffer.fields_ = fields;
  buffer.layout_ = *layout;
  buffer.bytes_.assign(kEncodedHeaderBytes + layout->payload_bytes(), 0);
  absl::Status written = WriteHeader(fields, buffer.bytes_.data(), buffer.bytes_.size());
  if (!written.ok()) return written;
  return buffer;
}

absl::StatusOr<EncodedView> EncodedBuffer::Finish(int64_t max_elements) const {
  return DecodeEncoded(bytes_.data(), bytes_.size(), fields_.num_elements, max_elements);
}

}  // namespace hptrain::comm
