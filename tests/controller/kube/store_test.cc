#include "controller/kube/store.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "controller/kube/object_meta.h"

namespace hptrain::kube {
namespace {

ObjectPtr Pod(const std::string& ns, const std::string& name, const std::string& rv,
              nlohmann::json labels = nlohmann::json::object()) {
  return std::make_shared<const nlohmann::json>(nlohmann::json{
      {"kind", "Pod"},
      {"metadata",
       {{"namespace", ns}, {"name", name}, {"resourceVersion", rv}, {"labels", labels}}}});
}

TEST(KubeStoreTest, UpsertGetRemove) {
  Store store;
  EXPECT_EQ(store.Upsert(Pod("a", "p", "1")), nullptr);
  ObjectPtr old = store.Upsert(Pod("a", "p", "2"));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(ResourceVersionOf(*old), "1");
  EXPECT_EQ(ResourceVersionOf(*store.Get("a", "p")), "2");
  EXPECT_EQ(store.Get("a/p"), store.Get("a", "p"));
  EXPECT_EQ(store.Get("b", "p"), nullptr);
  EXPECT_EQ(store.size(), 1u);
  ASSERT_NE(store.Remove("a/p"), nullptr);
  EXPECT_EQ(store.Remove("a/p"), nullptr);
  EXPECT_EQ(store.size(), 0u);
}

class KubeStoreListTest : public ::testing::TestWithParam<bool> {};

// The same answers with and without an index on hptrain.io/job.
TEST_P(KubeStoreListTest, ListsByNamespaceAndLabels) {
  Store store(GetParam() ? std::vector<std::string>{"hptrain.io/job"}
                         : std::vector<std::string>{});
  store.Upsert(Pod("a", "w-0", "1", {{"hptrain.io/job", "x"}, {"hptrain.io/role", "worker"}}));
  store.Upsert(Pod("a", "ps-0", "1", {{"hptrain.io/job", "x"}, {"hptrain.io/role", "ps"}}));
  store.Upsert(Pod("ab", "w-0", "1", {{"hptrain.io/job", "x"}}));
  store.Upsert(Pod("b", "w-0", "1", {{"hptrain.io/job", "y"}}));
  EXPECT_EQ(store.List().size(), 4u);
  EXPECT_EQ(store.List("a").size(), 2u);  // not "ab"
  EXPECT_EQ(store.ListByLabels("", {{"hptrain.io/job", "x"}}).size(), 3u);
  std::vector<ObjectPtr> workers =
      store.ListByLabels("a", {{"hptrain.io/job", "x"}, {"hptrain.io/role", "worker"}});
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(NameOf(*workers[0]), "w-0");
  EXPECT_TRUE(store.ListByLabels("b", {{"hptrain.io/job", "x"}}).empty());
  EXPECT_EQ(store.Keys(), (std::vector<std::string>{"a/ps-0", "a/w-0", "ab/w-0", "b/w-0"}));
  EXPECT_TRUE(store.ListByLabels("", {{"hptrain.io/job", "z"}}).empty());
  EXPECT_TRUE(store.ListByLabels("", {{"hptrain.io/role", "none"}}).empty());
}

INSTANTIATE_TEST_SUITE_P(IndexedAndNot, KubeStoreListTest, ::testing::Bool());

// Random upserts (labels added, changed, dropped, of the wrong type), removals and replaces:
// the indexed store answers every selection as a full scan does, in the same order.
TEST(KubeStoreTest, IndexAgreesWithAScanUnderRandomChanges) {
  Store indexed({"hptrain.io/job"});
  Store scanned;
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  auto random_pod = [&](int rv) {
    nlohmann::json labels = nlohmann::json::object();
    switch (pick(4)) {
      case 0: break;  // unlabelled
      case 1: labels["hptrain.io/job"] = 7; break;  // not a string: never selected
      default: labels["hptrain.io/job"] = "j" + std::to_string(pick(4)); break;
    }
    if (pick(2) == 0) labels["hptrain.io/role"] = pick(2) == 0 ? "ps" : "worker";
    return Pod("n" + std::to_string(pick(3)), "p" + std::to_string(pick(20)),
               std::to_string(rv), labels);
  };
  for (int round = 0; round < 2000; ++round) {
    int action = pick(20);
    if (action == 0) {
      std::vector<ObjectPtr> next;
      for (int i = pick(30); i > 0; --i) next.push_back(random_pod(round));
      indexed.Replace(next);
      scanned.Replace(next);
    } else if (action < 6) {
      std::string key = "n" + std::to_string(pick(3)) + "/p" + std::to_string(pick(20));
      EXPECT_EQ(indexed.Remove(key) == nullptr, scanned.Remove(key) == nullptr);
    } else {
      ObjectPtr pod = random_pod(round);
      indexed.Upsert(pod);
      scanned.Upsert(pod);
    }
    for (const char* ns : {"", "n0", "n1", "n2"}) {
      for (int job = 0; job < 5; ++job) {
        std::map<std::string, std::string> selector = {
            {"hptrain.io/job", "j" + std::to_string(job % 4)}};
        if (job == 4) selector["hptrain.io/role"] = "ps";  // an indexed and an unindexed key
        ASSERT_EQ(indexed.ListByLabels(ns, selector), scanned.ListByLabels(ns, selector))
            << "round " << round << " ns " << ns << " job " << job;
      }
    }
  }
}

TEST(KubeStoreTest, ReplaceReportsTheDifference) {
  Store store;
  store.Upsert(Pod("n", "kept", "1"));
  store.Upsert(Pod("n", "changed", "1"));
  store.Upsert(Pod("n", "vanished", "1"));
  ObjectPtr held = store.Get("n", "vanished");
  std::vector<Store::Delta> deltas =
      store.Replace({Pod("n", "kept", "1"), Pod("n", "changed", "2"), Pod("n", "new", "3")});
  ASSERT_EQ(deltas.size(), 3u);
  EXPECT_EQ(deltas[0].kind, Store::Delta::Kind::kUpdated);
  EXPECT_EQ(NameOf(*deltas[0].object), "changed");
  EXPECT_EQ(ResourceVersionOf(*deltas[0].old_object), "1");
  EXPECT_EQ(deltas[1].kind, Store::Delta::Kind::kAdded);
  EXPECT_EQ(NameOf(*deltas[1].object), "new");
  EXPECT_EQ(deltas[2].kind, Store::Delta::Kind::kDeleted);
  EXPECT_EQ(NameOf(*deltas[2].object), "vanished");
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.Get("n", "vanished"), nullptr);
  EXPECT_EQ(NameOf(*held), "vanished");  // readers keep their pointer
}

}  // namespace
}  // namespace hptrain::kube
