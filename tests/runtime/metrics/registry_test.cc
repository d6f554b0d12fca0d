#include "runtime/metrics/registry.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CounterTest, IncAccumulates) {
  Counter c;
  EXPECT_EQ(c.Value(), 0);
  c.Inc();
  c.Inc(2.5);
  c.Inc(0);
  EXPECT_EQ(c.Value(), 3.5);
}

TEST(CounterTest, NegativeIncIsABug) {
  Counter c;
  c.Inc(1);
  // Asserts in debug builds; ignored in release builds so the counter stays monotonic.
  EXPECT_DEBUG_DEATH(c.Inc(-1), "negative");
  EXPECT_EQ(c.Value(), 1);
}

TEST(GaugeTest, SetIncDec) {
  Gauge g;
  EXPECT_EQ(g.Value(), 0);
  g.Set(10);
  g.Inc();
  g.Inc(4.5);
  g.Dec();
  g.Dec(0.5);
  EXPECT_EQ(g.Value(), 14);
  g.Set(-3);
  EXPECT_EQ(g.Value(), -3);
}

TEST(HistogramTest, BucketsAreInclusiveAndCumulative) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 2.0, 3.0, 10.0}) h.Observe(v);
  HistogramSnapshot s = h.Snapshot();
  EXPECT_THAT(s.bounds, ElementsAre(1, 2, 5));
  EXPECT_THAT(s.cumulative, ElementsAre(2, 4, 5, 6));  // le=1 holds 1.0: "less or equal"
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.sum, 18);
}

TEST(HistogramTest, EmptyBoundsHaveOnlyInf) {
  Histogram h({});
  h.Observe(-7);
  h.Observe(7);
  HistogramSnapshot s = h.Snapshot();
  EXPECT_THAT(s.cumulative, ElementsAre(2));
  EXPECT_EQ(s.sum, 0);
}

TEST(HistogramTest, NaNGoesToInfBucket) {
  Histogram h({1});
  h.Observe(std::nan(""));
  HistogramSnapshot s = h.Snapshot();
  EXPECT_THAT(s.cumulative, ElementsAre(0, 1));
  EXPECT_TRUE(std::isnan(s.sum));
}

