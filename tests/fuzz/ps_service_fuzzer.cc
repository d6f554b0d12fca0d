// libFuzzer target: the parameter server's request handling (runtime/ps/ps_service.cc) without a
// network. PsService's streaming handlers take gRPC's concrete stream classes, which only a
// server can create, so this runs their bodies over the same functions: ReadChunked over the
// decoded stream messages, ParseSections / ParseTensors, ParamStore::Init / Push / Pull /
// GetState, and SerializeTensors / WriteChunked for the answers. A fresh shard (2 workers,
// tensors of 5 and 1100 elements, SGD with momentum, staleness bound 1) takes each input's calls
// in order (fuzz_input.h records):
//   selector % 4: 0 Init, 1 Push (streams), 2 Pull, 3 GetState (unary requests);
//   selector bit 0x40 on a stream: the payload is [header message][byte string] (u16-length-
//   prefixed) and is cut into chunks here, with valid CRCs, of ((selector >> 2) & 0xf) * 64 + 1
//   bytes (0xf: the largest chunk); otherwise the payload is the stream's messages, u16-length-
//   prefixed, as they would arrive.
// Every call must return a status; every pulled tensor must decode as the shard's tensor; the
// shard's parameters must stay finite-sized and its version must never go backwards.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "proto/hptrain/v1/ps.pb.h"
#include "runtime/comm/encoded_tensor_proto.h"
#include "runtime/ps/param_store.h"
#include "runtime/ps/ps_codec.h"
#include "runtime/ps/ps_wire.h"
#include "tests/fuzz/fuzz_input.h"

namespace hptrain::fuzz {
namespace {

namespace v1 = hptrain::v1;

const std::vector<int64_t> kTensorSizes = {5, 1100};
constexpr int64_t kTotal = 1105;
constexpr int kWorld = 2;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "ps fuzz: %s\n", what.c_str());
  std::abort();
}

// What ReadChunked reads from: a list of messages.
template <typename Message>
class FakeReader {
 public:
  explicit FakeReader(std::vector<Message> messages) : messages_(std::move(messages)) {}
  bool Read(Message* m) {
    if (next_ >= messages_.size()) return false;
    *m = messages_[next_++];
    return true;
  }

 private:
  std::vector<Message> messages_;
  size_t next_ = 0;
};

// What WriteChunked writes to.
template <typename Message>
struct FakeWriter {
  bool Write(const Message& m) {
    messages.push_back(m);
    return true;
  }
  std::vector<Message> messages;
};

// The stream of a request with a `header` and `chunk` oneof, from a record (see the top).
template <typename Message, typename Header>
std::vector<Message> Stream(const Record& record, bool* ok) {
  std::vector<Message> out;
  *ok = true;
  if (record.selector & 0x40) {
    std::vector<std::string> parts =
        Pieces(reinterpret_cast<const uint8_t*>(record.payload.data()), record.payload.size());
    Message first;
    if (parts.empty() || !first.mutable_header()->ParseFromString(parts[0])) {
      *ok = false;
      return out;
    }
    out.push_back(first);
    const size_t chunk_bytes = ((record.selector >> 2) & 0xf) == 0xf
                                   ? comm::kMaxChunkDataBytes
                                   : ((record.selector >> 2) & 0xf) * 64 + 1;
    auto chunks = comm::SplitIntoChunks("fuzz", parts.size() > 1 ? parts[1] : "", chunk_bytes);
    if (!chunks.ok()) Fail("splitting a byte string failed: " + chunks.status().ToString());
    for (v1::TensorChunk& chunk : *chunks) {
      Message m;
      *m.mutable_chunk() = std::move(chunk);
      out.push_back(std::move(m));
    }
    return out;
  }
  for (const std::string& piece :
       Pieces(reinterpret_cast<const uint8_t*>(record.payload.data()), record.payload.size())) {
    Message m;
    if (!m.ParseFromString(piece)) {
      *ok = false;
      return out;
    }
    out.push_back(std::move(m));
  }
  return out;
}

ps::ParamStoreConfig Config() {
  ps::ParamStoreConfig config;
  config.shard = 0;
  config.world_size = kWorld;
  config.global_batch = 64;
  config.optimizer.type = "sgd";
  config.optimizer.lr = 0.1;
  config.optimizer.momentum = 0.9;
  config.max_lead = 1;
  return config;
}

