#include "controller/promql/text_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/metrics/exposition.h"
#include "runtime/metrics/registry.h"

namespace hptrain::promql {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;

using Labels = std::map<std::string, std::string>;

std::vector<Sample> MustParse(absl::string_view text) {
  absl::StatusOr<std::vector<Sample>> samples = ParseTextFormat(text);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<Sample>{};
}

// The first sample whose name and labels include `labels`, or null.
const Sample* Find(const std::vector<Sample>& samples, const Labels& labels) {
  for (const Sample& s : samples) {
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) match = false;
    }
    if (match) return &s;
  }
  return nullptr;
}

TEST(PromqlTextFormatTest, EmptyAndCommentOnlyPagesHaveNoSamples) {
  EXPECT_THAT(MustParse(""), IsEmpty());
  EXPECT_THAT(MustParse("\n\n  \n\t\n"), IsEmpty());
  EXPECT_THAT(MustParse("# HELP foo Some help.\n# TYPE foo counter\n# just a comment\n#\n"
                        "   # indented comment\n# HELP\n# TYPE foo\n"),
              IsEmpty());
}

TEST(PromqlTextFormatTest, SampleWithoutLabels) {
  std::vector<Sample> samples = MustParse("foo 1\n");
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_THAT(samples[0].labels, ElementsAre(Pair("__name__", "foo")));
  EXPECT_EQ(NameOf(samples[0]), "foo");
  EXPECT_EQ(samples[0].value, 1.0);
  EXPECT_EQ(samples[0].timestamp_seconds, 0.0);
}

TEST(PromqlTextFormatTest, SampleWithLabels) {
  std::vector<Sample> samples =
      MustParse("hptrain_step{trainingjob=\"mnist\",rank=\"3\"} 1200\nnext:rate_5m{a=\"\"} -2.5\n");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_THAT(samples[0].labels, ElementsAre(Pair("__name__", "hptrain_step"), Pair("rank", "3"),
                                             Pair("trainingjob", "mnist")));
  EXPECT_EQ(samples[0].value, 1200.0);
  EXPECT_THAT(samples[1].labels, ElementsAre(Pair("__name__", "next:rate_5m"), Pair("a", "")));
  EXPECT_EQ(samples[1].value, -2.5);
}

TEST(PromqlTextFormatTest, LabelValueEscapes) {
  std::vector<Sample> samples =
      MustParse(R"(foo{path="C:\\dir\\",quote="say \"hi\"",nl="a\nb",plain="x,y=z}{"} 1)");
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].labels.at("path"), "C:\\dir\\");
  EXPECT_EQ(samples[0].labels.at("quote"), "say \"hi\"");
  EXPECT_EQ(samples[0].labels.at("nl"), "a\nb");
  EXPECT_EQ(samples[0].labels.at("plain"), "x,y=z}{");
}

TEST(PromqlTextFormatTest, LabelSetSpellings) {
  std::vector<Sample> samples = MustParse(
      "a{x=\"1\",} 1\n"
      "b{} 2\n"
      "c { x = \"1\" , y=\"2\" , } 3\n"
      "d{x=\"1\"}4\n"
      "e\t\t5\t\n"
      "f{utf8=\"Grüße ✓\"} 6\n");
  ASSERT_EQ(samples.size(), 6u);
  EXPECT_THAT(samples[0].labels, ElementsAre(Pair("__name__", "a"), Pair("x", "1")));
  EXPECT_THAT(samples[1].labels, ElementsAre(Pair("__name__", "b")));
  EXPECT_THAT(samples[2].labels,
              ElementsAre(Pair("__name__", "c"), Pair("x", "1"), Pair("y", "2")));
  EXPECT_EQ(samples[2].value, 3.0);
  EXPECT_EQ(samples[3].value, 4.0);
  EXPECT_EQ(samples[4].value, 5.0);
  EXPECT_EQ(samples[5].labels.at("utf8"), "Grüße ✓");
}

TEST(PromqlTextFormatTest, SpecialAndExponentValues) {
  std::vector<Sample> samples = MustParse(
      "a NaN\nb +Inf\nc -Inf\nd 1e3\ne -1.5E-3\nf +7\ng .5\nh 1.7976931348623157e308\ni Inf\n"
      "j 1e-400\n");
  ASSERT_EQ(samples.size(), 10u);
  EXPECT_TRUE(std::isnan(samples[0].value));
  EXPECT_EQ(samples[1].value, INFINITY);
  EXPECT_EQ(samples[2].value, -INFINITY);
  EXPECT_EQ(samples[3].value, 1000.0);
  EXPECT_EQ(samples[4].value, -0.0015);
  EXPECT_EQ(samples[5].value, 7.0);
  EXPECT_EQ(samples[6].value, 0.5);
  EXPECT_EQ(samples[7].value, 1.7976931348623157e308);
  EXPECT_EQ(samples[8].value, INFINITY);
  EXPECT_EQ(samples[9].value, 0.0);  // underflow rounds to zero, as Go's ParseFloat does
}

