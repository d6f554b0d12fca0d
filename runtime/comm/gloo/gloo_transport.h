// GlooTransport: the CPU back end's Transport, Gloo's TCP pairs under a full mesh.
//
// Rendezvous: every rank publishes its listening address in the job's KeyValueStore (the
// coordinator) under "<prefix>/..." and connects to all others (gloo::rendezvous::Context::
// connectFullMesh). Gloo throws; this adapter turns its exceptions into Status and nothing else
// escapes.
#ifndef HPTRAIN_RUNTIME_COMM_GLOO_GLOO_TRANSPORT_H_
#define HPTRAIN_RUNTIME_COMM_GLOO_GLOO_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/kv_store.h"
#include "runtime/comm/transport.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}

namespace hptrain::comm {

struct GlooOptions {
  std::string bind_host = "127.0.0.1";  // address the TCP device listens on and advertises
  std::string store_prefix = "gloo";    // KV namespace of this communicator
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

class GlooTransport : public Transport {
 public:
  // Connects `size` ranks through `store`; blocks until all have joined or the timeout passes.
  // The process ignores SIGPIPE from then on (unless it installed a handler), so that a peer's
  // death comes back as an error status, not as a signal.
  static absl::StatusOr<std::unique_ptr<GlooTransport>> Connect(KeyValueStore& store, int rank,
                                                                int size,
                                                                const GlooOptions& options);
  ~GlooTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void AbortUntimedRecvs() override;
  std::chrono::milliseconds timeout() const override { return timeout_; }

 protected:
  absl::Status DoSendRecv(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes, uint64_t tag) override;
  // Posts every receive of the pass first (see Transport::RingPass).
  absl::Status DoRingPass(int to, int from, absl::Span<const PassStep> steps, uint64_t tag,
                          const OnReceived& on_received) override;
  // Waited for without a time limit (a Gloo timeout would close every pair of the context); the
  // peer's closed connection ends it with an error.
  absl::Status DoUntimedRecv(int from, void* recv, size_t bytes, uint64_t tag) override;

 private:
  GlooTransport(std::shared_ptr<gloo::Context> context, int rank, int size,
                std::chrono::milliseconds timeout);

  std::shared_ptr<gloo::Context> context_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::mutex untimed_mu_;
  // The buffers of the UntimedRecvs in progress, and those of aborted ones, kept for the
  // context's lifetime because Gloo may still hold them.
  std::set<gloo::transport::UnboundBuffer*> untimed_;
  bool untimed_aborted_ = false;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> aborted_;
};

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_GLOO_GLOO_TRANSPORT_H_
