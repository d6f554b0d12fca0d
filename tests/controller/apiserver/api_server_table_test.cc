// Server-side printing (table_convert.h): what `kubectl get` receives for custom resources, and
// that a CRD written by server-side apply is served and Established like one created by POST.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/apiserver/table_convert.h"
#include "tests/controller/apiserver/test_objects.h"

namespace hptrain::testing {
namespace {

using ::testing::ElementsAre;

constexpr char kTableAccept[] =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json";

nlohmann::json WidgetCrd(bool with_columns) {
  nlohmann::json version = {{"name", "v1"},
                            {"served", true},
                            {"storage", true},
                            {"subresources", {{"status", nlohmann::json::object()}}}};
  if (with_columns) {
    version["additionalPrinterColumns"] = {
        {{"name", "Phase"}, {"type", "string"}, {"jsonPath", ".status.phase"}},
        {{"name", "Step"}, {"type", "integer"}, {"jsonPath", ".status.step"}},
        {{"name", "Rate"}, {"type", "number"}, {"jsonPath", ".status.rate"}, {"priority", 1}},
        {{"name", "Age"}, {"type", "date"}, {"jsonPath", ".metadata.creationTimestamp"}}};
  }
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"scope", "Namespaced"},
            {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
            {"versions", {version}}}}};
}

nlohmann::json Widget(const std::string& name) {
  return {{"apiVersion", "example.com/v1"},
          {"kind", "Widget"},
          {"metadata", {{"name", name}}},
          {"spec", {{"size", 1}}}};
}

std::vector<std::string> ColumnNames(const nlohmann::json& table) {
  std::vector<std::string> names;
  for (const nlohmann::json& c : table["columnDefinitions"]) names.push_back(c["name"]);
  return names;
}

using ApiServerTableTest = ApiServerTest;

constexpr char kCrdPath[] = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
constexpr char kWidgets[] = "/apis/example.com/v1/namespaces/ns/widgets";

TEST_F(ApiServerTableTest, ServerSideApplyOfACrdServesItAndMarksItEstablished) {
  HttpResult applied =
      client_->Patch(std::string(kCrdPath) + "/widgets.example.com?fieldManager=kubectl",
                     WidgetCrd(true), "application/apply-patch+yaml");
  ASSERT_EQ(applied.status, 201) << applied.text;
  auto crd = server_->Get("customresourcedefinitions.apiextensions.k8s.io", "",
                          "widgets.example.com");
  ASSERT_TRUE(crd.ok()) << crd.status();
  bool established = false;
  for (const nlohmann::json& c : (*crd)["status"]["conditions"]) {
    established = established || (c["type"] == "Established" && c["status"] == "True");
  }
  EXPECT_TRUE(established) << *crd;
  EXPECT_EQ(client_->Post(kWidgets, Widget("w")).status, 201);
}