TEST(PromqlTextFormatTest, TimestampsInMillisecondsBecomeSeconds) {
  std::vector<Sample> samples = MustParse("a 1 1712000000123\nb{x=\"y\"} 2 -1500   \nc 3 0\nd 4\n");
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_DOUBLE_EQ(samples[0].timestamp_seconds, 1712000000.123);
  EXPECT_DOUBLE_EQ(samples[1].timestamp_seconds, -1.5);
  EXPECT_EQ(samples[2].timestamp_seconds, 0.0);
  EXPECT_EQ(samples[3].timestamp_seconds, 0.0);
}

TEST(PromqlTextFormatTest, CrLfAndMissingFinalNewline) {
  std::vector<Sample> samples = MustParse("# HELP a x\r\na 1\r\n\r\nb{c=\"d\"} 2");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].value, 1.0);
  EXPECT_THAT(samples[1].labels, ElementsAre(Pair("__name__", "b"), Pair("c", "d")));
  EXPECT_EQ(samples[1].value, 2.0);
}

// What a worker serves: the runtime's own registry rendered by its exposition code.
TEST(PromqlTextFormatTest, ParsesTheRuntimeExposition) {
  metrics::Registry registry({{"trainingjob", "mnist"}, {"role", "worker"}, {"rank", "3"}});
  registry.Counter("hptrain_comm_bytes_total", "Bytes moved\nby \\collectives.", {"direction"})
      ->WithLabels({"sent"})
      ->Inc(1048576);
  registry.Counter("hptrain_comm_bytes_total", "Bytes moved\nby \\collectives.", {"direction"})
      ->WithLabels({"recv \"odd\"\\\nvalue"})
      ->Inc(3);
  registry.Gauge("hptrain_loss", "Training loss.")->Get()->Set(NAN);
  registry.Gauge("hptrain_batch_size", "Batch size.")->Get()->Set(-0.25);
  metrics::Histogram* step =
      registry
          .Histogram("hptrain_step_duration_seconds", "Wall time of a step.", {"phase"}, {0.1, 1})
          ->WithLabels({"forward"});
  step->Observe(0.05);
  step->Observe(0.5);
  step->Observe(7);
  std::string page = metrics::TextExposition(registry);

  std::vector<Sample> samples = MustParse(page);
  // 2 counters + 2 gauges + (3 buckets + sum + count).
  ASSERT_EQ(samples.size(), 9u) << page;
  for (const Sample& s : samples) {
    EXPECT_EQ(s.labels.at("trainingjob"), "mnist") << page;
    EXPECT_EQ(s.labels.at("rank"), "3") << page;
  }
  const Sample* sent =
      Find(samples, {{"__name__", "hptrain_comm_bytes_total"}, {"direction", "sent"}});
  ASSERT_NE(sent, nullptr) << page;
  EXPECT_EQ(sent->value, 1048576.0);
  const Sample* odd = Find(samples, {{"direction", "recv \"odd\"\\\nvalue"}});
  ASSERT_NE(odd, nullptr) << page;
  EXPECT_EQ(odd->value, 3.0);
  const Sample* loss = Find(samples, {{"__name__", "hptrain_loss"}});
  ASSERT_NE(loss, nullptr);
  EXPECT_TRUE(std::isnan(loss->value));
  const Sample* batch = Find(samples, {{"__name__", "hptrain_batch_size"}});
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->value, -0.25);
  const Sample* inf_bucket = Find(
      samples,
      {{"__name__", "hptrain_step_duration_seconds_bucket"}, {"le", "+Inf"}, {"phase", "forward"}});
  ASSERT_NE(inf_bucket, nullptr) << page;
  EXPECT_EQ(inf_bucket->value, 3.0);
  const Sample* le_1 =
      Find(samples, {{"__name__", "hptrain_step_duration_seconds_bucket"}, {"le", "1"}});
  ASSERT_NE(le_1, nullptr) << page;
  EXPECT_EQ(le_1->value, 2.0);
  const Sample* sum = Find(samples, {{"__name__", "hptrain_step_duration_seconds_sum"}});
  ASSERT_NE(sum, nullptr);
  EXPECT_DOUBLE_EQ(sum->value, 7.55);
  const Sample* count = Find(samples, {{"__name__", "hptrain_step_duration_seconds_count"}});
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->value, 3.0);
}

