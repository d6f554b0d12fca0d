#include "tests/controller/apiserver/http_frontend.h"

#include <sys/socket.h>

#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "runtime/base/status.h"
#include "tests/controller/apiserver/discovery.h"
#include "tests/controller/apiserver/json_util.h"
#include "tests/controller/apiserver/table_convert.h"

namespace hptrain::testing {
namespace {

constexpr absl::Duration kWatchPoll = absl::Milliseconds(100);
// The real server picks 30-60 minutes when a watch names no timeoutSeconds.
constexpr absl::Duration kDefaultWatchTimeout = absl::Minutes(30);
constexpr time_t kIoTimeoutSeconds = 5;

std::string Param(const httplib::Request& request, const char* key) {
  return request.has_param(key) ? request.get_param_value(key) : std::string();
}

void WriteJson(httplib::Response& response, int code, const std::string& body) {
  response.status = code;
  response.set_header("Cache-Control", "no-cache, private");
  response.set_content(body, "application/json");
}

void WriteError(httplib::Response& response, const absl::Status& status) {
  nlohmann::json body = StatusBody(status);
  WriteJson(response, body.value("code", 500), body.dump());
}

// The Table a GET or LIST of `type` must answer with, when the client asked for one and the type
// has printer columns (table_convert.h).
std::optional<TableOptions> TableRequested(const httplib::Request& request,
                                           const ResourceType& type) {
  if (type.printer_columns.is_null()) return std::nullopt;
  std::optional<std::string> version = AcceptedTableVersion(request.get_header_value("Accept"));
  if (!version.has_value()) return std::nullopt;
  TableOptions options;
  options.api_version = *version;
  if (std::string include = Param(request, "includeObject"); !include.empty()) {
    options.include_object = include;
  }
  options.now = absl::Now();
  return options;
}

WriteContext ContextOf(const httplib::Request& request) {
  WriteContext context;
  std::string manager = Param(request, "fieldManager");
  if (manager.empty()) {
    std::string agent = request.get_header_value("User-Agent");
    manager = agent.substr(0, agent.find('/'));
  }
  context.field_manager = manager.empty() ? "unknown" : manager;
  context.force = Param(request, "force") == "true";
  context.dry_run = Param(request, "dryRun") == "All";
  return context;
}

absl::StatusOr<ListRequest> ListRequestOf(const httplib::Request& request, const ResourceType& type,
                                          const RequestInfo& info) {
  ListRequest list;
  list.ns = info.ns;
  HPTRAIN_ASSIGN_OR_RETURN(list.labels, LabelSelector::Parse(Param(request, "labelSelector")));
  std::string fields = Param(request, "fieldSelector");
  if (!info.name.empty()) {
    // A watch on one object (/watch/.../NAME) selects it by name.
    fields = fields.empty() ? absl::StrCat("metadata.name=", info.name)
                            : absl::StrCat(fields, ",metadata.name=", info.name);
  }
  HPTRAIN_ASSIGN_OR_RETURN(list.fields, FieldSelector::Parse(fields, type.selectable_fields));
  std::string limit = Param(request, "limit");
  if (!limit.empty() && (!absl::SimpleAtoi(limit, &list.limit) || list.limit < 0)) {
    return BadRequestError(absl::StrCat("limit: Invalid value: \"", limit, "\""));
  }
  list.continue_token = Param(request, "continue");
  list.resource_version = Param(request, "resourceVersion");
  return list;
}

absl::StatusOr<DeleteOptions> DeleteOptionsOf(const httplib::Request& request) {
  DeleteOptions options;
  nlohmann::json body = nlohmann::json::object();
  if (!request.body.empty()) {
    HPTRAIN_ASSIGN_OR_RETURN(body,
                             ParseBody(request.body, request.get_header_value("Content-Type")));
    if (!body.is_object()) return BadRequestError("DeleteOptions must be a JSON object");
  }
  options.propagation_policy = body.value("propagationPolicy", "");
  if (body.contains("orphanDependents") && body["orphanDependents"].is_boolean() &&
      body["orphanDependents"].get<bool>()) {
    options.propagation_policy = "Orphan";
  }
  if (body.contains("preconditions") && body["preconditions"].is_object()) {
    const nlohmann::json& pre = body["preconditions"];
    if (pre.contains("uid") && pre["uid"].is_string()) options.precondition_uid = pre["uid"];
    if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string()) {
      options.precondition_resource_version = pre["resourceVersion"];
    }
  }
  if (body.contains("dryRun") && body["dryRun"].is_array() && !body["dryRun"].empty()) {
    options.dry_run = true;
  }
  std::string policy = Param(request, "propagationPolicy");
  if (!policy.empty()) options.propagation_policy = policy;
  if (Param(request, "orphanDependents") == "true") options.propagation_policy = "Orphan";
  if (Param(request, "dryRun") == "All") options.dry_run = true;
  return options;
}

}  // namespace

