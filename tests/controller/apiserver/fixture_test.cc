// Replays the recorded kube-apiserver v1.28.7 exchanges (tests/fixtures/kube) against the
// API server double and compares the answers: same HTTP status and the same body shape.
//
// Covered (every fixture but 41):
//  - 01-38 replay as one sequence, in recording order, in namespace "fixtures", so every request
//    meets the state the recording assumes: 03 posts the stand-in CRD (its schema then validates
//    09, its array-indexed scale path fails 22), 08/11 create the objects later fixtures read,
//    patch and delete. uids, resourceVersions and continue tokens of the recording are mapped to
//    the double's before a request is sent, so optimistic-concurrency requests (17, 18, 34, 35)
//    and the watch from a resourceVersion (36) mean what they meant when recorded.
//  - 07 and 36 (watches): the recorded actions run while the watch is open (07: create, spec
//    patch, status patch, delete of "watched"; 36: Background delete of the owner "resnet");
//    timeoutSeconds is shortened to 3 s to keep the test fast. Compared: the sequence of event
//    types and the events' objects (generation, spec, status, bookmark shape).
//  - 40 (401) and 42 (403) run on doubles configured with a bearer token and an RBAC authorizer.
// Compared per answer: status code; Status bodies exactly (38: all but the oldest-version number
// in the message); objects: kind, apiVersion, the set of top-level and metadata keys, spec (equal
// for TrainingJob and Lease, a superset of what was sent for kinds the server defaults), status,
// generation, finalizers, managedFields managers (and fieldsV1 for TrainingJob), and whether the
// resourceVersion changed where the recording's changed; lists: kind, item names, metadata keys
// and whether continue is set; discovery: the served groups and resources.
// Not covered:
//  - 41 tokenrequest: the double does not serve serviceaccounts/token (the controller never
//    requests tokens and the double cannot mint service-account JWTs); it answers 404.
#include <dirent.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/apiserver/test_objects.h"

#ifndef HPTRAIN_KUBE_FIXTURES_DIR
#define HPTRAIN_KUBE_FIXTURES_DIR ""
#endif

namespace hptrain::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// Fixture files by number ("08" -> "08-tj-create.json"); empty when the folder is missing.
std::map<std::string, std::string> FixtureFiles() {
  std::map<std::string, std::string> files;
  DIR* dir = opendir(HPTRAIN_KUBE_FIXTURES_DIR);
  if (dir == nullptr) return files;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.size() > 8 && absl::EndsWith(name, ".json") && name[2] == '-') {
      files[name.substr(0, 2)] = std::string(HPTRAIN_KUBE_FIXTURES_DIR) + "/" + name;
    }
  }
  closedir(dir);
  return files;
}

std::set<std::string> Keys(const nlohmann::json& object) {
  std::set<std::string> keys;
  if (object.is_object()) {
    for (const auto& item : object.items()) keys.insert(item.key());
  }
  return keys;
}

// True when every field of `small` is in `big` with the same value (arrays element by element).
bool Contains(const nlohmann::json& big, const nlohmann::json& small) {
  if (small.is_object()) {
    if (!big.is_object()) return false;
    for (const auto& [key, value] : small.items()) {
      if (!big.contains(key) || !Contains(big[key], value)) return false;
    }
    return true;
  }
  if (small.is_array()) {
    if (!big.is_array() || big.size() != small.size()) return false;
    for (size_t i = 0; i < small.size(); ++i) {
      if (!Contains(big[i], small[i])) return false;
    }
    return true;
  }
  return big == small;
}

std::vector<nlohmann::json> EventLines(const std::string& body) {
  std::vector<nlohmann::json> events;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    events.push_back(nlohmann::json::parse(line));
  }
  return events;
}

std::vector<std::string> EventTypes(const std::vector<nlohmann::json>& events) {
  std::vector<std::string> types;
  for (const nlohmann::json& event : events) types.push_back(event.value("type", "?"));
  return types;
}

std::vector<std::string> Managers(const nlohmann::json& object) {
  std::vector<std::string> out;
  for (const nlohmann::json& entry :
       object["metadata"].value("managedFields", nlohmann::json::array())) {
    out.push_back(absl::StrJoin(
        {entry.value("manager", ""), entry.value("operation", ""), entry.value("subresource", "")},
        "/"));
  }
  return out;
}

