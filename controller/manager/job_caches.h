// JobCaches: the informers the controller sees the cluster through, and what they hold about
// one TrainingJob.
//
// Per watched namespace (or once for all namespaces) six informers (controller/kube/informer.h):
//   trainingjobs.hptrain.io/v1alpha1   every job
//   pods, services, secrets            only the controller's own objects, selected by the label
//                                      app.kubernetes.io/managed-by=hptrain-controller
//   podgroups.scheduling.volcano.sh,   the same, for gang scheduling (reconcile/pod_group.h);
//   podgroups.scheduling.x-k8s.io      optional kinds: where a scheduler's CRD is not installed
//                                      (or the role does not cover it) the informer holds
//                                      nothing and looks again every minute
// Every add, update and delete becomes the key ("namespace/name") of the job concerned, handed
// to the `on_change` callback (the controller's work queue): a job's own key, or the owner job
// of a pod, Service or Secret (owner_key.h). Relists after a 410 replay what changed while the
// watch was down the same way, so no change is missed.
//
// Observe(job) then gives the reconciler its input from the caches: the job and the objects
// labelled hptrain.io/job=<name> in its namespace.
//
// Thread-safety: Start/Stop are for the owner's thread. `on_change` runs on the informers'
// threads and must not block. Everything else is safe from any thread.
#ifndef HPTRAIN_CONTROLLER_MANAGER_JOB_CACHES_H_
#define HPTRAIN_CONTROLLER_MANAGER_JOB_CACHES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/kube/client.h"
#include "controller/kube/informer.h"
#include "controller/kube/store.h"
#include "controller/reconcile/reconciler.h"

namespace hptrain::manager {

// The label selector of the informers for owned kinds.
inline constexpr char kOwnedSelector[] = "app.kubernetes.io/managed-by=hptrain-controller";

struct JobCachesOptions {
  // Namespaces to watch; empty (or any entry empty) = all namespaces.
  std::vector<std::string> namespaces;
  int watch_timeout_seconds = 300;
  kube::BackoffOptions backoff;  // between failed lists and watches
  // How often the informer of a kind that is not installed (a PodGroup CRD) looks again.
  absl::Duration absent_kind_relist = absl::Minutes(1);
};

class JobCaches {
 public:
  using KeyHandler = std::function<void(const std::string& key)>;

  // `client` is not owned and must outlive the caches.
  JobCaches(kube::Client* client, JobCachesOptions options, KeyHandler on_change);
  // Stops the informers.
  ~JobCaches();
  JobCaches(const JobCaches&) = delete;
  JobCaches& operator=(const JobCaches&) = delete;

  // Starts every informer and returns; FailedPrecondition if already started.
  absl::Status Start();
  // Stops every informer (each returns within about a hundred milliseconds). Idempotent.
  void Stop();

  // True once every informer has delivered its first list.
  bool HasSynced() const;
  // Blocks until HasSynced() or `timeout`; returns HasSynced().
  bool WaitForSync(absl::Duration timeout) const;

  // The cached TrainingJob under `key`, or null (deleted, or not in a watched namespace).
  kube::ObjectPtr Job(absl::string_view key) const;
  // Keys of every cached TrainingJob.
  std::vector<std::string> JobKeys() const;

  // The reconciler's view of `job` (a cached TrainingJob): the job and its namespace's pods,
  // Services, Secrets and PodGroups labelled hptrain.io/job=<name>. token and worker_metrics are left
  // empty for the caller.
  reconcile::Observed Observe(const nlohmann::json& job) const;

  // The namespaces watched, "" standing for all.
  std::vector<std::string> namespaces() const;
  // Lists the informers started so far, all together (a relist after a 410 counts).
  int64_t lists_started() const;

 private:
  struct NamespaceInformers {
    std::unique_ptr<kube::Informer> jobs;
    std::unique_ptr<kube::Informer> pods;
    std::unique_ptr<kube::Informer> services;
    std::unique_ptr<kube::Informer> secrets;
    std::unique_ptr<kube::Informer> volcano_pod_groups;
    std::unique_ptr<kube::Informer> scheduler_plugins_pod_groups;
    std::vector<kube::Informer*> all() const {
      return {jobs.get(),     pods.get(),
              services.get(), secrets.get(),
              volcano_pod_groups.get(), scheduler_plugins_pod_groups.get()};
    }
  };

  // The informers covering namespace `ns`, or null.
  const NamespaceInformers* For(absl::string_view ns) const;
  kube::InformerHandlers JobHandlers() const;
  kube::InformerHandlers OwnedHandlers() const;

  kube::Client* const client_;
  const KeyHandler on_change_;
  std::map<std::string, NamespaceInformers, std::less<>> informers_;  // by namespace; "" = all
  bool started_ = false;
};

}  // namespace hptrain::manager

#endif  // HPTRAIN_CONTROLLER_MANAGER_JOB_CACHES_H_
