// Backoff: jittered exponential delays between retries (reconnecting a watch, relisting).
//
//   delay_n = min(max, initial * factor^n) * (1 + jitter * r),  r uniform in [0, 1)
//
// client-go's reflector uses initial 800 ms, max 30 s, factor 2, jitter 1 for the same purpose;
// those are the defaults. Reset() after a success starts again from `initial`. Tests pass small
// durations and a fixed `random` source.
//
// Not thread-safe: one Backoff per retry loop.
#ifndef HPTRAIN_CONTROLLER_KUBE_BACKOFF_H_
#define HPTRAIN_CONTROLLER_KUBE_BACKOFF_H_

#include <algorithm>
#include <functional>
#include <random>
#include <utility>

#include "absl/time/time.h"

namespace hptrain::kube {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(800);
  absl::Duration max = absl::Seconds(30);
  double factor = 2.0;
  double jitter = 1.0;  // 0 = no jitter
  // Uniform random numbers in [0, 1); empty: a per-Backoff generator seeded from the clock.
  std::function<double()> random;
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {})
      : options_(std::move(options)),
        current_(options_.initial),
        engine_(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))) {}

  // The delay to wait now; the next call returns a longer one (up to `max`).
  absl::Duration Next() {
    absl::Duration base = std::min(current_, options_.max);
    current_ = std::min(options_.max, current_ * options_.factor);
    double r = options_.random ? options_.random()
                               : std::uniform_real_distribution<double>(0.0, 1.0)(engine_);
    return base * (1.0 + options_.jitter * r);
  }

  // Starts again from `initial`.
  void Reset() { current_ = options_.initial; }

 private:
  BackoffOptions options_;
  absl::Duration current_;
  std::mt19937_64 engine_;
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_BACKOFF_H_
