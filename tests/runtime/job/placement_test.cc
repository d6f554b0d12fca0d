// Placement files of `hptrain run --placement`: where the ps and each worker run.
#include "runtime/job/placement.h"

#include "gtest/gtest.h"
#include "tests/integration/hptrain_process.h"

namespace hptrain::job {
namespace {

TEST(Placement, ReadsThePsAndEveryWorker) {
  testing::TempDir dir;
  const std::string path = dir.Write("p.yaml", R"(
ps: {exec: [ip, netns, exec, h0], address: 10.90.0.1}
workers:
  - {exec: [ip, netns, exec, h1], address: 10.90.0.2}
  - {address: 10.90.0.3}
)");
  auto placement = ReadPlacementFile(path, 2);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->ps.address, "10.90.0.1");
  EXPECT_EQ(placement->ps.exec, (std::vector<std::string>{"ip", "netns", "exec", "h0"}));
  ASSERT_EQ(placement->workers.size(), 2u);
  EXPECT_EQ(placement->workers[1].address, "10.90.0.3");
  EXPECT_TRUE(placement->workers[1].exec.empty());
}

TEST(Placement, ReadsParameterServerShardHosts) {
  testing::TempDir dir;
  const std::string path = dir.Write("p.yaml", R"(
ps: {address: 10.90.0.1}
psShards:
  - {exec: [ip, netns, exec, h5], address: 10.90.0.6}
  - {address: 10.90.0.7}
)");
  auto placement = ReadPlacementFile(path, 2, 3);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_EQ(placement->ps_shards.size(), 2u);
  EXPECT_EQ(placement->ps_shards[0].exec, (std::vector<std::string>{"ip", "netns", "exec", "h5"}));
  EXPECT_EQ(placement->ps_shards[1].address, "10.90.0.7");
  auto wrong = ReadPlacementFile(path, 2, 2);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("psShards: has 2 entries, the job has 1"),
            std::string::npos)
      << wrong.status();
}

TEST(Placement, RejectsBadFilesWithTheFieldNamed) {
  testing::TempDir dir;
  struct Case {
    const char* text;
    const char* expected;
  } cases[] = {
      {"ps: {address: 1.2.3.4}\nworkers: [{address: a}]\n", "workers: has 1 entries, the job has 2"},
      {"ps: {address: 1.2.3.4, port: 3}\n", "ps.port: unknown field"},
      {"ps: {address: ''}\n", "ps.address: must not be empty"},
      {"ps: {exec: ip}\n", "ps.exec: must be a list"},
      {"hosts: []\n", "hosts: unknown field"},
      {"psShards: {address: a}\n", "psShards: must be a list"},
      {"ps: [\n", "malformed placement"},
  };
  for (const Case& c : cases) {
    auto placement = ReadPlacementFile(dir.Write("bad.yaml", c.text), 2);
    ASSERT_FALSE(placement.ok()) << c.text;
    EXPECT_NE(placement.status().message().find(c.expected), std::string::npos)
        << placement.status();
  }
  EXPECT_TRUE(absl::IsNotFound(ReadPlacementFile(dir.path() + "/missing.yaml", 2).status()));
}

}  // namespace
}  // namespace hptrain::job
