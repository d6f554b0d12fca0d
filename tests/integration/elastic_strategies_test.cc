// Elastic membership (docs/elastic.md) through the real binary, for every strategy and under
// churn: a worker that joins a running job continues from rank 0's parameters whatever the
// strategy, and a job that loses, drops and regains workers twenty times in a row still finishes
// and still learns.
//
// Both tests drive `hptrain run --control FILE` from RunProcess's poll callback. They read the
// run's stderr while it runs (RunProcess writes it to a file, which /proc/PID/fd/2 reopens) and
// set the pace through spec.testing.slowdownFile: the workers are slowed down until the events
// the test waits for have happened, then run at full speed to the end, so the run neither ends
// before a joiner arrives nor idles once it did.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/hptrain_process.h"

namespace hptrain::testing {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What a running child has written to stderr so far: RunProcess points it at a file. Until the
// child has done so (just after fork), its stderr is still ours, a pipe that must not be read.
std::string StderrSoFar(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/2";
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return ReadFile(path);
}

// Appends one command line to the control file.
void Control(const std::string& path, const std::string& line) {
  FILE* f = std::fopen(path.c_str(), "a");
  ASSERT_NE(f, nullptr) << path;
  std::fprintf(f, "%s\n", line.c_str());
  std::fclose(f);
}

// Replaces the slowdown file atomically with `slots` copies of `factor`.
void SetSlowdown(const std::string& path, int slots, double factor) {
  std::ostringstream text;
  for (int i = 0; i < slots; ++i) text << (i ? " " : "") << factor;
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  ASSERT_NE(f, nullptr) << tmp;
  std::fprintf(f, "%s\n", text.str().c_str());
  std::fclose(f);
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0) << path;
}

// `hptrain worker S: membership epoch E: rank R of W from step T, parameters H (...)`.
struct WorkerChange {
  int slot = -1;
  long long epoch = -1;
  int rank = -1;
  int world = -1;
  long long step = -1;
  std::string hash;
};

std::vector<WorkerChange> WorkerChanges(const std::string& err) {
  static const std::regex re(
      "hptrain worker (\\d+): membership epoch (\\d+): rank (\\d+) of (\\d+) from step (\\d+), "
      "parameters ([0-9a-f]{16}) ");
  std::vector<WorkerChange> out;
  for (const std::string& line : Lines(err)) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    out.push_back({std::stoi(m[1]), std::stoll(m[2]), std::stoi(m[3]), std::stoi(m[4]),
                   std::stoll(m[5]), m[6]});
  }
  return out;
}

// The members of the newest epoch the coordinator logged (`hptrain coordinator: membership
// epoch E: REASON slot S (...); members A,B,C[, from step T]`), or `initial` before any.
std::vector<int> CoordinatorMembers(const std::string& err, const std::vector<int>& initial) {
  static const std::regex re("hptrain coordinator: membership epoch \\d+: .*; members ([0-9,]*)");
  std::vector<int> members = initial;
  for (const std::string& line : Lines(err)) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    members.clear();
    std::stringstream list(m[1].str());
    for (std::string item; std::getline(list, item, ',');) {
      if (!item.empty()) members.push_back(std::stoi(item));
    }
  }
  return members;
}

// Whether the coordinator logged, after its first `skip` membership lines, an epoch that took
// `slot` out (`lost slot S` or `removed slot S`); `*lines` is how many membership lines it logged.
bool CoordinatorDropped(const std::string& err, size_t skip, int slot, size_t* lines) {
  static const std::regex re("hptrain coordinator: membership epoch \\d+: (\\w+) slot (\\d+) ");
  *lines = 0;
  bool dropped = false;
  for (const std::string& line : Lines(err)) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    if (++*lines <= skip) continue;
    dropped = dropped || (m[1] != "joined" && std::stoi(m[2]) == slot);
  }
  return dropped;
}

// The lines of `err` that speak of membership, for failure messages and the log.
std::string MembershipLog(const std::string& err) {
  std::string out;
  for (const std::string& line : Lines(err)) {
    if (line.find("membership") != std::string::npos ||
        line.find("control file") != std::string::npos ||
        line.find("restarting it") != std::string::npos) {
      out += line + "\n";
    }
  }
  return out;
}

