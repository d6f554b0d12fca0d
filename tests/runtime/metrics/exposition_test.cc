#include "runtime/metrics/exposition.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/metrics/registry.h"

namespace hptrain::metrics {
namespace {

TEST(ExpositionTest, FormatValue) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(1), "1");
  EXPECT_EQ(FormatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.001), "0.001");
  EXPECT_EQ(FormatValue(1234567890123.0), "1234567890123");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(ExpositionTest, FormatValueRoundTrips) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> exponent(-300, 300);
  std::uniform_real_distribution<double> mantissa(-1, 1);
  for (int i = 0; i < 10000; ++i) {
    double v = mantissa(rng) * std::pow(10.0, exponent(rng));
    std::string text = FormatValue(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
}

TEST(ExpositionTest, Escaping) {
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");  // quotes stay in HELP
  EXPECT_EQ(EscapeLabelValue("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
  EXPECT_EQ(EscapeLabelValue("plain ünicode"), "plain ünicode");
}

// A small registry with all three types, constant labels and escaping; the exact text is the
// contract with Prometheus, so it is compared byte for byte.
TEST(ExpositionTest, GoldenText) {
  Registry r({{"trainingjob", "mnist"}, {"rank", "0"}});
  CounterFamily* bytes =
      r.Counter("hptrain_comm_bytes_total", "Bytes moved.\nBy collectives \\ PS.", {"direction"});
  bytes->WithLabels({"sent"})->Inc(1024);
  bytes->WithLabels({"recv"})->Inc(2048.5);
  r.Gauge("hptrain_batch_size", "Current batch.")->Get()->Set(64);
  r.Gauge("hptrain_info", "Escapes.", {"path"})->WithLabels({"a\"b\\c\nd"})->Set(1);
  Histogram* h = r.Histogram("hptrain_step_duration_seconds", "Step time.", {}, {0.1, 1})->Get();
  h->Observe(0.0625);
  h->Observe(0.5);
  h->Observe(2);

  EXPECT_EQ(TextExposition(r),
            "# HELP hptrain_batch_size Current batch.\n"
            "# TYPE hptrain_batch_size gauge\n"
            "hptrain_batch_size{trainingjob=\"mnist\",rank=\"0\"} 64\n"
            "# HELP hptrain_comm_bytes_total Bytes moved.\\nBy collectives \\\\ PS.\n"
            "# TYPE hptrain_comm_bytes_total counter\n"
            "hptrain_comm_bytes_total{trainingjob=\"mnist\",rank=\"0\",direction=\"recv\"} 2048.5\n"
            "hptrain_comm_bytes_total{trainingjob=\"mnist\",rank=\"0\",direction=\"sent\"} 1024\n"
            "# HELP hptrain_info Escapes.\n"
            "# TYPE hptrain_info gauge\n"
            "hptrain_info{trainingjob=\"mnist\",rank=\"0\",path=\"a\\\"b\\\\c\\nd\"} 1\n"
            "# HELP hptrain_step_duration_seconds Step time.\n"
            "# TYPE hptrain_step_duration_seconds histogram\n"
            "hptrain_step_duration_seconds_bucket{trainingjob=\"mnist\",rank=\"0\",le=\"0.1\"} 1\n"
            "hptrain_step_duration_seconds_bucket{trainingjob=\"mnist\",rank=\"0\",le=\"1\"} 2\n"
            "hptrain_step_duration_seconds_bucket{trainingjob=\"mnist\",rank=\"0\",le=\"+Inf\"} 3\n"
            "hptrain_step_duration_seconds_sum{trainingjob=\"mnist\",rank=\"0\"} 2.5625\n"
            "hptrain_step_duration_seconds_count{trainingjob=\"mnist\",rank=\"0\"} 3\n");
}

TEST(ExpositionTest, NoLabelsAtAll) {
  Registry r;
  r.Counter("a_total", "A.")->Get()->Inc(3);
  Histogram* h = r.Histogram("b_seconds", "B.", {}, {})->Get();
  h->Observe(1);
  EXPECT_EQ(TextExposition(r),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 3\n"
            "# HELP b_seconds B.\n# TYPE b_seconds histogram\n"
            "b_seconds_bucket{le=\"+Inf\"} 1\nb_seconds_sum 1\nb_seconds_count 1\n");
}

TEST(ExpositionTest, LabelledFamilyWithoutChildrenHasOnlyMetadata) {
  Registry r;
  r.Counter("hptrain_rpc_rejected_total", "Rejected RPCs.", {"reason"});
  EXPECT_EQ(TextExposition(r),
            "# HELP hptrain_rpc_rejected_total Rejected RPCs.\n"
            "# TYPE hptrain_rpc_rejected_total counter\n");
}

// Runs `promtool check metrics < path`; returns its exit code and its combined output.
std::pair<int, std::string> RunPromtool(const std::string& path) {
  std::string command = "promtool check metrics < '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

bool HavePromtool() { return std::system("command -v promtool > /dev/null 2>&1") == 0; }

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// promtool is the Prometheus project's own parser and linter: docs/design.md requires every endpoint
// to pass it.
TEST(PromtoolTest, RegistryOutputPassesCheckMetrics) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not on PATH (Debian package prometheus)";
  Registry r({{"trainingjob", "mnist"}, {"role", "worker"}, {"rank", "3"}});
  CounterFamily* bytes =
      r.Counter("hptrain_comm_bytes_total", "Bytes moved by collectives.", {"direction"});
  bytes->WithLabels({"sent"})->Inc(1e9);
  bytes->WithLabels({"received"})->Inc(12345.5);
  r.Counter("hptrain_rpc_rejected_total", "Rejected RPCs.\nBy \"reason\".", {"reason"})
      ->WithLabels({"bad \"token\"\\\n"})
      ->Inc();
  r.Gauge("hptrain_batch_size", "Current batch size.")->Get()->Set(128);
  r.Gauge("hptrain_train_loss", "Training loss.")->Get()->Set(std::nan(""));
  r.Gauge("hptrain_samples_per_second", "Throughput.")
      ->Get()
      ->Set(std::numeric_limits<double>::infinity());
  HistogramFamily* step =
      r.Histogram("hptrain_step_duration_seconds", "Wall time of one step.", {"phase"});
  for (double v : {0.0005, 0.02, 0.3, 7.0, 120.0}) step->WithLabels({"train"})->Observe(v);
  step->WithLabels({"eval"});
  r.Histogram("hptrain_comm_seconds", "Communication time.")->Get()->Observe(0.01);

  std::string path = WriteTemp("metrics_promtool_ok.txt", TextExposition(r));
  auto [code, output] = RunPromtool(path);
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output, "") << "promtool reported problems";
}

// Guards the harness above: a known lint problem must be seen.
TEST(PromtoolTest, HarnessSeesProblems) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not on PATH (Debian package prometheus)";
  std::string path =
      WriteTemp("metrics_promtool_bad.txt", "# HELP foo x\n# TYPE foo counter\nfoo 1\n");
  auto [code, output] = RunPromtool(path);
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, ::testing::HasSubstr("_total"));
}

}  // namespace
}  // namespace hptrain::metrics
