// Placement: where `hptrain run` starts each process. By default the ps and every worker run on
// this machine and serve on 127.0.0.1. A placement file (`hptrain run JOB.yaml --placement FILE`)
// puts each process on another "host" — in practice a network namespace of the benchmark
// harness's emulated cluster (bench/README.md) — by naming, for the ps and for each worker rank,
// the command prefix that enters that host and the address the process serves on there:
//
//   ps:      {exec: [ip, netns, exec, hpb-h0], address: 10.90.0.1}
//   workers:                                   # one entry per rank, in rank order
//     - {exec: [ip, netns, exec, hpb-h1], address: 10.90.0.2}
//     - {exec: [ip, netns, exec, hpb-h2], address: 10.90.0.3}
//   psShards:                                  # optional: parameter-server shards 1..S-1
//     - {exec: [ip, netns, exec, hpb-h5], address: 10.90.0.6}
//
// Without psShards, shards 1..S-1 (spec.ps.shards) run on the ps host. The ps serves its
// coordinator on its address; each worker binds its collectives (Gloo) and its
// metrics endpoint to its own. The launcher itself polls the coordinator, so it must run where
// the ps address is reachable (the harness runs it on the ps host). JSON works too (it is YAML).
#ifndef HPTRAIN_RUNTIME_JOB_PLACEMENT_H_
#define HPTRAIN_RUNTIME_JOB_PLACEMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::job {

struct HostPlacement {
  std::vector<std::string> exec;  // command prefix; empty = run directly
  std::string address = "127.0.0.1";
};

struct Placement {
  HostPlacement ps;
  std::vector<HostPlacement> workers;  // empty = every worker on 127.0.0.1, no prefix
  std::vector<HostPlacement> ps_shards;  // shards 1..S-1; empty = on the ps host
};

// Reads a placement file for a job of `world_size` workers and `ps_shards` parameter-server
// shards. Errors (InvalidArgument, one line, naming the file and the field): malformed YAML,
// unknown keys, a worker count other than `world_size`, a psShards count other than
// ps_shards − 1, an empty address; NotFound for a missing file.
absl::StatusOr<Placement> ReadPlacementFile(const std::string& path, int world_size,
                                            int ps_shards = 1);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_PLACEMENT_H_
