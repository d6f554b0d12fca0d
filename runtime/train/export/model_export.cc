#include "runtime/train/export/model_export.h"

#include <cstring>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"
#include "runtime/train/export/zoo_script.h"
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train {
namespace {

constexpr char kParams[] = "params";    // run_checkpoint.cc's section names
constexpr char kBuffers[] = "buffers";

// Runs `fn`, turning a libtorch exception into Internal "WHAT: message".
template <typename Fn>
absl::Status Torch(const std::string& what, Fn&& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", internal::ExceptionMessage(e)));
  }
}

int64_t Elements(const std::vector<torch::Tensor>& tensors) {
  int64_t n = 0;
  for (const torch::Tensor& t : tensors) n += t.numel();
  return n;
}

// Copies `values` into `tensors` in order; the sizes were checked.
void Unflatten(const std::vector<float>& values, const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (const torch::Tensor& t : tensors) {
    torch::Tensor source =
        torch::from_blob(const_cast<float*>(values.data() + offset), t.sizes(), torch::kFloat32);
    t.copy_(source);
    offset += static_cast<size_t>(t.numel());
  }
}

// What nn.Module's train() and eval() set, in Python and in C++ (a module without it reads as
// training and ignores eval()).
void AddTrainingFlag(torch::jit::Module& module) {
  module.register_attribute("training", c10::BoolType::get(), false);
}

// The submodule of `root` at dotted `path` ("" = root itself), created on first use with a
// class of its own.
torch::jit::Module& SubmoduleAt(torch::jit::Module& root, const std::string& path,
                                const std::string& class_prefix,
                                const std::shared_ptr<torch::jit::CompilationUnit>& cu,
                                std::map<std::string, torch::jit::Module>* made) {
  if (path.empty()) return root;
  auto it = made->find(path);
  if (it != made->end()) return it->second;
  const size_t dot = path.rfind('.');
  const std::string parent_path = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string name = dot == std::string::npos ? path : path.substr(dot + 1);
  torch::jit::Module& parent = SubmoduleAt(root, parent_path, class_prefix, cu, made);
  const std::string class_name =
      absl::StrCat(class_prefix, ".m_", absl::StrReplaceAll(path, {{".", "_"}}));
  torch::jit::Module child(c10::QualifiedName(class_name), cu, /*shouldMangle=*/true);
  AddTrainingFlag(child);
  parent.register_module(name, child);
  return made->emplace(path, child).first->second;
}

// Splits "a.b.weight" into ("a.b", "weight").
std::pair<std::string, std::string> SplitName(const std::string& dotted) {
  const size_t dot = dotted.rfind('.');
  if (dot == std::string::npos) return {"", dotted};
  return {dotted.substr(0, dot), dotted.substr(dot + 1)};
}

std::string OutputMeaning(const std::string& task) {
  if (task == "multilabel") return "one logit per label";
  if (task == "regression") return "the predicted targets";
  if (task == "torchscript") return "the module's own outputs";
  return "class logits";
}

std::string Describe(const ExportRequest& r, const std::string& model_name) {
  const job::JobSpec& spec = *r.spec;
  return absl::StrCat(
      model_name, " trained with hptrain (job ", spec.name, ", checkpoint step ",
      r.checkpoint->step, ", data set ", spec.dataset.name, ", task ",
      spec.task.empty() ? "classification" : spec.task, "). Input: float32 [N, ",
      r.shape.channels, ", ", r.shape.height, ", ", r.shape.width,
      "], a pixel p in [0, 255] of channel c given as (p / 255 - input_mean[c]) / input_std[c]. "
      "Output: [N, ", r.shape.num_classes, "], ", OutputMeaning(spec.task),
      ". Call eval() before serving.");
}

template <typename T>
c10::List<T> ListOf(const std::vector<float>& values) {
  c10::List<T> list;
  for (float v : values) list.push_back(static_cast<T>(v));
  return list;
}

// Per channel, whether the request gives one value or one per channel.
std::vector<float> PerChannel(const std::vector<float>& values, int64_t channels, float fallback) {
  if (values.size() == static_cast<size_t>(channels)) return values;
  return std::vector<float>(static_cast<size_t>(channels), values.empty() ? fallback : values[0]);
}

absl::Status SetAttributes(torch::jit::Module& module, const ExportRequest& r,
                           const std::string& description) {
  return Torch("setting the module's attributes", [&] {
    module.register_attribute("hptrain_model", c10::StringType::get(), description);
    module.register_attribute("input_mean", c10::ListType::ofFloats(),
                              ListOf<double>(PerChannel(r.mean, r.shape.channels, 0.0f)));
    module.register_attribute("input_std", c10::ListType::ofFloats(),
                              ListOf<double>(PerChannel(r.std, r.shape.channels, 1.0f)));
    c10::List<int64_t> shape({r.shape.channels, r.shape.height, r.shape.width});
    module.register_attribute("input_shape", c10::ListType::ofInts(), shape);
  });
}

absl::Status Save(torch::jit::Module& module, const std::string& path) {
  std::ostringstream bytes;
  HPTRAIN_RETURN_IF_ERROR(Torch(absl::StrCat(path, ": saving the module"), [&] {
    module.eval();
    module.save(bytes);
  }));
  return WriteFileAtomically(path, bytes.str());
}

}  // namespace