class FixtureTest : public ApiServerTest {
 protected:
  void SetUp() override {
    files_ = FixtureFiles();
    if (files_.empty()) {
      GTEST_SKIP() << "recorded fixtures not found at " << HPTRAIN_KUBE_FIXTURES_DIR;
    }
    ApiServerTest::SetUp();
  }

  nlohmann::json Load(const std::string& number) {
    auto it = files_.find(number);
    if (it == files_.end()) {
      ADD_FAILURE() << "fixture " << number << " missing";
      return nlohmann::json::object();
    }
    std::ifstream in(it->second);
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str());
  }

  static nlohmann::json RecordedBody(const nlohmann::json& fixture) {
    return nlohmann::json::parse(fixture["response"]["body"].get<std::string>(), nullptr, false);
  }

  // The recorded request's path with recorded resourceVersions and continue tokens mapped.
  std::string MapPath(const std::string& path) const {
    size_t q = path.find('?');
    if (q == std::string::npos) return path;
    std::vector<std::string> params = absl::StrSplit(path.substr(q + 1), '&');
    for (std::string& param : params) {
      size_t eq = param.find('=');
      std::string key = param.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : param.substr(eq + 1);
      if (key == "resourceVersion" && rvs_.count(value)) param = key + "=" + rvs_.at(value);
      if (key == "continue" && tokens_.count(value)) param = key + "=" + tokens_.at(value);
      if (key == "timeoutSeconds") param = "timeoutSeconds=3";
    }
    return path.substr(0, q + 1) + absl::StrJoin(params, "&");
  }

  // Recorded uids and resourceVersions in a request body mapped to the double's.
  void MapBody(nlohmann::json* body) const {
    if (body->is_string() && uids_.count(body->get<std::string>())) {
      *body = uids_.at(body->get<std::string>());
    } else if (body->is_object()) {
      for (auto& [key, value] : body->items()) {
        if (key == "resourceVersion" && value.is_string() && rvs_.count(value)) {
          value = rvs_.at(value);
        } else {
          MapBody(&value);
        }
      }
    } else if (body->is_array()) {
      for (nlohmann::json& item : *body) MapBody(&item);
    }
  }

  // Sends the recorded request (mapped), then learns the mapping from the answer: recorded uid,
  // resourceVersion and continue token -> the double's. Checks that the resourceVersion changed
  // exactly where the recording's changed.
  HttpResult Replay(const nlohmann::json& fixture) {
    const nlohmann::json& request = fixture["request"];
    nlohmann::json body = request.value("body", nlohmann::json());
    MapBody(&body);
    std::string content_type;
    if (request.contains("headers")) content_type = request["headers"].value("Content-Type", "");
    // A body recorded as text (25) goes out as recorded.
    std::string text = body.is_string() ? body.get<std::string>() : body.dump();
    HttpResult result =
        client_->Send(request["method"], MapPath(request["path"]), body.is_null() ? "" : text,
                      content_type, {{"User-Agent", ""}});
    Learn(RecordedBody(fixture), result.body);
    return result;
  }

  void Learn(const nlohmann::json& recorded, const nlohmann::json& actual) {
    if (!recorded.is_object() || !actual.is_object() || !recorded.contains("metadata")) return;
    const nlohmann::json& rec_meta = recorded["metadata"];
    const nlohmann::json& meta = actual.value("metadata", nlohmann::json::object());
    if (rec_meta.contains("uid") && meta.contains("uid")) uids_[rec_meta["uid"]] = meta["uid"];
    if (rec_meta.contains("continue") && meta.contains("continue")) {
      tokens_[rec_meta["continue"]] = meta["continue"];
    }
    if (!rec_meta.contains("resourceVersion") || !meta.contains("resourceVersion")) return;
    std::string rec_rv = rec_meta["resourceVersion"];
    std::string rv = meta["resourceVersion"];
    uint64_t value = 0;
    EXPECT_TRUE(absl::SimpleAtoi(rv, &value)) << rv;
    if (recorded.contains("items")) {
      EXPECT_GE(value, max_rv_);  // a list is at least as new as what came before
      return;
    }
    if (rvs_.count(rec_rv)) {
      EXPECT_EQ(rv, rvs_[rec_rv]) << "the recording kept this resourceVersion";
    } else {
      EXPECT_GT(value, max_rv_) << "the recording moved to a new resourceVersion";
    }
    rvs_[rec_rv] = rv;
    max_rv_ = std::max(max_rv_, value);
  }

  // The comparison described at the top of the file.
  void ExpectLikeRecorded(const nlohmann::json& fixture, const HttpResult& actual) {
    SCOPED_TRACE(fixture.value("name", "?"));
    EXPECT_EQ(actual.status, fixture["response"]["status"]) << actual.text;
    nlohmann::json expected = RecordedBody(fixture);
    ASSERT_FALSE(actual.body.is_discarded()) << actual.text;
    const nlohmann::json& got = actual.body;
    EXPECT_EQ(got.value("kind", ""), expected.value("kind", ""));
    EXPECT_EQ(got.value("apiVersion", ""), expected.value("apiVersion", ""));
    if (expected.value("kind", "") == "Status") {
      EXPECT_EQ(got, expected);
      return;
    }
    if (expected.contains("items")) {
      std::vector<std::string> want, have;
      for (const nlohmann::json& item : expected["items"]) want.push_back(item["metadata"]["name"]);
      for (const nlohmann::json& item : got["items"]) have.push_back(item["metadata"]["name"]);
      EXPECT_EQ(have, want);
      EXPECT_EQ(Keys(got["metadata"]), Keys(expected["metadata"]));
      EXPECT_EQ(got["metadata"].value("continue", "").empty(),
                expected["metadata"].value("continue", "").empty());
      return;
    }
    EXPECT_EQ(Keys(got), Keys(expected));
    EXPECT_EQ(Keys(got["metadata"]), Keys(expected["metadata"]));
    for (const char* key : {"name", "namespace", "generation", "labels", "finalizers"}) {
      EXPECT_EQ(got["metadata"].value(key, nlohmann::json()),
                expected["metadata"].value(key, nlohmann::json()))
          << key;
    }
    EXPECT_EQ(Managers(got), Managers(expected));
    const nlohmann::json sent = fixture["request"].value("body", nlohmann::json());
    std::string kind = expected.value("kind", "");
    if (kind == "TrainingJob" || kind == "Lease") {
      EXPECT_EQ(got.value("spec", nlohmann::json()), expected.value("spec", nlohmann::json()));
    } else if (sent.is_object() && sent.contains("spec") &&
               fixture["request"]["method"] == "POST") {
      EXPECT_TRUE(Contains(got["spec"], sent["spec"])) << got["spec"] << " lacks " << sent["spec"];
    }
    if (kind == "TrainingJob") {
      EXPECT_EQ(got.value("status", nlohmann::json()), expected.value("status", nlohmann::json()));
      for (size_t i = 0; i < got["metadata"]["managedFields"].size(); ++i) {
        EXPECT_EQ(got["metadata"]["managedFields"][i]["fieldsV1"],
                  expected["metadata"]["managedFields"][i]["fieldsV1"]);
      }
    }
    if (kind == "Pod") {
      EXPECT_EQ(got["status"]["phase"], expected["status"]["phase"]);
    }
  }

  // Replays and compares in one step.
  HttpResult Step(const std::string& number) {
    nlohmann::json fixture = Load(number);
    HttpResult result = Replay(fixture);
    ExpectLikeRecorded(fixture, result);
    return result;
  }

  std::map<std::string, std::string> files_;
  std::map<std::string, std::string> uids_, rvs_, tokens_;
  uint64_t max_rv_ = 0;
};