HttpFrontend::HttpFrontend(ObjectStore* store, ApiOperations* operations, RequestPolicy* policy)
    : store_(store), operations_(operations), policy_(policy) {}

HttpFrontend::~HttpFrontend() { Stop(); }

absl::StatusOr<int> HttpFrontend::Start(const FrontendOptions& options) {
  if (server_ != nullptr) return absl::FailedPreconditionError("API server double already runs");
  options_ = options;
  stopping_ = false;
  auto server = std::make_unique<httplib::Server>();
  // No SO_REUSEPORT (httplib's default): a second server must not share the port.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  size_t threads = options.worker_threads;
  server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server->set_keep_alive_timeout(kIoTimeoutSeconds);
  server->set_read_timeout(kIoTimeoutSeconds);
  server->set_write_timeout(kIoTimeoutSeconds);
  auto handler = [this](const httplib::Request& request, httplib::Response& response) {
    Handle(request, response);
  };
  server->Get(".*", handler);
  server->Post(".*", handler);
  server->Put(".*", handler);
  server->Patch(".*", handler);
  server->Delete(".*", handler);

  int bound = options.port == 0
                  ? server->bind_to_any_port(options.host)
                  : (server->bind_to_port(options.host, options.port) ? options.port : -1);
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot bind the API server double to ", options.host, ":", options.port));
  }
  server_ = std::move(server);
  listener_done_ = false;
  httplib::Server* raw = server_.get();
  listener_ = std::thread([this, raw] {
    raw->listen_after_bind();
    listener_done_ = true;
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!raw->is_running() && !listener_done_) {
    if (std::chrono::steady_clock::now() > deadline) {
      Stop();
      return absl::DeadlineExceededError("API server double did not start within 5 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  port_ = bound;
  return bound;
}

void HttpFrontend::Stop() {
  if (server_ == nullptr) return;
  stopping_ = true;
  while (!listener_done_) {
    server_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  listener_.join();
  server_.reset();
  port_ = 0;
}

void HttpFrontend::Handle(const httplib::Request& request, httplib::Response& response) {
  policy_->Begin();
  RequestInfo info = ParseRequestInfo(request.method, request.path, Param(request, "watch"));
  size_t query = request.target.find('?');
  RequestRecord record;
  record.method = request.method;
  record.path = request.path;
  record.query = query == std::string::npos ? "" : request.target.substr(query + 1);
  record.verb = info.verb;
  record.group = info.group;
  record.resource = info.resource;
  record.subresource = info.subresource;
  record.ns = info.ns;
  record.name = info.name;
  absl::Status status;
  try {
    absl::StatusOr<std::string> user =
        policy_->Authenticate(request.get_header_value("Authorization"));
    if (user.ok()) {
      record.user = *user;
      status = Serve(request, info, *user, response);
    } else {
      status = user.status();
    }
  } catch (const std::exception& e) {
    // A body of the wrong JSON types reaches nlohmann's checked accessors.
    status = BadRequestError(absl::StrCat("the request could not be processed: ", e.what()));
  }
  if (!status.ok()) WriteError(response, status);
  record.status = response.status;
  policy_->Record(std::move(record));
}

absl::Status HttpFrontend::Serve(const httplib::Request& request, const RequestInfo& info,
                                 const std::string& user, httplib::Response& response) {
  std::optional<Fault> fault =
      policy_->TakeFault(info.verb, info.resource, info.subresource, info.ns);
  if (fault.has_value()) {
    absl::SleepFor(fault->latency);
    if (fault->code != 0) {
      return ErrorForCode(fault->code,
                          fault->message.empty() ? "injected failure" : fault->message);
    }
  }
  RequestAttributes attributes{user,
                               info.verb,
                               info.group,
                               info.resource,
                               info.subresource,
                               info.ns,
                               info.name,
                               info.resource_request,
                               request.path};
  HPTRAIN_RETURN_IF_ERROR(policy_->Authorize(attributes));
  if (!info.resource_request) return ServeNonResource(request, info, response);
  if (info.malformed) return UnknownPathError();

  std::optional<ResourceType> type = store_->FindType(info.group, info.resource);
  if (!type.has_value() || type->version != info.version) return UnknownPathError();
  bool collection_verb =
      info.verb == "list" || info.verb == "watch" || info.verb == "deletecollection";
  if (type->namespaced && info.ns.empty() && !collection_verb) return UnknownPathError();
  if (!type->namespaced && !info.ns.empty()) return UnknownPathError();
  const std::string& sub = info.subresource;
  if (!sub.empty() && !(sub == "status" && type->status_subresource) &&
      !(sub == "scale" && type->scale.has_value())) {
    return UnknownPathError();
  }

  if (info.verb == "get") {
    if (sub == "scale") {
      HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json scale,
                               operations_->GetScale(*type, info.ns, info.name));
      WriteJson(response, 200, scale.dump());
      return absl::OkStatus();
    }
    HPTRAIN_ASSIGN_OR_RETURN(ObjectPtr object, operations_->Get(*type, info.ns, info.name));
    if (std::optional<TableOptions> table = TableRequested(request, *type); table.has_value()) {
      table->resource_version = std::to_string(object->resource_version());
      WriteJson(response, 200, ToTable(*type, {object->json()}, *table).dump());
      return absl::OkStatus();
    }
    WriteJson(response, 200, object->Serialized());
    return absl::OkStatus();
  }
  if (info.verb == "list") return ServeList(request, *type, info, response);
  if (info.verb == "watch") return ServeWatch(request, *type, info, response);
  if (info.verb == "create") {
    if (!info.name.empty()) return MethodNotAllowedError();
    HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json body,
                             ParseBody(request.body, request.get_header_value("Content-Type")));
    HPTRAIN_ASSIGN_OR_RETURN(
        ObjectPtr object, operations_->Create(*type, info.ns, std::move(body), ContextOf(request)));
    WriteJson(response, 201, object->Serialized());
    return absl::OkStatus();
  }
  if (info.verb == "update") {
    if (info.name.empty()) return MethodNotAllowedError();
    HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json body,
                             ParseBody(request.body, request.get_header_value("Content-Type")));
    if (sub == "scale") {
      HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json scale,
                               operations_->UpdateScale(*type, info.ns, info.name, std::nullopt,
                                                        body, ContextOf(request)));
      WriteJson(response, 200, scale.dump());
      return absl::OkStatus();
    }
    HPTRAIN_ASSIGN_OR_RETURN(
        ObjectPtr object,
        operations_->Update(*type, info.ns, info.name, sub, std::move(body), ContextOf(request)));
    WriteJson(response, 200, object->Serialized());
    return absl::OkStatus();
  }
  if (info.verb == "patch") {
    if (info.name.empty()) return MethodNotAllowedError();
    return ServePatch(request, *type, info, response);
  }
  if (info.verb == "delete") {
    if (!sub.empty()) return MethodNotAllowedError();
    HPTRAIN_ASSIGN_OR_RETURN(DeleteOptions options, DeleteOptionsOf(request));
    HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json body,
                             operations_->Delete(*type, info.ns, info.name, options));
    WriteJson(response, 200, body.dump());
    return absl::OkStatus();
  }
  if (info.verb == "deletecollection") {
    HPTRAIN_ASSIGN_OR_RETURN(ListRequest list, ListRequestOf(request, *type, info));
    HPTRAIN_ASSIGN_OR_RETURN(DeleteOptions options, DeleteOptionsOf(request));
    HPTRAIN_ASSIGN_OR_RETURN(nlohmann::json body,
                             operations_->DeleteCollection(*type, list, options));
    WriteJson(response, 200, body.dump());
    return absl::OkStatus();
  }
  return MethodNotAllowedError();
}

