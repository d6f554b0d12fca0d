#include "runtime/train/models/model.h"

#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status.h"
#include "runtime/train/models/model_zoo_internal.h"

namespace hptrain::train {
namespace {

using internal::ZooFactory;
using internal::ZooNet;

struct ZooEntry {
  const char* name;
  ZooFactory factory;
};

constexpr ZooEntry kZoo[] = {
    {"lenet5", &internal::NewLeNet5},     {"mlp", &internal::NewMlp},
    {"resnet20", &internal::NewResNet20}, {"vgg11", &internal::NewVgg11},
    {"alexnet", &internal::NewAlexNet},
};

// A C++ frontend network behind the Model interface.
class ModuleModel final : public Model {
 public:
  ModuleModel(std::string name, std::shared_ptr<ZooNet> net)
      : Model(std::move(name)), net_(std::move(net)) {}

  absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input) override {
    try {
      return net_->forward(input);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": forward failed: ", internal::ExceptionMessage(e)));
    }
  }

  std::vector<torch::Tensor> parameters() const override { return net_->parameters(); }
  std::vector<std::string> parameter_names() const override {
    return net_->named_parameters().keys();
  }

  std::vector<torch::Tensor> buffers() const override {
    std::vector<torch::Tensor> out;
    for (const auto& item : net_->named_buffers()) {
      if (item.value().is_floating_point()) out.push_back(item.value());
    }
    return out;
  }
  std::vector<std::string> buffer_names() const override {
    std::vector<std::string> out;
    for (const auto& item : net_->named_buffers()) {
      if (item.value().is_floating_point()) out.push_back(item.key());
    }
    return out;
  }

  void train(bool on) override { net_->train(on); }
  bool is_training() const override { return net_->is_training(); }

  bool gates_forward() const override { return net_->gates_forward(); }
  void set_forward_gate(std::function<void(int)> gate) override {
    net_->set_gate(std::move(gate));
  }

  absl::Status to(const torch::Device& device) override {
    try {
      net_->to(device);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(name(), ": moving to ", device.str(),
                                              " failed: ", internal::ExceptionMessage(e)));
    }
  }

 private:
  std::shared_ptr<ZooNet> net_;
};

// One forward pass on zeros, in evaluation mode and without grad, to turn a shape mismatch into
// an error at construction rather than at the first training step.
absl::Status CheckForward(Model& model, const ModelShape& shape) {
  const bool was_training = model.is_training();
  model.train(false);
  absl::StatusOr<torch::Tensor> out;
  try {
    torch::NoGradGuard no_grad;
    out = model.Forward(torch::zeros({1, shape.channels, shape.height, shape.width}));
  } catch (const std::exception& e) {
    out = absl::InternalError(internal::ExceptionMessage(e));
  }
  model.train(was_training);
  const std::string input =
      absl::StrCat("[1, ", shape.channels, ", ", shape.height, ", ", shape.width, "]");
  if (!out.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(out.status().message(), " (checking with a zero ", input, " input)"));
  }
  if (out->dim() != 2 || out->size(0) != 1 || out->size(1) != shape.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        model.name(), ": a zero ", input, " input gives logits of shape [",
        absl::StrJoin(out->sizes(), ", "), "], expected [1, ", shape.num_classes, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

std::string ExceptionMessage(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  const std::string message = c10 != nullptr ? c10->what_without_backtrace() : e.what();
  // The TorchScript interpreter puts the Python-level traceback first and the actual error
  // ("RuntimeError: ...") last; other libtorch errors lead with it and append lists of
  // dispatch keys or serialized code.
  std::vector<absl::string_view> lines = absl::StrSplit(message, '\n', absl::SkipWhitespace());
  if (lines.empty()) return message;
  if (absl::StartsWith(lines.front(), "The following operation failed in the TorchScript")) {
    return std::string(lines.back());
  }
  return std::string(lines.front());
}

std::unique_ptr<Model> WrapZooNet(std::string name, std::shared_ptr<ZooNet> net) {
  return std::make_unique<ModuleModel>(std::move(name), std::move(net));
}

}  // namespace internal

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const torch::Tensor& p : parameters()) n += p.numel();
  return n;
}

std::vector<int> Model::parameter_layers() const {
  std::vector<int> layers;
  std::string previous;
  for (const std::string& name : parameter_names()) {
    const size_t dot = name.rfind('.');
    std::string module = dot == std::string::npos ? std::string() : name.substr(0, dot);
    if (layers.empty()) {
      layers.push_back(0);
    } else {
      layers.push_back(module == previous ? layers.back() : layers.back() + 1);
    }
    previous = std::move(module);
  }
  return layers;
}

std::vector<std::string> ZooModelNames() {
  std::vector<std::string> names;
  for (const ZooEntry& entry : kZoo) names.emplace_back(entry.name);
  return names;
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const job::ModelSpec& spec,
                                                   const ModelShape& shape, uint64_t seed) {
  if (shape.channels <= 0 || shape.height <= 0 || shape.width <= 0 || shape.num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad model shape ", shape.channels, "x",
                                                   shape.height, "x", shape.width, ", ",
                                                   shape.num_classes, " classes"));
  }
  std::unique_ptr<Model> model;
  if (!spec.torchscript.empty()) {
    if (!spec.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: name \"", spec.name, "\" and torchscript are exclusive"));
    }
    HPTRAIN_ASSIGN_OR_RETURN(model, internal::LoadTorchScript(spec.torchscript));
  } else {
    const ZooEntry* entry = nullptr;
    for (const ZooEntry& e : kZoo) {
      if (spec.name == e.name) entry = &e;
    }
    if (entry == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown model \"", spec.name, "\"; known: ", absl::StrJoin(ZooModelNames(), ", ")));
    }
    // Seeding and construction must not interleave with another CreateModel.
    static std::mutex* const mu = new std::mutex;
    std::lock_guard<std::mutex> lock(*mu);
    try {
      torch::manual_seed(seed);
      absl::StatusOr<std::shared_ptr<ZooNet>> net = entry->factory(spec, shape);
      if (!net.ok()) return Annotate(net.status(), absl::StrCat("model ", spec.name));
      model = internal::WrapZooNet(spec.name, *std::move(net));
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", spec.name, ": construction failed: ", internal::ExceptionMessage(e)));
    }
  }
  HPTRAIN_RETURN_IF_ERROR(CheckForward(*model, shape));
  model->train(true);
  return model;
}

}  // namespace hptrain::train
