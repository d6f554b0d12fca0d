// The trainer's side of a checkpoint (checkpoint.h is the file format): what a run writes after a
// step and reads back to resume: its position, the flat parameters ("params"), the model's
// buffers ("buffers"), the local optimizer's state (its own section names), and the strategy's
// sections, whose names only the strategy knows (Strategy::SaveState and Strategy::Start).
#ifndef HPTRAIN_RUNTIME_TRAIN_RUN_CHECKPOINT_H_
#define HPTRAIN_RUNTIME_TRAIN_RUN_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/sync/strategy.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/flat_model.h"
#include "runtime/train/local_optimizer.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

// Where a run stands: global steps done, and the position of the next step.
struct RunPosition {
  int64_t step = 0;
  int epoch = 0;
  int64_t step_in_epoch = 0;
};

// The parts of a run a checkpoint holds; none is owned.
struct RunState {
  FlatModel* flat = nullptr;
  Model* model = nullptr;
  LocalOptimizer* optimizer = nullptr;
  sync::Strategy* strategy = nullptr;
};

// Rank 0, after Strategy::Synchronize, which left the host copy of the flat parameters current:
// writes the checkpoint of `state` at `position` to `path` atomically.
absl::Status WriteRunCheckpoint(const std::string& path, const std::string& job,
                                const RunPosition& position, const RunState& state);

// What a resumed run continues from.
struct ResumedRun {
  RunPosition position;
  sync::CheckpointSections strategy_sections;  // for Strategy::Start
};

// Reads the checkpoint at `path` into the model (parameters on its device, buffers) and the
// optimizer, and returns the position and the strategy's sections; nullopt when there is no
// checkpoint yet. A section that does not match this model is FailedPrecondition naming it.
absl::StatusOr<std::optional<ResumedRun>> ReadRunCheckpoint(const std::string& path,
                                                            const RunState& state);

// The two halves of the above, in memory (a membership change sends the state over the
// communicator, docs/elastic.md): what WriteRunCheckpoint writes, the strategy's sections only with
// `strategy_state`; and what ReadRunCheckpoint does with a checkpoint read (errors name `path`,
// the state's origin), moving the strategy's sections out of `checkpoint`.
absl::StatusOr<Checkpoint> CaptureRunState(const std::string& job, const RunPosition& position,
                                           const RunState& state, bool strategy_state);
absl::StatusOr<ResumedRun> RestoreRunState(Checkpoint& checkpoint, const std::string& path,
                                           const RunState& state);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_RUN_CHECKPOINT_H_
