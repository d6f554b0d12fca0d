#include "tests/controller/apiserver/api_server_double.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.h"
#include "tests/controller/apiserver/object_meta.h"

namespace hptrain::testing {
namespace {

ObjectStore::Options StoreOptions(const ApiServerDoubleOptions& options) {
  ObjectStore::Options store;
  store.first_resource_version = options.first_resource_version;
  store.history_limit = options.history_limit;
  store.watch_queue_limit = options.watch_queue_limit;
  return store;
}

// Runs `fn`, turning an exception from a malformed JSON argument into InvalidArgument.
template <typename Fn>
auto Guarded(Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed object: ", e.what()));
  }
}

}  // namespace

ApiServerDouble::ApiServerDouble(ApiServerDoubleOptions options)
    : options_(std::move(options)),
      store_(StoreOptions(options_)),
      operations_(&store_),
      collector_(&store_, &operations_),
      frontend_(&store_, &operations_, &policy_) {
  for (const ResourceType& type : BuiltinResources()) store_.AddType(type);
  if (options_.serve_training_jobs) store_.AddType(TrainingJobResource());
  operations_.SetOwnerChangeCallback([this](const ObjectKey& key, const ObjectPtr& object) {
    collector_.OnOwnerChange(key, object);
  });
}

ApiServerDouble::~ApiServerDouble() { Stop(); }

absl::StatusOr<int> ApiServerDouble::Start() {
  collector_.Start();
  FrontendOptions frontend;
  frontend.host = options_.host;
  frontend.port = options_.port;
  frontend.worker_threads = options_.worker_threads;
  frontend.git_version = options_.git_version;
  absl::StatusOr<int> port = frontend_.Start(frontend);
  if (!port.ok()) collector_.Stop();
  return port;
}

void ApiServerDouble::Stop() {
  frontend_.Stop();
  collector_.Stop();
}

int ApiServerDouble::port() const { return frontend_.port(); }

std::string ApiServerDouble::base_url() const {
  return absl::StrCat("http://", options_.host, ":", port());
}

void ApiServerDouble::ServeResource(const ResourceType& type) { store_.AddType(type); }

std::optional<ResourceType> ApiServerDouble::FindResource(const std::string& resource) const {
  absl::StatusOr<ResourceType> type = Type(resource);
  if (!type.ok()) return std::nullopt;
  return *type;
}

absl::StatusOr<ResourceType> ApiServerDouble::Type(const std::string& resource) const {
  std::optional<ResourceType> exact = store_.FindType(resource);
  if (exact.has_value()) return *exact;
  std::optional<ResourceType> found;
  for (const ResourceType& type : store_.Types()) {
    if (type.plural != resource) continue;
    if (found.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource \"", resource, "\" is ambiguous: name it with its group"));
    }
    found = type;
  }
  if (!found.has_value()) {
    return absl::NotFoundError(absl::StrCat("the double serves no resource \"", resource, "\""));
  }
  return *found;
}

absl::StatusOr<nlohmann::json> ApiServerDouble::Get(const std::string& resource,
                                                    const std::string& ns,
                                                    const std::string& name) const {
  HPTRAIN_ASSIGN_OR_RETURN(ResourceType type, Type(resource));
  HPTRAIN_ASSIGN_OR_RETURN(ObjectPtr object, operations_.Get(type, ns, name));
  return object->json();
}

std::vector<nlohmann::json> ApiServerDouble::List(const std::string& resource,
                                                  const std::string& ns,
                                                  const std::string& label_selector) const {
  std::vector<nlohmann::json> out;
  absl::StatusOr<ResourceType> type = Type(resource);
  absl::StatusOr<LabelSelector> labels = LabelSelector::Parse(label_selector);
  if (!type.ok() || !labels.ok()) return out;
  ListRequest request;
  request.ns = ns;
  request.labels = *labels;
  absl::StatusOr<ListPage> page = store_.List(*type, request);
  if (!page.ok()) return out;
  for (const ObjectPtr& object : page->items) out.push_back(object->json());
  return out;
}

absl::StatusOr<nlohmann::json> ApiServerDouble::Create(const std::string& resource,
                                                       nlohmann::json object) {
  HPTRAIN_ASSIGN_OR_RETURN(ResourceType type, Type(resource));
  return Guarded([&]() -> absl::StatusOr<nlohmann::json> {
    std::string ns;
    if (type.namespaced && object.is_object() && object.contains("metadata")) {
      ns = object["metadata"].value("namespace", "default");
    } else if (type.namespaced) {
      ns = "default";
    }
    WriteContext context;
    context.field_manager = "apiserver-double";
    HPTRAIN_ASSIGN_OR_RETURN(ObjectPtr created,
                             operations_.Create(type, ns, std::move(object), context));
    return created->json();
  });
}

