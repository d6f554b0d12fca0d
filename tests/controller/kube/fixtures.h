// Recorded kube-apiserver exchanges (tests/fixtures/kube, see its README.md) for replay.
//
// The directory comes from $HPTRAIN_KUBE_FIXTURES, else the compile-time default
// HPTRAIN_KUBE_FIXTURE_DIR (the repository's tests/fixtures/kube). Tests skip with a printed
// reason when it is absent.
#ifndef HPTRAIN_TESTS_CONTROLLER_KUBE_FIXTURES_H_
#define HPTRAIN_TESTS_CONTROLLER_KUBE_FIXTURES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tests/controller/kube/fake_server.h"

namespace hptrain::kube::testing {

struct Fixture {
  std::string file;
  std::string method;
  std::string path;  // with query
  nlohmann::json request_headers;
  nlohmann::json request_body;  // null, an object, or a string
  int status = 0;
  std::string reason;
  nlohmann::json response_headers;
  std::string response_body;
  std::string raw_http;  // watch fixtures: the exact bytes on the wire

  // The request body as JSON (a string body is parsed), or null.
  nlohmann::json RequestJson() const;
  // The response body parsed as JSON.
  nlohmann::json ResponseJson() const;
  // What a server sends back: raw_http when recorded, else a response rebuilt from status,
  // headers (minus framing) and body, with Content-Length and "Connection: close".
  std::string ResponseBytes() const;
};

// The fixture directory, or "" when it does not exist.
std::string FixtureDir();

// Loads the fixture whose file name starts with `number` ("13" -> 13-tj-get-missing.json).
absl::StatusOr<Fixture> LoadFixture(absl::string_view number);

// A handler that answers every request with the fixture's recorded response.
FakeServer::Handler ReplayHandler(const Fixture& fixture);

}  // namespace hptrain::kube::testing

#define HPTRAIN_REQUIRE_FIXTURES()                                                         \
  do {                                                                                     \
    if (::hptrain::kube::testing::FixtureDir().empty()) {                                  \
      GTEST_SKIP() << "recorded API fixtures not found (set HPTRAIN_KUBE_FIXTURES to the " \
                      "fixtures/kube directory)";                                          \
    }                                                                                      \
  } while (0)

#endif  // HPTRAIN_TESTS_CONTROLLER_KUBE_FIXTURES_H_
