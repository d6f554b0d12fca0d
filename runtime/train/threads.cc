#include "runtime/train/threads.h"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "runtime/base/atomic_file.h"

namespace hptrain::train {
namespace {

constexpr char kCgroupRoot[] = "/sys/fs/cgroup";
constexpr char kSelfCgroup[] = "/proc/self/cgroup";

// quota / period in whole cores, rounded up; 0 (no limit) for a quota of -1 or nonsense.
int CoresOf(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((quota + period - 1) / period, INT_MAX));
}

// The whitespace-separated words of a file; none when it cannot be read.
std::vector<std::string> Words(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return {};
  return absl::StrSplit(*text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

// cgroup v2: cpu.max holds "QUOTA PERIOD", or "max PERIOD" without a limit.
int V2Limit(const std::string& dir) {
  std::vector<std::string> words = Words(dir + "/cpu.max");
  int64_t quota = 0, period = 0;
  if (words.size() != 2 || !absl::SimpleAtoi(words[0], &quota) ||
      !absl::SimpleAtoi(words[1], &period)) {
    return 0;
  }
  return CoresOf(quota, period);
}

// cgroup v1: cpu.cfs_quota_us (-1 without a limit) over cpu.cfs_period_us.
int V1Limit(const std::string& dir) {
  std::vector<std::string> quota_words = Words(dir + "/cpu.cfs_quota_us");
  std::vector<std::string> period_words = Words(dir + "/cpu.cfs_period_us");
  int64_t quota = 0, period = 0;
  if (quota_words.size() != 1 || period_words.size() != 1 ||
      !absl::SimpleAtoi(quota_words[0], &quota) || !absl::SimpleAtoi(period_words[0], &period)) {
    return 0;
  }
  return CoresOf(quota, period);
}

// The smaller of two limits, 0 meaning none.
int Tighter(int a, int b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

// The limit `read` finds in the cgroup `path` (e.g. "/kubepods/pod1") under `hierarchy` and in
// every cgroup above it: a parent's quota caps its children's. Where the path does not exist under
// the mount (a container that sees its own cgroup at the mount's root without a cgroup namespace),
// only the root is found, which is then that cgroup itself.
int LimitAlong(const std::string& hierarchy, absl::string_view path,
               int (*read)(const std::string&)) {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  // ".." appears for a cgroup outside this process's cgroup namespace: only the root is ours.
  if (std::find(parts.begin(), parts.end(), "..") != parts.end()) parts.clear();
  std::string dir = hierarchy;
  int limit = read(dir);
  for (absl::string_view part : parts) {
    absl::StrAppend(&dir, "/", part);
    limit = Tighter(limit, read(dir));
  }
  return limit;
}

int Divide(int cpus, int workers_on_host) {
  return std::max(1, cpus / std::max(1, workers_on_host));
}

// The CPUs this process may run on (its affinity mask, which a CPU manager's cpuset narrows);
// all of the machine's when that cannot be read.
int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int CgroupCpuLimit(const std::string& cgroup_root, const std::string& self_cgroup) {
  // /proc/self/cgroup: "0::/path" for cgroup v2, "N:controller,...:/path" per v1 hierarchy.
  absl::string_view v2_path = "/", v1_path = "/";
  for (absl::string_view line : absl::StrSplit(self_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (fields[0] == "0" && fields[1].empty()) {
      v2_path = fields[2];
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
      if (controller == "cpu") v1_path = fields[2];
    }
  }
  int limit = LimitAlong(cgroup_root, v2_path, V2Limit);
  // v1 mounts the cpu controller at cpu,cpuacct (with cpu a link to it) or at cpu alone.
  limit = Tighter(limit, LimitAlong(cgroup_root + "/cpu", v1_path, V1Limit));
  limit = Tighter(limit, LimitAlong(cgroup_root + "/cpu,cpuacct", v1_path, V1Limit));
  return limit;
}

int DefaultThreads(const std::string& cgroup_root, int cores, int workers_on_host,
                   const std::string& self_cgroup) {
  return Divide(Tighter(CgroupCpuLimit(cgroup_root, self_cgroup), std::max(0, cores)),
                workers_on_host);
}

ThreadChoice ChooseThreads(int spec_threads, int workers_on_host) {
  if (spec_threads > 0) return {spec_threads, "spec.threads"};
  absl::StatusOr<std::string> self_cgroup = ReadFile(kSelfCgroup);
  const int limit = CgroupCpuLimit(kCgroupRoot, self_cgroup.ok() ? *self_cgroup : "");
  const int cores = UsableCores();
  const int workers = std::max(1, workers_on_host);
  const std::string over = absl::StrCat(" over ", workers, workers == 1 ? " worker" : " workers",
                                        " on this host");
  if (limit > 0 && limit < cores) {
    return {Divide(limit, workers), absl::StrCat("a CPU quota of ", limit, " cores", over)};
  }
  return {Divide(cores, workers), absl::StrCat(cores, cores == 1 ? " core" : " cores", over)};
}

}  // namespace hptrain::train