absl::StatusOr<nlohmann::json> ApiServerDouble::Put(const std::string& resource,
                                                    nlohmann::json object) {
  HPTRAIN_ASSIGN_OR_RETURN(ResourceType type, Type(resource));
  return Guarded([&]() -> absl::StatusOr<nlohmann::json> {
    HPTRAIN_ASSIGN_OR_RETURN(ObjectPtr stored, operations_.Put(type, std::move(object)));
    return stored->json();
  });
}

absl::StatusOr<nlohmann::json> ApiServerDouble::Mutate(
    const std::string& resource, const std::string& ns, const std::string& name,
    const std::function<void(nlohmann::json*)>& mutate) {
  HPTRAIN_ASSIGN_OR_RETURN(ResourceType type, Type(resource));
  return Guarded([&]() -> absl::StatusOr<nlohmann::json> {
    HPTRAIN_ASSIGN_OR_RETURN(ObjectPtr stored,
                             operations_.Mutate(type, ns, name, [&](nlohmann::json* object) {
                               mutate(object);
                               return absl::OkStatus();
                             }));
    return stored->json();
  });
}

absl::Status ApiServerDouble::SetPodPhase(const std::string& ns, const std::string& name,
                                          const std::string& phase) {
  std::string now = NowTimestamp();
  return Mutate("pods", ns, name,
                [&](nlohmann::json* pod) {
                  nlohmann::json& status = (*pod)["status"];
                  status["phase"] = phase;
                  bool ready = phase == "Running";
                  status["conditions"] = {{{"type", "Ready"},
                                           {"status", ready ? "True" : "False"},
                                           {"lastTransitionTime", now}}};
                  if (phase != "Pending" && !status.contains("startTime")) {
                    status["startTime"] = now;
                  }
                })
      .status();
}

absl::StatusOr<nlohmann::json> ApiServerDouble::Delete(const std::string& resource,
                                                       const std::string& ns,
                                                       const std::string& name,
                                                       const std::string& propagation_policy) {
  HPTRAIN_ASSIGN_OR_RETURN(ResourceType type, Type(resource));
  DeleteOptions options;
  options.propagation_policy = propagation_policy;
  return Guarded([&]() { return operations_.Delete(type, ns, name, options); });
}

uint64_t ApiServerDouble::resource_version() const { return store_.CurrentResourceVersion(); }

void ApiServerDouble::AddValidator(const std::string& resource, Validator validator) {
  absl::StatusOr<ResourceType> type = Type(resource);
  operations_.AddValidator(type.ok() ? type->Qualified() : resource, std::move(validator));
}

void ApiServerDouble::AddAdmission(const std::string& resource, Admission admission) {
  absl::StatusOr<ResourceType> type = Type(resource);
  operations_.AddAdmission(type.ok() ? type->Qualified() : resource, std::move(admission));
}

void ApiServerDouble::AddToken(const std::string& token, const std::string& user) {
  policy_.AddToken(token, user);
}

void ApiServerDouble::SetAuthorizer(Authorizer authorizer) {
  policy_.SetAuthorizer(std::move(authorizer));
}

std::vector<RequestAttributes> ApiServerDouble::Denials() const { return policy_.Denials(); }

void ApiServerDouble::InjectFault(Fault fault) { policy_.InjectFault(std::move(fault)); }

void ApiServerDouble::ClearFaults() { policy_.ClearFaults(); }

void ApiServerDouble::SendBookmarks() { store_.SendBookmarks(); }

void ApiServerDouble::CompactHistory() { store_.CompactHistory(); }

void ApiServerDouble::CloseAllWatches() { store_.CloseAllWatches(); }

size_t ApiServerDouble::WatchCount(const std::string& resource) const {
  if (resource.empty()) return store_.WatcherCount("");
  absl::StatusOr<ResourceType> type = Type(resource);
  return type.ok() ? store_.WatcherCount(type->Qualified()) : 0;
}

std::vector<RequestRecord> ApiServerDouble::RequestLog() const { return policy_.Log(); }

void ApiServerDouble::ClearRequestLog() { policy_.ClearLog(); }

int ApiServerDouble::RequestCount(const std::string& verb, const std::string& resource) const {
  return policy_.Count(verb, resource);
}

bool ApiServerDouble::WaitFor(const std::function<bool()>& condition,
                              absl::Duration timeout) const {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    uint64_t seen = store_.WriteCount();
    if (condition()) return true;
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return condition();
    store_.AwaitWrite(seen, std::min(left, absl::Milliseconds(50)));
  }
}

bool ApiServerDouble::WaitForGarbageCollection(absl::Duration timeout) {
  return collector_.WaitIdle(timeout);
}

}  // namespace hptrain::testing
