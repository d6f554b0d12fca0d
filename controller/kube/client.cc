#include "controller/kube/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/kube/api_error.h"
#include "controller/kube/query.h"
#include "runtime/base/status.h"

namespace hptrain::kube {
namespace {

constexpr int64_t kDefaultPageSize = 500;

bool IsSuccess(int status) { return status >= 200 && status < 300; }

const char* PolicyName(PropagationPolicy policy) {
  switch (policy) {
    case PropagationPolicy::kBackground:
      return "Background";
    case PropagationPolicy::kForeground:
      return "Foreground";
    case PropagationPolicy::kOrphan:
      return "Orphan";
  }
  return "Background";
}

// The namespace a write goes to: the explicit one, else the object's own.
absl::StatusOr<std::string> TargetNamespace(const Resource& resource, absl::string_view ns,
                                            const nlohmann::json& object) {
  if (!resource.namespaced) return std::string();
  std::string target = ns.empty() ? NamespaceOf(object) : std::string(ns);
  if (target.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(resource.plural, " \"", NameOf(object),
                                                   "\": no namespace given for a namespaced kind"));
  }
  return target;
}

absl::StatusOr<std::string> TargetName(const Resource& resource, const nlohmann::json& object) {
  std::string name = NameOf(object);
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(resource.plural, ": the object has no metadata.name"));
  }
  return name;
}

}  // namespace

const char* PatchContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";
  }
  return "application/merge-patch+json";
}

absl::StatusOr<std::unique_ptr<Client>> Client::FromConfig(const Config& config) {
  HPTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<HttpTransport> transport, HttpTransport::Create(config));
  return std::make_unique<Client>(std::move(transport));
}

Client::Client(std::unique_ptr<HttpTransport> transport) : transport_(std::move(transport)) {}

absl::StatusOr<nlohmann::json> Client::Call(HttpRequest request) {
  HPTRAIN_ASSIGN_OR_RETURN(HttpResponse response, transport_->Do(request));
  if (!IsSuccess(response.status)) return StatusFromResponse(response.status, response.body);
  if (response.body.empty()) return nlohmann::json();
  nlohmann::json parsed = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InternalError(absl::StrCat(request.method, " ", request.target,
                                            ": the response is not JSON (HTTP ", response.status,
                                            ")"));
  }
  return parsed;
}

absl::StatusOr<nlohmann::json> Client::Get(const Resource& resource, absl::string_view ns,
                                           absl::string_view name, absl::string_view subresource) {
  HttpRequest request;
  request.target = resource.ObjectPath(ns, name, subresource);
  return Call(std::move(request));
}

absl::StatusOr<ObjectList> Client::ListPage(const Resource& resource, absl::string_view ns,
                                            const ListOptions& options) {
  Query query;
  query.AddIfSet("labelSelector", options.label_selector)
      .AddIfSet("fieldSelector", options.field_selector);
  if (options.limit > 0) query.Add("limit", options.limit);
  query.AddIfSet("continue", options.continue_token)
      .AddIfSet("resourceVersion", options.resource_version);
  HttpRequest request;
  request.target = resource.CollectionPath(ns) + query.Encoded();
  request.cancel = options.cancel;
  HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json body, Call(std::move(request)));

  ObjectList list;
  auto items = body.is_object() ? body.find("items") : body.end();
  if (!body.is_object() || items == body.end() || !(items->is_array() || items->is_null())) {
    return absl::InternalError(
        absl::StrCat("list ", resource.plural, ": the response is not a list"));
  }
  if (items->is_array()) {
    list.items.reserve(items->size());
    for (nlohmann::json& item : *items) {
      if (!item.is_object()) {
        return absl::InternalError(
            absl::StrCat("list ", resource.plural, ": an item is not an object"));
      }
      if (!item.contains("kind")) item["kind"] = resource.kind;
      if (!item.contains("apiVersion")) item["apiVersion"] = resource.ApiVersion();
      list.items.push_back(std::move(item));
    }
  }
  auto metadata = body.find("metadata");
  if (metadata != body.end() && metadata->is_object()) {
    auto text = [&](const char* key) {
      auto it = metadata->find(key);
      return it != metadata->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    list.resource_version = text("resourceVersion");
    list.continue_token = text("continue");
    auto remaining = metadata->find("remainingItemCount");
    if (remaining != metadata->end() && remaining->is_number_integer()) {
      list.remaining_item_count = remaining->get<int64_t>();
    }
  }
  return list;
}

