#include "runtime/comm/topology.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status.h"

namespace hptrain::comm {

Topology::Topology(std::vector<int> node_of_rank) : node_of_rank_(std::move(node_of_rank)) {
  // Renumber the nodes in the order of their lowest rank, so the input's numbering never matters.
  std::map<int, int> renumbered;
  for (int r = 0; r < world(); ++r) {
    auto [it, added] = renumbered.emplace(node_of_rank_[r], static_cast<int>(renumbered.size()));
    if (added) nodes_.emplace_back();
    node_of_rank_[r] = it->second;
    nodes_[it->second].push_back(r);
  }
}

absl::StatusOr<Topology> Topology::FromNodeSizes(const std::vector<int>& sizes, int world,
                                                 const std::string& path) {
  if (sizes.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no nodes"));
  std::vector<int> node_of_rank;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, "[", k, "]: node ", k,
                       " is empty (every node holds at least one worker), got ", sizes[k]));
    }
    for (int i = 0; i < sizes[k]; ++i) node_of_rank.push_back(static_cast<int>(k));
  }
  if (static_cast<int>(node_of_rank.size()) != world) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the nodes hold ", node_of_rank.size(),
                                                   " workers, but the job has ", world,
                                                   " (every rank must be on exactly one node)"));
  }
  return Topology(std::move(node_of_rank));
}

absl::StatusOr<Topology> Topology::FromNodeNames(const std::vector<std::string>& names) {
  std::map<std::string, int> ids;
  std::vector<int> node_of_rank;
  for (size_t r = 0; r < names.size(); ++r) {
    if (names[r].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, " has no node name"));
    }
    auto [it, added] = ids.emplace(names[r], static_cast<int>(ids.size()));
    node_of_rank.push_back(it->second);
  }
  if (node_of_rank.empty()) return absl::InvalidArgumentError("no ranks");
  return Topology(std::move(node_of_rank));
}

std::vector<int> Topology::leaders() const {
  std::vector<int> out;
  for (const auto& node : nodes_) out.push_back(node.front());
  return out;
}

int Topology::local_rank(int rank) const {
  const std::vector<int>& node = nodes_[node_of(rank)];
  for (size_t i = 0; i < node.size(); ++i) {
    if (node[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

std::string Topology::ToString() const {
  std::vector<std::string> parts;
  for (const auto& node : nodes_) parts.push_back(absl::StrCat("[", absl::StrJoin(node, " "), "]"));
  return absl::StrJoin(parts, " ");
}

std::string NodeNameKey(int rank) { return absl::StrCat("topology/node/", rank); }

absl::Status PublishNodeName(KeyValueStore& store, int rank, const std::string& node_name) {
  if (node_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": empty node name"));
  }
  return store.Set(NodeNameKey(rank), node_name);
}

absl::StatusOr<Topology> TopologyFromStore(KeyValueStore& store, int world,
                                           std::chrono::milliseconds timeout) {
  std::vector<int> slots;
  for (int r = 0; r < world; ++r) slots.push_back(r);
  return TopologyFromStore(store, slots, timeout);
}

absl::StatusOr<Topology> TopologyFromStore(KeyValueStore& store, const std::vector<int>& slots,
                                           std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  for (int slot : slots) keys.push_back(NodeNameKey(slot));
  HPTRAIN_RETURN_IF_ERROR(store.Wait(keys, timeout), "waiting for every worker's node name");
  std::vector<std::string> names;
  for (size_t r = 0; r < slots.size(); ++r) {
    HPTRAIN_ASSIGN_OR_RETURN(std::string name, store.Get(keys[r], timeout));
    names.push_back(std::move(name));
  }
  return Topology::FromNodeNames(names);
}

}  // namespace hptrain::comm