absl::Status LoadCheckpointWeights(const Checkpoint& checkpoint, const std::string& path,
                                   const std::vector<torch::Tensor>& params,
                                   const std::vector<torch::Tensor>& buffers) {
  HPTRAIN_RETURN_IF_ERROR(
      CheckSection(checkpoint, path, kParams, static_cast<size_t>(Elements(params))));
  HPTRAIN_RETURN_IF_ERROR(
      CheckSection(checkpoint, path, kBuffers, static_cast<size_t>(Elements(buffers))));
  for (const auto& tensors : {params, buffers}) {
    for (const torch::Tensor& t : tensors) {
      if (t.scalar_type() != torch::kFloat32 || !t.device().is_cpu()) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ": the model has a tensor that is not float32 on the CPU"));
      }
    }
  }
  return Torch(absl::StrCat(path, ": loading the weights"), [&] {
    Unflatten(checkpoint.sections.at(kParams), params);
    Unflatten(checkpoint.sections.at(kBuffers), buffers);
  });
}

absl::StatusOr<torch::jit::Module> ScriptZooModel(const Model& model, const job::ModelSpec& spec,
                                                  const ModelShape& shape) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string forward, ZooForwardScript(spec, shape));
  const std::string class_prefix = absl::StrCat("__torch__.hptrain.", spec.name);
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module root(c10::QualifiedName(class_prefix + ".Model"), cu, /*shouldMangle=*/true);
  absl::Status status = Torch(absl::StrCat(spec.name, ": building the TorchScript module"), [&] {
    torch::NoGradGuard no_grad;
    AddTrainingFlag(root);
    std::map<std::string, torch::jit::Module> made;
    const std::vector<torch::Tensor> params = model.parameters();
    const std::vector<std::string> param_names = model.parameter_names();
    for (size_t i = 0; i < params.size(); ++i) {
      auto [path, name] = SplitName(param_names[i]);
      torch::Tensor copy = params[i].detach().to(torch::kCPU).clone();
      copy.set_requires_grad(true);
      SubmoduleAt(root, path, class_prefix, cu, &made).register_parameter(name, copy, false);
    }
    const std::vector<torch::Tensor> buffers = model.buffers();
    const std::vector<std::string> buffer_names = model.buffer_names();
    for (size_t i = 0; i < buffers.size(); ++i) {
      auto [path, name] = SplitName(buffer_names[i]);
      SubmoduleAt(root, path, class_prefix, cu, &made)
          .register_buffer(name, buffers[i].detach().to(torch::kCPU).clone());
    }
    root.define(forward);
  });
  if (!status.ok()) return status;
  return root;
}

absl::StatusOr<ExportedModel> ExportModel(const ExportRequest& r) {
  const job::JobSpec& spec = *r.spec;
  ExportedModel exported;
  torch::jit::Module module;
  if (!spec.model.torchscript.empty()) {
    // The user's own module, its forward untouched: load it here rather than through Model, which
    // hides the module; the parameter and buffer order is Model's for TorchScript models
    // (named_parameters / named_buffers, recursive), the order the checkpoint was written in.
    HPTRAIN_ASSIGN_OR_RETURN(auto model, CreateModel(spec.model, r.shape, spec.seed));
    (void)model;  // the same checks as a worker's (the file loads, the output shape fits)
    HPTRAIN_RETURN_IF_ERROR(Torch(spec.model.torchscript, [&] {
      module = torch::jit::load(spec.model.torchscript, torch::kCPU);
    }));
    std::vector<torch::Tensor> params;
    std::vector<torch::Tensor> buffers;
    for (const auto& p : module.named_parameters(/*recurse=*/true)) params.push_back(p.value);
    for (const auto& b : module.named_buffers(/*recurse=*/true)) {
      if (b.value.is_floating_point()) buffers.push_back(b.value);
    }
    HPTRAIN_RETURN_IF_ERROR(LoadCheckpointWeights(*r.checkpoint, r.checkpoint_path, params, buffers));
    exported.num_parameters = Elements(params);
    exported.description = Describe(r, spec.model.torchscript);
  } else {
    HPTRAIN_ASSIGN_OR_RETURN(auto model, CreateModel(spec.model, r.shape, spec.seed));
    HPTRAIN_RETURN_IF_ERROR(LoadCheckpointWeights(*r.checkpoint, r.checkpoint_path,
                                                  model->parameters(), model->buffers()));
    model->train(false);
    HPTRAIN_ASSIGN_OR_RETURN(module, ScriptZooModel(*model, spec.model, r.shape));
    exported.num_parameters = model->num_parameters();
    exported.description = Describe(r, spec.model.name);
  }
  HPTRAIN_RETURN_IF_ERROR(SetAttributes(module, r, exported.description));
  HPTRAIN_RETURN_IF_ERROR(Save(module, r.out));
  return exported;
}

}  // namespace hptrain::train