absl::StatusOr<ObjectList> Client::List(const Resource& resource, absl::string_view ns,
                                        const ListOptions& options) {
  return ListPage(resource, ns, options);
}

absl::StatusOr<ObjectList> Client::ListAll(const Resource& resource, absl::string_view ns,
                                           ListOptions options) {
  if (options.limit <= 0) options.limit = kDefaultPageSize;
  ObjectList all;
  while (true) {
    absl::StatusOr<ObjectList> page = ListPage(resource, ns, options);
    if (!page.ok() && IsGone(page.status()) && !options.continue_token.empty()) {
      // The continue token expired between pages: one consistent list without paging.
      options.limit = 0;
      options.continue_token.clear();
      all.items.clear();
      continue;
    }
    if (!page.ok()) return page.status();
    for (nlohmann::json& item : page->items) all.items.push_back(std::move(item));
    all.resource_version = page->resource_version;
    if (page->continue_token.empty()) break;
    options.continue_token = page->continue_token;
  }
  return all;
}

absl::StatusOr<nlohmann::json> Client::Create(const Resource& resource, absl::string_view ns,
                                              const nlohmann::json& object) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string target_ns, TargetNamespace(resource, ns, object));
  HttpRequest request;
  request.method = "POST";
  request.target = resource.CollectionPath(target_ns);
  request.body = object.dump();
  request.content_type = "application/json";
  return Call(std::move(request));
}

absl::StatusOr<nlohmann::json> Client::Update(const Resource& resource,
                                              const nlohmann::json& object) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string ns, TargetNamespace(resource, "", object));
  HPTRAIN_ASSIGN_OR_RETURN(std::string name, TargetName(resource, object));
  HttpRequest request;
  request.method = "PUT";
  request.target = resource.ObjectPath(ns, name);
  request.body = object.dump();
  request.content_type = "application/json";
  return Call(std::move(request));
}

absl::StatusOr<nlohmann::json> Client::UpdateStatus(const Resource& resource,
                                                    const nlohmann::json& object) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string ns, TargetNamespace(resource, "", object));
  HPTRAIN_ASSIGN_OR_RETURN(std::string name, TargetName(resource, object));
  HttpRequest request;
  request.method = "PUT";
  request.target = resource.ObjectPath(ns, name, "status");
  request.body = object.dump();
  request.content_type = "application/json";
  return Call(std::move(request));
}

absl::StatusOr<nlohmann::json> Client::Patch(const Resource& resource, absl::string_view ns,
                                             absl::string_view name, PatchType type,
                                             const nlohmann::json& patch,
                                             const PatchOptions& options) {
  if (type == PatchType::kApply && options.field_manager.empty()) {
    return absl::InvalidArgumentError("server-side apply needs a field manager");
  }
  if (type == PatchType::kJson && !patch.is_array()) {
    return absl::InvalidArgumentError("a JSON patch is an array of operations");
  }
  Query query;
  query.AddIfSet("fieldManager", options.field_manager);
  if (type == PatchType::kApply && options.force) query.Add("force", "true");
  HttpRequest request;
  request.method = "PATCH";
  request.target = resource.ObjectPath(ns, name, options.subresource) + query.Encoded();
  request.body = patch.dump();
  request.content_type = PatchContentType(type);
  return Call(std::move(request));
}

