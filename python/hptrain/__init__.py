"""hptrain for your own PyTorch training script.

A few lines turn a plain PyTorch loop into a worker of a TrainingJob whose strategy, options and
batch shares come from the job's manifest (spec.strategy, spec.workerGroups[].batchSize,
spec.rebalance), so one script runs under every strategy::

    import hptrain as hp
    hp.init()
    model = Net().to(hp.device())
    opt = hp.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model)
    sampler = hp.data.GlobalBatchSampler(len(dataset))
    loader = DataLoader(dataset, batch_sampler=sampler, num_workers=2)
    hp.restore(model, opt)
    for x, y in loader:
        loss = loss_fn(model(x), y)          # a mean over the local batch
        loss.backward(); opt.step(); opt.zero_grad()
        hp.report(loss=loss.item())
    hp.evaluate(lambda: {"accuracy": test(model)})

The program runs as a job's spec.trainer, under `hptrain run` or on Kubernetes (docs/python.md).
"""

import atexit
import os
import sys

import torch

from . import _C
from . import data

Error = _C.Error

__all__ = [
    "Error", "init", "rank", "size", "device", "job", "DistributedOptimizer", "restore", "report",
    "evaluate", "save", "finish", "epoch", "step", "steps_per_epoch", "extra", "data",
]


class _State:
    session = None
    loop = None
    optimizer = None       # the DistributedOptimizer
    dataset_size = None    # from the sampler or DistributedOptimizer(dataset_size=)
    extra = None           # hp.save(extra=...): kept in every later checkpoint's sidecar
    last_sidecar_step = None
    failure = None         # an uncaught exception's text, for the coordinator


def _session():
    if _State.session is None:
        raise Error("call hp.init() first")
    return _State.session


def init():
    """Joins the job this process is a worker of, from the HPTRAIN_* environment that
    `hptrain run` and the controller set: registers with the coordinator, serves /metrics and
    connects to the other workers (and the parameter server). Idempotent."""
    if _State.session is not None:
        return
    try:
        session = _C.Session.from_environment()
    except Error as e:
        # A worker that cannot join its job has nothing to do: one line, a non-zero exit.
        raise SystemExit("hptrain: %s" % e) from None
    _State.session = session
    torch.set_num_threads(session.choose_threads())
    if session.device.startswith("cuda"):
        torch.cuda.set_device(torch.device(session.device))
        # spec.deterministic, as the built-in trainer has it: deterministic cuDNN, no autotuning,
        # no TF32; otherwise autotuned convolutions.
        torch.backends.cudnn.deterministic = session.deterministic
        torch.backends.cudnn.benchmark = not session.deterministic
        if session.deterministic:
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
    previous_hook = sys.excepthook

    def record_failure(kind, value, traceback):
        _State.failure = "%s: %s" % (kind.__name__, value)
        previous_hook(kind, value, traceback)

    sys.excepthook = record_failure
    atexit.register(finish)


def rank():
    """This worker's rank, 0-based."""
    return _session().rank


def size():
    """The number of workers of the job."""
    return _session().world


def device():
    """The torch.device this worker trains on (spec.device resolved for this process)."""
    return torch.device(_session().device)


def job():
    """The job's settings a script may read: name, strategy, epochs, global batch size, seed."""
    s = _session()
    return {
        "name": s.job, "strategy": s.strategy, "epochs": s.epochs, "max_steps": s.max_steps,
        "global_batch_size": s.global_batch_size, "seed": s.seed, "rank": s.rank,
        "world": s.world, "checkpoint_path": s.checkpoint_path,
    }


def _sidecar(step):
    return "%s.user-%d.pt" % (_session().checkpoint_path, step)


