// How many libtorch threads a worker uses when the job leaves spec.threads at 0: the CPUs it may
// use, shared among the workers of the job on its host. In a Kubernetes pod the CPUs are the
// container's CPU limit, which the kernel enforces as a cgroup CPU quota; `hardware_concurrency()`
// there still counts every core of the node, and a pod limited to 2 cores on a 64-core node that
// ran 64 threads would spend its quota in the first few milliseconds of every period and then
// stall. So the quota, when there is one, is what gets divided.
//
// The quota is read from the cgroup files: cgroup v2's `cpu.max` ("QUOTA PERIOD", or "max PERIOD"
// for none) or cgroup v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us` (quota -1: none), in the
// process's own cgroup and every cgroup above it, the smallest limit winning. Files that are
// missing or unreadable mean no quota: the fallback is the cores, as before. No libtorch here.
#ifndef HPTRAIN_RUNTIME_TRAIN_THREADS_H_
#define HPTRAIN_RUNTIME_TRAIN_THREADS_H_

#include <string>

namespace hptrain::train {

// The CPU limit that the cgroup files under `cgroup_root` (normally /sys/fs/cgroup) set for a
// process in the cgroups `self_cgroup` names (the text of /proc/self/cgroup; empty: only the files
// directly under the root, which inside a container's cgroup namespace are its own), in whole cores
// rounded up, as a quota of 2.5 cores keeps 3 threads busy for most of each period. 0 when there is
// no limit or none can be read. cgroup v1 files are looked for under `cpu/` and `cpu,cpuacct/`.
int CgroupCpuLimit(const std::string& cgroup_root, const std::string& self_cgroup = "");

// The libtorch threads of one worker when spec.threads is 0: the cgroup CPU limit under
// `cgroup_root` (no more than `cores`), or `cores` when there is none, divided among the
// `workers_on_host` workers of the job that share them (rounded down); at least 1.
int DefaultThreads(const std::string& cgroup_root, int cores, int workers_on_host,
                   const std::string& self_cgroup = "");

struct ThreadChoice {
  int threads = 1;
  std::string basis;  // how it was chosen, for the worker's start-up line
};

// The threads of this worker: `spec_threads` when positive, else DefaultThreads over this
// process's cgroups (/sys/fs/cgroup, /proc/self/cgroup) and the CPUs it may run on.
ThreadChoice ChooseThreads(int spec_threads, int workers_on_host);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_THREADS_H_