// PsService::Init's body.
void Init(ps::ParamStore& store, const Record& record) {
  bool ok = false;
  FakeReader<v1::InitRequest> reader(Stream<v1::InitRequest, v1::InitHeader>(record, &ok));
  if (!ok) return;
  v1::InitHeader header;
  std::string bytes;
  if (!ps::ReadChunked<v1::InitRequest>(&reader, &header, &bytes, "init").ok()) return;
  auto sections = ps::ParseSections(bytes, "init");
  if (!sections.ok()) return;
  ps::ShardLayoutInfo layout;
  layout.shard = header.layout().shard();
  layout.shards = header.layout().shards();
  layout.begin = header.layout().begin();
  layout.end = header.layout().end();
  layout.tensor_sizes.assign(header.layout().tensor_sizes().begin(),
                             header.layout().tensor_sizes().end());
  layout.world_size = header.layout().world_size();
  ps::ShardState state;
  state.version = header.version();
  state.optimizer_steps = header.optimizer_steps();
  state.sections = *std::move(sections);
  (void)store.Init(header.rank(), layout, state);
}

// PsService::Push's body.
void Push(ps::ParamStore& store, const Record& record) {
  bool ok = false;
  FakeReader<v1::PushRequest> reader(Stream<v1::PushRequest, v1::PushHeader>(record, &ok));
  if (!ok) return;
  v1::PushHeader header;
  std::string bytes;
  if (!ps::ReadChunked<v1::PushRequest>(&reader, &header, &bytes, "push").ok()) return;
  auto tensors = ps::ParseTensors(bytes, "push");
  if (!tensors.ok()) return;
  ps::PushInfo push;
  push.rank = header.rank();
  push.step = header.step();
  push.version = header.version();
  push.batch_size = header.batch_size();
  push.lr = header.lr();
  push.begin = header.begin();
  push.end = header.end();
  push.schedule = header.schedule();
  (void)store.Push(push, *tensors);
}

// PsService::Pull's body, and the worker's check of what it got.
void Pull(ps::ParamStore& store, const Record& record) {
  v1::PullRequest request;
  if (!request.ParseFromString(record.payload)) return;
  auto result = store.Pull(request.rank(), request.min_version(), request.bits(),
                           std::chrono::milliseconds(0));
  if (!result.ok()) return;
  if (result->tensors.size() != kTensorSizes.size()) Fail("a pull without every tensor");
  for (size_t t = 0; t < kTensorSizes.size(); ++t) {
    if (!ps::DecodePsTensor(result->tensors[t], kTensorSizes[t], "pull").ok()) {
      Fail("a pulled tensor does not decode as the shard's tensor");
    }
  }
  auto bytes = ps::SerializeTensors(result->tensors);
  if (!bytes.ok()) Fail("pulled tensors do not serialize");
  v1::PullHeader header;
  header.set_version(result->version);
  FakeWriter<v1::PullResponse> writer;
  if (!ps::WriteChunked<v1::PullResponse>(&writer, header, *bytes, "pull").ok()) {
    Fail("a pull could not be written");
  }
}

// PsService::GetState's body.
void GetState(ps::ParamStore& store, const Record& record) {
  v1::GetStateRequest request;
  if (!request.ParseFromString(record.payload)) return;
  auto state = store.GetState(request.version(), std::chrono::milliseconds(0));
  if (!state.ok()) return;
  auto params = state->sections.find("params");
  if (params == state->sections.end() || params->second.size() != static_cast<size_t>(kTotal)) {
    Fail("the state has no parameters of the shard's size");
  }
  auto bytes = ps::SerializeSections(state->sections);
  if (!bytes.ok()) Fail("the state does not serialize");
  v1::PullHeader header;
  header.set_version(state->version);
  FakeWriter<v1::GetStateResponse> writer;
  if (!ps::WriteChunked<v1::GetStateResponse>(&writer, header, *bytes, "state").ok()) {
    Fail("the state could not be written");
  }
}

void Run(const uint8_t* data, size_t size) {
  ps::ParamStore store(Config());
  int64_t version = 0;
  for (const Record& record : Records(data, size)) {
    switch (record.selector % 4) {
      case 0:
        Init(store, record);
        break;
      case 1:
        Push(store, record);
        break;
      case 2:
        Pull(store, record);
        break;
      default:
        GetState(store, record);
        break;
    }
    if (store.initialised()) {
      if (store.version() < version && (record.selector % 4) != 0) {
        Fail("the model version went backwards without an init");
      }
      version = store.version();
    }
  }
  store.Shutdown();
}

