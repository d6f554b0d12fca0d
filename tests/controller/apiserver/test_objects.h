// Objects and paths shared by the API server double's tests.
#ifndef HPTRAIN_TESTS_CONTROLLER_APISERVER_TEST_OBJECTS_H_
#define HPTRAIN_TESTS_CONTROLLER_APISERVER_TEST_OBJECTS_H_

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/controller/apiserver/api_server_double.h"
#include "tests/controller/apiserver/test_http.h"

namespace hptrain::testing {

inline std::string TjPath(const std::string& ns, const std::string& name = "") {
  std::string path = "/apis/hptrain.io/v1alpha1/namespaces/" + ns + "/trainingjobs";
  return name.empty() ? path : path + "/" + name;
}

inline std::string PodPath(const std::string& ns, const std::string& name = "") {
  std::string path = "/api/v1/namespaces/" + ns + "/pods";
  return name.empty() ? path : path + "/" + name;
}

// A TrainingJob in the contract's plain-field shorthand (spec.workers.replicas).
inline nlohmann::json TrainingJob(const std::string& name, const std::string& ns = "default",
                                  int replicas = 2, nlohmann::json labels = {{"team", "vision"}}) {
  return {{"apiVersion", "hptrain.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec",
           {{"strategy", {{"type", "ssgd"}}},
            {"globalBatchSize", 128},
            {"workers", {{"replicas", replicas}, {"template", {{"image", "hptrain:dev"}}}}}}}};
}

// An ownerReference to `owner` (a stored object) as the controller sets it.
inline nlohmann::json OwnerRef(const nlohmann::json& owner) {
  return {{"apiVersion", owner["apiVersion"]},
          {"kind", owner["kind"]},
          {"name", owner["metadata"]["name"]},
          {"uid", owner["metadata"]["uid"]},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

inline nlohmann::json Pod(const std::string& name, const std::string& ns,
                          nlohmann::json labels = nlohmann::json::object(),
                          const nlohmann::json& owner = nullptr) {
  nlohmann::json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"containers", {{{"name", "worker"}, {"image", "hptrain:dev"}, {"args", {"worker"}}}}}}}};
  if (!owner.is_null())
    pod["metadata"]["ownerReferences"] = nlohmann::json::array({OwnerRef(owner)});
  return pod;
}

// A started double with a client; stops it (ending watches) after each test.
class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }
  void TearDown() override {
    if (server_ == nullptr) return;
    server_->CloseAllWatches();
    server_->Stop();
  }
  void StartServer(ApiServerDoubleOptions options = {}) {
    server_ = std::make_unique<ApiServerDouble>(options);
    absl::StatusOr<int> port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    client_ = std::make_unique<TestClient>(port_);
  }
  // Creates through HTTP and returns the stored object; fails the test otherwise.
  nlohmann::json MustCreate(const std::string& path, const nlohmann::json& object) {
    HttpResult result = client_->Post(path, object);
    EXPECT_EQ(result.status, 201) << result.text;
    return result.body;
  }

  std::unique_ptr<ApiServerDouble> server_;
  std::unique_ptr<TestClient> client_;
  int port_ = 0;
};

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_APISERVER_TEST_OBJECTS_H_
