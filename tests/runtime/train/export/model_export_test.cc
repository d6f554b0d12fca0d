// Model export: for every zoo model, the exported module, saved and loaded back with
// torch::jit::load, computes what the C++ model computes in evaluation mode, bit for bit; the
// checkpoint's weights land in the module; a checkpoint of another model is refused.
#include "runtime/train/export/model_export.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/train/export/zoo_script.h"
#include "runtime/train/models/model.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::train {
namespace {

using ::testing::HasSubstr;

job::ModelSpec Zoo(const std::string& name) {
  job::ModelSpec spec;
  spec.name = name;
  return spec;
}

// Every parameter and buffer moved off its initial value, so that a weight the module missed or
// misplaced shows in its output (BatchNorm's running statistics start at 0 and 1).
void Perturb(Model& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (torch::Tensor p : model.parameters()) p.add_(torch::randn_like(p) * 0.05);
  for (torch::Tensor b : model.buffers()) b.add_(torch::rand_like(b) * 0.5);
}

struct Case {
  std::string model;
  ModelShape shape;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " " << c.shape.channels << "x" << c.shape.height << "x" << c.shape.width;
}

class ModelExportTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(ModelExportTest, ExportedForwardEqualsTheCppForward) {
  const Case& c = GetParam();
  job::ModelSpec spec = Zoo(c.model);
  if (c.model == "mlp") spec.hidden = {32, 16};
  auto model = CreateModel(spec, c.shape, 3);
  ASSERT_TRUE(model.ok()) << model.status();
  Perturb(**model, 5);
  (*model)->train(false);

  auto scripted = ScriptZooModel(**model, spec, c.shape);
  ASSERT_TRUE(scripted.ok()) << scripted.status();
  testing::TempDir dir;
  const std::string path = dir.path() + "/model.pt";
  scripted->save(path);
  torch::jit::Module loaded = torch::jit::load(path);
  loaded.eval();

  // State-dict names are the C++ model's.
  std::vector<std::string> names;
  for (const auto& p : loaded.named_parameters(/*recurse=*/true)) names.push_back(p.name);
  EXPECT_EQ(names, (*model)->parameter_names());

  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  const torch::Tensor x = torch::randn({5, c.shape.channels, c.shape.height, c.shape.width});
  auto expected = (*model)->Forward(x);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const torch::Tensor got = loaded.forward({x}).toTensor();
  ASSERT_EQ(got.sizes(), expected->sizes());
  EXPECT_TRUE(torch::equal(got, *expected))
      << c.model << ": max difference " << (got - *expected).abs().max().item<float>();
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ModelExportTest,
    ::testing::Values(Case{"lenet5", {1, 28, 28, 10}}, Case{"lenet5", {3, 32, 32, 10}},
                      Case{"mlp", {1, 28, 28, 10}}, Case{"resnet20", {3, 32, 32, 10}},
                      Case{"vgg11", {3, 32, 32, 10}}, Case{"vgg11", {1, 28, 28, 10}},
                      Case{"alexnet", {3, 32, 32, 100}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.model + "_" + std::to_string(info.param.shape.channels) + "x" +
             std::to_string(info.param.shape.height);
    });

// A checkpoint as run_checkpoint.cc writes it: the flat parameters and buffers of `model`.
Checkpoint CheckpointOf(const Model& model) {
  Checkpoint c;
  c.job = "exported";
  c.step = 42;
  for (const torch::Tensor& p : model.parameters()) {
    const torch::Tensor flat = p.detach().contiguous().view(-1);
    c.sections["params"].insert(c.sections["params"].end(), flat.data_ptr<float>(),
                                flat.data_ptr<float>() + flat.numel());
  }
  c.sections["buffers"];
  for (const torch::Tensor& b : model.buffers()) {
    const torch::Tensor flat = b.detach().contiguous().view(-1);
    c.sections["buffers"].insert(c.sections["buffers"].end(), flat.data_ptr<float>(),
                                 flat.data_ptr<float>() + flat.numel());
  }
  return c;
}

job::JobSpec LeNetJob() {
  job::JobSpec spec;
  spec.name = "exported";
  spec.model = Zoo("lenet5");
  spec.dataset.name = "fashion-mnist";
  spec.seed = 1;  // another initialization than the checkpoint's model
  return spec;
}

TEST(ExportModel, WritesTheCheckpointWeightsAndTheInputAttributes) {
  torch::set_num_threads(1);
  const ModelShape shape{1, 28, 28, 10};
  auto trained = CreateModel(Zoo("lenet5"), shape, 9);
  ASSERT_TRUE(trained.ok()) << trained.status();
  Perturb(**trained, 11);
  const Checkpoint checkpoint = CheckpointOf(**trained);
  const job::JobSpec spec = LeNetJob();

  testing::TempDir dir;
  ExportRequest request;
  request.spec = &spec;
  request.checkpoint = &checkpoint;
  request.checkpoint_path = "run.ckpt";
  request.shape = shape;
  request.mean = {0.25f};
  request.std = {0.5f};
  request.out = dir.path() + "/model.pt";
  auto exported = ExportModel(request);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->num_parameters, 61706);
  EXPECT_THAT(exported->description, HasSubstr("lenet5"));

