// Topology: which ranks of a job share a node (docs/algorithms.md §2).
//
// Nodes are numbered in the order of their leaders, and a node's leader is its lowest rank, so
// every rank derives the same grouping from the same input. Sources of the grouping:
//   - node sizes in rank order (spec.topology under `hptrain run`): ranks
//     [0, s_0) are node 0, the next s_1 ranks node 1, and so on;
//   - one node name per rank ($HPTRAIN_NODE_NAME: a pod's spec.nodeName on Kubernetes, the
//     placement host under `hptrain run --placement`), published through the coordinator's
//     key-value store (PublishNodeName / TopologyFromStore).
// A communicator that knows no topology treats every rank as a node of its own
// (Communicator::inter_node_bytes_sent).
#ifndef HPTRAIN_RUNTIME_COMM_TOPOLOGY_H_
#define HPTRAIN_RUNTIME_COMM_TOPOLOGY_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/kv_store.h"

namespace hptrain::comm {

class Topology {
 public:
  // Node k holds sizes[k] consecutive ranks. InvalidArgument naming `path` (e.g.
  // "spec.topology.nodes") when a size is below 1 or the sizes do not add up to `world`.
  static absl::StatusOr<Topology> FromNodeSizes(const std::vector<int>& sizes, int world,
                                                const std::string& path);
  // Ranks with equal names share a node. InvalidArgument when a name is empty.
  static absl::StatusOr<Topology> FromNodeNames(const std::vector<std::string>& names);

  int world() const { return static_cast<int>(node_of_rank_.size()); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int node_of(int rank) const { return node_of_rank_[rank]; }
  // The ranks of node k, ascending; the first is the node's leader.
  const std::vector<int>& ranks_of(int node) const { return nodes_[node]; }
  int leader_of(int node) const { return nodes_[node].front(); }
  std::vector<int> leaders() const;
  bool is_leader(int rank) const { return leader_of(node_of(rank)) == rank; }
  // The rank's position inside its node (0 for the leader).
  int local_rank(int rank) const;
  // "[0 1] [2 3 4]": the nodes' ranks, for logs and errors.
  std::string ToString() const;

 private:
  explicit Topology(std::vector<int> node_of_rank);
  std::vector<int> node_of_rank_;        // rank -> node
  std::vector<std::vector<int>> nodes_;  // node -> its ranks, ascending
};

// The key under which rank `rank`'s node name is published.
std::string NodeNameKey(int rank);

// Publishes this rank's node name in `store` (the coordinator does it at Register when the
// worker gives one; tests and single-process runs call it themselves).
absl::Status PublishNodeName(KeyValueStore& store, int rank, const std::string& node_name);

// Waits up to `timeout` until every rank's node name is in `store` and groups the ranks by it.
// DeadlineExceeded naming the first rank whose name is missing.
absl::StatusOr<Topology> TopologyFromStore(KeyValueStore& store, int world,
                                           std::chrono::milliseconds timeout);
// The same for the ranks of an elastic job's membership epoch: rank r's node is the one `slots[r]`
// registered with.
absl::StatusOr<Topology> TopologyFromStore(KeyValueStore& store, const std::vector<int>& slots,
                                           std::chrono::milliseconds timeout);

}  // namespace hptrain::comm

#endif  // HPTRAIN_RUNTIME_COMM_TOPOLOGY_H_
