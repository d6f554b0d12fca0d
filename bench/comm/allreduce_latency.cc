// hptrain-allreduce-latency: the time of one ring all-reduce (Communicator::AllReduceSum over
// GlooTransport, TCP on 127.0.0.1) among N ranks run as threads of this process, so a host with
// fewer cores than ranks shows what its scheduling costs each step of the ring. Every iteration
// starts from a barrier; the report is rank 0's median and 90th percentile, and whether all
// ranks ended with the same bits.
//
//   hptrain-allreduce-latency [--ranks 4] [--count 61706] [--iterations 200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/gloo/gloo_transport.h"
#include "runtime/comm/kv_store.h"

namespace {

int Usage(const char* problem) {
  std::fprintf(stderr,
               "hptrain-allreduce-latency: %s\n"
               "usage: hptrain-allreduce-latency [--ranks N>=2] [--count FLOATS>=1] "
               "[--iterations K>=1]\n",
               problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long ranks = 4, count = 61706, iterations = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    long* target = flag == "--ranks"        ? &ranks
                   : flag == "--count"      ? &count
                   : flag == "--iterations" ? &iterations
                                            : nullptr;
    if (target == nullptr) return Usage(("unknown flag " + flag).c_str());
    if (i + 1 == argc) return Usage((flag + " needs a value").c_str());
    char* end = nullptr;
    *target = std::strtol(argv[++i], &end, 10);
    if (*end != '\0') return Usage((flag + ": not an integer: " + argv[i]).c_str());
  }
  if (ranks < 2 || count < 1 || iterations < 1) return Usage("a value is out of range");

  using hptrain::comm::GlooTransport;
  hptrain::comm::InMemoryStore store;
  hptrain::comm::GlooOptions options;
  std::vector<std::vector<double>> millis(ranks);
  std::vector<std::vector<float>> results(ranks);
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto transport = GlooTransport::Connect(store, r, static_cast<int>(ranks), options);
      if (!transport.ok()) {
        errors[r] = std::string(transport.status().message());
        return;
      }
      hptrain::comm::TransportCommunicator comm(std::move(*transport));
      std::vector<float> data(count);
      for (long it = 0; it < iterations; ++it) {
        for (long i = 0; i < count; ++i) data[i] = 0.1f * (r + 1) + static_cast<float>(i % 13);
        absl::Status status = comm.Barrier();
        const auto start = std::chrono::steady_clock::now();
        if (status.ok()) status = comm.AllReduceSum(data.data(), data.size());
        if (!status.ok()) {
          errors[r] = std::string(status.message());
          return;
        }
        millis[r].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
      }
      results[r] = data;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    if (!errors[r].empty()) {
      std::fprintf(stderr, "hptrain-allreduce-latency: rank %d: %s\n", r, errors[r].c_str());
      return 1;
    }
  }
  std::vector<double> m = millis[0];
  std::sort(m.begin(), m.end());
  bool same = true;
  for (int r = 1; r < ranks; ++r) same = same && results[r] == results[0];
  std::printf("ranks %ld, %ld floats, %ld iterations: median %.3f ms, p90 %.3f ms; %s\n", ranks,
              count, iterations, m[m.size() / 2], m[m.size() * 9 / 10],
              same ? "every rank has the same bits" : "RANKS DISAGREE");
  return same ? 0 : 1;
}
