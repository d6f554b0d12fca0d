// For the scenario tests that play the kubelet with real runtime processes: the hptrain binary
// ($HPTRAIN_BIN), a scratch directory, and `hptrain ps|worker` processes started from what the
// controller's pods mount (the job file and token of its Secret) and from their environment.
#ifndef HPTRAIN_TESTS_CONTROLLER_MANAGER_POD_PROCESSES_H_
#define HPTRAIN_TESTS_CONTROLLER_MANAGER_POD_PROCESSES_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/controller/manager/controller_fixture.h"
#include "tests/controller/manager/subprocess.h"

namespace hptrain::manager::testing {

// $HPTRAIN_BIN/<name>; "" when HPTRAIN_BIN is not set.
std::string Binary(const char* name);
// True when `program` is on the PATH.
bool OnPath(const std::string& program);

class PodProcessTest : public ControllerTest {
 protected:
  // Skips without the hptrain binary (a build without libtorch); else the fixture's SetUp and a
  // fresh dir_.
  void SetUp() override;
  // Kills every process, then the fixture's TearDown; removes dir_.
  void TearDown() override;

  // Writes `text` to dir_/name; returns the path.
  std::string Write(const std::string& name, const std::string& text);
  // Starts argv with the environment changes `set` ("NAME=value"); kept until TearDown.
  Subprocess* Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& set = {});
  // The decoded value of `key` in the job's Secret ("" when absent).
  std::string SecretValue(const std::string& job, const std::string& key);
  // The literal env entries of the pod's first container, as "NAME=value".
  static std::vector<std::string> PodEnv(const Json& pod);

  std::string dir_;
  std::vector<std::unique_ptr<Subprocess>> processes_;
};

}  // namespace hptrain::manager::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_MANAGER_POD_PROCESSES_H_