TEST_F(FixtureTest, RecordedSequenceReplays) {
  {  // 01: /version
    nlohmann::json fixture = Load("01");
    HttpResult result = Replay(fixture);
    ASSERT_EQ(result.status, 200);
    nlohmann::json expected = RecordedBody(fixture);
    EXPECT_EQ(Keys(result.body), Keys(expected));
    for (const char* key : {"major", "minor", "gitVersion"})
      EXPECT_EQ(result.body[key], expected[key]);
  }
  {  // 02: /api
    nlohmann::json fixture = Load("02");
    HttpResult result = Replay(fixture);
    ASSERT_EQ(result.status, 200);
    nlohmann::json expected = RecordedBody(fixture);
    EXPECT_EQ(Keys(result.body), Keys(expected));
    EXPECT_EQ(result.body["kind"], expected["kind"]);
    EXPECT_EQ(result.body["versions"], expected["versions"]);
  }
  {  // 03: the stand-in CRD; its status starts empty
    nlohmann::json fixture = Load("03");
    HttpResult result = Step("03");
    EXPECT_EQ(result.body["status"], RecordedBody(fixture)["status"]);
  }
  {  // 04: then Established
    nlohmann::json fixture = Load("04");
    HttpResult result = Step("04");
    nlohmann::json expected = RecordedBody(fixture);
    EXPECT_EQ(result.body["status"]["acceptedNames"], expected["status"]["acceptedNames"]);
    ASSERT_EQ(result.body["status"]["conditions"].size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(Keys(result.body["status"]["conditions"][i]),
                Keys(expected["status"]["conditions"][i]));
      EXPECT_EQ(result.body["status"]["conditions"][i]["type"],
                expected["status"]["conditions"][i]["type"]);
    }
  }
  {  // 05: every group the double serves is a real group, hptrain.io exactly as recorded
    nlohmann::json fixture = Load("05");
    HttpResult result = Replay(fixture);
    ASSERT_EQ(result.status, 200);
    nlohmann::json expected = RecordedBody(fixture);
    EXPECT_EQ(Keys(result.body), Keys(expected));
    std::map<std::string, nlohmann::json> recorded;
    for (const nlohmann::json& group : expected["groups"]) recorded[group["name"]] = group;
    for (const nlohmann::json& group : result.body["groups"]) {
      ASSERT_TRUE(recorded.count(group["name"])) << group;
      EXPECT_EQ(group, recorded[group["name"]]);
    }
  }
  {  // 06: resources of hptrain.io/v1alpha1
    nlohmann::json fixture = Load("06");
    HttpResult result = Replay(fixture);
    ASSERT_EQ(result.status, 200);
    nlohmann::json expected = RecordedBody(fixture);
    EXPECT_EQ(Keys(result.body), Keys(expected));
    EXPECT_EQ(result.body["groupVersion"], expected["groupVersion"]);
    ASSERT_EQ(result.body["resources"].size(), expected["resources"].size());
    for (size_t i = 0; i < expected["resources"].size(); ++i) {
      nlohmann::json got = result.body["resources"][i];
      nlohmann::json want = expected["resources"][i];
      EXPECT_EQ(Keys(got), Keys(want)) << want["name"];
      got.erase("storageVersionHash");
      want.erase("storageVersionHash");
      EXPECT_EQ(got, want);
    }
  }
  {  // 07: watch while an object is created, spec-patched, status-patched and deleted
    nlohmann::json fixture = Load("07");
    std::vector<nlohmann::json> recorded = EventLines(fixture["response"]["body"]);
    WatchStream watch(port_, MapPath(fixture["request"]["path"]));
    ASSERT_TRUE(WaitForWatches(*server_, "trainingjobs", 1));
    nlohmann::json object = recorded[0]["object"];
    nlohmann::json create = {
        {"apiVersion", object["apiVersion"]},
        {"kind", object["kind"]},
        {"metadata",
         {{"name", object["metadata"]["name"]}, {"labels", object["metadata"]["labels"]}}},
        {"spec", object["spec"]}};
    const std::string path = TjPath("fixtures");
    ASSERT_EQ(client_->Post(path, create).status, 201);
    ASSERT_EQ(client_
                  ->Patch(path + "/watched", {{"spec", recorded[1]["object"]["spec"]}},
                          "application/merge-patch+json")
                  .status,
              200);
    ASSERT_EQ(client_
                  ->Patch(path + "/watched/status", {{"status", recorded[2]["object"]["status"]}},
                          "application/merge-patch+json")
                  .status,
              200);
    ASSERT_EQ(client_->Delete(path + "/watched").status, 200);
    ASSERT_TRUE(watch.WaitForEnd(kWait));
    EXPECT_EQ(watch.status(), fixture["response"]["status"]);
    std::vector<nlohmann::json> events = watch.events();
    EXPECT_EQ(EventTypes(events), EventTypes(recorded));
    for (size_t i = 0; i < std::min(events.size(), recorded.size()); ++i) {
      const nlohmann::json& got = events[i]["object"];
      const nlohmann::json& want = recorded[i]["object"];
      EXPECT_EQ(got["metadata"]["generation"], want["metadata"]["generation"]) << i;
      EXPECT_EQ(got["spec"], want["spec"]) << i;
      EXPECT_EQ(got.value("status", nlohmann::json()), want.value("status", nlohmann::json())) << i;
      EXPECT_EQ(Keys(got["metadata"]), Keys(want["metadata"])) << i;
    }
  }
  for (const char* number :
       {"08", "09", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19", "20", "21",
        "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32", "33", "34", "35"}) {
    HttpResult result = Step(number);
    if (std::string(number) == "30") {
      EXPECT_EQ(result.body["data"], RecordedBody(Load("30"))["data"]);
    }
  }
  {  // 36: watch pods from a resourceVersion while the owner is deleted in the background
    nlohmann::json fixture = Load("36");
    std::vector<nlohmann::json> recorded = EventLines(fixture["response"]["body"]);
    WatchStream watch(port_, MapPath(fixture["request"]["path"]));
    ASSERT_TRUE(WaitForWatches(*server_, "pods", 1));
    ASSERT_EQ(
        client_->Delete(TjPath("fixtures", "resnet") + "?propagationPolicy=Background").status,
        200);
    ASSERT_TRUE(watch.WaitForEnd(kWait));
    std::vector<nlohmann::json> events = watch.events();
    ASSERT_EQ(EventTypes(events), EventTypes(recorded));
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(Keys(events[i]["object"]["metadata"]), Keys(recorded[i]["object"]["metadata"]));
      EXPECT_EQ(events[i]["object"]["metadata"]["name"], recorded[i]["object"]["metadata"]["name"]);
    }
    nlohmann::json bookmark = recorded[2]["object"];
    bookmark["metadata"]["resourceVersion"] = events[2]["object"]["metadata"]["resourceVersion"];
    EXPECT_EQ(events[2]["object"], bookmark);
    uint64_t deleted_rv = 0, bookmark_rv = 0;
    ASSERT_TRUE(absl::SimpleAtoi(events[1]["object"]["metadata"].value("resourceVersion", ""),
                                 &deleted_rv));
    ASSERT_TRUE(absl::SimpleAtoi(bookmark["metadata"].value("resourceVersion", ""), &bookmark_rv));
    EXPECT_GE(bookmark_rv, deleted_rv);
  }
  Step("37");
  {  // 38: too old resourceVersion: HTTP 200, one ERROR event with a 410 Status
    nlohmann::json fixture = Load("38");
    std::vector<nlohmann::json> recorded = EventLines(fixture["response"]["body"]);
    WatchStream watch(port_, MapPath(fixture["request"]["path"]));
    ASSERT_TRUE(watch.WaitForEnd(kWait));
    EXPECT_EQ(watch.status(), 200);
    std::vector<nlohmann::json> events = watch.events();
    ASSERT_EQ(EventTypes(events), EventTypes(recorded));
    nlohmann::json got = events[0]["object"];
    nlohmann::json want = recorded[0]["object"];
    EXPECT_TRUE(
        absl::StartsWith(got["message"].get<std::string>(), "too old resource version: 1 ("))
        << got;
    got.erase("message");
    want.erase("message");
    EXPECT_EQ(got, want);
  }
}

