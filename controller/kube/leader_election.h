// LeaderElector: one active controller among replicas, through a coordination.k8s.io/v1 Lease.
//
// The protocol (client-go's leaderelection with a Lease lock):
//   1. Candidate: every retry_period (jittered up to 2.2x), try to acquire:
//        GET the Lease. Missing: CREATE it with holderIdentity = identity, acquireTime =
//        renewTime = now, leaseTransitions 0 (AlreadyExists: somebody was faster; retry).
//        Held by another identity whose record has changed within lease_duration (timed by
//        this process's clock, not the holder's renewTime, so clock skew does not matter): wait.
//        Otherwise (expired, released, or ours): PUT the Lease with our identity, renewTime now
//        and, when taking over, acquireTime now and leaseTransitions + 1, carrying the
//        resourceVersion we read: a 409 Conflict means another candidate won the race.
//   2. Leader: on_started_leading(), then renew (the same GET + PUT) every retry_period. When no
//      renewal has succeeded for renew_deadline, leadership is lost: on_stopped_leading(), and
//      back to 1 (the controller's main may also choose to exit).
//   3. Stop(): ends the loop; a leader calls on_stopped_leading() and then, with
//      release_on_stop, clears holderIdentity so the next candidate takes over at once.
//
// Defaults are client-go's and Kubeflow's: lease 15 s, renew deadline 10 s, retry 2 s. Each
// attempt is bounded by the client's request timeout; keep Config::timeout below renew_deadline.
//
// Thread-safety: Start/Stop are for the owner's thread; IsLeader/Leader are safe from any thread.
// The callbacks run on the elector's thread and must return promptly (start or stop workers,
// don't run them); on_stopped_leading returns only once work guarded by the lease has stopped.
#ifndef HPTRAIN_CONTROLLER_KUBE_LEADER_ELECTION_H_
#define HPTRAIN_CONTROLLER_KUBE_LEADER_ELECTION_H_

#include <atomic>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/kube/client.h"
#include "controller/kube/rate_limiter.h"

namespace hptrain::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;  // required
  std::string lease_name = "hptrain-controller";
  std::string identity;  // required; unique per replica (pod name)
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  bool release_on_stop = true;
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& holder)> on_new_leader;  // optional: holder changed
  // The clock written into acquireTime / renewTime; empty: absl::Now. Expiry and deadlines are
  // always timed with the real clock.
  NowFunction now;
};

class LeaderElector {
 public:
  // `client` is not owned and must outlive the elector.
  LeaderElector(Client* client, LeaderElectionConfig config);
  // Stops the elector if it runs.
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Checks the config and starts the election thread. InvalidArgument for an empty identity or
  // namespace, or durations not ordered lease_duration > renew_deadline > retry_period > 0;
  // FailedPrecondition if already running.
  absl::Status Start();

  // Ends the election (see step 3) and joins the thread. Blocks for at most one API request plus
  // the release. Idempotent.
  void Stop();

  bool IsLeader() const { return leading_.load(); }

  // The holder seen in the last Lease read ("" before the first read or after a release).
  std::string Leader() const;

  // One acquire-or-renew attempt (step 1); true when this replica holds the lease afterwards.
  // Called by the election thread; public for tests.
  bool TryAcquireOrRenew();

 private:
  void Run();
  bool Sleep(absl::Duration delay);
  bool stopping() const;
  void Release();
  std::string Stamp() const;  // MicroTime of config_.now
  void Observe(const nlohmann::json& lease, absl::Time now);

  Client* const client_;
  const LeaderElectionConfig config_;
  std::atomic<bool> leading_{false};
  std::thread thread_;
  std::mt19937_64 jitter_;

  mutable absl::Mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string observed_holder_ ABSL_GUARDED_BY(mu_);
  // Election-thread state: the last Lease read and when this process saw it change.
  std::string observed_resource_version_;
  absl::Time observed_time_;
};

}  // namespace hptrain::kube

#endif  // HPTRAIN_CONTROLLER_KUBE_LEADER_ELECTION_H_
