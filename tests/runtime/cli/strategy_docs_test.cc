// The strategy descriptors' outputs (runtime/cli/strategy_docs.h), and that a parameter defined
// once in a descriptor reaches the parser, the validator, the CRD and the README table.
#include "runtime/cli/strategy_docs.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/job/job_parser.h"
#include "runtime/sync/strategy_descriptor.h"

namespace hptrain::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A strategy of this test binary only, with one parameter no other strategy has.
const bool kTestOnlyRegistered = [] {
  sync::ParamSpec gain;
  gain.name = "gain";
  gain.type = sync::ParamType::kNumber;
  gain.doc = "how much the test-only strategy amplifies";
  gain.range.min = 0;
  gain.range.max = 2;
  gain.default_value = sync::OptionValue(1.0);
  sync::StrategyDescriptor d;
  d.name = "testonly";
  d.doc = "a strategy registered by strategy_docs_test only";
  d.params = {gain};
  return sync::RegisterStrategyDescriptor(d);
}();

constexpr char kJob[] = R"(apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: t
spec:
  model: {name: lenet5}
  dataset: {name: fashion-mnist}
  globalBatchSize: 64
  workers: {replicas: 2}
)";

std::string ErrorOf(const std::vector<std::string>& overrides) {
  absl::StatusOr<job::JobSpec> spec = job::ParseJobText(kJob, overrides, "job.yaml");
  return spec.ok() ? "" : std::string(spec.status().message());
}

TEST(StrategyDocsTest, AParameterAddedToOneDescriptorAppearsEverywhere) {
  ASSERT_TRUE(kTestOnlyRegistered);
  // The parser reads it and the validator lets it through on its strategy; unset, it reads as
  // its default.
  absl::StatusOr<job::JobSpec> spec =
      job::ParseJobText(kJob, {"spec.strategy.type=testonly", "spec.strategy.gain=1.5"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->strategy.Number("gain"), 1.5);
  spec = job::ParseJobText(kJob, {"spec.strategy.type=testonly"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->strategy.Has("gain"));
  EXPECT_DOUBLE_EQ(spec->strategy.Number("gain"), 1.0);

  // The validator enforces its type, its range and where it applies.
  EXPECT_EQ(ErrorOf({"spec.strategy.type=testonly", "spec.strategy.gain=3"}),
            "job.yaml: spec.strategy.gain: must be in [0, 2], got 3");
  EXPECT_EQ(ErrorOf({"spec.strategy.type=testonly", "spec.strategy.gain=x"}),
            "job.yaml: spec.strategy.gain: must be a number, got \"x\"");
  EXPECT_EQ(ErrorOf({"spec.strategy.gain=1"}),
            "job.yaml: spec.strategy.gain: does not apply to strategy ssgd (ssgd takes no "
            "parameters)");
  EXPECT_THAT(ErrorOf({"spec.strategy.type=testonly", "spec.strategy.density=0.1"}),
              HasSubstr("spec.strategy.density: does not apply to strategy testonly (testonly "
                        "takes gain)"));

  // The CRD: a property with its bounds, the rule saying where it applies, the strategy type.
  const std::string crd = CrdYaml();
  EXPECT_THAT(crd, HasSubstr("                    gain:\n"
                             "                      type: number\n"
                             "                      minimum: 0\n"
                             "                      maximum: 2\n"));
  EXPECT_THAT(crd, HasSubstr("- rule: \"!has(self.gain) || (has(self.type) && self.type == "
                             "'testonly')\""));
  EXPECT_THAT(crd, HasSubstr("                      - testonly\n"));

  // The README table and the other listings.
  EXPECT_THAT(StrategiesMarkdown(),
              HasSubstr("| `testonly` | a strategy registered by strategy_docs_test only | "
                        "`gain` (1; in [0, 2]) |"));
  EXPECT_THAT(StrategiesTable(), HasSubstr("gain"));
  EXPECT_THAT(StrategiesJson(), HasSubstr("{\"name\": \"gain\", \"type\": \"number\""));
}

TEST(StrategyDocsTest, EveryBuiltInStrategyIsListed) {
  const std::string table = StrategiesTable();
  const std::string markdown = StrategiesMarkdown();
  const std::string json = StrategiesJson();
  for (const sync::StrategyDescriptor& d : sync::StrategyDescriptors()) {
    EXPECT_THAT(table, HasSubstr("\n" + d.name + " ")) << d.name;
    EXPECT_THAT(markdown, HasSubstr("| `" + d.name + "` |")) << d.name;
    EXPECT_THAT(json, HasSubstr("{\"name\": \"" + d.name + "\"")) << d.name;
  }
  // Where they run: the descriptors' devices, e.g. topk on NCCL unless compact.
  EXPECT_THAT(table, HasSubstr("cuda (nccl, not with sparseEncoding: compact)"));
  EXPECT_THAT(markdown, HasSubstr("| `interval` (8; >= 1) | cpu, cuda (gloo) |\n"));
}

TEST(StrategyDocsTest, TheCrdKeepsItsTemplateAndReplacesTheMarker) {
  const std::string crd = CrdYaml();
  EXPECT_THAT(crd, HasSubstr("kind: CustomResourceDefinition"));
  EXPECT_THAT(crd, HasSubstr("                strategy:\n                  type: object\n"));
  EXPECT_THAT(crd, Not(HasSubstr("__HPTRAIN_STRATEGY_SCHEMA__")));
  EXPECT_THAT(crd, HasSubstr("                optimizer:\n"));
  EXPECT_EQ(crd.back(), '\n');
  EXPECT_THAT(crd, Not(HasSubstr("\n\n\n")));
}

}  // namespace
}  // namespace hptrain::cli
