#include "runtime/ps/ps_client.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "runtime/base/status.h"
#include "runtime/ps/grpc_status.h"
#include "runtime/ps/ps_wire.h"
#include "runtime/ps/tls_credentials.h"

namespace hptrain::ps {

std::string ShardAddressKey(int shard) { return absl::StrCat("ps/shard/", shard); }

PsClient::PsClient(std::vector<std::string> addresses, std::string token,
                   std::chrono::milliseconds timeout)
    : addresses_(std::move(addresses)), token_(std::move(token)), timeout_(timeout) {
  for (const std::string& address : addresses_) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    stubs_.push_back(v1::ParameterServer::NewStub(
        grpc::CreateCustomChannel(address, DefaultChannelCredentials(), args)));
  }
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Discover(comm::KeyValueStore& store,
                                                             int shards, std::string token,
                                                             std::chrono::milliseconds timeout) {
  std::vector<std::string> addresses;
  for (int s = 0; s < shards; ++s) {
    absl::StatusOr<std::string> address = store.Get(ShardAddressKey(s), timeout);
    if (!address.ok()) {
      return absl::Status(address.status().code(),
                          absl::StrCat("parameter server shard ", s, " did not register: ",
                                       address.status().message()));
    }
    addresses.push_back(*address);
  }
  return std::make_unique<PsClient>(std::move(addresses), std::move(token), timeout);
}

// Registers its context with the client for the call's life; `refused` when the client was
// cancelled before the call could start.
class PsClient::Call {
 public:
  explicit Call(PsClient* client) : client_(client) {
    client_->Prepare(&context);
    std::lock_guard<std::mutex> lock(client_->calls_mu_);
    refused = client_->cancelled();
    if (!refused) client_->calls_.insert(&context);
  }
  ~Call() {
    std::lock_guard<std::mutex> lock(client_->calls_mu_);
    client_->calls_.erase(&context);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  grpc::ClientContext context;
  bool refused = false;

 private:
  PsClient* client_;
};

void PsClient::CancelPending() {
  std::lock_guard<std::mutex> lock(calls_mu_);
  set_cancelled(true);
  for (grpc::ClientContext* context : calls_) context->TryCancel();
}

void PsClient::Prepare(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() + timeout_);
  context->AddMetadata(kAuthMetadataKey, "Bearer " + token_);
}

absl::Status PsClient::Failed(int shard, const char* call, const absl::Status& status) const {
  const char* unreachable = absl::IsUnavailable(status) ? " unreachable" : "";
  return absl::Status(status.code(),
                      absl::StrCat("parameter server shard ", shard, " (", addresses_[shard], ")",
                                   unreachable, " ", call, ": ", status.message()));
}

namespace {

// Streams `header` and `bytes` through a client-streaming call's writer and finishes the call;
// the call's own error comes first (a refused stream breaks the writes too).
template <typename Request, typename Header, typename Writer>
absl::Status SendAndFinish(Writer* writer, const Header& header, const std::string& bytes,
                           const char* what) {
  absl::Status sent = WriteChunked<Request>(writer, header, bytes, what);
  writer->WritesDone();
  absl::Status status = FromGrpc(writer->Finish());
  return status.ok() ? sent : status;
}

// Reads a server-streaming call's header and bytes and finishes the call; the call's own error
// comes first.
template <typename Response, typename Reader>
absl::Status ReceiveAndFinish(Reader* reader, v1::PullHeader* header, std::string* bytes,
                              const char* what) {
  absl::Status read = ReadChunked<Response>(reader, header, bytes, what);
  absl::Status status = FromGrpc(reader->Finish());
  return status.ok() ? read : status;
}

}  // namespace

absl::Status PsClient::Init(int shard, int rank, const ShardLayoutInfo& layout,
                            const ShardState& state) {
  v1::InitHeader header;
  header.set_rank(rank);
  v1::ShardLayout* l = header.mutable_layout();
  l->set_shard(layout.shard);
  l->set_shards(layout.shards);
  l->set_begin(layout.begin);
  l->set_end(layout.end);
  for (int64_t n : layout.tensor_sizes) l->add_tensor_sizes(n);
  l->set_world_size(layout.world_size);
  header.set_version(state.version);
  header.set_optimizer_steps(state.optimizer_steps);
  header.set_membership_epoch(membership_epoch());
  HPTRAIN_ASSIGN_OR_RETURN(std::string bytes, SerializeSections(state.sections));
  Call call(this);
  if (call.refused) return CancelledCall(shard, "Init");
  v1::InitResponse response;
  auto writer = stubs_[shard]->Init(&call.context, &response);
  absl::Status status = SendAndFinish<v1::InitRequest>(writer.get(), header, bytes, "init");
  if (!status.ok()) return Failed(shard, "Init", status);
  CountSent(StateBytes(state));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsClient::Push(int shard, const PushInfo& push,
                                       const std::vector<std::vector<uint8_t>>& tensors) {
  v1::PushHeader header;
  header.set_rank(push.rank);
  header.set_step(push.step);
  header.set_version(push.version);
  header.set_batch_size(push.batch_size);
  header.set_lr(push.lr);
  header.set_begin(push.begin);
  header.set_end(push.end);
  header.set_schedule(push.schedule);
  header.set_membership_epoch(membership_epoch());
  HPTRAIN_ASSIGN_OR_RETURN(std::string bytes, SerializeTensors(tensors));
  Call call(this);
  if (call.refused) return CancelledCall(shard, "Push");
  v1::PushResponse response;
  auto writer = stubs_[shard]->Push(&call.context, &response);
  absl::Status status = SendAndFinish<v1::PushRequest>(writer.get(), header, bytes, "push");
  if (!status.ok()) return Failed(shard, "Push", status);
  CountSent(PayloadBytes(tensors));
  return response.version();
}

absl::StatusOr<PullResult> PsClient::Pull(int shard, int rank, int64_t min_version, int bits) {
  v1::PullRequest request;
  request.set_rank(rank);
  request.set_min_version(min_version);
  request.set_bits(bits);
  request.set_membership_epoch(membership_epoch());
  Call call(this);
  if (call.refused) return CancelledCall(shard, "Pull");
  auto reader = stubs_[shard]->Pull(&call.context, request);
  v1::PullHeader header;
  std::string bytes;
  absl::Status status =
      ReceiveAndFinish<v1::PullResponse>(reader.get(), &header, &bytes, "pull");
  if (!status.ok()) return Failed(shard, "Pull", status);
  PullResult result;
  result.version = header.version();
  absl::StatusOr<std::vector<std::vector<uint8_t>>> tensors = ParseTensors(bytes, "pull");
  if (!tensors.ok()) return Failed(shard, "Pull", tensors.status());
  result.tensors = *std::move(tensors);
  CountReceived(PayloadBytes(result.tensors));
  return result;
}

absl::StatusOr<ShardState> PsClient::GetState(int shard, int64_t version) {
  v1::GetStateRequest request;
  request.set_version(version);
  Call call(this);
  if (call.refused) return CancelledCall(shard, "GetState");
  auto reader = stubs_[shard]->GetState(&call.context, request);
  v1::PullHeader header;
  std::string bytes;
  absl::Status status =
      ReceiveAndFinish<v1::GetStateResponse>(reader.get(), &header, &bytes, "state");
  if (!status.ok()) return Failed(shard, "GetState", status);
  ShardState state;
  state.version = header.version();
  state.optimizer_steps = header.version();
  absl::StatusOr<std::map<std::string, std::vector<float>>> sections =
      ParseSections(bytes, "state");
  if (!sections.ok()) return Failed(shard, "GetState", sections.status());
  state.sections = *std::move(sections);
  CountReceived(StateBytes(state));
  return state;
}

}  // namespace hptrain::ps
