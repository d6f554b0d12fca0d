// The API server double at benchmark size: 1,000 TrainingJobs and 8,000 Pods with twenty open
// watches, paginated and selected lists, and garbage collection of one job's pods.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/controller/apiserver/test_objects.h"

namespace hptrain::testing {
namespace {

constexpr int kJobs = 1000;
constexpr int kPodsPerJob = 8;
constexpr int kSelectiveWatches = 18;
constexpr int kFullWatches = 2;

std::string JobName(int i) { return "job-" + std::to_string(i); }

using ApiServerScaleTest = ApiServerTest;

TEST_F(ApiServerScaleTest, HoldsABenchmarkSizedClusterWithManyWatchers) {
  const std::string from = std::to_string(server_->resource_version());
  std::vector<std::unique_ptr<WatchStream>> watches;
  for (int i = 0; i < kSelectiveWatches + kFullWatches; ++i) {
    std::string query = "?watch=1&timeoutSeconds=120&resourceVersion=" + from;
    if (i < kSelectiveWatches) query += "&labelSelector=hptrain.io/job%3D" + JobName(i * 50);
    watches.push_back(std::make_unique<WatchStream>(port_, "/api/v1/pods" + query));
  }
  ASSERT_TRUE(WaitForWatches(*server_, "pods", watches.size()));

  for (int j = 0; j < kJobs; ++j) {
    absl::StatusOr<nlohmann::json> job =
        server_->Create("trainingjobs", TrainingJob(JobName(j), "bench", kPodsPerJob));
    ASSERT_TRUE(job.ok()) << job.status();
    for (int r = 0; r < kPodsPerJob; ++r) {
      nlohmann::json pod =
          Pod(JobName(j) + "-worker-" + std::to_string(r), "bench",
              {{"hptrain.io/job", JobName(j)}, {"hptrain.io/role", "worker"}}, *job);
      ASSERT_TRUE(server_->Create("pods", std::move(pod)).ok());
    }
  }

  for (int i = 0; i < kSelectiveWatches; ++i) {
    EXPECT_EQ(watches[i]->WaitForEvents(kPodsPerJob, absl::Seconds(20)).size(),
              static_cast<size_t>(kPodsPerJob))
        << "watch " << i;
  }
  for (int i = kSelectiveWatches; i < kSelectiveWatches + kFullWatches; ++i) {
    EXPECT_EQ(watches[i]->WaitForEvents(kJobs * kPodsPerJob, absl::Seconds(30)).size(),
              static_cast<size_t>(kJobs * kPodsPerJob))
        << "watch " << i;
  }

  // All pods in pages of 500, every page from the first page's snapshot.
  size_t listed = 0;
  std::string token;
  int pages = 0;
  do {
    std::string path = "/api/v1/namespaces/bench/pods?limit=500";
    if (!token.empty()) path += "&continue=" + token;
    HttpResult page = client_->Get(path);
    ASSERT_EQ(page.status, 200) << page.text;
    listed += page.body["items"].size();
    token = page.body["metadata"].value("continue", "");
    ++pages;
  } while (!token.empty() && pages < 100);
  EXPECT_EQ(listed, static_cast<size_t>(kJobs * kPodsPerJob));
  EXPECT_EQ(pages, kJobs * kPodsPerJob / 500);

  HttpResult one_job = client_->Get(
      "/api/v1/namespaces/bench/pods?labelSelector=hptrain.io/"
      "job%3D" +
      JobName(123));
  ASSERT_EQ(one_job.status, 200);
  EXPECT_EQ(one_job.body["items"].size(), static_cast<size_t>(kPodsPerJob));

  ASSERT_EQ(client_->Delete(TjPath("bench", JobName(0))).status, 200);
  ASSERT_TRUE(server_->WaitForGarbageCollection(absl::Seconds(10)));
  EXPECT_TRUE(server_->List("pods", "bench", "hptrain.io/job=" + JobName(0)).empty());
  EXPECT_EQ(server_->List("pods", "bench").size(), static_cast<size_t>((kJobs - 1) * kPodsPerJob));
  // The watch on job-0 saw its pods go: MODIFIED (deletionTimestamp) and DELETED for each.
  EXPECT_EQ(watches[0]->WaitForEvents(3 * kPodsPerJob, absl::Seconds(10)).size(),
            static_cast<size_t>(3 * kPodsPerJob));
}

}  // namespace
}  // namespace hptrain::testing
