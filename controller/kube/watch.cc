#include "controller/kube/watch.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace hptrain::kube {

const char* WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

std::string WatchEvent::ResourceVersion() const {
  if (!object.is_object()) return "";
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto rv = metadata->find("resourceVersion");
  if (rv == metadata->end() || !rv->is_string()) return "";
  return rv->get<std::string>();
}

absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view line) {
  nlohmann::json parsed =
      nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](absl::string_view why) {
    return absl::InternalError(
        absl::StrCat("malformed watch event (", why, "): ", line.substr(0, 120)));
  };
  if (!parsed.is_object()) return bad("not a JSON object");
  auto type = parsed.find("type");
  auto object = parsed.find("object");
  if (type == parsed.end() || !type->is_string()) return bad("no type");
  if (object == parsed.end() || !object->is_object()) return bad("no object");
  WatchEvent event;
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (name == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (name == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (name == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (name == "ERROR") {
    event.type = WatchEventType::kError;
  } else {
    return bad(absl::StrCat("unknown type ", name));
  }
  event.object = std::move(*object);
  return event;
}

absl::Status WatchDecoder::Feed(absl::string_view bytes, const WatchHandler& handler) {
  size_t start = 0;
  while (start < bytes.size()) {
    size_t newline = bytes.find('\n', start);
    if (newline == absl::string_view::npos) {
      buffer_.append(bytes.data() + start, bytes.size() - start);
      if (buffer_.size() > kMaxEventBytes) {
        return absl::InternalError(
            absl::StrCat("malformed watch event: longer than ", kMaxEventBytes, " bytes"));
      }
      return absl::OkStatus();
    }
    absl::string_view piece = bytes.substr(start, newline - start);
    start = newline + 1;
    absl::string_view line = piece;
    if (!buffer_.empty()) {
      buffer_.append(piece.data(), piece.size());
      line = buffer_;
    }
    if (!absl::StripAsciiWhitespace(line).empty()) {
      absl::StatusOr<WatchEvent> event = ParseWatchEvent(line);
      buffer_.clear();
      if (!event.ok()) return event.status();
      absl::Status status = handler(*event);
      if (!status.ok()) return status;
    }
    buffer_.clear();
  }
  return absl::OkStatus();
}

bool WatchDecoder::HasPartialEvent() const { return !absl::StripAsciiWhitespace(buffer_).empty(); }

}  // namespace hptrain::kube
