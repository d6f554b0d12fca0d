#include "runtime/train/export/zoo_script.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hptrain::train {
namespace {

// The TorchScript expression for the submodule at dotted `path` of `self`.
std::string Ref(const std::string& path) {
  std::string expr = "self";
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    int unused;
    if (absl::SimpleAtoi(part, &unused)) {
      expr = absl::StrCat("getattr(", expr, ", \"", part, "\")");
    } else {
      absl::StrAppend(&expr, ".", part);
    }
  }
  return expr;
}

// The functional forms the C++ frontend modules call (Conv2dImpl, BatchNorm2dImpl in evaluation
// mode with its default momentum and eps, LinearImpl).
std::string Conv(const std::string& x, const std::string& m, int stride, int pad, bool bias) {
  const std::string r = Ref(m);
  return absl::StrCat("torch.conv2d(", x, ", ", r, ".weight, ", bias ? r + ".bias" : "None", ", [",
                      stride, ", ", stride, "], [", pad, ", ", pad, "], [1, 1], 1)");
}
std::string BatchNorm(const std::string& x, const std::string& m) {
  const std::string r = Ref(m);
  return absl::StrCat("torch.batch_norm(", x, ", ", r, ".weight, ", r, ".bias, ", r,
                      ".running_mean, ", r, ".running_var, False, 0.1, 1e-05, True)");
}
std::string Linear(const std::string& x, const std::string& m) {
  const std::string r = Ref(m);
  return absl::StrCat("torch.linear(", x, ", ", r, ".weight, ", r, ".bias)");
}
std::string Pool(const std::string& x, bool ceil) {
  return absl::StrCat("torch.max_pool2d(", x, ", [2, 2], [2, 2], [0, 0], [1, 1], ",
                      ceil ? "True" : "False", ")");
}

// A method body from its lines (indented here).
std::string Method(const std::vector<std::string>& lines) {
  std::string out = "def forward(self, x: Tensor) -> Tensor:\n";
  for (const std::string& line : lines) absl::StrAppend(&out, "    ", line, "\n");
  return out;
}

// lenet5.cc: conv1 pads inputs smaller than 32x32 up to 32.
std::string LeNet5(const ModelShape& s) {
  const int64_t side = std::min(s.height, s.width);
  const int pad = side < 32 ? static_cast<int>((32 - side + 1) / 2) : 0;
  return Method({
      absl::StrCat("x = ", Pool(absl::StrCat("torch.relu(", Conv("x", "conv1", 1, pad, true), ")"),
                                false)),
      absl::StrCat("x = ", Pool(absl::StrCat("torch.relu(", Conv("x", "conv2", 1, 0, true), ")"),
                                false)),
      "x = x.flatten(1)",
      absl::StrCat("x = torch.relu(", Linear("x", "fc1"), ")"),
      absl::StrCat("x = torch.relu(", Linear("x", "fc2"), ")"),
      absl::StrCat("return ", Linear("x", "fc3")),
  });
}

// mlp.cc: layers.0 .. layers.<hidden>, ReLU between them.
std::string Mlp(const job::ModelSpec& spec) {
  const size_t layers = (spec.hidden.empty() ? 2 : spec.hidden.size()) + 1;
  std::vector<std::string> lines = {"x = x.flatten(1)"};
  for (size_t i = 0; i < layers; ++i) {
    const std::string linear = Linear("x", absl::StrCat("layers.", i));
    lines.push_back(i + 1 < layers ? absl::StrCat("x = torch.relu(", linear, ")")
                                   : absl::StrCat("return ", linear));
  }
  return Method(lines);
}

