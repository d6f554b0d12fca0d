// Model export: a trained model as a TorchScript module that Python serves with
// torch.jit.load("model.pt"), no hptrain needed (`hptrain export`, docs/export.md).
//
//   zoo models         a module built here: the C++ model's parameters and floating-point buffers
//                      under their dotted names (state_dict keys "conv1.weight", ...), and a
//                      TorchScript forward that computes the C++ forward in evaluation mode
//                      (zoo_script.h).
//   TorchScript models the job's own module (spec.model.torchscript) with the trained weights.
//
// Either way the module gets these attributes, so that its user knows how to feed it:
//   hptrain_model  str: what the model is, how it was trained, its input and output
//   input_mean     List[float], per input channel
//   input_std      List[float]; a pixel p in [0, 255] of channel c is fed as
//                  (p / 255 - input_mean[c]) / input_std[c] (mean 0, std 1: normalization off)
//   input_shape    List[int]: [C, H, W] of one sample
// and is saved in evaluation mode.
//
// Errors: nothing here throws; libtorch's exceptions become Status. Thread-safety: none needed
// beyond libtorch's own (distinct arguments are independent).
#ifndef HPTRAIN_RUNTIME_TRAIN_EXPORT_MODEL_EXPORT_H_
#define HPTRAIN_RUNTIME_TRAIN_EXPORT_MODEL_EXPORT_H_

#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {

// What to export: the job, its checkpoint, and the data the model was trained on.
struct ExportRequest {
  const job::JobSpec* spec = nullptr;        // not owned
  const Checkpoint* checkpoint = nullptr;    // not owned
  std::string checkpoint_path;               // for messages
  ModelShape shape;                          // the input and output shape (ModelShapeFor)
  std::vector<float> mean;                   // per channel: the normalization the trainer applied
  std::vector<float> std;
  std::string out;                           // the file to write (replaced atomically)
};

// What was written.
struct ExportedModel {
  std::string description;  // the hptrain_model attribute
  int64_t num_parameters = 0;
};

// Builds the job's model, loads the checkpoint's weights into it and writes the module to
// request.out. FailedPrecondition "CHECKPOINT: section params does not match this model
// (expected N values)" (likewise buffers) when the checkpoint is another model's; the errors of
// CreateModel for the model itself; Internal on a libtorch failure; the file's errors writing out.
absl::StatusOr<ExportedModel> ExportModel(const ExportRequest& request);

// Copies a checkpoint's flat "params" and "buffers" sections (run_checkpoint.h's layout: each
// tensor's values in order) into `params` and `buffers`, in place. FailedPrecondition as above
// when a section's size is not the tensors' total.
absl::Status LoadCheckpointWeights(const Checkpoint& checkpoint, const std::string& path,
                                   const std::vector<torch::Tensor>& params,
                                   const std::vector<torch::Tensor>& buffers);

// A TorchScript module of zoo model `model` (built for `spec` and `shape`) holding copies of its
// current parameters and floating-point buffers. InvalidArgument for a model outside the zoo;
// Internal when TorchScript rejects the module.
absl::StatusOr<torch::jit::Module> ScriptZooModel(const Model& model, const job::ModelSpec& spec,
                                                  const ModelShape& shape);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_EXPORT_MODEL_EXPORT_H_