  torch::jit::Module loaded = torch::jit::load(request.out);
  for (const auto& module : loaded.named_modules()) {
    EXPECT_FALSE(module.value.is_training()) << "module \"" << module.name << "\"";
  }
  EXPECT_EQ(loaded.attr("hptrain_model").toStringRef(), exported->description);
  EXPECT_EQ(loaded.attr("input_mean").toDoubleList().vec(), std::vector<double>{0.25});
  EXPECT_EQ(loaded.attr("input_std").toDoubleList().vec(), std::vector<double>{0.5});
  EXPECT_EQ(loaded.attr("input_shape").toIntList().vec(), (std::vector<int64_t>{1, 28, 28}));

  torch::NoGradGuard no_grad;
  (*trained)->train(false);
  const torch::Tensor x = torch::randn({3, 1, 28, 28});
  auto expected = (*trained)->Forward(x);
  ASSERT_TRUE(expected.ok());
  EXPECT_TRUE(torch::equal(loaded.forward({x}).toTensor(), *expected));
}

TEST(ExportModel, ACheckpointOfAnotherModelIsFailedPrecondition) {
  torch::set_num_threads(1);
  job::ModelSpec mlp = Zoo("mlp");
  mlp.hidden = {8};
  auto other = CreateModel(mlp, {1, 28, 28, 10}, 1);
  ASSERT_TRUE(other.ok());
  const Checkpoint checkpoint = CheckpointOf(**other);
  const job::JobSpec spec = LeNetJob();
  testing::TempDir dir;
  ExportRequest request;
  request.spec = &spec;
  request.checkpoint = &checkpoint;
  request.checkpoint_path = "mlp.ckpt";
  request.shape = {1, 28, 28, 10};
  request.out = dir.path() + "/model.pt";
  auto exported = ExportModel(request);
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(exported.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(exported.status().message(), HasSubstr("mlp.ckpt: section params"));
  EXPECT_FALSE(testing::FileExists(request.out));
}

// A TorchScript job: the user's own module (here a linear classifier) with the checkpoint's weights
// and the input attributes; its forward is its own.
TEST(ExportModel, ATorchScriptJobExportsItsOwnModuleWithTheTrainedWeights) {
  torch::set_num_threads(1);
  testing::TempDir dir;
  torch::jit::Module user("__torch__.UserLinear");
  user.register_attribute("training", c10::BoolType::get(), true);
  user.register_parameter("weight", torch::zeros({10, 784}), false);
  user.register_parameter("bias", torch::zeros({10}), false);
  user.define(
      "def forward(self, x: Tensor) -> Tensor:\n"
      "    return torch.linear(x.flatten(1), self.weight, self.bias)\n");
  const std::string module_path = dir.path() + "/user.pt";
  user.save(module_path);

  const torch::Tensor weight = torch::randn({10, 784});
  const torch::Tensor bias = torch::randn({10});
  Checkpoint checkpoint;
  checkpoint.job = "user";
  checkpoint.step = 3;
  checkpoint.sections["params"].assign(weight.data_ptr<float>(), weight.data_ptr<float>() + 7840);
  checkpoint.sections["params"].insert(checkpoint.sections["params"].end(), bias.data_ptr<float>(),
                                       bias.data_ptr<float>() + 10);
  checkpoint.sections["buffers"];
  job::JobSpec spec;
  spec.name = "user";
  spec.model.torchscript = module_path;
  spec.dataset.name = "fashion-mnist";
  ExportRequest request;
  request.spec = &spec;
  request.checkpoint = &checkpoint;
  request.checkpoint_path = "user.ckpt";
  request.shape = {1, 28, 28, 10};
  request.mean = {0.5f};
  request.std = {0.25f};
  request.out = dir.path() + "/model.pt";
  auto exported = ExportModel(request);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->num_parameters, 7850);

  torch::jit::Module loaded = torch::jit::load(request.out);
  EXPECT_FALSE(loaded.is_training());
  EXPECT_EQ(loaded.attr("input_std").toDoubleList().vec(), std::vector<double>{0.25});
  EXPECT_THAT(loaded.attr("hptrain_model").toStringRef(), HasSubstr(module_path));
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({4, 1, 28, 28});
  EXPECT_TRUE(torch::equal(loaded.forward({x}).toTensor(),
                           torch::linear(x.flatten(1), weight, bias)));
}

TEST(ZooForwardScript, AModelOutsideTheZooIsInvalidArgument) {
  auto script = ZooForwardScript(Zoo("resnet50"), {3, 32, 32, 10});
  EXPECT_EQ(script.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hptrain::train