absl::Status HttpFrontend::ServeNonResource(const httplib::Request& request,
                                            const RequestInfo& info, httplib::Response& response) {
  const std::vector<std::string>& parts = info.parts;
  std::optional<nlohmann::json> body;
  std::vector<ResourceType> types = store_->Types();
  if (parts.size() == 1 && parts[0] == "version") {
    body = VersionInfo(options_.git_version);
  } else if (parts.size() == 1 && parts[0] == "api") {
    body = CoreApiVersions(absl::StrCat(options_.host, ":", port_.load()));
  } else if (parts.size() == 2 && parts[0] == "api") {
    body = ApiResourceList(types, "", parts[1]);
  } else if (parts.size() == 1 && parts[0] == "apis") {
    body = ApiGroupList(types);
  } else if (parts.size() == 2 && parts[0] == "apis") {
    body = ApiGroup(types, parts[1]);
  } else if (parts.size() == 3 && parts[0] == "apis") {
    body = ApiResourceList(types, parts[1], parts[2]);
  } else if (parts.size() == 1 &&
             (parts[0] == "healthz" || parts[0] == "livez" || parts[0] == "readyz")) {
    response.status = 200;
    response.set_content("ok", "text/plain; charset=utf-8");
    return absl::OkStatus();
  }
  if (!body.has_value()) return UnknownPathError();
  if (request.method != "GET") return MethodNotAllowedError();
  WriteJson(response, 200, body->dump());
  return absl::OkStatus();
}