// The options a strategy needs on the synthetic MLP (`hptrain strategies`), as arguments of
// `hptrain run`; files they name are written to `dir`.
std::vector<std::string> StrategyArgs(const std::string& strategy, const TempDir& dir) {
  std::vector<std::string> sets = {"spec.strategy.type=" + strategy};
  std::vector<std::string> args;
  if (strategy == "hierarchical") {
    // One node: every worker on the loopback host, so the nodes come from the hosts (a slot
    // beyond the placement's runs on the host of slot `slot mod replicas`).
    args = {"--placement", dir.Write("placement.yaml",
                                     "ps: {address: 127.0.0.1}\n"
                                     "workers:\n  - {address: 127.0.0.1}\n"
                                     "  - {address: 127.0.0.1}\n")};
    sets.push_back("spec.strategy.interval=4");
  } else if (strategy == "gossip") {
    sets.push_back("spec.strategy.threshold=0.01");  // no calibration window
  } else if (strategy == "localsgd") {
    sets.push_back("spec.strategy.interval=4");
  } else if (strategy == "mp2") {
    sets.push_back(
        "spec.strategy.predictor=" +
        std::filesystem::absolute("examples/predictors/lenet5-fashion-mnist.mp2p").string());
  }
  for (const std::string& set : sets) args.insert(args.end(), {"--set", set});
  return args;
}

class ElasticStrategies : public ::testing::TestWithParam<std::string> {};

