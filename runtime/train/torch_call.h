// TorchCall: the adapter between libtorch, which throws, and the runtime, which returns Status.
#ifndef HPTRAIN_RUNTIME_TRAIN_TORCH_CALL_H_
#define HPTRAIN_RUNTIME_TRAIN_TORCH_CALL_H_

#include <c10/util/Exception.h>

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hptrain::train {

// Runs `fn`, turning a c10::Error (or any std::exception) into an Internal status that says what
// was being done: "<what>: <message>". Returns OK when `fn` returns.
template <typename Fn>
absl::Status TorchCall(const char* what, Fn&& fn) {
  try {
    std::forward<Fn>(fn)();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_TORCH_CALL_H_
