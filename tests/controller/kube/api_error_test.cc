#include "controller/kube/api_error.h"

#include <gtest/gtest.h>

#include "runtime/base/status.h"

namespace hptrain::kube {
namespace {

TEST(KubeApiErrorTest, NotFoundStatusBecomesOneLineWithCodeAndReason) {
  absl::Status status = StatusFromResponse(
      404, R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
           R"("message":"trainingjobs.hptrain.io \"nope\" not found","reason":"NotFound",)"
           R"("details":{"name":"nope","group":"hptrain.io","kind":"trainingjobs"},"code":404})");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "trainingjobs.hptrain.io \"nope\" not found (404 NotFound)");
  EXPECT_TRUE(kube::IsNotFound(status));
  EXPECT_FALSE(IsConflict(status));
  std::optional<ApiError> error = GetApiError(status);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, 404);
  EXPECT_EQ(error->reason, "NotFound");
  EXPECT_EQ(error->name, "nope");
  EXPECT_EQ(error->group, "hptrain.io");
  EXPECT_EQ(error->kind, "trainingjobs");
}

TEST(KubeApiErrorTest, ConflictAndAlreadyExistsAreDistinguishedByReason) {
  absl::Status exists = StatusFromResponse(
      409, R"({"kind":"Status","message":"x already exists","reason":"AlreadyExists","code":409})");
  absl::Status conflict = StatusFromResponse(
      409, R"({"kind":"Status","message":"modified","reason":"Conflict","code":409})");
  EXPECT_TRUE(kube::IsAlreadyExists(exists));
  EXPECT_FALSE(IsConflict(exists));
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_FALSE(kube::IsAlreadyExists(conflict));
}

TEST(KubeApiErrorTest, HttpCodesMapToAbslCodes) {
  EXPECT_EQ(CodeForHttpStatus(401, ""), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CodeForHttpStatus(403, ""), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CodeForHttpStatus(410, "Expired"), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CodeForHttpStatus(422, "Invalid"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeForHttpStatus(429, ""), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CodeForHttpStatus(500, ""), absl::StatusCode::kInternal);
  EXPECT_EQ(CodeForHttpStatus(503, ""), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CodeForHttpStatus(504, ""), absl::StatusCode::kUnavailable);
}

TEST(KubeApiErrorTest, NonStatusBodyIsShortenedToOneLine) {
  std::string html = "<html>\n<body>\n" + std::string(500, 'x') + "\n</body></html>";
  absl::Status status = StatusFromResponse(502, html);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(std::string(status.message()).find('\n'), std::string::npos);
  EXPECT_LT(status.message().size(), 260u);
  EXPECT_EQ(status.message().substr(0, 9), "HTTP 502:");
}

TEST(KubeApiErrorTest, InStreamGoneIsGone) {
  nlohmann::json status_object = {{"kind", "Status"},
                                  {"status", "Failure"},
                                  {"message", "too old resource version: 1 (216)"},
                                  {"reason", "Expired"},
                                  {"code", 410}};
  absl::Status status = StatusFromStatusObject(status_object, 500);
  EXPECT_TRUE(IsGone(status));
  EXPECT_EQ(status.message(), "too old resource version: 1 (216) (410 Expired)");
}

TEST(KubeApiErrorTest, ContextKeepsTheDetailsAndHelpersFallBackToTheCode) {
  absl::Status original = StatusFromResponse(
      410, R"({"kind":"Status","message":"gone","reason":"Expired","code":410})");
  // HPTRAIN_RETURN_IF_ERROR's context keeps the API error's details.
  absl::Status annotated = Annotate(original, "listing pods");
  ASSERT_TRUE(GetApiError(annotated).has_value());
  EXPECT_EQ(GetApiError(annotated)->reason, "Expired");
  EXPECT_TRUE(IsGone(annotated));
  // A status that lost its payload (rebuilt elsewhere) still answers from its code.
  absl::Status bare(original.code(), "listing pods: gone");
  EXPECT_FALSE(GetApiError(bare).has_value());
  EXPECT_TRUE(IsGone(bare));
  // A payload that says otherwise wins over the code.
  absl::Status other = StatusFromResponse(400, "bad");
  EXPECT_FALSE(IsGone(other));
  EXPECT_FALSE(kube::IsNotFound(absl::OkStatus()));
}

TEST(KubeApiErrorTest, CausesSurviveTheRoundTrip) {
  ApiError error;
  error.code = 422;
  error.reason = "Invalid";
  error.message = "bad";
  error.causes = {{"FieldValueInvalid", "must be >= 0", "spec.replicas"}};
  absl::Status status = ToStatus(error);
  EXPECT_TRUE(IsInvalid(status));
  std::optional<ApiError> back = GetApiError(status);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->causes.size(), 1u);
  EXPECT_EQ(back->causes[0].field, "spec.replicas");
  EXPECT_EQ(back->causes[0].reason, "FieldValueInvalid");
  EXPECT_EQ(back->causes[0].message, "must be >= 0");
}

}  // namespace
}  // namespace hptrain::kube
