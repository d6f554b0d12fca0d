// TrainingJob objects for the reconciler's tests, as the API server would return them (with
// uid, generation and namespace).
#ifndef HPTRAIN_TESTS_CONTROLLER_RECONCILE_TESTING_JOBS_H_
#define HPTRAIN_TESTS_CONTROLLER_RECONCILE_TESTING_JOBS_H_

#include <string>

#include "controller/reconcile/object_meta.h"

namespace hptrain::reconcile::testing {

inline constexpr char kNamespace[] = "team-a";
inline constexpr char kJobName[] = "mlp";
inline constexpr char kJobUid[] = "11111111-2222-3333-4444-555555555555";
inline constexpr char kImage[] = "hptrain/runtime:test";

// Synthetic MLP, global batch 64, `replicas` workers in the shorthand spec.workers form with
// image kImage, no ps template, generation 1, no status.
Json ShorthandJob(int replicas = 2);

// ResNet-20 over two GPU groups: "a100" x2 (1 GPU, cpu 8, nodeSelector A100, a toleration, an
// env var and a volume) and "t4" x1 (1 GPU, T4), a ps template with cpu requests, job
// name "hetero".
Json HeteroJob();

// The user's own program (spec.trainer: python3 -u train_lm.py --corpus /data/corpus.txt in
// /app) in image registry.example/team-a/lm:3, job "lm" in kNamespace, over two groups: "big"
// x2 (a worker container with args --log-every 10 and env PYTHONUNBUFFERED=1) and "small" x1 (a
// container named "trainer"); ssgd, no ps template. It also names spec.model and spec.dataset,
// which the runtime's validator still requires of every job.
Json TrainerJob();

// ShorthandJob(replicas) with strategy `type` (a parameter-server strategy: ps, hps, mp2) and
// spec.ps.shards = `shards`.
Json ShardedJob(const std::string& type, int shards, int replicas = 2);

// spec.runPolicy[key] = value.
void SetRunPolicy(Json* job, const std::string& key, const Json& value);

// Sets spec.workers.replicas (shorthand jobs) and bumps metadata.generation, as an edit would.
void Scale(Json* job, int replicas);

}  // namespace hptrain::reconcile::testing

#endif  // HPTRAIN_TESTS_CONTROLLER_RECONCILE_TESTING_JOBS_H_