absl::Status HttpFrontend::ServeList(const httplib::Request& request, const ResourceType& type,
                                     const RequestInfo& info, httplib::Response& response) {
  HPTRAIN_ASSIGN_OR_RETURN(ListRequest list, ListRequestOf(request, type, info));
  HPTRAIN_ASSIGN_OR_RETURN(ListPage page, store_->List(type, list));
  nlohmann::json meta = {{"resourceVersion", std::to_string(page.resource_version)}};
  if (type.custom || !page.continue_token.empty()) meta["continue"] = page.continue_token;
  if (page.remaining_items.has_value()) meta["remainingItemCount"] = *page.remaining_items;
  if (std::optional<TableOptions> table = TableRequested(request, type); table.has_value()) {
    std::vector<nlohmann::json> objects;
    for (const ObjectPtr& item : page.items) objects.push_back(item->json());
    table->resource_version = std::to_string(page.resource_version);
    table->continue_token = page.continue_token;
    nlohmann::json body = ToTable(type, objects, *table);
    if (page.remaining_items.has_value()) body["metadata"]["remainingItemCount"] = *page.remaining_items;
    WriteJson(response, 200, body.dump());
    return absl::OkStatus();
  }
  std::string body =
      absl::StrCat("{\"kind\":\"", type.ListKind(), "\",\"apiVersion\":\"", type.ApiVersion(),
                   "\",\"metadata\":", meta.dump(), ",\"items\":[");
  for (size_t i = 0; i < page.items.size(); ++i) {
    if (i > 0) body.push_back(',');
    body.append(page.items[i]->Serialized());
  }
  body.append("]}");
  WriteJson(response, 200, body);
  return absl::OkStatus();
}

