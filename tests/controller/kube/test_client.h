// What the kube client's tests share besides the fake server: a client for a test server's
// URL, and polling until a condition holds.
#ifndef HPTRAIN_TESTS_CONTROLLER_KUBE_TEST_CLIENT_H_
#define HPTRAIN_TESTS_CONTROLLER_KUBE_TEST_CLIENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "controller/kube/client.h"

namespace hptrain::kube::testing {

// A client of `url` with bearer `token` ("" = none) and `timeout` (nullopt = Config's default);
// fails the test (and returns null) when the config is refused.
std::unique_ptr<Client> NewTestClient(const std::string& url, const std::string& token = "",
                                      std::optional<absl::Duration> timeout = absl::Seconds(5));

// Polls `done` every 5 ms until it holds or 10 s pass; returns its last value.
bool Eventually(const std::function<bool()>& done);

}  // namespace hptrain::kube::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_KUBE_TEST_CLIENT_H_
