#include "tests/controller/kube/test_client.h"

#include <utility>

#include "gtest/gtest.h"

namespace hptrain::kube::testing {

std::unique_ptr<Client> NewTestClient(const std::string& url, const std::string& token,
                                      std::optional<absl::Duration> timeout) {
  Config config;
  config.server = url;
  config.token = token;
  if (timeout.has_value()) config.timeout = *timeout;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::FromConfig(config);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

bool Eventually(const std::function<bool()>& done) {
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

}  // namespace hptrain::kube::testing
