"""Data for a TrainingJob's workers: each worker's slice of every global batch, in the built-in
trainer's order (one seeded permutation per epoch; worker i takes b_i consecutive samples of each
global batch of B), with b_i following the H-PS allocation."""

import torch
import torch.utils.data

from . import _C


def _hp():
    from . import _State, _session  # the package's state, once hp.init() ran
    return _State, _session


class GlobalBatchSampler(torch.utils.data.Sampler):
    """A batch_sampler for torch.utils.data.DataLoader: yields this worker's indices of every
    remaining step of the job (all epochs, spec.maxSteps honoured, from the restored step on).
    Its batches' lengths follow the allocation in force at each step (spec.rebalance), the same
    step on every rank."""

    def __init__(self, dataset_size):
        state, session = _hp()
        self._session = session()
        self._size = int(dataset_size)
        if state.dataset_size is not None and state.dataset_size != self._size:
            raise _C.Error("GlobalBatchSampler: %d samples, but %d were given before"
                           % (self._size, state.dataset_size))
        state.dataset_size = self._size
        if state.optimizer is not None:
            from . import _ensure_loop
            _ensure_loop()

    def _total_steps(self):
        s = self._session
        total = _C.steps_per_epoch(self._size, s.global_batch_size) * s.epochs
        return min(total, s.max_steps) if s.max_steps > 0 else total

    def __len__(self):
        state, _ = _hp()
        done = state.loop.step if state.loop is not None else 0
        return max(0, self._total_steps() - done)

    def __iter__(self):
        from . import _ensure_loop
        loop = _ensure_loop()
        step = loop.step
        while step < loop.total_steps:
            yield loop.batch_indices(step)
            step += 1


class JobDataset(torch.utils.data.TensorDataset):
    """The job's spec.dataset split ("train" or "test"), read and normalized as the built-in
    trainer reads it: (image float32 [C, H, W], label int64) pairs."""

    def __init__(self, split="train"):
        _, session = _hp()
        inputs, targets = _C.job_dataset(session(), split)
        super().__init__(inputs, targets)
