#include "tests/controller/reconcile/testing/jobs.h"

namespace hptrain::reconcile::testing {

Json ShorthandJob(int replicas) {
  Json job = Json::parse(R"({
    "apiVersion": "hptrain.io/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {
      "name": "mlp", "namespace": "team-a", "uid": "11111111-2222-3333-4444-555555555555",
      "generation": 1, "resourceVersion": "100",
      "labels": {"team": "a"}, "annotations": {"note": "x"},
      "managedFields": [{"manager": "kubectl", "operation": "Update"}]
    },
    "spec": {
      "model": {"name": "mlp", "hidden": [64]},
      "dataset": {"name": "synthetic",
                  "synthetic": {"samples": 2048, "testSamples": 512, "shape": [1, 28, 28],
                                "classes": 10}},
      "strategy": {"type": "ssgd"},
      "optimizer": {"type": "sgd", "lr": 0.1},
      "globalBatchSize": 64,
      "epochs": 1,
      "seed": 1,
      "workers": {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "worker",
                                              "image": "hptrain/runtime:test"}]}}
      }
    }
  })");
  job["spec"]["workers"]["replicas"] = replicas;
  return job;
}

Json HeteroJob() {
  return Json::parse(R"({
    "apiVersion": "hptrain.io/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "hetero", "namespace": "training",
                 "uid": "aaaaaaaa-0000-0000-0000-000000000001", "generation": 3},
    "spec": {
      "model": {"name": "resnet20"},
      "dataset": {"name": "synthetic"},
      "strategy": {"type": "hps", "bits": "8"},
      "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
      "globalBatchSize": 512,
      "epochs": 30,
      "device": "cuda",
      "workerGroups": [
        {"name": "a100", "replicas": 2, "template": {
          "metadata": {"labels": {"pool": "a100", "hptrain.io/role": "spoofed"}},
          "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "cifar"}}],
            "containers": [{
              "name": "worker", "image": "hptrain/runtime:0.1.0",
              "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
              "volumeMounts": [{"name": "data", "mountPath": "/data"}],
              "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "8", "memory": "32Gi"}}
            }]
          }}},
        {"name": "t4", "replicas": 1, "template": {
          "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{
              "name": "main", "image": "hptrain/runtime:0.1.0",
              "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4"}}
            }]
          }}}
      ],
      "ps": {"template": {"spec": {"containers": [{
        "name": "ps", "image": "hptrain/runtime:0.1.0",
        "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]}}},
      "runPolicy": {"backoffLimit": 2, "ttlSecondsAfterFinished": 86400}
    }
  })");
}

Json TrainerJob() {
  return Json::parse(R"({
    "apiVersion": "hptrain.io/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "lm", "namespace": "team-a",
                 "uid": "bbbbbbbb-0000-0000-0000-000000000002", "generation": 1},
    "spec": {
      "trainer": {"command": ["python3", "-u", "train_lm.py"],
                  "args": ["--corpus", "/data/corpus.txt"],
                  "workingDir": "/app"},
      "dataset": {"name": "synthetic"},
      "strategy": {"type": "ssgd"},
      "optimizer": {"type": "sgd", "lr": 0.1},
      "globalBatchSize": 48,
      "epochs": 1,
      "workerGroups": [
        {"name": "big", "replicas": 2, "template": {"spec": {"containers": [{
          "name": "worker", "image": "registry.example/team-a/lm:3",
          "args": ["--log-every", "10"],
          "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}]}]}}},
        {"name": "small", "replicas": 1, "template": {"spec": {"containers": [{
          "name": "trainer", "image": "registry.example/team-a/lm:3"}]}}}
      ]
    }
  })");
}

Json ShardedJob(const std::string& type, int shards, int replicas) {
  Json job = ShorthandJob(replicas);
  job["spec"]["strategy"] = {{"type", type}};
  if (type == "mp2") job["spec"]["strategy"]["predictor"] = "zero";  // required by mp2
  job["spec"]["ps"] = {{"shards", shards}};
  return job;
}

void SetRunPolicy(Json* job, const std::string& key, const Json& value) {
  (*job)["spec"]["runPolicy"][key] = value;
  (*job)["metadata"]["generation"] = (*job)["metadata"]["generation"].get<int64_t>() + 1;
}

void Scale(Json* job, int replicas) {
  (*job)["spec"]["workers"]["replicas"] = replicas;
  (*job)["metadata"]["generation"] = (*job)["metadata"]["generation"].get<int64_t>() + 1;
}

}  // namespace hptrain::reconcile::testing
