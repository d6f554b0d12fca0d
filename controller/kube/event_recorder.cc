#include "controller/kube/event_recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/kube/api_error.h"
#include "controller/kube/log.h"
#include "controller/kube/object_meta.h"
#include "controller/kube/timestamps.h"

namespace hptrain::kube {
namespace {

const char* TypeName(EventType type) { return type == EventType::kWarning ? "Warning" : "Normal"; }

std::string StringField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

ObjectReference ObjectReference::FromObject(const nlohmann::json& object) {
  ObjectReference ref;
  ref.api_version = StringField(object, "apiVersion");
  ref.kind = StringField(object, "kind");
  ref.name = NameOf(object);
  ref.ns = NamespaceOf(object);
  ref.uid = UidOf(object);
  return ref;
}

EventRecorder::EventRecorder(Client* client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

EventRecorder::~EventRecorder() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped_ += static_cast<int64_t>(queue_.size());
    queue_.clear();
  }
  thread_.join();
}

void EventRecorder::Record(const nlohmann::json& object, EventType type, absl::string_view reason,
                           absl::string_view message) {
  Record(ObjectReference::FromObject(object), type, reason, message);
}

void EventRecorder::Record(const ObjectReference& object, EventType type, absl::string_view reason,
                           absl::string_view message) {
  absl::Time now = options_.now ? options_.now() : absl::Now();
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= options_.queue_capacity) {
    ++dropped_;
    return;
  }
  queue_.push_back({object, type, std::string(reason), std::string(message), now});
}

bool EventRecorder::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && in_flight_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void EventRecorder::Run() {
  while (true) {
    Pending event;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      event = std::move(queue_.front());
      queue_.pop_front();
      ++in_flight_;
    }
    Write(event);
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
}

std::string EventRecorder::UniqueName(absl::string_view object_name, absl::Time time) {
  int64_t nanos = absl::ToUnixNanos(time);
  if (nanos <= last_name_nanos_) nanos = last_name_nanos_ + 1;  // two events in one tick
  last_name_nanos_ = nanos;
  return absl::StrCat(object_name, ".", absl::Hex(static_cast<uint64_t>(nanos)));
}

void EventRecorder::Write(const Pending& event) {
  std::string ns = event.object.ns.empty() ? "default" : event.object.ns;
  std::string series_key =
      absl::StrCat(event.object.uid, "|", ns, "/", event.object.kind, "/", event.object.name, "|",
                   TypeName(event.type), "|", event.reason, "|", event.message);
  auto describe = [&] {
    return absl::StrCat("event ", event.reason, " on ", event.object.kind, " ", ns, "/",
                        event.object.name);
  };

  auto existing = series_.find(series_key);
  if (existing != series_.end() &&
      event.time - existing->second.last < options_.aggregation_window) {
    Series& series = existing->second;
    nlohmann::json patch = {{"count", series.count + 1},
                            {"lastTimestamp", FormatKubeTime(event.time)}};
    absl::StatusOr<nlohmann::json> patched =
        client_->Patch(Events(), series.ns, series.name, PatchType::kMerge, patch);
    if (patched.ok()) {
      series.count += 1;
      series.last = event.time;
      ++written_;
      return;
    }
    if (!kube::IsNotFound(patched.status())) {
      LogLine(absl::StrCat(describe(), " not recorded: ", patched.status().message()));
      ++dropped_;
      return;
    }
    // The Event expired (the API server keeps them an hour): start a new series.
  }

  std::string name =
      UniqueName(event.object.name.empty() ? "object" : event.object.name, event.time);
  nlohmann::json involved = {{"apiVersion", event.object.api_version},
                             {"kind", event.object.kind},
                             {"name", event.object.name}};
  if (!event.object.ns.empty()) involved["namespace"] = event.object.ns;
  if (!event.object.uid.empty()) involved["uid"] = event.object.uid;
  nlohmann::json source = {{"component", options_.component}};
  if (!options_.instance.empty()) source["host"] = options_.instance;
  nlohmann::json body = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"involvedObject", std::move(involved)},
      {"type", TypeName(event.type)},
      {"reason", event.reason},
      {"message", event.message},
      {"source", std::move(source)},
      {"reportingComponent", options_.component},
      {"firstTimestamp", FormatKubeTime(event.time)},
      {"lastTimestamp", FormatKubeTime(event.time)},
      {"count", 1},
  };
  if (!options_.instance.empty()) body["reportingInstance"] = options_.instance;
  absl::StatusOr<nlohmann::json> created = client_->Create(Events(), ns, body);
  if (!created.ok()) {
    LogLine(absl::StrCat(describe(), " not recorded: ", created.status().message()));
    ++dropped_;
    return;
  }
  ++written_;
  if (existing != series_.end()) {
    existing->second = Series{ns, name, 1, event.time, event.time};
    return;
  }
  series_.emplace(series_key, Series{ns, name, 1, event.time, event.time});
  series_order_.push_back(series_key);
  while (series_.size() > options_.max_aggregated && !series_order_.empty()) {
    series_.erase(series_order_.front());
    series_order_.pop_front();
  }
}

}  // namespace hptrain::kube