TEST_F(ApiServerTableTest, ListAndGetAnswerTheCrdColumnsWhenATableIsAsked) {
  MustCreate(kCrdPath, WidgetCrd(true));
  MustCreate(kWidgets, Widget("a"));
  MustCreate(kWidgets, Widget("b"));
  ASSERT_TRUE(server_
                  ->Mutate("widgets.example.com", "ns", "a",
                           [](nlohmann::json* w) {
                             (*w)["status"] = {{"phase", "Running"}, {"step", 120.0},
                                               {"rate", 512}};
                           })
                  .ok());

  HttpResult list = client_->Send("GET", kWidgets, "", "", {{"Accept", kTableAccept}});
  ASSERT_EQ(list.status, 200) << list.text;
  EXPECT_EQ(list.body["kind"], "Table");
  EXPECT_EQ(list.body["apiVersion"], "meta.k8s.io/v1");
  EXPECT_THAT(ColumnNames(list.body), ElementsAre("Name", "Phase", "Step", "Rate", "Age"));
  EXPECT_EQ(list.body["columnDefinitions"][3]["priority"], 1);
  ASSERT_EQ(list.body["rows"].size(), 2u);
  const nlohmann::json& a = list.body["rows"][0];
  EXPECT_EQ(a["cells"][0], "a");
  EXPECT_EQ(a["cells"][1], "Running");
  EXPECT_EQ(a["cells"][2], 120) << "an integer column truncates a float value";
  EXPECT_TRUE(a["cells"][2].is_number_integer());
  EXPECT_EQ(a["cells"][3], 512.0);
  EXPECT_TRUE(a["cells"][4].is_string());
  EXPECT_THAT(a["cells"][4].get<std::string>(), ::testing::EndsWith("s"));
  EXPECT_EQ(a["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(a["object"]["metadata"]["name"], "a");
  const nlohmann::json& b = list.body["rows"][1];
  EXPECT_TRUE(b["cells"][1].is_null()) << "a missing value is null";
  EXPECT_FALSE(list.body["metadata"].value("resourceVersion", "").empty());

  HttpResult none = client_->Send("GET", std::string(kWidgets) + "?includeObject=None", "", "",
                                  {{"Accept", kTableAccept}});
  EXPECT_FALSE(none.body["rows"][0].contains("object"));
  HttpResult whole = client_->Send("GET", std::string(kWidgets) + "/a?includeObject=Object", "",
                                   "", {{"Accept", kTableAccept}});
  ASSERT_EQ(whole.status, 200) << whole.text;
  ASSERT_EQ(whole.body["rows"].size(), 1u);
  EXPECT_EQ(whole.body["rows"][0]["object"]["status"]["phase"], "Running");

  HttpResult plain = client_->Get(kWidgets);
  EXPECT_EQ(plain.body["kind"], "WidgetList") << "without the Accept header: the list";
  HttpResult pods = client_->Send("GET", PodPath("ns"), "", "", {{"Accept", kTableAccept}});
  EXPECT_EQ(pods.body["kind"], "PodList") << "built-in types have no printer columns here";
}

TEST_F(ApiServerTableTest, ACrdWithoutColumnsPrintsNameAndAge) {
  MustCreate(kCrdPath, WidgetCrd(false));
  MustCreate(kWidgets, Widget("a"));
  HttpResult list = client_->Send("GET", kWidgets, "", "",
                                  {{"Accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io"}});
  EXPECT_EQ(list.body["apiVersion"], "meta.k8s.io/v1beta1");
  EXPECT_THAT(ColumnNames(list.body), ElementsAre("Name", "Age"));
}

TEST(TableConvertTest, AcceptHeaders) {
  EXPECT_EQ(AcceptedTableVersion(kTableAccept), "meta.k8s.io/v1");
  EXPECT_EQ(AcceptedTableVersion("application/json"), std::nullopt);
  EXPECT_EQ(AcceptedTableVersion("application/json;as=Table;v=v2;g=meta.k8s.io"), std::nullopt);
  EXPECT_EQ(AcceptedTableVersion("application/json;as=Table;v=v1;g=example.com"), std::nullopt);
}

TEST(TableConvertTest, HumanDurationFollowsKubectl) {
  EXPECT_EQ(HumanDuration(absl::Seconds(-5)), "<invalid>");
  EXPECT_EQ(HumanDuration(absl::Milliseconds(-500)), "0s");
  EXPECT_EQ(HumanDuration(absl::Seconds(45)), "45s");
  EXPECT_EQ(HumanDuration(absl::Seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(absl::Seconds(150)), "2m30s");
  EXPECT_EQ(HumanDuration(absl::Minutes(5)), "5m");
  EXPECT_EQ(HumanDuration(absl::Minutes(42)), "42m");
  EXPECT_EQ(HumanDuration(absl::Minutes(200)), "3h20m");
  EXPECT_EQ(HumanDuration(absl::Hours(30)), "30h");
  EXPECT_EQ(HumanDuration(absl::Hours(76)), "3d4h");
  EXPECT_EQ(HumanDuration(absl::Hours(24 * 30)), "30d");
  EXPECT_EQ(HumanDuration(absl::Hours(24 * (365 * 3 + 10))), "3y10d");
  EXPECT_EQ(HumanDuration(absl::Hours(24 * 365 * 9)), "9y");
}

}  // namespace
}  // namespace hptrain::testing