def _before_checkpoint(step):
    """Rank 0, before the checkpoint of `step` is written: the program's own state beside it
    (the optimizer's when it is the program's, and hp.save's extra), atomically. The sidecar of
    the checkpoint it replaces is kept until then; older ones go."""
    opt = _State.optimizer
    state = {"step": step, "extra": _State.extra}
    if opt is not None and opt._optimizer is not None:
        state["optimizer"] = opt._optimizer.state_dict()
    path = _sidecar(step)
    tmp = path + ".tmp"
    torch.save(state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    previous = _State.last_sidecar_step
    directory = os.path.dirname(os.path.abspath(path))
    prefix = os.path.basename(_session().checkpoint_path) + ".user-"
    for name in os.listdir(directory):
        if not (name.startswith(prefix) and name.endswith(".pt")):
            continue
        try:
            old = int(name[len(prefix):-3])
        except ValueError:
            continue
        if old != step and old != previous:
            os.remove(os.path.join(directory, name))
    _State.last_sidecar_step = step


def _ensure_loop():
    if _State.loop is not None:
        return _State.loop
    opt = _State.optimizer
    if opt is None:
        raise Error("create hp.DistributedOptimizer(optimizer, model) first")
    size = opt._dataset_size or _State.dataset_size
    if size is None:
        raise Error("the number of training samples is unknown: use hp.data.GlobalBatchSampler("
                    "len(dataset)) or DistributedOptimizer(..., dataset_size=N)")
    named = [(n, p) for n, p in opt._model.named_parameters() if p.requires_grad]
    # The floating-point buffers a checkpoint keeps (BatchNorm statistics); not constants such as
    # an attention mask registered with persistent=False.
    persistent = set(opt._model.state_dict().keys())
    buffers = [(n, b) for n, b in opt._model.named_buffers()
               if b.is_floating_point() and n in persistent]
    _State.loop = _C.Loop(
        _session(), [p for _, p in named], [n for n, _ in named], [b for _, b in buffers],
        [n for n, _ in buffers], opt._optimizer is None, int(size), _before_checkpoint)
    return _State.loop


class DistributedOptimizer:
    """Wraps the script's optimizer (or None: hptrain's own, spec.optimizer with its learning-rate
    schedule, required for ps, hps, mp2 and multistep) so that each step uses the job's exchange.

    Gradients enter the strategy's buckets from autograd hooks as backward produces them, each
    weighted by this worker's batch b_i (the loss is a mean over the local batch), so the update
    is the global batch's mean whatever the allocation. step() waits for the exchange with the GIL
    released. One backward per step."""

    def __init__(self, optimizer, model, dataset_size=None):
        _session()
        if _State.optimizer is not None:
            raise Error("one DistributedOptimizer per process")
        if optimizer is not None and _session().strategy == "dgc" and any(
                group.get("momentum", 0) for group in optimizer.param_groups):
            raise Error("strategy dgc applies momentum itself (momentum correction): give your "
                        "optimizer momentum 0, or pass optimizer=None (hptrain's optimizer)")
        self._optimizer = optimizer
        self._model = model
        self._dataset_size = dataset_size
        _State.optimizer = self
        if dataset_size is not None or _State.dataset_size is not None:
            _ensure_loop()

    @property
    def param_groups(self):
        return self._optimizer.param_groups if self._optimizer is not None else []

    def state_dict(self):
        return self._optimizer.state_dict() if self._optimizer is not None else {}

    def load_state_dict(self, state):
        if self._optimizer is not None:
            self._optimizer.load_state_dict(state)

    def zero_grad(self, set_to_none=True):
        if self._optimizer is not None:
            self._optimizer.zero_grad(set_to_none=set_to_none)
            return
        for p in self._model.parameters():
            p.grad = None

    def step(self, closure=None):
        if closure is not None:
            raise Error("DistributedOptimizer.step() takes no closure")
        loop = _ensure_loop()
        if self._optimizer is not None:
            loop.wait_for_gradients()
            self._optimizer.step()
        loop.end_step()


def restore(model=None, optimizer=None):
    """Continues from the job's checkpoint (spec.checkpoint.path) when the worker was started to
    resume ($HPTRAIN_RESUME, `hptrain run --resume`, a gang restart): the parameters, buffers,
    hptrain's optimizer and the strategy's state, and the program's own state from the sidecar
    (its optimizer, hp.save's extra). Returns the step training continues from (0: from the
    start). Call once, before the first step; every rank calls it."""
    del model  # the DistributedOptimizer's model is the one restored
    loop = _ensure_loop()
    step = loop.restore()
    if step > 0:
        path = _sidecar(step)
        if os.path.exists(path):
            state = torch.load(path, map_location="cpu")
            _State.extra = state.get("extra")
            _State.last_sidecar_step = step
            opt = optimizer or _State.optimizer
            if "optimizer" in state and opt is not None:
                opt.load_state_dict(state["optimizer"])
        elif _State.optimizer is not None and _State.optimizer._optimizer is not None:
            raise Error("%s: missing; the checkpoint of step %d was written with the program's "
                        "optimizer state beside it" % (path, step))
    return step


def extra():
    """The `extra` of the last hp.save, as restored."""
    return _State.extra


def report(loss):
    """The last step's loss (this worker's mean over its batch): the progress bar of `hptrain
    run`, the worker's metrics (hptrain_train_loss) and the job's status, and the epoch's mean
    train loss in the run summary. Call it after opt.step(); a step without a report is recorded
    without its loss."""
    if _State.loop is not None:
        _State.loop.report(float(loss))


def evaluate(fn):
    """Every rank: makes the workers' models the same (model-averaging strategies average them;
    a no-op where they are already), averages BatchNorm buffers, then returns fn()'s dict of
    metrics. "accuracy" and "loss", averaged over the ranks, are reported as the evaluation of
    the current step (the run summary, the job's status). The model is in eval mode and no
    gradients are recorded while fn runs."""
    loop = _ensure_loop()
    loop.synchronize_for_evaluation()
    model = _State.optimizer._model
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            result = fn()
    finally:
        model.train(was_training)
    result = dict(result or {})
    loop.report_evaluation(float(result.get("accuracy", 0.0)), float(result.get("loss", 0.0)))
    return result


def save(extra=None):
    """Every rank: a checkpoint of the current step now, with `extra` (anything torch.save takes)
    in its sidecar, and in every later checkpoint's until the next save."""
    if extra is not None:
        _State.extra = extra
    _ensure_loop().save_checkpoint()


def step():
    """Global steps done."""
    return _State.loop.step if _State.loop is not None else 0


def epoch():
    """The epoch of the next step."""
    return _State.loop.epoch if _State.loop is not None else 0


def steps_per_epoch():
    """Global steps in one epoch (the training set's size over the global batch)."""
    return _ensure_loop().steps_per_epoch


def finish():
    """Reports the outcome to the coordinator and leaves the job; runs at exit by itself."""
    session = _State.session
    if session is None:
        return
    failure = _State.failure
    session.finish(failure is None, failure or "")
    _State.loop = None
    _State.session = None
