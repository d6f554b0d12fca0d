// libFuzzer target: the checkpoint reader (runtime/train/checkpoint.h, LoadCheckpoint; libtorch-
// free). The input is the file, served from memory through a memfd. Each input is read twice: as
// it is, and with its last 4 bytes replaced by the CRC-32 of the rest, so that the fuzzer also
// reaches what lies behind the checksum. Every file must load or fail with DataLoss (NotFound
// cannot happen: the file exists); a file that loads must save and load again to the same state.
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/train/checkpoint.h"
#include "tests/fuzz/fuzz_input.h"

namespace hptrain::fuzz {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "checkpoint fuzz: %s\n", what.c_str());
  std::abort();
}

bool Same(const train::Checkpoint& a, const train::Checkpoint& b) {
  if (a.job != b.job || a.step != b.step || a.epoch != b.epoch ||
      a.step_in_epoch != b.step_in_epoch || a.optimizer_steps != b.optimizer_steps ||
      a.sections.size() != b.sections.size()) {
    return false;
  }
  for (const auto& [name, values] : a.sections) {
    auto it = b.sections.find(name);
    if (it == b.sections.end() || it->second.size() != values.size()) return false;
    // Bitwise: NaNs with payloads must survive too.
    if (!values.empty() &&
        std::memcmp(values.data(), it->second.data(), values.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

void Load(const std::string& bytes) {
  const int fd = memfd_create("checkpoint", 0);
  if (fd < 0) Fail("memfd_create failed");
  if (!bytes.empty() &&
      write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    Fail("writing the memfd failed");
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  absl::StatusOr<train::Checkpoint> loaded = train::LoadCheckpoint(path);
  close(fd);
  if (!loaded.ok()) {
    if (loaded.status().code() != absl::StatusCode::kDataLoss) {
      Fail("a bad file gave " + loaded.status().ToString());
    }
    return;
  }
  // Round trip through a real file (tmpfs where there is one: SaveCheckpoint fsyncs).
  std::string dir_template = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  dir_template += "/hptrain-checkpoint-fuzz-XXXXXX";
  const char* dir = mkdtemp(dir_template.data());
  if (dir == nullptr) Fail("mkdtemp failed");
  const std::string again_path = std::string(dir) + "/again.ckpt";
  absl::Status saved = train::SaveCheckpoint(again_path, *loaded);
  if (saved.ok()) {
    absl::StatusOr<train::Checkpoint> again = train::LoadCheckpoint(again_path);
    if (!again.ok()) Fail("a saved checkpoint does not load: " + again.status().ToString());
    if (!Same(*loaded, *again)) Fail("a checkpoint changed on its way through a file");
  }
  unlink(again_path.c_str());
  rmdir(dir);
}

void WriteSeeds(const std::string& dir) {
  train::Checkpoint sgd;
  sgd.job = "mlp";
  sgd.step = 12;
  sgd.epoch = 1;
  sgd.step_in_epoch = 2;
  sgd.optimizer_steps = 12;
  sgd.sections["params"] = {0.5f, -1.25f, 3.0f, 0.0f};
  sgd.sections["buffers"] = {};
  sgd.sections["momentum"] = {0.1f, 0.2f, 0.3f, 0.4f};
  train::Checkpoint adam = sgd;
  adam.sections.erase("momentum");
  adam.sections["adam.m"] = {1, 2, 3, 4};
  adam.sections["adam.v"] = {5, 6, 7, 8};
  train::Checkpoint empty;
  empty.job = "empty";
  for (const auto& [name, checkpoint] :
       {std::pair<const char*, train::Checkpoint>{"sgd", sgd}, {"adam", adam}, {"empty", empty}}) {
    absl::Status saved = train::SaveCheckpoint(dir + "/" + name, checkpoint);
    if (!saved.ok()) Fail("seed: " + saved.ToString());
  }
}

}  // namespace
}  // namespace hptrain::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hptrain::fuzz::MaybeWriteSeeds(hptrain::fuzz::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  hptrain::fuzz::Load(bytes);
  if (size >= 4) {
    const uLong crc = crc32(crc32(0L, Z_NULL, 0), data, static_cast<uInt>(size - 4));
    for (int i = 0; i < 4; ++i) bytes[size - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    hptrain::fuzz::Load(bytes);
  }
  return 0;
}