// Two workers train; once the first checkpoint shows training under way, `add` starts a third in
// slot 2. The epoch it joins in is logged by all three workers with the same step and the same
// parameters' hash (the joiner's are rank 0's, broadcast at the change), and the job ends well.
TEST_P(ElasticStrategies, AJoinerStartsFromRankZerosParameters) {
  const std::string strategy = GetParam();
  TempDir dir;
  const std::string ckpt = dir.path() + "/run.ckpt";
  const std::string control = dir.path() + "/control";
  const std::string slowdown = dir.path() + "/slowdown";
  const std::string name = "el-join-" + strategy;
  const std::string job =
      dir.Write("job.yaml", SyntheticJob(name, 2,
                                         "  elastic: {minReplicas: 1, maxReplicas: 3}\n"
                                         "  epochs: 4\n"
                                         "  maxSteps: 128\n"
                                         "  checkpoint: {path: " +
                                             ckpt +
                                             ", intervalSteps: 2}\n"
                                             "  testing: {slowdownFile: " +
                                             slowdown + "}\n"));
  SetSlowdown(slowdown, 3, 50);  // about a tenth of a second per step until the joiner is in
  std::vector<std::string> argv = {HptrainBinary(), "run", job, "--quiet", "--control", control};
  for (const std::string& arg : StrategyArgs(strategy, dir)) argv.push_back(arg);

  const Clock::time_point start = Clock::now();
  double added_s = -1, joined_s = -1;
  ProcessResult r = RunProcess(argv, 240, [&](pid_t pid) {
    if (joined_s >= 0) return;
    if (added_s < 0) {
      if (!FileExists(ckpt)) return;  // not training yet: a command now would be ignored
      Control(control, "add");
      added_s = SecondsSince(start);
      return;
    }
    std::set<int> slots;
    long long join_epoch = -1;
    const std::vector<WorkerChange> changes = WorkerChanges(StderrSoFar(pid));
    for (const WorkerChange& c : changes) {
      if (c.slot == 2) join_epoch = c.epoch;
    }
    for (const WorkerChange& c : changes) {
      if (c.epoch == join_epoch) slots.insert(c.slot);
    }
    if (slots.size() < 3) return;
    joined_s = SecondsSince(start);
    SetSlowdown(slowdown, 3, 1);
  });
  std::cout << strategy << ": add at " << added_s << " s, every worker in the new epoch at "
            << joined_s << " s, exit " << r.exit_code << " at " << SecondsSince(start)
            << " s (loaded machine)\n"
            << MembershipLog(r.err);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_GE(added_s, 0) << "no checkpoint appeared\n" << r.err;

  const std::vector<WorkerChange> changes = WorkerChanges(r.err);
  long long join_epoch = -1;
  for (const WorkerChange& c : changes) {
    if (c.slot == 2) join_epoch = c.epoch;
  }
  ASSERT_GE(join_epoch, 1) << "slot 2 never logged an epoch\n" << r.err;
  std::map<int, WorkerChange> by_slot;
  for (const WorkerChange& c : changes) {
    if (c.epoch != join_epoch) continue;
    EXPECT_EQ(by_slot.count(c.slot), 0u)
        << "slot " << c.slot << " logged epoch " << join_epoch << " twice\n"
        << r.err;
    by_slot[c.slot] = c;
  }
  ASSERT_EQ(by_slot.size(), 3u) << "epoch " << join_epoch << "\n" << r.err;
  std::set<int> ranks;
  for (const auto& [slot, c] : by_slot) {
    EXPECT_TRUE(slot >= 0 && slot <= 2) << slot;
    EXPECT_EQ(c.world, 3) << "slot " << slot;
    ranks.insert(c.rank);
    EXPECT_EQ(c.step, by_slot[0].step) << "slot " << slot << "\n" << r.err;
    EXPECT_EQ(c.hash, by_slot[0].hash) << "slot " << slot << "\n" << r.err;
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(by_slot[2].rank, 2);  // joiners are appended
  EXPECT_GT(by_slot[0].step, 0);
}

INSTANTIATE_TEST_SUITE_P(, ElasticStrategies,
                         ::testing::Values("ssgd", "fp16", "quantized", "topk", "dgc", "localsgd",
                                           "hierarchical", "multistep", "auto", "gossip", "ps",
                                           "hps", "mp2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Four workers (slots 0..3, at least 2 members) under 20 random events about a second apart: a
// member is killed (the launcher restarts its slot, the new worker joins) or removed (and a worker
// is added back once it left). The run ends by itself within its bound, the coordinator counted
// every change, and the model still learned.
TEST(ElasticChaos, TwentyKillsAndJoinsAndTheLossStillFalls) {
  constexpr int kEvents = 20;
  constexpr int kSlots = 4;
  TempDir dir;
  const std::string control = dir.path() + "/control";
  const std::string slowdown = dir.path() + "/slowdown";
  const std::string json = dir.path() + "/summary.json";
  const std::string job =
      dir.Write("job.yaml",
                SyntheticJob("el-chaos", kSlots,
                             "  elastic: {minReplicas: 2, maxReplicas: 4, joinTimeoutSeconds: 15}\n"
                             "  runPolicy: {restartPolicy: OnFailure, backoffLimit: 20, "
                             "peerTimeoutSeconds: 10}\n"
                             "  epochs: 50\n"
                             "  maxSteps: 1600\n"
                             "  testing: {slowdownFile: " +
                                 slowdown + ", slowdownWindow: 8}\n"));
  // Full speed until every worker trained a step (a first step's one-off CPU time, stretched,
  // could outlast the collectives' timeout), then some 50 ms a step while the events go on.
  SetSlowdown(slowdown, kSlots, 1);
  const unsigned seed = std::random_device{}();
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> gap(0.5, 1.5);

  const Clock::time_point start = Clock::now();
  int events = 0;
  double next_s = -1;       // when the next event is due (-1: once training runs)
  int departing = -1;       // the slot of the last event, until the coordinator dropped it
  size_t lines_before = 0;  // the coordinator's membership lines before the last event
  int removed = -1;         // a removed slot not yet replaced by an `add`
  double done_s = -1;       // when the last event had its effect
  double started_s = -1;    // when every worker had started
  std::vector<std::string> log;
  auto note = [&](const std::string& what) {
    char at[32];
    std::snprintf(at, sizeof(at), "%7.2f s  ", SecondsSince(start));
    log.push_back(at + what);
  };
  ProcessResult r = RunProcess(
      {HptrainBinary(), "run", job, "--quiet", "--control", control, "--output-json", json}, 300,
      [&](pid_t pid) {
        if (done_s >= 0) return;
        const std::string err = StderrSoFar(pid);
        const std::vector<int> members = CoordinatorMembers(err, {0, 1, 2, 3});
        if (next_s < 0) {
          // Every worker started (each logs its libtorch threads before it trains); two seconds
          // later they are past their first steps.
          size_t started = 0;
          for (size_t at = err.find("libtorch thread"); at != std::string::npos;
               at = err.find("libtorch thread", at + 1)) {
            ++started;
          }
          if (started < kSlots) return;
          if (started_s < 0) started_s = SecondsSince(start);
          if (SecondsSince(start) < started_s + 2) return;
          SetSlowdown(slowdown, kSlots, 60);
          note("training; slowed down, events begin");
          next_s = SecondsSince(start) + 1.0;
          return;
        }
        if (departing >= 0) {
          size_t lines = 0;
          if (!CoordinatorDropped(err, lines_before, departing, &lines)) return;  // not yet
          departing = -1;
          if (events == kEvents && removed < 0) {
            done_s = SecondsSince(start);
            note("last event done; full speed to the end");
            SetSlowdown(slowdown, kSlots, 1);
            return;
          }
        }
        if (SecondsSince(start) < next_s) return;
        if (removed >= 0) {
          // `add` takes the lowest slot without a running worker: wait until the removed one left.
          if (!FindProcesses({job, "worker", "--rank " + std::to_string(removed)}).empty()) return;
          Control(control, "add");
          note("add (slot " + std::to_string(removed) + " was removed)");
          removed = -1;
          next_s = SecondsSince(start) + gap(rng);
          if (events == kEvents) {
            done_s = SecondsSince(start);
            note("last event done; full speed to the end");
            SetSlowdown(slowdown, kSlots, 1);
          }
          return;
        }
        if (events == kEvents || members.size() < 3) return;  // keep at least 2 members
        const int slot = members[std::uniform_int_distribution<size_t>(0, members.size() - 1)(rng)];
        const bool kill = std::bernoulli_distribution(0.5)(rng);
        ++events;
        std::string line = (kill ? "kill " : "remove ") + std::to_string(slot);
        Control(control, line);
        note("event " + std::to_string(events) + ": " + line + " (members " +
             std::to_string(members.size()) + ")");
        departing = slot;
        CoordinatorDropped(err, 0, -1, &lines_before);
        if (!kill) removed = slot;
        next_s = SecondsSince(start) + gap(rng);
      });
  const double wall_s = SecondsSince(start);
  for (const std::string& line : log) std::cout << line << "\n";
  std::cout << "exit " << r.exit_code << " after " << wall_s << " s (loaded machine)\n"
            << MembershipLog(r.err);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(events, kEvents) << r.err;
  EXPECT_GE(done_s, 0) << "the last event never took effect\n" << r.err;

  // Members come and go, the job itself never starts over (its summary would then hold the
  // changes of the last gang only).
  for (const std::string& line : Lines(r.err)) {
    EXPECT_EQ(line.find("restarting the gang"), std::string::npos) << line;
  }

  nlohmann::json summary = nlohmann::json::parse(ReadFile(json), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << r.err;
  const nlohmann::json& changes = summary["membership_changes"];
  ASSERT_TRUE(changes.is_array()) << summary.dump();
  std::map<std::string, int> reasons;
  for (const auto& c : changes) {
    ++reasons[c["reason"].get<std::string>()];
    std::cout << "epoch " << c["epoch"] << " " << c["reason"] << " slots " << c["slots"]
              << " members " << c["members"] << " from step " << c["effective_step"] << " "
              << c["detail"] << "\n";
  }
  for (const auto& [reason, n] : reasons) std::cout << reason << ": " << n << "\n";
  std::cout << "worker_restarts " << summary["worker_restarts"] << "\n";
  EXPECT_GE(changes.size(), static_cast<size_t>(kEvents)) << summary.dump();
  EXPECT_GE(reasons["joined"], 1);

  const nlohmann::json& epochs = summary["per_epoch"];
  ASSERT_GE(epochs.size(), 2u) << summary.dump();
  const double first = epochs.front()["train_loss"].get<double>();
  const double last = epochs.back()["train_loss"].get<double>();
  const double final_loss = summary["final"]["train_loss"].get<double>();
  std::cout << "train_loss: first epoch " << first << ", last epoch " << last << ", final "
            << final_loss << " (" << epochs.size() << " epochs)\n";
  EXPECT_LT(last, first) << summary.dump();
  EXPECT_LT(final_loss, first) << summary.dump();
}

}  // namespace
}  // namespace hptrain::testing