TEST_F(FixtureTest, UnauthorizedMatchesFixture40) {
  server_->AddToken("the-only-valid-token", "admin");
  Step("40");
}

TEST_F(FixtureTest, ForbiddenMatchesFixture42) {
  // The recording's token stood for the service account "nobody", which had no RBAC rules.
  server_->AddToken("<token>", "system:serviceaccount:fixtures:nobody");
  server_->SetAuthorizer(RbacAuthorizer("system:serviceaccount:fixtures:nobody", {}));
  nlohmann::json fixture = Load("42");
  HttpResult result = client_->Send("GET", fixture["request"]["path"], "", "",
                                    {{"Authorization", "Bearer <token>"}});
  ExpectLikeRecorded(fixture, result);
}

TEST_F(FixtureTest, EveryFixtureIsCoveredOrExplained) {
  const std::set<std::string> covered = {
      "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13", "14",
      "15", "16", "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28",
      "29", "30", "31", "32", "33", "34", "35", "36", "37", "38", "40", "42"};
  const std::set<std::string> not_served = {"41"};  // serviceaccounts/token: see the top comment
  for (const auto& [number, path] : files_) {
    EXPECT_TRUE(covered.count(number) || not_served.count(number))
        << path << " is new: replay it here or explain why not";
  }
  nlohmann::json fixture = Load("41");
  HttpResult result = Replay(fixture);
  EXPECT_EQ(result.status, 404) << "the double does not serve serviceaccounts/token";
}

}  // namespace
}  // namespace hptrain::testing