// A page in the shape client_golang / node_exporter serve, summary quantiles included.
TEST(PromqlTextFormatTest, ParsesAGoClientPage) {
  const char* page =
      R"(# HELP go_gc_duration_seconds A summary of the pause duration of garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.4497e-05
go_gc_duration_seconds{quantile="0.25"} 3.1803e-05
go_gc_duration_seconds{quantile="1"} 0.000213117
go_gc_duration_seconds_sum 0.003474357
go_gc_duration_seconds_count 59
# HELP go_info Information about the Go environment.
# TYPE go_info gauge
go_info{version="go1.19.8"} 1
# HELP node_filesystem_avail_bytes Filesystem space available to non-root users in bytes.
# TYPE node_filesystem_avail_bytes gauge
node_filesystem_avail_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 3.4152001536e+10
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.71200000001e+09
# HELP promhttp_metric_handler_requests_total Total number of scrapes by HTTP status code.
# TYPE promhttp_metric_handler_requests_total counter
promhttp_metric_handler_requests_total{code="200"} 1234
promhttp_metric_handler_requests_total{code="500"} 0
# TYPE untyped_metric untyped
untyped_metric{a="b"} 12.5 1395066363000
)";
  std::vector<Sample> samples = MustParse(page);
  ASSERT_EQ(samples.size(), 11u);
  const Sample* q = Find(samples, {{"__name__", "go_gc_duration_seconds"}, {"quantile", "0.25"}});
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->value, 3.1803e-05);
  const Sample* fs = Find(samples, {{"mountpoint", "/"}});
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->value, 3.4152001536e+10);
  EXPECT_EQ(samples.back().timestamp_seconds, 1395066363.0);
}

struct Malformed {
  const char* text;
  int line;
  const char* what;
};