absl::StatusOr<nlohmann::json> Client::PatchStatus(const Resource& resource, absl::string_view ns,
                                                   absl::string_view name, PatchType type,
                                                   const nlohmann::json& patch,
                                                   PatchOptions options) {
  options.subresource = "status";
  return Patch(resource, ns, name, type, patch, options);
}

absl::StatusOr<nlohmann::json> Client::Apply(const Resource& resource, const nlohmann::json& object,
                                             absl::string_view field_manager, bool force) {
  HPTRAIN_ASSIGN_OR_RETURN(std::string ns, TargetNamespace(resource, "", object));
  HPTRAIN_ASSIGN_OR_RETURN(std::string name, TargetName(resource, object));
  PatchOptions options;
  options.field_manager = std::string(field_manager);
  options.force = force;
  // JSON is YAML: the object goes out as is.
  return Patch(resource, ns, name, PatchType::kApply, object, options);
}

absl::StatusOr<nlohmann::json> Client::Delete(const Resource& resource, absl::string_view ns,
                                              absl::string_view name,
                                              const DeleteOptions& options) {
  nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (options.propagation_policy.has_value()) {
    body["propagationPolicy"] = PolicyName(*options.propagation_policy);
  }
  if (options.grace_period_seconds.has_value()) {
    body["gracePeriodSeconds"] = *options.grace_period_seconds;
  }
  if (!options.precondition_uid.empty()) body["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  HttpRequest request;
  request.method = "DELETE";
  request.target = resource.ObjectPath(ns, name);
  request.body = body.dump();
  request.content_type = "application/json";
  return Call(std::move(request));
}

absl::Status Client::Watch(const Resource& resource, absl::string_view ns,
                           const WatchOptions& options, const WatchHandler& handler) {
  Query query;
  query.Add("watch", "1");
  if (options.allow_bookmarks) query.Add("allowWatchBookmarks", "true");
  query.AddIfSet("labelSelector", options.label_selector)
      .AddIfSet("fieldSelector", options.field_selector)
      .AddIfSet("resourceVersion", options.resource_version);
  if (options.timeout_seconds > 0) query.Add("timeoutSeconds", options.timeout_seconds);

  HttpRequest request;
  request.target = resource.CollectionPath(ns) + query.Encoded();
  request.cancel = options.cancel;
  request.timeout = options.idle_timeout;
  if (request.timeout <= absl::ZeroDuration()) {
    request.timeout = options.timeout_seconds > 0
                          ? absl::Seconds(options.timeout_seconds) + absl::Seconds(30)
                          : absl::Minutes(10);
  }

  // An ERROR event is handed to the handler, then ends the watch with its Status.
  WatchHandler deliver = [&handler](const WatchEvent& event) -> absl::Status {
    HPTRAIN_RETURN_IF_ERROR(handler(event));
    if (event.type == WatchEventType::kError) return StatusFromStatusObject(event.object, 500);
    return absl::OkStatus();
  };
  WatchDecoder decoder;
  absl::Status stream_status;
  BodyReceiver receiver = [&](absl::string_view piece) {
    stream_status = decoder.Feed(piece, deliver);
    return stream_status.ok();
  };
  absl::StatusOr<HttpResponse> response = transport_->Stream(request, receiver);
  if (!stream_status.ok()) return stream_status;
  if (!response.ok()) return response.status();
  if (!IsSuccess(response->status)) return StatusFromResponse(response->status, response->body);
  if (decoder.HasPartialEvent()) {
    return absl::UnavailableError(
        absl::StrCat("watch ", resource.plural, ": the stream ended in the middle of an event"));
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> Client::Raw(absl::string_view method, absl::string_view target,
                                           const nlohmann::json* body,
                                           absl::string_view content_type) {
  HttpRequest request;
  request.method = std::string(method);
  request.target = std::string(target);
  if (body != nullptr) {
    request.body = body->dump();
    request.content_type = std::string(content_type);
  }
  return Call(std::move(request));
}

}  // namespace hptrain::kube
