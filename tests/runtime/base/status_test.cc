// Context added by HPTRAIN_RETURN_IF_ERROR keeps the code and the payloads of the original error.
#include "runtime/base/status.h"

#include "gtest/gtest.h"

namespace hptrain {
namespace {

absl::Status Fails() {
  absl::Status s = absl::NotFoundError("pods \"p\" not found");
  s.SetPayload("type.hptrain.io/detail", absl::Cord("reason=NotFound"));
  return s;
}

absl::Status Caller() {
  HPTRAIN_RETURN_IF_ERROR(Fails(), "deleting pod ", 3);
  return absl::OkStatus();
}

TEST(Status, AnnotateKeepsCodeAndPayloads) {
  absl::Status s = Caller();
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_EQ(s.message(), "deleting pod 3: pods \"p\" not found");
  auto payload = s.GetPayload("type.hptrain.io/detail");
  ASSERT_TRUE(payload.has_value());
  EXPECT_EQ(std::string(*payload), "reason=NotFound");
}

}  // namespace
}  // namespace hptrain
