// Checkpoint: the training state that lets a killed run resume where it stopped and end with the
// same parameters as an uninterrupted run.
//
// File format (little-endian), written atomically (temp file, fsync, rename):
//   magic     "HPTCKPT1"                       8 bytes
//   header    u64 length + JSON {job, step, epoch, step_in_epoch, optimizer_steps,
//                                sections: [{name, count}]}
//   sections  the float32 values of each section, in header order
//   crc32     u32 over everything before it
// Sections: "params", "buffers", and the optimizer's state ("momentum", "adam.m", "adam.v").
// Reading never trusts the header: every count is checked against the bytes present.
#ifndef HPTRAIN_RUNTIME_TRAIN_CHECKPOINT_H_
#define HPTRAIN_RUNTIME_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hptrain::train {

struct Checkpoint {
  std::string job;
  int64_t step = 0;           // global steps completed
  int epoch = 0;              // epoch of the next step
  int64_t step_in_epoch = 0;  // index of the next step within its epoch
  int64_t optimizer_steps = 0;
  std::map<std::string, std::vector<float>> sections;
};

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint);

// The file's bytes, and back (the state a membership change sends, docs/elastic.md). Decode
// errors are LoadCheckpoint's, naming `path` (what the bytes came from).
std::string EncodeCheckpoint(const Checkpoint& checkpoint);
absl::StatusOr<Checkpoint> DecodeCheckpoint(const std::string& data, const std::string& path);

// NotFound if the file does not exist; DataLoss "PATH: ..." if it is truncated, corrupt or not a
// checkpoint.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

// OK when `checkpoint` has section `name` with `expected` values; otherwise FailedPrecondition
// "PATH: section NAME does not match this model (expected N values)".
absl::Status CheckSection(const Checkpoint& checkpoint, const std::string& path,
                          const std::string& name, size_t expected);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_CHECKPOINT_H_
