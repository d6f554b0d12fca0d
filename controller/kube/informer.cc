#include "controller/kube/informer.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/kube/api_error.h"
#include "controller/kube/log.h"
#include "controller/kube/object_meta.h"

namespace hptrain::kube {
namespace {

// A watch that ends this fast without a single event is treated like a failure (backoff), so a
// server that closes streams at once does not turn the loop into a busy spin.
constexpr absl::Duration kShortWatch = absl::Seconds(1);
constexpr absl::Duration kStopPollInterval = absl::Milliseconds(20);

}  // namespace

Informer::Informer(Client* client, Resource resource, InformerOptions options)
    : client_(client),
      resource_(std::move(resource)),
      options_(std::move(options)),
      store_(options_.indexed_labels) {}

Informer::~Informer() { Stop(); }

absl::Status Informer::AddHandlers(InformerHandlers handlers) {
  absl::MutexLock lock(&mu_);
  if (running_) {
    return absl::FailedPreconditionError(
        absl::StrCat("informer ", resource_.plural, ": add handlers before Start()"));
  }
  handlers_.push_back(std::move(handlers));
  return absl::OkStatus();
}

absl::Status Informer::Start() {
  absl::MutexLock lock(&mu_);
  if (running_) {
    return absl::FailedPreconditionError(
        absl::StrCat("informer ", resource_.plural, " is already running"));
  }
  running_ = true;
  stopping_ = false;
  thread_done_ = false;
  cancel_.Reset();
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void Informer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    stopping_ = true;
  }
  // A request whose socket was still opening can miss one Cancel(); repeat until the thread
  // reports that it has left its loop.
  while (true) {
    cancel_.Cancel();
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&thread_done_), kStopPollInterval)) break;
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
}

bool Informer::HasSynced() const {
  absl::MutexLock lock(&mu_);
  return synced_;
}

bool Informer::WaitForSync(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&synced_), timeout);
}

std::string Informer::LastResourceVersion() const {
  absl::MutexLock lock(&mu_);
  return resource_version_;
}

bool Informer::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void Informer::SetResourceVersion(const std::string& rv) {
  absl::MutexLock lock(&mu_);
  resource_version_ = rv;
}

bool Informer::Sleep(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay);
  return !stopping_;
}

void Informer::DispatchAdd(const nlohmann::json& object) {
  for (const InformerHandlers& h : handlers_) {
    if (h.on_add) h.on_add(object);
  }
}

void Informer::DispatchUpdate(const nlohmann::json& old_object, const nlohmann::json& new_object) {
  for (const InformerHandlers& h : handlers_) {
    if (h.on_update) h.on_update(old_object, new_object);
  }
}

void Informer::DispatchDelete(const nlohmann::json& object) {
  for (const InformerHandlers& h : handlers_) {
    if (h.on_delete) h.on_delete(object);
  }
}

absl::Status Informer::ListAndReplace() {
  ++lists_started_;
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.limit = options_.page_size;
  list_options.cancel = &cancel_;
  absl::StatusOr<ObjectList> list = client_->ListAll(resource_, options_.ns, list_options);
  if (!list.ok()) return list.status();
  std::vector<ObjectPtr> objects;
  objects.reserve(list->items.size());
  for (nlohmann::json& item : list->items) {
    objects.push_back(std::make_shared<const nlohmann::json>(std::move(item)));
  }
  std::vector<Store::Delta> deltas = store_.Replace(std::move(objects));
  SetResourceVersion(list->resource_version);
  for (const Store::Delta& delta : deltas) {
    switch (delta.kind) {
      case Store::Delta::Kind::kAdded:
        DispatchAdd(*delta.object);
        break;
      case Store::Delta::Kind::kUpdated:
        DispatchUpdate(*delta.old_object, *delta.object);
        break;
      case Store::Delta::Kind::kDeleted:
        DispatchDelete(*delta.object);
        break;
    }
  }
  absl::MutexLock lock(&mu_);
  synced_ = true;
  return absl::OkStatus();
}

