#include "controller/kube/store.h"

#include <gtest/gtest.h>

#include <memory>

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

TEST(KubeStoreTest, ListsByNamespaceAndLabels) {
  Store store;
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