// A round of BSP training on the shard: rank 0's init, both ranks' pushes for step 0 (full and
// 8-bit), their pulls (full, then an 8-bit delta), the state; as message streams and in the
// structured form.
void WriteSeeds(const std::string& dir) {
  std::vector<float> params(kTotal);
  for (int64_t i = 0; i < kTotal; ++i) params[i] = 0.001f * static_cast<float>(i % 97) - 0.05f;
  auto sections = ps::SerializeSections({{"params", params}});
  if (!sections.ok()) Fail("seed: sections");
  v1::InitHeader init;
  init.set_rank(0);
  init.mutable_layout()->set_shard(0);
  init.mutable_layout()->set_shards(1);
  init.mutable_layout()->set_begin(0);
  init.mutable_layout()->set_end(kTotal);
  for (int64_t n : kTensorSizes) init.mutable_layout()->add_tensor_sizes(n);
  init.mutable_layout()->set_world_size(kWorld);

  auto stream = [](int selector, const auto& header, auto message_type, const std::string& bytes) {
    using Message = decltype(message_type);
    FakeWriter<Message> writer;
    if (!ps::WriteChunked<Message>(&writer, header, bytes, "seed").ok()) Fail("seed: chunks");
    std::vector<std::string> pieces;
    for (const Message& m : writer.messages) pieces.push_back(m.SerializeAsString());
    return Record{static_cast<uint8_t>(selector), Join(pieces)};
  };
  auto structured = [](int selector, const google::protobuf::Message& header,
                       const std::string& bytes) {
    return Record{static_cast<uint8_t>(0x40 | (3 << 2) | selector),
                  Join({header.SerializeAsString(), bytes})};
  };

  std::vector<Record> messages = {stream(0, init, v1::InitRequest(), *sections)};
  std::vector<Record> split = {structured(0, init, *sections)};
  for (int rank = 0; rank < kWorld; ++rank) {
    const int bits = rank == 0 ? 32 : 8;
    std::vector<std::vector<uint8_t>> tensors;
    for (int64_t n : kTensorSizes) {
      std::vector<float> gradient(n);
      for (int64_t i = 0; i < n; ++i) gradient[i] = 0.01f * static_cast<float>((i * 7 + rank) % 13);
      auto encoded = ps::EncodeGradient(gradient.data(), nullptr, n, bits, 1, 0);
      if (!encoded.ok()) Fail("seed: gradient");
      tensors.push_back(*std::move(encoded));
    }
    auto bytes = ps::SerializeTensors(tensors);
    if (!bytes.ok()) Fail("seed: tensors");
    v1::PushHeader push;
    push.set_rank(rank);
    push.set_step(0);
    push.set_version(0);
    push.set_batch_size(32);
    push.set_lr(0.1);
    push.set_begin(0);
    push.set_end(kTotal);
    messages.push_back(stream(1, push, v1::PushRequest(), *bytes));
    split.push_back(structured(1, push, *bytes));
  }
  for (int bits : {32, 8}) {
    v1::PullRequest pull;
    pull.set_rank(1);
    pull.set_min_version(1);
    pull.set_bits(bits);
    messages.push_back({2, pull.SerializeAsString()});
    split.push_back({2, pull.SerializeAsString()});
  }
  v1::GetStateRequest state;
  state.set_version(1);
  messages.push_back({3, state.SerializeAsString()});
  split.push_back({3, state.SerializeAsString()});
  WriteSeed(dir, "round-messages", Encode(messages));
  WriteSeed(dir, "round-structured", Encode(split));
  // A push before the init, a stale one and a pull for a rank out of range.
  std::vector<Record> refused = {messages[1], messages[0], messages[1], messages[1]};
  v1::PullRequest bad_pull;
  bad_pull.set_rank(5);
  bad_pull.set_bits(4);
  refused.push_back({2, bad_pull.SerializeAsString()});
  WriteSeed(dir, "refused", Encode(refused));
}

}  // namespace
}  // namespace hptrain::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hptrain::fuzz::MaybeWriteSeeds(hptrain::fuzz::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hptrain::fuzz::Run(data, size);
  return 0;
}
