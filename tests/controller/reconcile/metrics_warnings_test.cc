// When a job whose worker readings fail gets its Warning MetricsUnavailable: after the episode
// has lasted `after`, then at most once per `repeat`; a successful reading ends the episode.
#include "controller/reconcile/metrics_warnings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hptrain::reconcile {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = "team-a/mlp";
constexpr char kOther[] = "team-a/other";
const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

absl::Time At(int seconds) { return kStart + absl::Seconds(seconds); }

MetricsWarningPolicy Policy() {
  MetricsWarningPolicy policy;
  policy.after = absl::Seconds(30);
  policy.repeat = absl::Minutes(10);
  return policy;
}

TEST(MetricsWarningsTest, TheFirstWarningComesOnceTheEpisodeHasLastedAfter) {
  MetricsWarnings warnings(Policy());
  EXPECT_FALSE(warnings.Failed(kJob, At(0), "pod /metrics", "e").has_value());
  EXPECT_TRUE(warnings.failing(kJob));
  EXPECT_FALSE(warnings.Failed(kJob, At(29), "pod /metrics", "e").has_value());
  std::optional<Event> event = warnings.Failed(kJob, At(30), "prometheus http://prometheus:9090",
                                               "GET /api/v1/query: connection refused");
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(event->type, kEventWarning);
  EXPECT_EQ(event->reason, kReasonMetricsUnavailable);
  EXPECT_EQ(event->message,
            "worker metrics unavailable from prometheus http://prometheus:9090: GET "
            "/api/v1/query: connection refused; status.step, status.samplesPerSecond and "
            "rebalancing wait for them");
}

TEST(MetricsWarningsTest, OneWarningPerRepeatWhileTheEpisodeLasts) {
  MetricsWarnings warnings(Policy());
  int events = 0;
  // A reading every 2 s for 25 minutes: warnings at 30 s, 10:30 and 20:30.
  for (int t = 0; t <= 25 * 60; t += 2) {
    if (warnings.Failed(kJob, At(t), "pod /metrics", "e").has_value()) ++events;
  }
  EXPECT_EQ(events, 3);
}

TEST(MetricsWarningsTest, ASuccessfulReadingEndsTheEpisode) {
  MetricsWarnings warnings(Policy());
  warnings.Failed(kJob, At(0), "s", "e");
  ASSERT_TRUE(warnings.Failed(kJob, At(30), "s", "e").has_value());
  warnings.Succeeded(kJob);
  EXPECT_FALSE(warnings.failing(kJob));
  // A new episode waits `after` again, and then warns without waiting for `repeat`.
  EXPECT_FALSE(warnings.Failed(kJob, At(40), "s", "e").has_value());
  EXPECT_FALSE(warnings.Failed(kJob, At(69), "s", "e").has_value());
  EXPECT_TRUE(warnings.Failed(kJob, At(70), "s", "e").has_value());
}

TEST(MetricsWarningsTest, JobsAreCountedApartAndForgottenWhenTheyStopRunning) {
  MetricsWarnings warnings(Policy());
  warnings.Failed(kJob, At(0), "s", "e");
  warnings.Failed(kOther, At(20), "s", "e");
  EXPECT_TRUE(warnings.Failed(kJob, At(30), "s", "e").has_value());
  EXPECT_FALSE(warnings.Failed(kOther, At(30), "s", "e").has_value());
  EXPECT_TRUE(warnings.Failed(kOther, At(50), "s", "e").has_value());

  warnings.Retain({kOther});
  EXPECT_FALSE(warnings.failing(kJob));
  EXPECT_TRUE(warnings.failing(kOther));
}

TEST(MetricsWarningsTest, ZeroAfterWarnsAtTheFirstFailure) {
  MetricsWarningPolicy policy = Policy();
  policy.after = absl::ZeroDuration();
  MetricsWarnings warnings(policy);
  std::optional<Event> event =
      warnings.Failed(kJob, At(0), "pod /metrics",
                      "pod mlp-worker-1: GET http://10.0.0.5:9090/metrics: "
                      "connection refused");
  ASSERT_TRUE(event.has_value());
  EXPECT_THAT(event->message, HasSubstr("from pod /metrics: pod mlp-worker-1: GET"));
}

}  // namespace
}  // namespace hptrain::reconcile