TEST(BucketsTest, Helpers) {
  EXPECT_THAT(ExponentialBuckets(1, 2, 4), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(LinearBuckets(0, 0.5, 3), ElementsAre(0, 0.5, 1));
  std::vector<double> d = DefaultDurationBuckets();
  EXPECT_TRUE(ValidateBuckets(d).ok());
  EXPECT_EQ(d.front(), 0.001);
  EXPECT_EQ(d.back(), 60);
}

TEST(ValidateTest, MetricNames) {
  for (const char* ok : {"a", "_x", "hptrain_step", "a:b_c9", "ABC"}) {
    EXPECT_TRUE(ValidateMetricName(ok).ok()) << ok;
  }
  for (const char* bad : {"", "9a", "a-b", "a b", "a.b", "é"}) {
    absl::Status s = ValidateMetricName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ValidateTest, LabelNames) {
  for (const char* ok : {"a", "_x", "direction", "rank2"}) {
    EXPECT_TRUE(ValidateLabelName(ok).ok()) << ok;
  }
  for (const char* bad : {"", "9a", "a:b", "__name__", "a-b"}) {
    EXPECT_EQ(ValidateLabelName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ValidateTest, Buckets) {
  EXPECT_TRUE(ValidateBuckets({}).ok());
  EXPECT_TRUE(ValidateBuckets({-1, 0, 1}).ok());
  EXPECT_FALSE(ValidateBuckets({1, 1}).ok());
  EXPECT_FALSE(ValidateBuckets({2, 1}).ok());
  EXPECT_FALSE(ValidateBuckets({1, INFINITY}).ok());
  EXPECT_FALSE(ValidateBuckets({std::nan("")}).ok());
}

TEST(RegistryTest, ChildrenAreKeyedByLabelValues) {
  Registry r;
  CounterFamily* f = r.Counter("x_total", "help", {"direction"});
  Counter* sent = f->WithLabels({"sent"});
  EXPECT_EQ(f->WithLabels({"sent"}), sent);
  EXPECT_NE(f->WithLabels({"recv"}), sent);
  sent->Inc(5);
  EXPECT_EQ(f->WithLabels({"sent"})->Value(), 5);
  EXPECT_EQ(f->WithLabels({"recv"})->Value(), 0);
}

TEST(RegistryTest, SameDefinitionReturnsSameFamily) {
  Registry r;
  EXPECT_EQ(r.Gauge("g", "help", {"a"}), r.Gauge("g", "help", {"a"}));
  EXPECT_EQ(r.Histogram("h_seconds", "help"), r.Histogram("h_seconds", "help"));
}

TEST(RegistryTest, CollectIsSortedAndUnlabelledChildExistsAtZero) {
  Registry r({{"trainingjob", "j"}});
  r.Gauge("b", "B");
  r.Counter("a_total", "A", {"k"})->WithLabels({"z"})->Inc();
  r.Counter("a_total", "A", {"k"})->WithLabels({"y"})->Inc(2);
  r.Histogram("c_seconds", "C", {}, {1});
  std::vector<FamilySnapshot> families = r.Collect();
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[0].name, "a_total");
  EXPECT_EQ(families[0].type, MetricType::kCounter);
  ASSERT_EQ(families[0].children.size(), 2u);
  EXPECT_THAT(families[0].children[0].label_values, ElementsAre("y"));
  EXPECT_EQ(families[0].children[0].value, 2);
  EXPECT_EQ(families[1].name, "b");
  ASSERT_EQ(families[1].children.size(), 1u);
  EXPECT_EQ(families[1].children[0].value, 0);
  EXPECT_EQ(families[2].name, "c_seconds");
  EXPECT_THAT(families[2].children[0].histogram.cumulative, ElementsAre(0, 0));
  EXPECT_THAT(r.const_labels(), ElementsAre(std::make_pair("trainingjob", "j")));
}

TEST(RegistryTest, ConcurrentUpdatesAreExact) {
  Registry r;
  CounterFamily* counters = r.Counter("c_total", "help", {"worker"});
  Gauge* gauge = r.Gauge("g", "help")->Get();
  Histogram* hist = r.Histogram("h_seconds", "help", {}, {0.5, 1.5})->Get();
  constexpr int kThreads = 8;
  constexpr int kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter* own = counters->WithLabels({std::to_string(t % 2)});
      for (int i = 0; i < kIters; ++i) {
        own->Inc();
        counters->WithLabels({"shared"})->Inc(2);  // lookup under lock, racing with others
        gauge->Inc();
        gauge->Dec(0.5);
        hist->Observe(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counters->WithLabels({"0"})->Value() + counters->WithLabels({"1"})->Value(),
            kThreads * kIters);
  EXPECT_EQ(counters->WithLabels({"shared"})->Value(), 2.0 * kThreads * kIters);
  EXPECT_EQ(gauge->Value(), 0.5 * kThreads * kIters);
  HistogramSnapshot s = hist->Snapshot();
  EXPECT_THAT(s.cumulative, ElementsAre(0, kThreads * kIters, kThreads * kIters));
  EXPECT_EQ(s.sum, kThreads * kIters);
}

// Bad definitions are programmer bugs: the registry aborts with the reason on stderr.
class RegistryDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(RegistryDeathTest, CounterNameWithoutTotal) {
  Registry r;
  EXPECT_DEATH(r.Counter("hptrain_bytes", "help"), "must end in _total");
}

TEST_F(RegistryDeathTest, InvalidNames) {
  Registry r;
  EXPECT_DEATH(r.Gauge("bad-name", "help"), "invalid metric name \"bad-name\"");
  EXPECT_DEATH(r.Gauge("g", "help", {"bad label"}), "invalid label name");
  EXPECT_DEATH(r.Gauge("g", "help", {"a", "a"}), "repeats");
  EXPECT_DEATH(r.Histogram("h", "help", {"le"}), "le");
  EXPECT_DEATH(r.Histogram("h", "help", {}, {2, 1}), "strictly increasing");
  EXPECT_DEATH(Registry({{"rank", "0"}, {"rank", "1"}}), "given twice");
  Registry with_rank({{"rank", "0"}});
  EXPECT_DEATH(with_rank.Gauge("g", "help", {"rank"}), "repeats");
}

// Prometheus gives every target "job" and "instance": a series of its own with either would
// hide the scrape job (honor_labels) or be renamed exported_job.
TEST_F(RegistryDeathTest, TargetLabelsAreRefused) {
  EXPECT_TRUE(IsTargetLabel("job"));
  EXPECT_TRUE(IsTargetLabel("instance"));
  EXPECT_FALSE(IsTargetLabel(kTrainingJobLabel));
  EXPECT_FALSE(IsTargetLabel(kRoleLabel));
  EXPECT_FALSE(IsTargetLabel(kRankLabel));
  EXPECT_DEATH(Registry({{"job", "mnist"}}), "constant label \"job\" is one Prometheus gives");
  EXPECT_DEATH(Registry({{"instance", "a:1"}}), "constant label \"instance\"");
  Registry r({{kTrainingJobLabel, "mnist"}});
  EXPECT_DEATH(r.Gauge("hptrain_g", "help", {"job"}), "hptrain_g: label \"job\"");
}

TEST_F(RegistryDeathTest, WrongNumberOfLabelValues) {
  Registry r;
  CounterFamily* f = r.Counter("c_total", "help", {"a", "b"});
  EXPECT_DEATH(f->WithLabels({"x"}), "has labels \\{a,b\\} but got 1 value");
  EXPECT_DEATH(f->Get(), "but got 0 value");
}

TEST_F(RegistryDeathTest, ConflictingRedefinition) {
  Registry r;
  r.Gauge("m", "help");
  EXPECT_DEATH(r.Histogram("m", "help"), "registered twice");
  EXPECT_DEATH(r.Gauge("m", "other help"), "registered twice");
  EXPECT_DEATH(r.Gauge("m", "help", {"a"}), "registered twice");
  r.Histogram("h", "help", {}, {1});
  EXPECT_DEATH(r.Histogram("h", "help", {}, {2}), "registered twice");
}

}  // namespace
}  // namespace hptrain::metrics