// resnet20.cc: option-A shortcuts (stride-2 subsampling, zero channel padding).
std::string ResNet20() {
  std::vector<std::string> lines = {
      absl::StrCat("x = torch.relu(", BatchNorm(Conv("x", "conv1", 1, 1, false), "bn1"), ")")};
  int in = 16;
  const int widths[] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage) {
    for (int block = 0; block < 3; ++block) {
      const int out = widths[stage];
      const int stride = (stage > 0 && block == 0) ? 2 : 1;
      const std::string b = absl::StrCat("layer", stage + 1, ".", block);
      lines.push_back(absl::StrCat(
          "out = torch.relu(", BatchNorm(Conv("x", b + ".conv1", stride, 1, false), b + ".bn1"),
          ")"));
      lines.push_back(
          absl::StrCat("out = ", BatchNorm(Conv("out", b + ".conv2", 1, 1, false), b + ".bn2")));
      lines.push_back(stride != 1 ? absl::StrCat("shortcut = x[:, :, ::", stride, ", ::", stride, "]")
                                  : "shortcut = x");
      if (out != in) {
        const int front = (out - in) / 2;
        lines.push_back(absl::StrCat("shortcut = torch.constant_pad_nd(shortcut, [0, 0, 0, 0, ",
                                     front, ", ", out - in - front, "], 0.0)"));
      }
      lines.push_back("x = torch.relu(out + shortcut)");
      in = out;
    }
  }
  lines.push_back("x = torch.adaptive_avg_pool2d(x, [1, 1]).flatten(1)");
  lines.push_back(absl::StrCat("return ", Linear("x", "fc")));
  return Method(lines);
}

// vgg11.cc: features = (conv, bn, relu) per conv and one entry per ceil-mode pool.
std::string Vgg11() {
  constexpr int kPool = 0;
  constexpr int kConfig[] = {64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512,
                             kPool};
  std::vector<std::string> lines;
  int index = 0;
  for (int out : kConfig) {
    if (out == kPool) {
      lines.push_back(absl::StrCat("x = ", Pool("x", true)));
      index += 1;
      continue;
    }
    const std::string conv = Conv("x", absl::StrCat("features.", index), 1, 1, true);
    lines.push_back(absl::StrCat("x = torch.relu(",
                                 BatchNorm(conv, absl::StrCat("features.", index + 1)), ")"));
    index += 3;
  }
  lines.push_back(absl::StrCat("return ", Linear("x.flatten(1)", "classifier")));
  return Method(lines);
}

// alexnet.cc: features conv 0, 3, 6, 8, 10 (pools after 0, 3 and 10); classifier linear 1, 4, 6
// (the dropouts are identities in evaluation mode).
std::string AlexNet() {
  std::vector<std::string> lines;
  for (int conv : {0, 3, 6, 8, 10}) {
    lines.push_back(absl::StrCat("x = torch.relu(",
                                 Conv("x", absl::StrCat("features.", conv), 1, 1, true), ")"));
    if (conv == 0 || conv == 3 || conv == 10) lines.push_back(absl::StrCat("x = ", Pool("x", true)));
  }
  lines.push_back("x = x.flatten(1)");
  lines.push_back(absl::StrCat("x = torch.relu(", Linear("x", "classifier.1"), ")"));
  lines.push_back(absl::StrCat("x = torch.relu(", Linear("x", "classifier.4"), ")"));
  lines.push_back(absl::StrCat("return ", Linear("x", "classifier.6")));
  return Method(lines);
}

}  // namespace

absl::StatusOr<std::string> ZooForwardScript(const job::ModelSpec& spec, const ModelShape& shape) {
  if (spec.name == "lenet5") return LeNet5(shape);
  if (spec.name == "mlp") return Mlp(spec);
  if (spec.name == "resnet20") return ResNet20();
  if (spec.name == "vgg11") return Vgg11();
  if (spec.name == "alexnet") return AlexNet();
  return absl::InvalidArgumentError(
      absl::StrCat("model \"", spec.name, "\" has no TorchScript forward; zoo models: ",
                   absl::StrJoin(ZooModelNames(), ", ")));
}

}  // namespace hptrain::train
