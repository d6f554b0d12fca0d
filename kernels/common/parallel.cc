#include "kernels/common/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace hptrain::kernels {
namespace {

std::atomic<int> g_thread_override{0};

// CPUs granted by a CFS quota, rounded up; 0 when there is no quota. A container limited to
// 2 CPUs on a 64-core host still has all 64 in its affinity mask, only the quota tells.
int CgroupCpuQuota() {
  long long quota = -1, period = 0;
  std::ifstream v2("/sys/fs/cgroup/cpu.max");  // "max 100000" or "200000 100000"
  std::string first;
  if (v2 >> first >> period) {
    if (first != "max") quota = std::atoll(first.c_str());
  } else {
    std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
        p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (!(q >> quota) || !(p >> period)) quota = -1;
  }
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>((quota + period - 1) / period);
}

int DetectThreads() {
  if (const char* env = std::getenv("HPTRAIN_KERNEL_THREADS")) {
    const int v = std::atoi(env);
    if (v > 0) return v;
  }
  int cpus = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  const int quota = CgroupCpuQuota();
  if (quota > 0 && (cpus <= 0 || quota < cpus)) cpus = quota;
  return std::max(cpus, 1);
}

}  // namespace

int KernelThreads() {
  const int forced = g_thread_override.load(std::memory_order_relaxed);
  if (forced > 0) return forced;
  static const int detected = DetectThreads();
  return detected;
}

void SetKernelThreads(int threads) {
  g_thread_override.store(threads > 0 ? threads : 0, std::memory_order_relaxed);
}

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(KernelThreads(), n / grain));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  // Chunk c covers [bound(c), bound(c + 1)): the first n % chunks chunks get one extra item.
  const int64_t base = n / chunks, extra = n % chunks;
  auto bound = [base, extra](int64_t c) { return c * base + std::min(c, extra); };
  std::vector<std::thread> workers;
  std::vector<int64_t> inline_chunks;
  workers.reserve(static_cast<size_t>(chunks - 1));
  for (int64_t c = 1; c < chunks; ++c) {
    try {
      workers.emplace_back(fn, bound(c), bound(c + 1));
    } catch (const std::system_error&) {
      inline_chunks.push_back(c);  // out of threads: do it here rather than fail
    }
  }
  fn(bound(0), bound(1));
  for (int64_t c : inline_chunks) fn(bound(c), bound(c + 1));
  for (std::thread& t : workers) t.join();
}

}  // namespace hptrain::kernels