bool Informer::AbsentKind(const absl::Status& status) {
  if (options_.absent_relist <= absl::ZeroDuration()) return false;
  if (!kube::IsNotFound(status) && !absl::IsPermissionDenied(status)) return false;
  if (!absent_logged_) {
    LogLine(absl::StrCat("informer ", resource_.plural, ".", resource_.group,
                         ": not available (", status.message(), "); looking again every ",
                         absl::FormatDuration(options_.absent_relist)));
    absent_logged_ = true;
  }
  for (const Store::Delta& delta : store_.Replace({})) {
    if (delta.kind == Store::Delta::Kind::kDeleted) DispatchDelete(*delta.object);
  }
  absl::MutexLock lock(&mu_);
  synced_ = true;
  return true;
}

absl::Status Informer::WatchOnce(bool* relist, int64_t* events) {
  ++watches_started_;
  WatchOptions watch_options;
  watch_options.resource_version = LastResourceVersion();
  watch_options.label_selector = options_.label_selector;
  watch_options.field_selector = options_.field_selector;
  watch_options.timeout_seconds = options_.watch_timeout_seconds;
  watch_options.cancel = &cancel_;
  bool error_event = false;
  absl::Status status = client_->Watch(
      resource_, options_.ns, watch_options, [&](const WatchEvent& event) -> absl::Status {
        switch (event.type) {
          case WatchEventType::kAdded:
          case WatchEventType::kModified: {
            auto object = std::make_shared<const nlohmann::json>(event.object);
            ObjectPtr old = store_.Upsert(object);
            if (old != nullptr) {
              DispatchUpdate(*old, *object);
            } else {
              DispatchAdd(*object);
            }
            break;
          }
          case WatchEventType::kDeleted:
            store_.Remove(KeyOf(event.object));
            DispatchDelete(event.object);
            break;
          case WatchEventType::kBookmark:
            break;
          case WatchEventType::kError:
            error_event = true;
            return absl::OkStatus();  // Watch() returns the event's Status next
        }
        ++*events;
        std::string rv = event.ResourceVersion();
        if (!rv.empty()) SetResourceVersion(rv);
        return absl::OkStatus();
      });
  *relist = error_event || IsGone(status);
  return status;
}

void Informer::Run() {
  Backoff backoff(options_.backoff);
  bool need_list = true;
  while (!stopping()) {
    if (need_list) {
      absl::Status status = ListAndReplace();
      if (stopping()) break;
      if (AbsentKind(status)) {
        Sleep(options_.absent_relist);
        continue;
      }
      if (!status.ok()) {
        LogLine(absl::StrCat("informer ", resource_.plural, ": list failed: ", status.message()));
        Sleep(backoff.Next());
        continue;
      }
      absent_logged_ = false;
      need_list = false;
      backoff.Reset();
    }
    absl::Time started = absl::Now();
    int64_t events = 0;
    bool relist = false;
    absl::Status status = WatchOnce(&relist, &events);
    if (stopping()) break;
    if (relist) {
      // The resume point is gone (compaction) or the stream broke server-side: start over.
      LogLine(absl::StrCat("informer ", resource_.plural, ": relisting: ", status.message()));
      need_list = true;
      if (!IsGone(status)) Sleep(backoff.Next());
      continue;
    }
    if (status.ok() && (events > 0 || absl::Now() - started >= kShortWatch)) {
      backoff.Reset();  // the server ended the stream normally: resume at once
      continue;
    }
    if (!status.ok()) {
      LogLine(absl::StrCat("informer ", resource_.plural, ": watch failed: ", status.message()));
    }
    Sleep(backoff.Next());
  }
  absl::MutexLock lock(&mu_);
  thread_done_ = true;
}

}  // namespace hptrain::kube
