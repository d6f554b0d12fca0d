// The one place where CUDA runtime and NCCL result codes become absl::Status (NCCL's checks.h).
//
// Every CUDA or NCCL call in hptrain goes through one of these, so a failure reads the same
// everywhere: what was called, the library's own error name and text, and file:line.
//
//   HPTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
//   HPTRAIN_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
//
// The *_RETURN_IF_ERROR macros return the Status from the enclosing function (which must return
// absl::Status or absl::StatusOr<T>). HPTRAIN_CUDA_STATUS / HPTRAIN_NCCL_STATUS only build the
// Status, for code that must look at a result first (a non-blocking NCCL call legitimately
// answers ncclInProgress, which the strict macros treat as an error).
//
// Code mapping (CUDA): out of memory -> ResourceExhausted; bad value or device ordinal ->
// InvalidArgument; no device, driver too old or not ready -> FailedPrecondition; everything else
// (launch failures, illegal addresses: the context is then unusable) -> Internal.
// Code mapping (NCCL): invalid argument -> InvalidArgument; invalid usage -> FailedPrecondition;
// system (sockets, shared memory) and remote (a peer died) errors -> Unavailable; unhandled CUDA
// and internal errors -> Internal; ncclInProgress -> Unavailable ("not finished yet").
// NCCL's last warning text (ncclGetLastError) is appended when there is one; NCCL keeps a single
// process-wide copy, so it may describe an earlier failure.
//
// Header-only; needs the CUDA and NCCL include directories (hptrain_comm_nccl carries them).
// Thread-safe: nothing here keeps state.
#ifndef HPTRAIN_RUNTIME_COMM_NCCL_CUDA_CHECK_H_
#define HPTRAIN_RUNTIME_COMM_NCCL_CUDA_CHECK_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hptrain::comm {

// Returns OK for cudaSuccess; otherwise "<what>: <cudaErrorName> (<text>) (file:line)" with the
// code mapped as described above.
inline absl::Status CudaStatus(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", cudaGetErrorName(err), " (",
                                     cudaGetErrorString(err), ") (", file, ":", line, ")");
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
      return absl::InvalidArgumentError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotReady:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// Returns OK for ncclSuccess; otherwise "<what>: <ncclGetErrorString> [NCCL: <last warning>]
// (file:line)" with the code mapped as described above.
inline absl::Status NcclStatus(ncclResult_t result, const char* what, const char* file, int line) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", ncclGetErrorString(result));
  // NCCL keeps one process-wide last-warning buffer; the comm argument is unused.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&message, " [NCCL: ", last, "]");
  absl::StrAppend(&message, " (", file, ":", line, ")");
  switch (result) {
    case ncclInvalidArgument:
      return absl::InvalidArgumentError(message);
    case ncclInvalidUsage:
      return absl::FailedPreconditionError(message);
    case ncclSystemError:
    case ncclRemoteError:
    case ncclInProgress:
      return absl::UnavailableError(message);
    default:  // ncclUnhandledCudaError, ncclInternalError
      return absl::InternalError(message);
  }
}

}  // namespace hptrain::comm

#define HPTRAIN_CUDA_STATUS(err, what) \
  ::hptrain::comm::CudaStatus((err), (what), __FILE__, __LINE__)
#define HPTRAIN_NCCL_STATUS(result, what) \
  ::hptrain::comm::NcclStatus((result), (what), __FILE__, __LINE__)

// HPTRAIN_CUDA_RETURN_IF_ERROR(expr): evaluates a cudaError_t expression; returns on failure.
#define HPTRAIN_CUDA_RETURN_IF_ERROR(expr)                                              \
  do {                                                                                  \
    cudaError_t hptrain_cuda_err_ = (expr);                                             \
    if (hptrain_cuda_err_ != cudaSuccess) {                                             \
      return ::hptrain::comm::CudaStatus(hptrain_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                   \
  } while (0)

// HPTRAIN_NCCL_RETURN_IF_ERROR(expr): evaluates an ncclResult_t expression; returns on anything
// but ncclSuccess (ncclInProgress included).
#define HPTRAIN_NCCL_RETURN_IF_ERROR(expr)                                                 \
  do {                                                                                     \
    ncclResult_t hptrain_nccl_result_ = (expr);                                            \
    if (hptrain_nccl_result_ != ncclSuccess) {                                             \
      return ::hptrain::comm::NcclStatus(hptrain_nccl_result_, #expr, __FILE__, __LINE__); \
    }                                                                                      \
  } while (0)

#endif  // HPTRAIN_RUNTIME_COMM_NCCL_CUDA_CHECK_H_