TEST(PromqlTextFormatTest, MalformedLinesNameTheLineAndTheProblem) {
  const Malformed cases[] = {
      {"ok 1\n\nfoo{rank 1}\n", 3, "expected '=' after label name \"rank\", found '1'"},
      {"foo{rank", 1, "expected '=' after label name \"rank\", found end of line"},
      {"foo\n", 1, "expected a value for \"foo\""},
      {"foo{a=\"b\"}\n", 1, "expected a value for \"foo\""},
      {"foo abc\n", 1, "invalid value \"abc\" for \"foo\""},
      {"foo 1.5.5", 1, "invalid value \"1.5.5\""},
      {"foo 1e400", 1, "invalid value \"1e400\""},
      {"foo --1", 1, "invalid value \"--1\""},
      {"foo 0x10", 1, "invalid value \"0x10\""},
      {"foo nan(1)", 1, "invalid value"},
      {"foo 1 abc", 1, "invalid timestamp \"abc\" for \"foo\""},
      {"foo 1 1.5", 1, "invalid timestamp \"1.5\""},
      {"foo 1 99999999999999999999", 1, "invalid timestamp"},
      {"foo 1 2 3", 1, "unexpected \"3\" after the timestamp of \"foo\""},
      {"a 1\nfoo{a=\"b} 1\n", 2, "unterminated value of label \"a\""},
      {"foo{a=\"b\\", 1, "unterminated value of label \"a\""},
      {"foo{a=\"b\"", 1, "unterminated label set of \"foo\""},
      {"foo{a=\"b\",", 1, "unterminated label set of \"foo\""},
      {"foo{a=\"b\" c=\"d\"} 1", 1,
       "expected ',' or '}' after the value of label \"a\", found 'c'"},
      {"foo{a=b} 1", 1, "expected '\"' to open the value of label \"a\", found 'b'"},
      {"foo{a=\"\\t\"} 1", 1, "invalid escape '\\t' in the value of label \"a\""},
      {"foo{1a=\"b\"} 1", 1, "expected a label name in the labels of \"foo\", found '1'"},
      {"foo{,} 1", 1, "expected a label name"},
      {"foo{a=\"1\",a=\"2\"} 1", 1, "duplicate label name \"a\" in \"foo\""},
      {"foo{__name__=\"x\"} 1", 1, "label name \"__name__\" is reserved"},
      {"1foo 1", 1, "expected a metric name, found '1'"},
      {"{a=\"b\"} 1", 1, "expected a metric name, found '{'"},
      {"foo-bar 1", 1, "invalid character '-' after metric name \"foo\""},
      {"# TYPE foo histogramx\n", 1, "unknown metric type \"histogramx\" for \"foo\""},
      {"# TYPE foo counter extra\n", 1, "unknown metric type \"counter extra\""},
      {"# TYPE 1foo counter\n", 1, "invalid metric name in # TYPE line, found '1'"},
      {"# HELP foo-bar x\n", 1, "invalid metric name in # HELP line, found '-'"},
      {"# HELP foo tab \\t escape\n", 1, "invalid escape in # HELP text of \"foo\""},
      {"# HELP foo trailing \\", 1, "invalid escape in # HELP text of \"foo\""},
      {"# c\r\n\r\nx 1\r\ny{\x01=\"\"} 1\r\n", 4,
       "expected a label name in the labels of \"y\", found '\\x01'"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<std::vector<Sample>> samples = ParseTextFormat(c.text);
    ASSERT_FALSE(samples.ok());
    EXPECT_EQ(samples.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(samples.status().message()),
                StartsWith(absl::StrCat("line ", c.line, ": ")));
    EXPECT_THAT(samples.status().message(), HasSubstr(c.what));
    EXPECT_EQ(samples.status().message().find('\n'), absl::string_view::npos);
  }
}

// The text is read through a view into an exactly sized heap buffer with no terminator: a read
// past its end would change the result (and trips AddressSanitizer in ASan builds).
TEST(PromqlTextFormatTest, NeverReadsPastTheInput) {
  auto parse_prefix = [](const std::string& whole, size_t n) {
    auto buffer = std::make_unique<char[]>(n);
    std::memcpy(buffer.get(), whole.data(), n);
    return ParseTextFormat(absl::string_view(buffer.get(), n));
  };
  const std::string line = "foo{a=\"b\\\\\"} 12 34";
  absl::StatusOr<std::vector<Sample>> full = parse_prefix(line, line.size());
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ((*full)[0].timestamp_seconds, 0.034);
  // Every prefix either fails cleanly or parses what it holds.
  for (size_t n = 0; n < line.size(); ++n) {
    SCOPED_TRACE(line.substr(0, n));
    absl::StatusOr<std::vector<Sample>> samples = parse_prefix(line, n);
    if (n == line.size() - 1) {  // "... 12 3"
      ASSERT_TRUE(samples.ok()) << samples.status();
      EXPECT_EQ((*samples)[0].value, 12.0);
      EXPECT_EQ((*samples)[0].timestamp_seconds, 0.003);
    } else if (n == line.size() - 3) {  // "... 12"
      ASSERT_TRUE(samples.ok()) << samples.status();
      EXPECT_EQ((*samples)[0].value, 12.0);
      EXPECT_EQ((*samples)[0].timestamp_seconds, 0.0);
    }
  }
  // A view that stops before bytes which would complete it.
  const std::string page = "foo 1\nbar{a=\"x\"} 2";
  absl::StatusOr<std::vector<Sample>> cut = ParseTextFormat(absl::string_view(page).substr(0, 14));
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("line 2: unterminated value of label \"a\""));
  absl::StatusOr<std::vector<Sample>> shorter =
      ParseTextFormat(absl::string_view(page).substr(0, 4));
  ASSERT_FALSE(shorter.ok());
  EXPECT_THAT(shorter.status().message(), HasSubstr("line 1: expected a value for \"foo\""));
}

TEST(PromqlTextFormatTest, ParsesAFewThousandLines) {
  std::string page;
  for (int i = 0; i < 5000; ++i) {
    absl::StrAppend(&page, "# HELP m", i, " help\n# TYPE m", i, " gauge\n");
    absl::StrAppend(&page, "m", i, "{trainingjob=\"j\",rank=\"", i % 64, "\",le=\"0.5\"} ", i,
                    ".5 ", 1712000000000 + i, "\n");
  }
  std::vector<Sample> samples = MustParse(page);
  ASSERT_EQ(samples.size(), 5000u);
  EXPECT_EQ(NameOf(samples[4999]), "m4999");
  EXPECT_EQ(samples[4999].labels.at("rank"), "7");
  EXPECT_EQ(samples[4999].value, 4999.5);
  EXPECT_DOUBLE_EQ(samples[4999].timestamp_seconds, 1712000004.999);
}

TEST(PromqlTextFormatTest, NameOfWithoutName) {
  Sample sample;
  EXPECT_EQ(NameOf(sample), "");
  sample.labels["__name__"] = "up";
  EXPECT_EQ(NameOf(sample), "up");
}

}  // namespace
}  // namespace hptrain::promql
