#include "runtime/comm/gloo/gloo_transport.h"

#include <signal.h>

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace hptrain::comm {
namespace {

// Gloo's TCP pairs write with writev, which raises SIGPIPE when the peer has closed its end: a
// rank that outlives a dead peer would be killed by the signal instead of getting Gloo's
// "Connection closed by peer" error (a Python process running Gloo ignores SIGPIPE from the
// start). The process ignores it from its first Gloo connection on, unless it has a handler.
void IgnoreSigpipe() {
  struct sigaction current;
  if (sigaction(SIGPIPE, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

// Gloo's Store interface over our KeyValueStore. Gloo expects exceptions on failure.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(KeyValueStore& store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status status = store_.Set(key, std::string(data.begin(), data.end()));
    if (!status.ok()) throw gloo::IoException(std::string(status.message()));
  }

  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> value = store_.Get(key, timeout_);
    if (!value.ok()) throw gloo::IoException(std::string(value.status().message()));
    return std::vector<char>(value->begin(), value->end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    absl::Status status = store_.Wait(keys, timeout);
    if (!status.ok()) throw gloo::IoException(std::string(status.message()));
  }

 private:
  KeyValueStore& store_;
  std::chrono::milliseconds timeout_;
};

absl::Status Aborted(const char* what, int peer) {
  return absl::UnavailableError(absl::StrCat(what, " rank ", peer, " was aborted"));
}

absl::Status ExchangeFailed(int rank, int to, int from, const std::exception& e) {
  return absl::UnavailableError(
      absl::StrCat("rank ", rank, " exchanging with ranks ", to, "/", from, ": ", e.what()));
}

}  // namespace

GlooTransport::GlooTransport(std::shared_ptr<gloo::Context> context, int rank, int size,
                             std::chrono::milliseconds timeout)
    : context_(std::move(context)), rank_(rank), size_(size), timeout_(timeout) {}

GlooTransport::~GlooTransport() {
  // Destroy the context (and its pairs) before the buffers Gloo may still hold.
  context_.reset();
}

absl::StatusOr<std::unique_ptr<GlooTransport>> GlooTransport::Connect(
    KeyValueStore& store, int rank, int size, const GlooOptions& options) {
  IgnoreSigpipe();
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.bind_host;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    StoreAdapter adapter(store, options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.store_prefix, adapter);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<GlooTransport>(
        new GlooTransport(std::move(context), rank, size, options.timeout));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo rendezvous of rank ", rank, " of ", size, " failed: ", e.what()));
  }
}

absl::Status GlooTransport::DoSendRecv(int to, const void* send, size_t send_bytes, int from,
                                       void* recv, size_t recv_bytes, uint64_t tag) {
  try {
    std::unique_ptr<gloo::transport::UnboundBuffer> in;
    std::unique_ptr<gloo::transport::UnboundBuffer> out;
    if (recv != nullptr && recv_bytes > 0) {
      in = context_->createUnboundBuffer(recv, recv_bytes);
      in->recv(from, tag);
    }
    if (send != nullptr && send_bytes > 0) {
      out = context_->createUnboundBuffer(const_cast<void*>(send), send_bytes);
      out->send(to, tag);
    }
    if (out && !out->waitSend(timeout_)) {
      return Aborted("send to", to);
    }
    if (in && !in->waitRecv(timeout_)) {
      return Aborted("receive from", from);
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return ExchangeFailed(rank_, to, from, e);
  }
}

absl::Status GlooTransport::DoRingPass(int to, int from, absl::Span<const PassStep> steps,
                                       uint64_t tag, const OnReceived& on_received) {
  try {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> in(steps.size());
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> out(steps.size());
    // Receives from one peer under one tag complete in the order they were posted.
    for (size_t s = 0; s < steps.size(); ++s) {
      if (steps[s].recv == nullptr || steps[s].recv_bytes == 0) continue;
      in[s] = context_->createUnboundBuffer(steps[s].recv, steps[s].recv_bytes);
      in[s]->recv(from, tag);
    }
    absl::Status ended;  // an error from on_received: no later step is sent
    for (size_t s = 0; s < steps.size() && ended.ok(); ++s) {
      if (steps[s].send != nullptr && steps[s].send_bytes > 0) {
        out[s] =
            context_->createUnboundBuffer(const_cast<void*>(steps[s].send), steps[s].send_bytes);
        out[s]->send(to, tag);
      }
      if (in[s] && !in[s]->waitRecv(timeout_)) {
        return Aborted("receive from", from);
      }
      ended = on_received(static_cast<int>(s));
    }
    for (size_t s = 0; s < steps.size(); ++s) {
      if (out[s] && !out[s]->waitSend(timeout_)) {
        return Aborted("send to", to);
      }
    }
    return ended;
  } catch (const std::exception& e) {
    return ExchangeFailed(rank_, to, from, e);
  }
}

}  // namespace hptrain::comm

namespace hptrain::comm {

absl::Status GlooTransport::DoUntimedRecv(int from, void* recv, size_t bytes, uint64_t tag) {
  std::unique_ptr<gloo::transport::UnboundBuffer> in;
  auto cancelled = [&] {
    return absl::CancelledError(
        absl::StrCat("rank ", rank_, ": receive from rank ", from, " aborted"));
  };
  try {
    in = context_->createUnboundBuffer(recv, bytes);
    {
      std::lock_guard<std::mutex> lock(untimed_mu_);
      if (untimed_aborted_) return cancelled();
      untimed_.insert(in.get());
    }
    in->recv(from, tag);
    // No time limit: a quiet peer is not a failure here (the caller bounds its own waits).
    const bool done = in->waitRecv(nullptr, std::chrono::hours(24 * 365));
    std::lock_guard<std::mutex> lock(untimed_mu_);
    untimed_.erase(in.get());
    if (!done) {
      aborted_.push_back(std::move(in));
      return cancelled();
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(untimed_mu_);
    if (in) {
      untimed_.erase(in.get());
      aborted_.push_back(std::move(in));
    }
    return absl::UnavailableError(
        absl::StrCat("rank ", rank_, " receiving from rank ", from, ": ", e.what()));
  }
}

void GlooTransport::AbortUntimedRecvs() {
  std::lock_guard<std::mutex> lock(untimed_mu_);
  untimed_aborted_ = true;
  for (gloo::transport::UnboundBuffer* in : untimed_) in->abortWaitRecv();
}

}  // namespace hptrain::comm
