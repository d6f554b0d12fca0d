#include <stdlib.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/train/models/model.h"

namespace hptrain::train {
namespace {

using ::testing::HasSubstr;

class ModelsTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

job::ModelSpec Zoo(const std::string& name) {
  job::ModelSpec spec;
  spec.name = name;
  return spec;
}

constexpr ModelShape kMnist{1, 28, 28, 10};
constexpr ModelShape kCifar{3, 32, 32, 10};

TEST_F(ModelsTest, LeNet5Has61706Parameters) {
  auto model = CreateModel(Zoo("lenet5"), kMnist, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_parameters(), 61706);
  EXPECT_EQ((*model)->parameter_names(),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                      "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                      "fc3.weight", "fc3.bias"}));
  EXPECT_TRUE((*model)->buffers().empty());
  // On CIFAR-sized inputs conv1 has no padding, so only conv1's input channels change.
  auto cifar = CreateModel(Zoo("lenet5"), kCifar, 1);
  ASSERT_TRUE(cifar.ok()) << cifar.status();
  EXPECT_EQ((*cifar)->num_parameters(), 61706 + 2 * 6 * 25);
}

// The priority scheduler's layers: one per module, in forward order; LeNet-5 and the MLP call
// the forward gate before each of them, in that order.
TEST_F(ModelsTest, LayersAndForwardGates) {
  auto lenet = CreateModel(Zoo("lenet5"), kMnist, 1);
  ASSERT_TRUE(lenet.ok()) << lenet.status();
  EXPECT_EQ((*lenet)->parameter_layers(), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
  ASSERT_TRUE((*lenet)->gates_forward());
  std::vector<int> calls;
  (*lenet)->set_forward_gate([&](int layer) { calls.push_back(layer); });
  ASSERT_TRUE((*lenet)->Forward(torch::zeros({2, 1, 28, 28})).ok());
  EXPECT_EQ(calls, (std::vector<int>{0, 1, 2, 3, 4}));

  auto mlp = CreateModel(Zoo("mlp"), kMnist, 1);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ((*mlp)->parameter_layers(), (std::vector<int>{0, 0, 1, 1, 2, 2}));
  calls.clear();
  (*mlp)->set_forward_gate([&](int layer) { calls.push_back(layer); });
  ASSERT_TRUE((*mlp)->Forward(torch::zeros({2, 1, 28, 28})).ok());
  EXPECT_EQ(calls, (std::vector<int>{0, 1, 2}));

  // ResNet-20 does not gate: the trainer waits for the whole update before its forward.
  auto resnet = CreateModel(Zoo("resnet20"), kCifar, 1);
  ASSERT_TRUE(resnet.ok()) << resnet.status();
  EXPECT_FALSE((*resnet)->gates_forward());
  const std::vector<int> layers = (*resnet)->parameter_layers();
  ASSERT_EQ(layers.size(), (*resnet)->parameters().size());
  EXPECT_EQ(layers.front(), 0);
  for (size_t i = 1; i < layers.size(); ++i) EXPECT_LE(layers[i] - layers[i - 1], 1);
}

TEST_F(ModelsTest, ResNet20HasTheCifarParameterCount) {
  auto model = CreateModel(Zoo("resnet20"), kCifar, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_parameters(), 269722);
  // BatchNorm running stats: 19 BN layers x (mean, var); num_batches_tracked left out.
  EXPECT_EQ((*model)->buffers().size(), 38u);
  EXPECT_EQ((*model)->buffer_names().front(), "bn1.running_mean");
  for (const torch::Tensor& b : (*model)->buffers()) EXPECT_TRUE(b.is_floating_point());
}

TEST_F(ModelsTest, MlpUsesHiddenWidths) {
  auto model = CreateModel(Zoo("mlp"), kMnist, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_parameters(), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  job::ModelSpec spec = Zoo("mlp");
  spec.hidden = {32};
  model = CreateModel(spec, kMnist, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_parameters(), 784 * 32 + 32 + 32 * 10 + 10);
  EXPECT_EQ((*model)->parameter_names().front(), "layers.0.weight");
}

TEST_F(ModelsTest, EveryZooModelForwardsMnistAndCifarShapes) {
  for (const std::string& name : ZooModelNames()) {
    for (const ModelShape& shape : {kMnist, kCifar, ModelShape{3, 32, 32, 100}}) {
      SCOPED_TRACE(name + " " + std::to_string(shape.channels) + "x" +
                   std::to_string(shape.height) + " classes " + std::to_string(shape.num_classes));
      auto model = CreateModel(Zoo(name), shape, 3);
      ASSERT_TRUE(model.ok()) << model.status();
      EXPECT_TRUE((*model)->is_training());
      auto logits = (*model)->Forward(torch::randn({2, shape.channels, shape.height, shape.width}));
      ASSERT_TRUE(logits.ok()) << logits.status();
      EXPECT_EQ(logits->sizes(), (std::vector<int64_t>{2, shape.num_classes}));
      // Backward reaches every parameter.
      logits->sum().backward();
      for (const torch::Tensor& p : (*model)->parameters()) EXPECT_TRUE(p.grad().defined());
      EXPECT_EQ((*model)->parameters().size(), (*model)->parameter_names().size());
      EXPECT_EQ((*model)->buffers().size(), (*model)->buffer_names().size());
    }
  }
}

TEST_F(ModelsTest, SameSeedGivesIdenticalWeights) {
  for (const std::string& name : ZooModelNames()) {
    SCOPED_TRACE(name);
    auto a = CreateModel(Zoo(name), kCifar, 11);
    auto b = CreateModel(Zoo(name), kCifar, 11);
    auto c = CreateModel(Zoo(name), kCifar, 12);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    const auto pa = (*a)->parameters();
    const auto pb = (*b)->parameters();
    const auto pc = (*c)->parameters();
    ASSERT_EQ(pa.size(), pb.size());
    bool any_differs = false;
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_TRUE(torch::equal(pa[i], pb[i])) << (*a)->parameter_names()[i];
      any_differs = any_differs || !torch::equal(pa[i], pc[i]);
    }
    EXPECT_TRUE(any_differs);
  }
}

TEST_F(ModelsTest, BadSpecsAreInvalidArgument) {
  EXPECT_EQ(CreateModel(Zoo("resnet1000"), kMnist, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateModel(Zoo("lenet5"), ModelShape{1, 28, 28, 0}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  job::ModelSpec spec = Zoo("mlp");
  spec.hidden = {0};
  EXPECT_EQ(CreateModel(spec, kMnist, 1).status().code(), absl::StatusCode::kInvalidArgument);
  spec = Zoo("lenet5");
  spec.torchscript = "/tmp/x.pt";
  EXPECT_EQ(CreateModel(spec, kMnist, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelsTest, ForwardOnAWrongShapeIsAnErrorNotAnException) {
  auto model = CreateModel(Zoo("lenet5"), kMnist, 1);
  ASSERT_TRUE(model.ok());
  auto logits = (*model)->Forward(torch::zeros({2, 3, 28, 28}));
  EXPECT_EQ(logits.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelsTest, TrainModeTogglesAndToCpuKeepsHandles) {
  auto model = CreateModel(Zoo("resnet20"), kCifar, 1);
  ASSERT_TRUE(model.ok());
  (*model)->train(false);
  EXPECT_FALSE((*model)->is_training());
  (*model)->train(true);
  const torch::Tensor first = (*model)->parameters().front();
  ASSERT_TRUE((*model)->to(torch::kCPU).ok());
  EXPECT_TRUE(first.is_same((*model)->parameters().front()));
}

TEST_F(ModelsTest, MissingOrBadTorchScriptFile) {
  job::ModelSpec spec;
  spec.torchscript = "/nonexistent/model.pt";
  auto missing = CreateModel(spec, kMnist, 1);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/model.pt"));

  spec.torchscript = ::testing::TempDir() + "/hptrain_not_a_model.pt";
  std::ofstream(spec.torchscript) << "this is not a zip archive";
  auto bad = CreateModel(spec, kMnist, 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr(spec.torchscript + ": not a TorchScript module: "));
}

// Exports LeNet-5 / MLP from Python (examples/export_torchscript.py) and loads it. Needs
// /usr/bin/python3 with torch; skipped otherwise.
class TorchScriptTest : public ModelsTest {
 protected:
  void SetUp() override {
    ModelsTest::SetUp();
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "/usr/bin/python3 cannot import torch; TorchScript export not testable";
    }
  }
  // Runs the export script; returns the output path.
  std::string Export(const std::string& args, const std::string& file) {
    const std::string path = ::testing::TempDir() + "/" + file;
    const std::string command =
        "/usr/bin/python3 examples/export_torchscript.py " + path + " " + args + " >/dev/null 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return path;
  }
};

TEST_F(TorchScriptTest, LoadsExportedLeNet5) {
  job::ModelSpec spec;
  spec.torchscript = Export("--model lenet5", "hptrain_lenet5.pt");
  auto model = CreateModel(spec, kMnist, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_parameters(), 61706);
  auto zoo = CreateModel(Zoo("lenet5"), kMnist, 1);
  ASSERT_TRUE(zoo.ok());
  EXPECT_EQ((*model)->parameter_names(), (*zoo)->parameter_names());
  auto logits = (*model)->Forward(torch::randn({4, 1, 28, 28}));
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->sizes(), (std::vector<int64_t>{4, 10}));
  logits->sum().backward();
  for (const torch::Tensor& p : (*model)->parameters()) EXPECT_TRUE(p.grad().defined());
  // The loaded module rejects shapes it was not built for with an error, not an exception.
  auto wrong = CreateModel(spec, ModelShape{1, 28, 28, 100}, 1);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TorchScriptTest, LoadsExportedMlp) {
  job::ModelSpec spec;
  spec.torchscript = Export("--model mlp --hidden 64,32", "hptrain_mlp.pt");
  auto model = CreateModel(spec, kMnist, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  job::ModelSpec zoo_spec = Zoo("mlp");
  zoo_spec.hidden = {64, 32};
  auto zoo = CreateModel(zoo_spec, kMnist, 1);
  ASSERT_TRUE(zoo.ok());
  EXPECT_EQ((*model)->num_parameters(), (*zoo)->num_parameters());
  EXPECT_EQ((*model)->parameter_names(), (*zoo)->parameter_names());
}

}  // namespace
}  // namespace hptrain::train
