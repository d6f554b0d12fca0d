#include "runtime/ps/ps_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/ps/grpc_status.h"
#include "runtime/ps/ps_wire.h"

namespace hptrain::ps {

using grpc::ServerContext;
using grpc::Status;

PsService::PsService(std::string token, ParamStore* store, std::chrono::milliseconds max_wait)
    : token_(std::move(token)), store_(store), max_wait_(max_wait) {}

Status PsService::Authorize(ServerContext* context) {
  const std::string reason = TokenRejection(*context, token_);
  if (reason.empty()) return Status::OK;
  if (on_unauthenticated_) on_unauthenticated_(reason);
  return Unauthenticated(reason);
}

std::chrono::milliseconds PsService::WaitBudget(ServerContext* context) const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      context->deadline() - std::chrono::system_clock::now());
  return std::max(std::chrono::milliseconds(0), std::min(left, max_wait_));
}

#define HPTRAIN_PS_AUTHORIZE(context)          \
  do {                                         \
    grpc::Status auth = Authorize(context);    \
    if (!auth.ok()) return auth;               \
  } while (0)

Status PsService::Init(ServerContext* context, grpc::ServerReader<v1::InitRequest>* reader,
                       v1::InitResponse* response) {
  HPTRAIN_PS_AUTHORIZE(context);
  v1::InitHeader header;
  std::string bytes;
  absl::Status read =
      ReadChunked<v1::InitRequest>(reader, &header, &bytes, "parameter-server init");
  if (!read.ok()) return ToGrpc(read);
  absl::StatusOr<std::map<std::string, std::vector<float>>> sections =
      ParseSections(bytes, "parameter-server init");
  if (!sections.ok()) return ToGrpc(sections.status());
  ShardLayoutInfo layout;
  layout.shard = header.layout().shard();
  layout.shards = header.layout().shards();
  layout.begin = header.layout().begin();
  layout.end = header.layout().end();
  layout.tensor_sizes.assign(header.layout().tensor_sizes().begin(),
                             header.layout().tensor_sizes().end());
  layout.world_size = header.layout().world_size();
  layout.membership_epoch = header.membership_epoch();
  ShardState state;
  state.version = header.version();
  state.optimizer_steps = header.optimizer_steps();
  state.sections = *std::move(sections);
  absl::Status status = store_->Init(header.rank(), layout, state);
  if (!status.ok()) return ToGrpc(status);
  response->set_version(state.version);
  return Status::OK;
}

Status PsService::Push(ServerContext* context, grpc::ServerReader<v1::PushRequest>* reader,
                       v1::PushResponse* response) {
  HPTRAIN_PS_AUTHORIZE(context);
  v1::PushHeader header;
  std::string bytes;
  absl::Status read = ReadChunked<v1::PushRequest>(reader, &header, &bytes, "push");
  if (!read.ok()) return ToGrpc(read);
  const std::string what =
      absl::StrCat("push of rank ", header.rank(), " for step ", header.step());
  absl::StatusOr<std::vector<std::vector<uint8_t>>> tensors = ParseTensors(bytes, what.c_str());
  if (!tensors.ok()) return ToGrpc(tensors.status());
  PushInfo push;
  push.rank = header.rank();
  push.step = header.step();
  push.version = header.version();
  push.batch_size = header.batch_size();
  push.lr = header.lr();
  push.begin = header.begin();
  push.end = header.end();
  push.schedule = header.schedule();
  push.membership_epoch = header.membership_epoch();
  absl::StatusOr<int64_t> version = store_->Push(push, *tensors);
  if (!version.ok()) return ToGrpc(version.status());
  response->set_version(*version);
  return Status::OK;
}

Status PsService::Pull(ServerContext* context, const v1::PullRequest* request,
                       grpc::ServerWriter<v1::PullResponse>* writer) {
  HPTRAIN_PS_AUTHORIZE(context);
  absl::StatusOr<PullResult> result =
      store_->Pull(request->rank(), request->min_version(), request->bits(), WaitBudget(context),
                   request->membership_epoch());
  if (!result.ok()) return ToGrpc(result.status());
  absl::StatusOr<std::string> bytes = SerializeTensors(result->tensors);
  if (!bytes.ok()) return ToGrpc(bytes.status());
  v1::PullHeader header;
  header.set_version(result->version);
  return ToGrpc(WriteChunked<v1::PullResponse>(writer, header, *bytes, "pull"));
}

Status PsService::GetState(ServerContext* context, const v1::GetStateRequest* request,
                           grpc::ServerWriter<v1::GetStateResponse>* writer) {
  HPTRAIN_PS_AUTHORIZE(context);
  absl::StatusOr<ShardState> state = store_->GetState(request->version(), WaitBudget(context));
  if (!state.ok()) return ToGrpc(state.status());
  absl::StatusOr<std::string> bytes = SerializeSections(state->sections);
  if (!bytes.ok()) return ToGrpc(bytes.status());
  v1::PullHeader header;
  header.set_version(state->version);
  return ToGrpc(WriteChunked<v1::GetStateResponse>(writer, header, *bytes, "state"));
}

}  // namespace hptrain::ps
