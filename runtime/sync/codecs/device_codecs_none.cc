// device_codecs.h in a build without the CUDA kernels: no device codec can be made, so none of the
// other members is ever reached.
#include "runtime/sync/codecs/device_codecs.h"

namespace hptrain::sync {
namespace {

absl::Status NotBuilt() {
  return absl::UnimplementedError("device codecs: this build of hptrain has no CUDA kernels");
}

}  // namespace

DeviceQuantizeCodec::DeviceQuantizeCodec(int, int64_t, uint64_t seed, int rank)
    : seed_(seed), rank_(rank) {}
absl::StatusOr<std::unique_ptr<DeviceQuantizeCodec>> DeviceQuantizeCodec::Create(int, int64_t,
                                                                                 size_t, uint64_t,
                                                                                 int) {
  return NotBuilt();
}
DeviceQuantizeCodec::~DeviceQuantizeCodec() = default;
size_t DeviceQuantizeCodec::EncodedBytes(size_t) const { return 0; }
absl::Status DeviceQuantizeCodec::Encode(const float*, size_t, size_t, uint64_t, uint8_t*) {
  return NotBuilt();
}
absl::Status DeviceQuantizeCodec::Decode(const uint8_t*, size_t, size_t, float*) {
  return NotBuilt();
}
absl::Status DeviceQuantizeCodec::DecodeAccumulate(const uint8_t*, size_t, size_t, float*) {
  return NotBuilt();
}
absl::Status DeviceQuantizeCodec::set_bits(int) { return NotBuilt(); }
absl::Status DeviceQuantizeCodec::FoldResidualInto(float*, size_t, void*) { return NotBuilt(); }
absl::Status DeviceQuantizeCodec::BeginDevice(void*, int) { return NotBuilt(); }
absl::Status DeviceQuantizeCodec::FinishDevice() { return NotBuilt(); }

absl::StatusOr<std::unique_ptr<DeviceHalfCodec>> DeviceHalfCodec::Create(size_t) {
  return NotBuilt();
}
DeviceHalfCodec::~DeviceHalfCodec() = default;
absl::Status DeviceHalfCodec::Encode(const float*, size_t, size_t, uint64_t, uint8_t*) {
  return NotBuilt();
}
absl::Status DeviceHalfCodec::Decode(const uint8_t*, size_t, size_t, float*) { return NotBuilt(); }
absl::Status DeviceHalfCodec::DecodeAccumulate(const uint8_t*, size_t, size_t, float*) {
  return NotBuilt();
}
absl::Status DeviceHalfCodec::FoldResidualInto(float*, size_t, void*) { return NotBuilt(); }
absl::Status DeviceHalfCodec::BeginDevice(void*, int) { return NotBuilt(); }
absl::Status DeviceHalfCodec::FinishDevice() { return NotBuilt(); }

}  // namespace hptrain::sync
