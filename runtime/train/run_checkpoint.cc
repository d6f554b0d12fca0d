#include "runtime/train/run_checkpoint.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "runtime/base/status.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/model_buffers.h"

namespace hptrain::train {
namespace {

constexpr char kParams[] = "params";
constexpr char kBuffers[] = "buffers";

}  // namespace

absl::StatusOr<Checkpoint> CaptureRunState(const std::string& job, const RunPosition& position,
                                           const RunState& state, bool strategy_state) {
  Checkpoint checkpoint;
  checkpoint.job = job;
  checkpoint.step = position.step;
  checkpoint.epoch = position.epoch;
  checkpoint.step_in_epoch = position.step_in_epoch;
  HPTRAIN_RETURN_IF_ERROR(state.optimizer->Save(&checkpoint));
  const absl::Span<float> p = state.flat->host();
  checkpoint.sections[kParams].assign(p.begin(), p.end());
  FlattenBuffers(*state.model, &checkpoint.sections[kBuffers]);
  if (strategy_state) {
    HPTRAIN_RETURN_IF_ERROR(state.strategy->SaveState(position.step, &checkpoint.sections),
                            "strategy ", state.strategy->name());
  }
  return checkpoint;
}

absl::Status WriteRunCheckpoint(const std::string& path, const std::string& job,
                                const RunPosition& position, const RunState& state) {
  HPTRAIN_ASSIGN_OR_RETURN(Checkpoint checkpoint, CaptureRunState(job, position, state, true));
  return SaveCheckpoint(path, checkpoint);
}

absl::StatusOr<std::optional<ResumedRun>> ReadRunCheckpoint(const std::string& path,
                                                            const RunState& state) {
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(path);
  if (absl::IsNotFound(loaded.status())) return std::nullopt;  // nothing to resume yet
  HPTRAIN_RETURN_IF_ERROR(loaded.status());
  HPTRAIN_ASSIGN_OR_RETURN(ResumedRun resumed, RestoreRunState(*loaded, path, state));
  return std::optional<ResumedRun>(std::move(resumed));
}

absl::StatusOr<ResumedRun> RestoreRunState(Checkpoint& c, const std::string& path,
                                           const RunState& state) {
  HPTRAIN_RETURN_IF_ERROR(CheckSection(c, path, kParams, static_cast<size_t>(state.flat->size())));
  const std::vector<float>& params = c.sections[kParams];
  std::copy(params.begin(), params.end(), state.flat->host().begin());
  state.flat->ToDevice();
  HPTRAIN_RETURN_IF_ERROR(CheckSection(c, path, kBuffers, BufferElements(*state.model)));
  HPTRAIN_RETURN_IF_ERROR(RestoreBuffers(*state.model, c.sections[kBuffers], 1.0f));
  HPTRAIN_RETURN_IF_ERROR(state.optimizer->Restore(c, path));
  // Every section the trainer did not write itself is the strategy's, whatever its name.
  ResumedRun resumed;
  for (auto& [name, values] : c.sections) {
    if (name == kParams || name == kBuffers || state.optimizer->OwnsSection(name)) continue;
    resumed.strategy_sections[name] = std::move(values);
  }
  resumed.position.step = c.step;
  resumed.position.epoch = c.epoch;
  resumed.position.step_in_epoch = c.step_in_epoch;
  return resumed;
}

}  // namespace hptrain::train
