# shellcheck shell=bash
# Sourced by bench/gpu/throughput.sh and bench/gpu/profile.sh: job_yaml MODEL BATCH prints a
# one-worker job on synthetic data of the model's shape with examples/fashion-mnist.yaml's
# optimizer and seed, on $DEVICE (cuda by default).
job_yaml() {  # job_yaml MODEL BATCH: a one-worker synthetic job on the GPU
  local model=$1 batch=$2 shape="[1, 28, 28]" device=${DEVICE:-cuda}
  [[ $model == resnet20 ]] && shape="[3, 32, 32]"
  cat <<EOF
# Written by bench/gpu/job_yaml.sh: examples/fashion-mnist.yaml's optimizer and seed, synthetic
# data of the model's shape, one worker on the GPU.
apiVersion: hptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: gpu-throughput-$model
spec:
  model:
    name: $model
  dataset:
    name: synthetic
    synthetic:
      samples: 8192
      testSamples: 512
      shape: $shape
      classes: 10
  strategy:
    type: ssgd
  optimizer:
    type: sgd
    lr: 0.05
    momentum: 0.9
    weightDecay: 5e-4
  globalBatchSize: $batch
  epochs: 1000
  seed: 42
  device: $device
  workers:
    replicas: 1
EOF
}
