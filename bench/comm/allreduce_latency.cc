// hptrain-allreduce-latency: the time of one ring all-reduce (Communicator::AllReduceSum over
// GlooTransport, TCP on 127.0.0.1), of one quantized all-reduce as the quantized strategy runs it
// (bucketed stochastic quantization to --bits with error feedback, re-encoded at every hop), or of
// one all-gather-v as topk and dgc use, among N ranks run as threads of this process, so a host
// with fewer cores than ranks shows what its scheduling costs each step of the ring. Every
// iteration starts from a barrier; the report is rank 0's median and 90th percentile, and whether
// all ranks ended with the same bits.
//
//   hptrain-allreduce-latency [--ranks 4] [--count 61706] [--iterations 200]
//                             [--collective all-reduce|quantized-all-reduce|all-gather-v]
//                             [--bits 8]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "runtime/base/exit_codes.h"
#include "runtime/cli/flags.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/gloo/gloo_transport.h"
#include "runtime/comm/kv_store.h"
#include "runtime/sync/codecs/quantize_codec.h"

int main(int argc, char** argv) {
  constexpr char kProgram[] = "hptrain-allreduce-latency";
  int ranks = 4, count = 61706, iterations = 200, bits = 8;
  std::string collective = "all-reduce";
  auto flags = hptrain::cli::FlagSet::ForProgram(
      kProgram,
      "[--ranks N] [--count FLOATS] [--iterations K] "
      "[--collective all-reduce|quantized-all-reduce|all-gather-v] [--bits B]");
  flags.Int("ranks", &ranks, "", "ranks, each a thread with its own Gloo context (>= 2)");
  flags.Int("count", &count, "",
            "floats in the buffer all-reduced, or each rank's block all-gathered (>= 1; LeNet-5 "
            "has 61706, topk at density 0.01 sends 1234 floats' worth)");
  flags.Int("iterations", &iterations, "", "collectives timed (>= 1)");
  flags.String("collective", &collective, "",
               "all-reduce (ssgd), quantized-all-reduce (quantized) or all-gather-v (topk, dgc)");
  flags.Int("bits", &bits, "", "bits per element of quantized-all-reduce: 1, 2, 4 or 8");
  if (int code = 0; !flags.ParseOrExit(argc, argv, &code)) return code;
  const bool gather = collective == "all-gather-v";
  const bool quantized = collective == "quantized-all-reduce";
  if (ranks < 2 || count < 1 || iterations < 1 || !flags.positional().empty() ||
      (!gather && !quantized && collective != "all-reduce") ||
      (bits != 1 && bits != 2 && bits != 4 && bits != 8)) {
    return hptrain::ReportErrorAs(
        kProgram, absl::InvalidArgumentError(
                      "--ranks must be >= 2, --count and --iterations >= 1, --collective "
                      "all-reduce, quantized-all-reduce or all-gather-v, --bits 1, 2, 4 or 8, "
                      "and there are no positional arguments"));
  }

  using hptrain::comm::GlooTransport;
  hptrain::comm::InMemoryStore store;
  hptrain::comm::GlooOptions options;
  std::vector<std::vector<double>> millis(ranks);
  std::vector<std::vector<float>> results(ranks);
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto transport = GlooTransport::Connect(store, r, ranks, options);
      if (!transport.ok()) {
        errors[r] = std::string(transport.status().message());
        return;
      }
      hptrain::comm::TransportCommunicator comm(std::move(*transport));
      hptrain::sync::QuantizeCodec codec(bits, 512, count, /*seed=*/42, r);
      std::vector<float> data;
      for (int it = 0; it < iterations; ++it) {
        data.resize(count);
        for (int i = 0; i < count; ++i) data[i] = 0.1f * (r + 1) + static_cast<float>(i % 13);
        absl::Status status = comm.Barrier();
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::string> blocks;
        if (status.ok() && gather) {
          status = comm.AllGatherV(data.data(), data.size() * sizeof(float), &blocks);
        } else if (status.ok() && quantized) {
          codec.set_step(it);
          status = comm.AllReduceSumCompressed(data.data(), data.size(), codec);
        } else if (status.ok()) {
          status = comm.AllReduceSum(data.data(), data.size());
        }
        if (!status.ok()) {
          errors[r] = std::string(status.message());
          return;
        }
        if (gather) {  // what every rank must agree on: the blocks in rank order
          data.clear();
          for (const std::string& b : blocks) {
            const float* f = reinterpret_cast<const float*>(b.data());
            data.insert(data.end(), f, f + b.size() / sizeof(float));
          }
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
      std::fprintf(stderr, "%s: rank %d: %s\n", kProgram, r, errors[r].c_str());
      return 1;
    }
  }
  std::vector<double> m = millis[0];
  std::sort(m.begin(), m.end());
  bool same = true;
  for (int r = 1; r < ranks; ++r) same = same && results[r] == results[0];
  if (quantized) collective += " at " + std::to_string(bits) + " bits";
  std::printf("%s, ranks %d, %d floats, %d iterations: median %.3f ms, p90 %.3f ms; %s\n",
              collective.c_str(), ranks, count, iterations, m[m.size() / 2], m[m.size() * 9 / 10],
              same ? "every rank has the same bits" : "RANKS DISAGREE");
  return same ? 0 : 1;
}
