#include "tests/controller/apiserver/watcher.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace hptrain::testing {
namespace {

const std::string& MetaString(const nlohmann::json& object, const char* key) {
  static const std::string kEmpty;
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return kEmpty;
  auto it = meta->find(key);
  if (it == meta->end() || !it->is_string()) return kEmpty;
  return it->get_ref<const std::string&>();
}

}  // namespace

const std::string& StoredObject::name() const { return MetaString(json_, "name"); }
const std::string& StoredObject::ns() const { return MetaString(json_, "namespace"); }

const std::string& StoredObject::Serialized() const {
  std::call_once(once_, [this] { text_ = json_.dump(); });
  return text_;
}

const char* EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "ERROR";
}

Watcher::Watcher(WatchFilter filter, size_t queue_limit, bool allow_bookmarks)
    : filter_(std::move(filter)), queue_limit_(queue_limit), allow_bookmarks_(allow_bookmarks) {}

bool Watcher::Selects(const nlohmann::json& object) const {
  if (!filter_.labels.empty()) {
    const nlohmann::json* labels = nullptr;
    auto meta = object.find("metadata");
    if (meta != object.end() && meta->contains("labels")) labels = &(*meta)["labels"];
    if (!filter_.labels.Matches(labels != nullptr ? *labels : nlohmann::json())) return false;
  }
  return filter_.fields.empty() || filter_.fields.Matches(object);
}

void Watcher::EnqueueLocked(Item item, bool bounded) {
  if (closed_) return;
  if (bounded && queue_.size() >= queue_limit_ + initial_) {
    // The client is too slow: end its stream rather than hold writers or grow without bound.
    overflowed_ = true;
    closed_ = true;
    drain_ = false;
    queue_.clear();
    return;
  }
  queue_.push_back(std::move(item));
}

void Watcher::Offer(const WatchEvent& event) {
  const ObjectPtr& object = event.object;
  if (!filter_.ns.empty() && object->ns() != filter_.ns) return;
  bool now = Selects(object->json());
  Item item{event.type, object, {}};
  if (event.type == EventType::kModified && event.previous != nullptr) {
    bool before = Selects(event.previous->json());
    if (!now && !before) return;
    if (now && !before) item.type = EventType::kAdded;
    if (!now && before) {
      // Left the selection: DELETED with the previous state at the new resourceVersion.
      nlohmann::json last = event.previous->json();
      last["metadata"]["resourceVersion"] = std::to_string(object->resource_version());
      item = Item{EventType::kDeleted,
                  std::make_shared<StoredObject>(std::move(last), object->resource_version()),
                  {}};
    }
  } else if (!now) {
    return;
  }
  absl::MutexLock lock(&mu_);
  EnqueueLocked(std::move(item), /*bounded=*/true);
}

void Watcher::OfferInitial(const ObjectPtr& object) {
  if (!filter_.ns.empty() && object->ns() != filter_.ns) return;
  if (!Selects(object->json())) return;
  absl::MutexLock lock(&mu_);
  ++initial_;
  EnqueueLocked(Item{EventType::kAdded, object, {}}, /*bounded=*/false);
}

void Watcher::PushLine(std::string line) {
  absl::MutexLock lock(&mu_);
  EnqueueLocked(Item{EventType::kAdded, nullptr, std::move(line)}, /*bounded=*/false);
}

void Watcher::Close(bool drain) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  drain_ = drain;
  if (!drain) queue_.clear();
}

Watcher::PopResult Watcher::Pop(std::string* line, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || closed_; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
  if (closed_ && (!drain_ || queue_.empty())) return PopResult::kClosed;
  if (queue_.empty()) return PopResult::kIdle;
  Item item = std::move(queue_.front());
  queue_.pop_front();
  if (initial_ > 0 && item.object != nullptr) --initial_;
  if (item.object == nullptr) {
    *line = std::move(item.line);
  } else {
    *line = absl::StrCat("{\"type\":\"", EventTypeName(item.type),
                         "\",\"object\":", item.object->Serialized(), "}\n");
  }
  return PopResult::kLine;
}

bool Watcher::overflowed() const {
  absl::MutexLock lock(&mu_);
  return overflowed_;
}

bool Watcher::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

}  // namespace hptrain::testing
