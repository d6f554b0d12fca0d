#include "tests/controller/manager/pod_processes.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace hptrain::manager::testing {

std::string Binary(const char* name) {
  const char* dir = std::getenv("HPTRAIN_BIN");
  return dir == nullptr ? "" : absl::StrCat(dir, "/", name);
}

bool OnPath(const std::string& program) {
  return std::system(absl::StrCat("command -v ", program, " >/dev/null 2>&1").c_str()) == 0;
}

void PodProcessTest::SetUp() {
  if (Binary("hptrain").empty() || access(Binary("hptrain").c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no hptrain binary (built without libtorch): no runtime process to run";
  }
  ControllerTest::SetUp();
  dir_ = absl::StrCat(::testing::TempDir(), "/hptrain-pods-", getpid());
  ASSERT_EQ(std::system(absl::StrCat("rm -rf ", dir_, " && mkdir -p ", dir_).c_str()), 0);
}

void PodProcessTest::TearDown() {
  for (auto& process : processes_) process->Signal(SIGKILL);
  for (auto& process : processes_) process->Wait(absl::Seconds(10));
  processes_.clear();
  ControllerTest::TearDown();
  if (!dir_.empty()) std::system(absl::StrCat("rm -rf ", dir_).c_str());
}

std::string PodProcessTest::Write(const std::string& name, const std::string& text) {
  std::string path = absl::StrCat(dir_, "/", name);
  std::ofstream(path) << text;
  return path;
}

Subprocess* PodProcessTest::Spawn(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& set) {
  processes_.push_back(std::make_unique<Subprocess>());
  absl::Status started = processes_.back()->Start(argv, {}, set);
  EXPECT_TRUE(started.ok()) << started;
  return processes_.back().get();
}

std::string PodProcessTest::SecretValue(const std::string& job, const std::string& key) {
  for (const Json& secret : Owned("secrets", job)) {
    std::string decoded;
    if (absl::Base64Unescape(secret["data"].value(key, ""), &decoded)) return decoded;
  }
  return "";
}

std::vector<std::string> PodProcessTest::PodEnv(const Json& pod) {
  std::vector<std::string> env;
  for (const Json& var : pod["spec"]["containers"][0].value("env", Json::array())) {
    if (var.contains("value")) env.push_back(absl::StrCat(var.value("name", ""), "=",
                                                          var.value("value", "")));
  }
  return env;
}

}  // namespace hptrain::manager::testing