absl::Status HttpFrontend::ServeWatch(const httplib::Request& request, const ResourceType& type,
                                      const RequestInfo& info, httplib::Response& response) {
  HPTRAIN_ASSIGN_OR_RETURN(ListRequest list, ListRequestOf(request, type, info));
  WatchRequest watch{{list.ns, list.labels, list.fields},
                     list.resource_version,
                     Param(request, "allowWatchBookmarks") == "true" ||
                         Param(request, "allowWatchBookmarks") == "1"};
  absl::Duration timeout = kDefaultWatchTimeout;
  std::string timeout_text = Param(request, "timeoutSeconds");
  int64_t seconds = 0;
  if (!timeout_text.empty()) {
    if (!absl::SimpleAtoi(timeout_text, &seconds) || seconds < 0) {
      return BadRequestError(absl::StrCat("timeoutSeconds: Invalid value: \"", timeout_text, "\""));
    }
    if (seconds > 0) timeout = absl::Seconds(seconds);
  }
  HPTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Watcher> watcher, store_->Watch(type, watch));

  // httplib gzips application/json bodies for clients that accept it, buffering a chunked body
  // until it ends; a watch must reach the client event by event, so drop the offer. The request
  // object is the server's own, non-const one, lent to handlers read-only.
  const_cast<httplib::Request&>(request).headers.erase("Accept-Encoding");

  struct Stream {
    std::shared_ptr<Watcher> watcher;
    absl::Time deadline;
    bool expired = false;
  };
  auto stream = std::make_shared<Stream>(Stream{watcher, absl::Now() + timeout});
  std::string resource = type.Qualified();
  response.status = 200;
  response.set_header("Cache-Control", "no-cache, private");
  response.set_chunked_content_provider(
      "application/json",
      [this, stream, resource](size_t /*offset*/, httplib::DataSink& sink) {
        if (stopping_) {
          sink.done();
          return true;
        }
        if (!stream->expired && absl::Now() >= stream->deadline) {
          // timeoutSeconds is over: a last BOOKMARK when asked for, then the end of the stream.
          stream->expired = true;
          store_->Bookmark(resource, stream->watcher);
          stream->watcher->Close(/*drain=*/true);
        }
        absl::Duration wait = kWatchPoll;
        if (!stream->expired) wait = std::min(wait, stream->deadline - absl::Now());
        std::string line;
        switch (stream->watcher->Pop(&line, std::max(wait, absl::ZeroDuration()))) {
          case Watcher::PopResult::kLine:
            return sink.write(line.data(), line.size());
          case Watcher::PopResult::kClosed:
            sink.done();
            return true;
          case Watcher::PopResult::kIdle:
            return true;
        }
        return true;
      },
      [this, stream, resource](bool /*success*/) { store_->Unwatch(resource, stream->watcher); });
  return absl::OkStatus();
}

absl::Status HttpFrontend::ServePatch(const httplib::Request& request, const ResourceType& type,
                                      const RequestInfo& info, httplib::Response& response) {
  HPTRAIN_ASSIGN_OR_RETURN(PatchType patch_type,
                           PatchTypeFromContentType(request.get_header_value("Content-Type")));
  HPTRAIN_ASSIGN_OR_RETURN(
      nlohmann::json body,
      ParseBody(request.body, patch_type == PatchType::kApply ? "yaml" : "json"));
  WriteContext context = ContextOf(request);
  // Apply needs an explicit fieldManager; the User-Agent default is for updates only.
  if (patch_type == PatchType::kApply) context.field_manager = Param(request, "fieldManager");
  if (info.subresource == "scale") {
    HPTRAIN_ASSIGN_OR_RETURN(
        nlohmann::json scale,
        operations_->UpdateScale(type, info.ns, info.name, patch_type, body, context));
    WriteJson(response, 200, scale.dump());
    return absl::OkStatus();
  }
  bool existed = store_->Get(type.Qualified(), info.ns, info.name) != nullptr;
  HPTRAIN_ASSIGN_OR_RETURN(
      ObjectPtr object,
      operations_->Patch(type, info.ns, info.name, info.subresource, patch_type, body, context));
  WriteJson(response, existed ? 200 : 201, object->Serialized());
  return absl::OkStatus();
}

}  // namespace hptrain::testing
