// TorchScript models: a module exported from Python with torch.jit.script or torch.jit.trace
// (see examples/export_torchscript.py) and loaded with torch::jit::load.
#include <sys/stat.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train::internal {
namespace {

class TorchScriptModel final : public Model {
 public:
  TorchScriptModel(std::string path, torch::jit::Module module)
      : Model(std::move(path)), module_(std::move(module)) {}

  absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input) override {
    try {
      torch::IValue out = module_.forward({input});
      if (!out.isTensor()) {
        return absl::InvalidArgumentError(absl::StrCat(name(), ": forward returned ", out.tagKind(),
                                                       ", expected a tensor of logits"));
      }
      return out.toTensor();
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": forward failed: ", ExceptionMessage(e)));
    }
  }

  std::vector<torch::Tensor> parameters() const override {
    std::vector<torch::Tensor> out;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) out.push_back(p.value);
    return out;
  }
  std::vector<std::string> parameter_names() const override {
    std::vector<std::string> out;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) out.push_back(p.name);
    return out;
  }

  std::vector<torch::Tensor> buffers() const override {
    std::vector<torch::Tensor> out;
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
      if (b.value.is_floating_point()) out.push_back(b.value);
    }
    return out;
  }
  std::vector<std::string> buffer_names() const override {
    std::vector<std::string> out;
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
      if (b.value.is_floating_point()) out.push_back(b.name);
    }
    return out;
  }

  bool HasMethod(const std::string& method) const override {
    return module_.find_method(method).has_value();
  }

  absl::StatusOr<torch::Tensor> CallMethod(const std::string& method,
                                           const std::vector<torch::Tensor>& args) override {
    if (!HasMethod(method)) {
      return absl::NotFoundError(absl::StrCat(name(), ": the module has no method ", method));
    }
    try {
      std::vector<torch::IValue> inputs(args.begin(), args.end());
      torch::IValue out = module_.get_method(method)(std::move(inputs));
      if (!out.isTensor()) {
        return absl::InvalidArgumentError(absl::StrCat(name(), ": ", method, " returned ",
                                                       out.tagKind(), ", expected a tensor"));
      }
      return out.toTensor();
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": ", method, " failed: ", ExceptionMessage(e)));
    }
  }

  void train(bool on) override { module_.train(on); }
  bool is_training() const override { return module_.is_training(); }

  absl::Status to(const torch::Device& device) override {
    try {
      module_.to(device);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat(name(), ": moving to ", device.str(), " failed: ", ExceptionMessage(e)));
    }
  }

 private:
  torch::jit::Module module_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadTorchScript(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  try {
    torch::jit::Module module = torch::jit::load(path, torch::kCPU);
    return std::unique_ptr<Model>(new TorchScriptModel(path, std::move(module)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a TorchScript module: ", ExceptionMessage(e)));
  }
}

}  // namespace hptrain::train::internal
