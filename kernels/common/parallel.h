// ParallelFor: split a kernel's loop over the machine's cores.
//
// CPU kernels call it for large buffers (hundreds of thousands of elements and up); below that,
// starting threads costs more than it saves. There is no pool: each call starts
// KernelThreads() - 1 std::threads, runs the first chunk on the calling thread and joins them
// all before returning. That costs some tens of microseconds per call, which is small next to
// the work it is used for.
//
// Chunks are contiguous and in order, so a kernel whose per-item result does not depend on how
// the range is split (every kernel in kernels/) gives bit-identical results with any thread count.
//
// Thread-safety: ParallelFor may be called from several threads at once; `fn` is called
// concurrently on disjoint ranges and must not throw.
#ifndef HPTRAIN_KERNELS_COMMON_PARALLEL_H_
#define HPTRAIN_KERNELS_COMMON_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace hptrain::kernels {

// Calls fn(begin, end) on contiguous chunks that partition [0, n), at most KernelThreads() of
// them at once and each at least `grain` items long (so n < 2·grain runs as one call on the
// calling thread, with no thread started). Blocks until every call has returned. n <= 0 calls
// nothing; grain < 1 counts as 1. If the system refuses to start a thread, that chunk runs on
// the calling thread instead.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// How many threads ParallelFor uses: SetKernelThreads()'s value if one was set, else the
// environment variable HPTRAIN_KERNEL_THREADS if it is a positive integer, else the CPUs this
// process may run on (its affinity mask, capped by a cgroup v2 cpu.max quota), at least 1.
int KernelThreads();

// Overrides KernelThreads() for the whole process (tests compare 1 thread with many; a trainer
// that already runs one kernel per core sets 1). threads <= 0 removes the override.
void SetKernelThreads(int threads);

}  // namespace hptrain::kernels

#endif  // HPTRAIN_KERNELS_COMMON_PARALLEL_H_
