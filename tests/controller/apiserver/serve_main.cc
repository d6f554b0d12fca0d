// hptrain-apiserver-double: the API server double as a process, for trying the controller and
// kubectl without a cluster (docs/guide.md walks through it). It serves the built-in types and the
// TrainingJob resource on 127.0.0.1, writes a kubeconfig for kubectl and the controller, and with
// --kubelet plays the kubelet: every pod it sees Pending is reported Running (nothing is run).
//
//   hptrain-apiserver-double --port 6443 --kubeconfig /tmp/double.kubeconfig --kubelet
//
// Runs until SIGINT or SIGTERM. Exit codes: 0 stopped by a signal, 2 bad flags or the port is
// taken or the kubeconfig cannot be written.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/atomic_file.h"
#include "tests/controller/apiserver/api_server_double.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "hptrain-apiserver-double: %s\n"
               "usage: hptrain-apiserver-double [--port N] [--kubeconfig PATH] [--kubelet]\n",
               problem.c_str());
  return 2;
}

std::string Kubeconfig(const std::string& url) {
  return absl::StrCat(
      "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: ", url,
      "\ncontexts:\n- name: double\n  context:\n    cluster: double\n    user: admin\n"
      "    namespace: default\ncurrent-context: double\nusers:\n- name: admin\n  user: {}\n");
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  std::string kubeconfig;
  bool kubelet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--kubelet") {
      kubelet = true;
    } else if ((arg == "--port" || arg == "--kubeconfig") && i + 1 < argc) {
      const std::string value = argv[++i];
      if (arg == "--kubeconfig") {
        kubeconfig = value;
      } else if (!absl::SimpleAtoi(value, &port) || port < 0 || port > 65535) {
        return Usage(absl::StrCat("--port: expected 0..65535, got \"", value, "\""));
      }
    } else {
      return Usage(absl::StrCat("unknown or incomplete flag \"", arg, "\""));
    }
  }
  hptrain::testing::ApiServerDoubleOptions options;
  options.port = port;
  hptrain::testing::ApiServerDouble server(options);
  absl::StatusOr<int> bound = server.Start();
  if (!bound.ok()) return Usage(std::string(bound.status().message()));
  if (!kubeconfig.empty()) {
    absl::Status written = hptrain::WriteFileAtomically(kubeconfig, Kubeconfig(server.base_url()));
    if (!written.ok()) return Usage(std::string(written.message()));
  }
  std::printf("serving the API server double on %s%s%s\n", server.base_url().c_str(),
              kubeconfig.empty() ? "" : "; kubeconfig ", kubeconfig.c_str());
  std::fflush(stdout);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) {
    if (kubelet) {
      for (const nlohmann::json& pod : server.List("pods")) {
        const std::string phase = pod.value("/status/phase"_json_pointer, std::string("Pending"));
        if (phase != "Pending" || pod["metadata"].contains("deletionTimestamp")) continue;
        (void)server.SetPodPhase(pod["metadata"]["namespace"], pod["metadata"]["name"], "Running");
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  server.Stop();
  return 0;
}
