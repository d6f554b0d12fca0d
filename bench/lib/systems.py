"""The systems a benchmark suite compares, and how each one is started on an emulated cluster.

Every system trains the same model on the same data with the same global batch, optimizer,
learning-rate schedule and seed; it differs only in how gradients (or models) cross the network.
hptrain systems run `hptrain run` on host 0 (the ps host) with a placement file that puts worker
r on host r + 1 (on a two-level cluster, `workers_per_node` W > 1: on host 1 + r // W, whose
namespace its node's workers share) and, for a system with S > 1 parameter-server shards, shard s
(1..S-1) on host H + s, a host of its own after the H worker hosts (shard 0 and the coordinator
stay on the ps host); PyTorch DDP systems run one `ddp_peer.py` process per rank on the same
hosts as hptrain's workers.
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(ROOT, "bench", "peers", "ddp_peer.py")
DDP_PORT = 29500
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch

# Models: what each suite trains, and the settings every system shares.
MODELS = {
    # 61,706 parameters: small messages, latency-bound.
    "lenet5": {"job": {"spec.model.name": "lenet5"}, "peer": ["--model", "lenet5"],
               "batch": 128, "lr": 0.05, "epochs": 2, "target": 0.84},
    # 1,333,770 parameters (784-1024-512-10): bandwidth-bound.
    "mlp": {"job": {"spec.model.name": "mlp", "spec.model.hidden": "[1024,512]"},
            "peer": ["--model", "mlp", "--hidden", "1024,512"],
            "batch": 512, "lr": 0.1, "epochs": 2, "target": 0.84},
}

# The MP² predictor trained on LeNet-5/Fashion-MNIST snapshots (examples/predictors/README.md).
MP2_PREDICTOR = os.path.join(ROOT, "examples", "predictors", "lenet5-fashion-mnist.mp2p")

# The priority scheduler as the suite runs it (docs/algorithms.md §3b): chunks of 65,536 elements
# (256 KiB), two per launch, so that the MLP's 803,840-element first layer goes in 13 chunks and
# the input side of the model is updated before its output side has been exchanged.
SCHEDULER = {"spec.scheduler.type": "priority", "spec.scheduler.partitionElements": "65536",
             "spec.scheduler.creditElements": "131072"}

# hptrain systems: name -> job overrides. A key without a dot is a field of spec.strategy; a key
# that starts with "spec." is a job path of its own (e.g. spec.ps.shards).
HPTRAIN = {
    "hptrain-ssgd": {"type": "ssgd"},
    "hptrain-fp16": {"type": "fp16"},
    "hptrain-q8": {"type": "quantized", "bits": "8"},
    "hptrain-q4": {"type": "quantized", "bits": "4"},
    "hptrain-qdyn": {"type": "quantized", "bits": "dynamic"},
    "hptrain-topk": {"type": "topk", "density": "0.01"},
    "hptrain-dgc": {"type": "dgc", "density": "0.01"},
    # ssgd or 8-bit quantized, picked from the first 20 steps' times (docs/algorithms.md §8a), and
    # the fixed widths behind the same gate (fp32 where the link is fast enough).
    "hptrain-auto": {"type": "auto"},
    "hptrain-auto-topk": {"type": "auto", "compressor": "topk"},
    "hptrain-q8-fallback": {"type": "quantized", "bits": "8", "denseFallback": "true"},
    "hptrain-q4-fallback": {"type": "quantized", "bits": "4", "denseFallback": "true"},
    # Parameter server (docs/algorithms.md §5): BSP, then H-PS with everything on (8-bit pushes and
    # deltas, staleness 1, batch allocation) and its ablations, each with one part of H-PS.
    "hptrain-ps": {"type": "ps"},
    "hptrain-hps": {"type": "hps", "bits": "8", "staleness": "1", "spec.rebalance.enabled": "true"},
    "hptrain-hps-a": {"type": "ps", "spec.rebalance.enabled": "true"},  # allocation only
    "hptrain-hps-b": {"type": "hps", "bits": "32", "staleness": "1"},   # pipelining only
    "hptrain-hps-c": {"type": "hps", "bits": "8", "staleness": "0"},    # quantization only
    "hptrain-ps2": {"type": "ps", "spec.ps.shards": "2"},  # shard 1 on a host of its own
    # Model averaging (docs/algorithms.md §3): local SGD every 8 steps (the peer of ddp-postlocal8),
    # and multistep with its defaults (no warm-up, the interval picked every epoch by the AdaComm
    # rule from H = 8, every round ending with a model average),
    "hptrain-localsgd": {"type": "localsgd", "interval": "8"},
    "hptrain-multistep": {"type": "multistep"},
    # ... after one warm-up epoch of ssgd, after a warm-up of a tenth of an epoch,
    "hptrain-multistep-w1": {"type": "multistep", "warmupEpochs": "1"},
    "hptrain-multistep-w01": {"type": "multistep", "warmupEpochs": "0.1"},
    # ... with the delayed global step instead of the average (update: delayed, after one warm-up
    # epoch: the default before the average),
    "hptrain-multistep-delayed": {"type": "multistep", "warmupEpochs": "1", "update": "delayed"},
    # ... with its round all-reduce quantized to 8 bits, and with the priority scheduler.
    "hptrain-multistep-q8": {"type": "multistep",
                             "spec.strategy.compression.type": "quantized",
                             "spec.strategy.compression.bits": "8"},
    "hptrain-multistep-prio": {"type": "multistep", **SCHEDULER},
    # ssgd with the sub-tensor priority scheduler (its effect on plain SSGD).
    "hptrain-ssgd-prio": {"type": "ssgd", **SCHEDULER},
    # MP² (docs/algorithms.md §1): 10 % of each large tensor pushed, the rest predicted by the shipped
    # LeNet-5 predictor at the PS (mode A: 8-bit delta pulls, the default, or the full model with
    # pullBits 32; mode B: fresh values only, predicted on every worker too), and the zero-change
    # ablation (the complement stays stale).
    "hptrain-mp2": {"type": "mp2", "predictor": MP2_PREDICTOR},
    "hptrain-mp2-full": {"type": "mp2", "predictor": MP2_PREDICTOR, "pullBits": "32"},
    "hptrain-mp2-b": {"type": "mp2", "mode": "B", "predictor": MP2_PREDICTOR},
    "hptrain-mp2-zero": {"type": "mp2", "predictor": "zero"},
    # localProgress (docs/algorithms.md §1g): the workers keep their steps on unpushed elements.
    "hptrain-mp2-local": {"type": "mp2", "predictor": MP2_PREDICTOR, "localProgress": "true"},
    "hptrain-mp2-zero-local": {"type": "mp2", "predictor": "zero", "localProgress": "true"},
    # Node-based exchange (docs/algorithms.md §2) on a two-level cluster (--workers-per-node):
    # strategy hierarchical, inter-node parameter averaging once per epoch (K' = -1) and every 50
    # steps, both as eDNNcomm has it (no K' ramp-up: warmupSteps 0), and once per epoch after the
    # default ramp-up (half an epoch of ssgd steps); ssgd and 8-bit quantized over the
    # hierarchical all-reduce (the quantized one encodes the leaders' exchange only).
    # hptrain-ssgd is the flat ring on the same placement.
    "hptrain-hierarchical-epoch": {"type": "hierarchical", "interval": "-1", "warmupSteps": "0"},
    "hptrain-hierarchical-50": {"type": "hierarchical", "interval": "50", "warmupSteps": "0"},
    "hptrain-hierarchical-epoch-warmup": {"type": "hierarchical", "interval": "-1"},
    "hptrain-ssgd-hier": {"type": "ssgd", "spec.communicator.hierarchical": "true"},
    "hptrain-quantized8-hier": {"type": "quantized", "bits": "8",
                                "spec.communicator.hierarchical": "true",
                                "spec.communicator.compressInterNodeOnly": "true"},
    # Gossip (docs/algorithms.md §4): adaptive gossip with its defaults (θ self-calibrated for a
    # request every targetInterval = 5 steps over the first 200 steps, maxInterval 64),
    # fixed-period gossip exchanging at every step (p = 1, the baseline of the paper's targets),
    # EASGD (center on rank 0) and Jin's one-way gossiping SGD (push, p = 1); adaptive gossip
    # with the fixed thresholds 0.01 (the default before self-calibration) and 0.05, and
    # self-calibrated for a request every 4 steps.
    "hptrain-gossip": {"type": "gossip"},
    "hptrain-gossip-k4": {"type": "gossip", "targetInterval": "4"},
    "hptrain-gossip-t01": {"type": "gossip", "threshold": "0.01"},
    "hptrain-gossip-t05": {"type": "gossip", "threshold": "0.05"},
    "hptrain-gossip-p1": {"type": "gossip", "period": "1"},
    "hptrain-easgd": {"type": "gossip", "variant": "easgd"},
    "hptrain-gossip-push": {"type": "gossip", "variant": "push", "period": "1"},
}

# The systems that only mean something when several workers share a node: left out of the
# default list of a flat cluster (each worker a node of its own), where they would repeat ssgd,
# quantized and local SGD; any of them can still be named with --systems.
NODE_SYSTEMS = ("hptrain-hierarchical-epoch", "hptrain-hierarchical-50",
                "hptrain-hierarchical-epoch-warmup", "hptrain-ssgd-hier",
                "hptrain-quantized8-hier")

# The two-level bench (docs/algorithms.md §2, bench/run --two-level): the hierarchical systems,
# flat ssgd on the same placement, and DDP.
TWO_LEVEL_SYSTEMS = ("hptrain-hierarchical-epoch", "hptrain-hierarchical-50", "hptrain-ssgd",
                     "hptrain-ssgd-hier", "hptrain-quantized8-hier", "ddp")

# The gossip systems: left out of the default list (they have a bench of their own, below);
# any of them can still be named with --systems.
GOSSIP_ONLY = ("hptrain-gossip", "hptrain-gossip-p1", "hptrain-easgd", "hptrain-gossip-push",
               "hptrain-gossip-t01", "hptrain-gossip-t05", "hptrain-gossip-k4")

# The gossip bench (docs/algorithms.md §4, bench/run --gossip): adaptive gossip, fixed-period
# gossip (p = 1) that its targets are set against, EASGD and all-reduce SSGD.
GOSSIP_SYSTEMS = ("hptrain-gossip", "hptrain-gossip-p1", "hptrain-easgd", "hptrain-ssgd")

# The strategies whose workers exchange with parameter-server processes on the ps host.
PS_STRATEGIES = ("ps", "hps", "mp2")

# The Python package's systems (docs/python.md): python-X trains examples/python/lenet5.py, a plain
# PyTorch LeNet-5 script, as the job's spec.trainer with hptrain-X's strategy. LeNet-5 only; not
# in the default list (name them with --systems).
PYTHON_SCRIPT = os.path.join(ROOT, "examples", "python", "lenet5.py")
PYTHON_PREFIX = "python-"


def is_python(name):
    """Whether `name` is a Python-package system (python-X, X an hptrain system's suffix)."""
    return name.startswith(PYTHON_PREFIX) and "hptrain-" + name[len(PYTHON_PREFIX):] in HPTRAIN


def strategy_of(name):
    """The job overrides of hptrain system `name`, or of the hptrain system a python-X mirrors."""
    if is_python(name):
        return HPTRAIN["hptrain-" + name[len(PYTHON_PREFIX):]]
    return HPTRAIN.get(name, {})


# PyTorch DDP systems: name -> ddp_peer.py flags.
DDP = {
    "ddp": ["--hook", "none"],
    "ddp-fp16": ["--hook", "fp16"],
    "ddp-powersgd2": ["--hook", "powersgd", "--powersgd-rank", "2"],
    "ddp-powersgd4": ["--hook", "powersgd", "--powersgd-rank", "4"],
    "ddp-postlocal8": ["--hook", "postlocal", "--period", "8"],
}


def all_systems(built_strategies, python=False):
    """Every hptrain system whose strategy this binary has, then every DDP system; with
    `python` (the package was built), the python-X twin of every hptrain system too."""
    names = [n for n, s in HPTRAIN.items() if s["type"] in built_strategies]
    twins = [PYTHON_PREFIX + n[len("hptrain-"):] for n in names] if python else []
    return names + list(DDP) + twins


def default_systems(built_strategies, workers_per_node=1):
    """What runs without --systems: on a two-level cluster the two-level bench's systems, on a
    flat one every system but those that need nodes of several workers and the gossip bench's
    own."""
    known = all_systems(built_strategies)
    if workers_per_node > 1:
        return [n for n in TWO_LEVEL_SYSTEMS if n in known]
    return [n for n in known if n not in NODE_SYSTEMS and n not in GOSSIP_ONLY]


def is_gossip(name):
    """Whether hptrain system `name` runs strategy gossip."""
    return strategy_of(name).get("type") == "gossip"


def is_ddp(name):
    return name in DDP


def uses_ps(name):
    """Whether hptrain system `name` sends its gradients through the ps host."""
    return strategy_of(name).get("type") in PS_STRATEGIES


def ps_shards(name, hptrain_sets=()):
    """Parameter-server shards of system `name`: spec.ps.shards from its own overrides, or from
    the suite's `--hptrain-set`s, which come after them; 1 for every other system."""
    if not uses_ps(name):
        return 1
    shards = strategy_of(name).get("spec.ps.shards", "1")
    for item in hptrain_sets:
        key, _, value = item.partition("=")
        if key.strip() == "spec.ps.shards":
            shards = value.strip()
    try:
        return max(1, int(shards))
    except ValueError:
        return 1  # hptrain itself rejects the job with a one-line error


def shard_hosts(name, settings):
    """The hosts of parameter-server shards 1..S-1 of system `name`: H + 1 .. H + S - 1, after
    the H worker hosts (empty for a single shard or a collective strategy)."""
    return [settings.nodes + s for s in range(1, ps_shards(name, settings.hptrain_sets))]


def ps_hosts(name, settings):
    """Every host of system `name`'s parameter server: the ps host (coordinator and shard 0),
    then the hosts of shards 1..S-1."""
    return [0] + shard_hosts(name, settings)


def worker_host(settings, rank):
    """The host (namespace index) of worker `rank`: hosts 1..H hold the workers, consecutive
    ranks together, settings.workers_per_node on each."""
    return 1 + rank // settings.workers_per_node


def worker_hosts(settings):
    """The hosts of the workers, 1..H (H = settings.nodes)."""
    return list(range(1, settings.nodes + 1))


TRAIN_SAMPLES = 60000  # Fashion-MNIST


def eval_interval(steps_per_epoch, evals_per_epoch):
    """Global steps between evaluations for at most `evals_per_epoch` per epoch, at the same
    points of every epoch: the smallest divisor of the steps per epoch that is at least
    steps / evals (so that no evaluation falls a step or two before an epoch's end, which is
    evaluated anyway). 0 when that is the whole epoch."""
    if evals_per_epoch <= 1 or steps_per_epoch <= 1:
        return 0
    target = steps_per_epoch / evals_per_epoch
    every = next(d for d in range(1, steps_per_epoch + 1)
                 if steps_per_epoch % d == 0 and d >= target)
    return 0 if every >= steps_per_epoch else every


class Settings:
    """What one suite run shares across systems."""

    def __init__(self, model, workers, epochs, max_steps, target, threads, evals_per_epoch=1,
                 hptrain_sets=(), slowdown=(), workers_per_node=1):
        self.model = model
        self.m = MODELS[model]
        self.workers = workers
        # Workers per host: the workers of a host share its network namespace (loopback between
        # them, no rate limit), so they are one node of the hierarchical exchange (hptrain names
        # a worker's node after its host address). 1: every worker a host of its own.
        self.workers_per_node = workers_per_node
        self.nodes = workers // workers_per_node
        self.epochs = epochs or self.m["epochs"]
        self.max_steps = max_steps
        self.target = target or self.m["target"]
        self.threads = threads or max(1, (os.cpu_count() or 1) // workers)
        # Every system also evaluates every `eval_every` global steps (0: at epoch ends only).
        self.eval_every = eval_interval(TRAIN_SAMPLES // self.m["batch"], evals_per_epoch)
        self.hptrain_sets = list(hptrain_sets)  # "path=value" for every hptrain system
        # One slowdown factor per worker (emulated heterogeneity; empty: none), given to hptrain
        # as spec.testing.slowdown and to the DDP peer as --slowdown.
        self.slowdown = [float(f) for f in slowdown]


def hptrain_command(name, settings, cluster, binary, out_dir):
    """argv (to run on host 0) and the summary path for hptrain system `name`."""
    placement = {"ps": {"exec": cluster.exec_prefix(0), "address": cluster.address(0)},
                 "workers": [{"exec": cluster.exec_prefix(worker_host(settings, r)),
                              "address": cluster.address(worker_host(settings, r))}
                             for r in range(settings.workers)]}
    extra = shard_hosts(name, settings)
    if extra:
        if extra[-1] >= cluster.hosts:
            raise ValueError(f"{name}: parameter-server shard host {extra[-1]} is not in the "
                             f"cluster ({cluster.hosts} hosts)")
        placement["psShards"] = [{"exec": cluster.exec_prefix(h), "address": cluster.address(h)}
                                  for h in extra]
    placement_file = os.path.join(out_dir, f"{name}.placement.json")
    with open(placement_file, "w") as f:
        json.dump(placement, f, indent=1)
    sets = {"spec.epochs": settings.epochs, "spec.globalBatchSize": settings.m["batch"],
            "spec.optimizer.lr": settings.m["lr"], "spec.threads": settings.threads,
            "spec.workerGroups.0.replicas": settings.workers, "spec.seed": 42}
    job = os.path.join(ROOT, "examples", "fashion-mnist.yaml")
    if is_python(name):
        if settings.model != "lenet5":
            raise ValueError(f"{name}: the Python systems train LeNet-5 only "
                             f"(examples/python/lenet5.py), not {settings.model}")
        job = os.path.join(ROOT, "examples", "python", "lenet5.yaml")
        sets["spec.trainer.command"] = f"[{PYTHON},{PYTHON_SCRIPT},--builtin-init]"
    else:
        sets.update(settings.m["job"])
    if settings.max_steps:
        sets["spec.maxSteps"] = settings.max_steps
    if settings.eval_every:
        sets["spec.evalEverySteps"] = settings.eval_every
    if settings.slowdown:
        sets["spec.testing.slowdown"] = "[" + ",".join(f"{f:g}" for f in settings.slowdown) + "]"
    for key, value in strategy_of(name).items():
        sets[key if key.startswith("spec.") else f"spec.strategy.{key}"] = value
    summary = os.path.join(out_dir, f"{name}.json")
    argv = [binary, "run", job, "--quiet",
            "--placement", placement_file, "--output-json", summary]
    for key, value in sets.items():
        argv += ["--set", f"{key}={value}"]
    for item in settings.hptrain_sets:
        argv += ["--set", item]
    return argv, summary


def ddp_commands(name, settings, cluster, t0, out_dir):
    """[(host, argv)] for each rank and the result path for DDP system `name`."""
    result = os.path.join(out_dir, f"{name}.json")
    common = [PYTHON, PEER, "--world-size", str(settings.workers),
              "--master", f"{cluster.address(1)}:{DDP_PORT}", "--epochs", str(settings.epochs),
              "--batch", str(settings.m["batch"]), "--lr", str(settings.m["lr"]),
              "--threads", str(settings.threads), "--t0", repr(t0), "--seed", "42"]
    common += settings.m["peer"] + DDP[name]
    if settings.max_steps:
        common += ["--max-steps", str(settings.max_steps)]
    if settings.eval_every:
        common += ["--eval-every", str(settings.eval_every)]
    if settings.slowdown:
        common += ["--slowdown", ",".join(f"{f:g}" for f in settings.slowdown)]
    commands = []
    for r in range(settings.workers):
        argv = common + ["--rank", str(r)]
        if r == 0:
            argv += ["--output", result]
        commands.append((worker_host(settings, r), argv))
    return commands, result
