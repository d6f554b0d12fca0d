// spec.topology, spec.communicator and strategy hierarchical in the job file: parsing, the
// rejected inputs (one line naming the field), and the communicator the worker builds from them.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/hierarchical_communicator.h"
#include "runtime/comm/loopback_transport.h"
#include "runtime/job/job_parser.h"
#include "runtime/ps/coordinator_client.h"
#include "runtime/ps/coordinator_server.h"
#include "runtime/ps/coordinator_service.h"
#include "runtime/sync/hierarchical.h"

namespace hptrain::sync {
namespace {

// A 4-worker synthetic job; `extra` is appended under spec (two-space indented).
std::string Job(const std::string& extra) {
  return R"(apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: nodes
spec:
  model:
    name: mlp
    hidden: [8]
  dataset:
    name: synthetic
    synthetic:
      samples: 256
      testSamples: 64
      shape: [1, 4, 4]
      classes: 4
  optimizer:
    type: sgd
    lr: 0.1
  globalBatchSize: 32
  workers:
    replicas: 4
)" + extra;
}

std::string ErrorOf(const std::string& extra) {
  absl::StatusOr<job::JobSpec> spec = job::ParseJobText(Job(extra));
  if (spec.ok()) return "";
  return std::string(spec.status().message());
}

TEST(HierarchicalJobTest, ParsesTopologyCommunicatorAndStrategy) {
  auto spec = job::ParseJobText(Job(R"(  strategy:
    type: hierarchical
    interval: -1
    averageOptimizerState: true
    warmupSteps: 0
  topology:
    nodes: [1, 3]
)"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->strategy.Int("interval"), -1);
  ASSERT_TRUE(spec->strategy.Has("warmupSteps"));
  EXPECT_EQ(spec->strategy.Int("warmupSteps"), 0);  // written: no ramp-up (left out: the default)
  EXPECT_TRUE(spec->strategy.Bool("averageOptimizerState"));
  EXPECT_EQ(spec->topology.NodeSizes(4), (std::vector<int>{1, 3}));

  auto ssgd = job::ParseJobText(Job(R"(  strategy:
    type: quantized
    bits: "8"
  communicator:
    hierarchical: true
    compressInterNodeOnly: true
  topology:
    workersPerNode: 2
)"));
  ASSERT_TRUE(ssgd.ok()) << ssgd.status();
  EXPECT_TRUE(ssgd->communicator.hierarchical);
  EXPECT_TRUE(ssgd->communicator.compress_inter_node_only);
  EXPECT_EQ(ssgd->topology.NodeSizes(4), (std::vector<int>{2, 2}));
}

TEST(HierarchicalJobTest, RejectsBadInputNamingTheField) {
  struct Case {
    std::string extra;
    std::string expected;  // the start of the one-line message
  };
  const std::vector<Case> cases = {
      {"  strategy:\n    type: hierarchical\n    interval: 0\n", "spec.strategy.interval: "},
      {"  strategy:\n    type: hierarchical\n    interval: -2\n", "spec.strategy.interval: "},
      {"  strategy:\n    type: localsgd\n    interval: -1\n", "spec.strategy.interval: "},
      {"  topology:\n    nodes: [1, 2]\n",
       "spec.topology.nodes: the nodes hold 3 workers, but the job has 4"},
      {"  topology:\n    workersPerNode: 3\n",
       "spec.topology.workersPerNode: the nodes hold 3 workers, but the job has 4"},
      {"  topology:\n    nodes: [2, 0, 2]\n", "spec.topology.nodes[1]: node 1 is empty"},
      {"  topology:\n    workersPerNode: -1\n", "spec.topology.workersPerNode: "},
      {"  topology:\n    workersPerNode: 2\n    nodes: [2, 2]\n", "spec.topology.nodes: "},
      {"  topology:\n    racks: 2\n", "spec.topology.racks: "},
      {"  communicator:\n    compressInterNodeOnly: true\n",
       "spec.communicator.compressInterNodeOnly: applies only with"},
      {"  strategy:\n    type: ps\n  communicator:\n    hierarchical: true\n",
       "spec.communicator.hierarchical: strategy ps"},
      {"  strategy:\n    type: ssgd\n    averageOptimizerState: true\n",
       "spec.strategy.averageOptimizerState: does not apply to strategy ssgd"},
      {"  strategy:\n    type: hierarchical\n    warmupSteps: -3\n",
       "spec.strategy.warmupSteps: must be >= 0, got -3"},
      {"  strategy:\n    type: hierarchical\n    warmupSteps: half\n", "spec.strategy.warmupSteps"},
      {"  strategy:\n    type: localsgd\n    warmupSteps: 0\n",
       "spec.strategy.warmupSteps: does not apply to strategy localsgd"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorOf(c.extra);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.extra << " gave: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TEST(HierarchicalJobTest, WorkerCommunicatorFollowsTheSpec) {
  auto hub = std::make_shared<comm::LoopbackHub>(4);
  job::JobSpec flat;
  flat.strategy.type = "ssgd";
  auto plain = MakeJobCommunicator(flat, std::make_unique<comm::LoopbackTransport>(hub, 0));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->node_communicator(), nullptr);  // no topology: the plain communicator

  job::JobSpec nodes = flat;
  nodes.topology.workers_per_node = 2;
  auto split = MakeJobCommunicator(nodes, std::make_unique<comm::LoopbackTransport>(hub, 1));
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_NE((*split)->node_communicator(), nullptr);
  EXPECT_EQ((*split)->node_communicator()->size(), 2);

  // Node names (published by the coordinator) apply when spec.topology is unset.
  auto named = comm::Topology::FromNodeNames({"a", "b", "a", "b"});
  ASSERT_TRUE(named.ok());
  job::JobSpec strategy = flat;
  strategy.strategy.type = "hierarchical";
  auto by_name =
      MakeJobCommunicator(strategy, std::make_unique<comm::LoopbackTransport>(hub, 2), *named);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  auto* h = dynamic_cast<comm::HierarchicalCommunicator*>(by_name->get());
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->topology().ToString(), "[0 2] [1 3]");

  auto missing = MakeJobCommunicator(strategy, std::make_unique<comm::LoopbackTransport>(hub, 3));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("$HPTRAIN_NODE_NAME"), std::string::npos);
}

TEST(HierarchicalJobTest, CoordinatorPublishesTheNodeNamesGivenAtRegister) {
  ps::CoordinatorConfig config;
  config.job = "nodes";
  config.strategy = "hierarchical";
  config.token = "secret";
  config.groups = {"w", "w", "w"};
  config.allocation = {4, 4, 4};
  config.global_batch = 12;
  auto server = ps::CoordinatorServer::Start("127.0.0.1", 0,
                                             std::make_unique<ps::CoordinatorService>(config));
  ASSERT_TRUE(server.ok()) << server.status();
  ps::CoordinatorClient client("127.0.0.1:" + std::to_string((*server)->port()), "secret");
  const std::vector<std::string> names = {"node-b", "node-a", "node-b"};
  for (int rank = 0; rank < 3; ++rank) {
    hptrain::v1::RegisterRequest request;
    request.set_rank(rank);
    request.set_group("w");
    request.set_node_name(names[rank]);
    ASSERT_TRUE(client.Register(request).ok());
  }
  auto topology = comm::TopologyFromStore(client, 3, std::chrono::seconds(5));
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->ToString(), "[0 2] [1]");
  // Registering again without a name (an older worker) leaves the published name alone.
  hptrain::v1::RegisterRequest unnamed;
  unnamed.set_rank(0);
  unnamed.set_group("w");
  ASSERT_TRUE(client.Register(unnamed).ok());
  EXPECT_EQ(*client.Get(comm::NodeNameKey(0), std::chrono::milliseconds(100)), "node-b");
}

}  // namespace
}  // namespace hptrain::sync
