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
//
// The ps serves its coordinator on its address; each worker binds its collectives (Gloo) and its
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
};

// Reads a placement file for a job of `world_size` workers. Errors (InvalidArgument, one line,
// naming the file and the field): malformed YAML, unknown keys, a worker count other than
// `world_size`, an empty address; NotFound for a missing file.
absl::StatusOr<Placement> ReadPlacementFile(const std::string& path, int world_size);

}  // namespace hptrain::job

#endif  // HPTRAIN_RUNTIME_JOB_PLACEMENT_H_
