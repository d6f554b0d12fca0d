#include "controller/kube/canceller.h"

#include <utility>

namespace hptrain::kube {

void Canceller::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_.store(true, std::memory_order_release);
  if (abort_) abort_();
}

void Canceller::Reset() { cancelled_.store(false, std::memory_order_release); }

bool Canceller::Attach(std::function<void()> abort) {
  absl::MutexLock lock(&mu_);
  if (cancelled()) return false;
  abort_ = std::move(abort);
  return true;
}

void Canceller::Detach() {
  absl::MutexLock lock(&mu_);
  abort_ = nullptr;
}

}  // namespace hptrain::kube
