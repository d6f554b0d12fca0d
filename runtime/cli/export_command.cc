// hptrain export JOB.yaml [CHECKPOINT] --out model.pt: the job's trained model as a TorchScript
// module for torch.jit.load (runtime/train/export/model_export.h, docs/export.md).
//
// The checkpoint holds the weights but not what they belong to: the job file says which model
// (spec.model), and its data set gives the input shape, the class count and the normalization
// (spec.dataset; read as the trainer reads it).
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/exit_codes.h"
#include "runtime/base/status.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/flags.h"
#include "runtime/job/job_parser.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/export/model_export.h"
#include "runtime/train/preflight.h"

namespace hptrain::cli {
namespace {

struct ExportOptions {
  std::string job_file;
  std::string checkpoint;  // "" = the job's spec.checkpoint.path
  std::string out;
  std::vector<std::string> overrides;
};

absl::StatusOr<train::ExportedModel> Export(const ExportOptions& options) {
  HPTRAIN_ASSIGN_OR_RETURN(job::JobSpec spec, job::ParseJobFile(options.job_file, options.overrides));
  if (spec.model.name.empty() && spec.model.torchscript.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.job_file, ": spec.model is not set (a spec.trainer program builds its own model; "
                          "save it from there)"));
  }
  const std::string path = options.checkpoint.empty() ? spec.checkpoint.path : options.checkpoint;
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no checkpoint: give CHECKPOINT or set spec.checkpoint.path in ", options.job_file));
  }
  HPTRAIN_ASSIGN_OR_RETURN(train::Checkpoint checkpoint, train::LoadCheckpoint(path));
  if (checkpoint.job != spec.name) {
    std::fprintf(stderr, "hptrain export: warning: %s was written by job \"%s\", not \"%s\"\n",
                 path.c_str(), checkpoint.job.c_str(), spec.name.c_str());
  }
  // The training split, as a worker opens it: the shape the model was built for and the
  // normalization its inputs had.
  HPTRAIN_ASSIGN_OR_RETURN(auto data, train::OpenDataset(spec.dataset, train::Split::kTrain,
                                                         spec.seed));
  train::ExportRequest request;
  request.spec = &spec;
  request.checkpoint = &checkpoint;
  request.checkpoint_path = path;
  request.shape = train::ModelShapeFor(*data);
  HPTRAIN_ASSIGN_OR_RETURN(train::Normalization norm, data->normalization());
  if (norm.none()) {  // pixels / 255: mean 0 and std 1 in every channel
    norm.mean.assign(static_cast<size_t>(data->shape().channels), 0.0f);
    norm.std.assign(static_cast<size_t>(data->shape().channels), 1.0f);
  }
  request.mean = std::move(norm.mean);
  request.std = std::move(norm.std);
  request.out = options.out;
  return train::ExportModel(request);
}

}  // namespace

int ExportCommand(int argc, char** argv) {
  ExportOptions options;
  FlagSet set("export",
              "JOB.yaml [CHECKPOINT] --out FILE [--set path=value]...\n"
              "  writes the job's trained model as a TorchScript module: load it in Python with\n"
              "  torch.jit.load(FILE). CHECKPOINT defaults to the job's spec.checkpoint.path; the\n"
              "  job file names the model and its data set (the input shape and normalization,\n"
              "  stored in the module as input_shape, input_mean and input_std)");
  set.String("out", &options.out, "", "the TorchScript file to write (replaced atomically)");
  set.Repeated("set", &options.overrides,
               "override a job field, e.g. --set spec.dataset.path=/data (repeatable)");
  int exit_code = kExitOk;
  if (!set.ParseOrExit(argc, argv, &exit_code)) return exit_code;
  const auto& positional = set.positional();
  if (positional.empty() || positional.size() > 2) {
    return ReportError("export", absl::InvalidArgumentError(
                                     "expected a job file and optionally a checkpoint (hptrain "
                                     "export JOB.yaml [CHECKPOINT] --out FILE)"));
  }
  if (options.out.empty()) {
    return ReportError("export",
                       absl::InvalidArgumentError("--out FILE is required: the module to write"));
  }
  options.job_file = positional[0];
  if (positional.size() == 2) options.checkpoint = positional[1];
  absl::StatusOr<train::ExportedModel> exported = Export(options);
  if (!exported.ok()) return ReportError("export", exported.status());
  std::printf("wrote %s: %lld parameters\n  %s\n  python: m = torch.jit.load(\"%s\").eval()\n",
              options.out.c_str(), static_cast<long long>(exported->num_parameters),
              exported->description.c_str(), options.out.c_str());
  return kExitOk;
}

}  // namespace hptrain::cli
