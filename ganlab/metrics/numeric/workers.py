"""The CPU worker pool shared by the blocked metric kernels (k-means, PRDC, similarity, ...)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

__all__ = ["WorkerPool"]

T = TypeVar("T")


class WorkerPool:
    """Context manager running blocked CPU work on threads with one intra-op thread each.

    On CPU, PyTorch opens an OpenMP parallel region for every large op and each region waits
    for all its threads, so a loop of short ops slows down badly when other processes share
    the cores (10x measured on 2 busy cores). Like scikit-learn's ``prange``, this pool gives
    each of ``torch.get_num_threads()`` workers whole blocks, run serially in that thread
    (``torch.set_num_threads(1)`` is thread-local for OpenMP/MKL; the process default is
    restored), so a pass has one synchronisation point. Off CPU, or with one worker, work
    runs inline. Threads live only inside the ``with`` block.

    Args:
        device: where the work runs (off CPU: inline).
        workers: worker threads (default ``torch.get_num_threads()``); e.g. an ensemble scores its members on
            ``trainer.ensemble_workers`` threads while it trains on one.

    Raises:
        ValueError: ``workers`` below 1.
    """

    def __init__(self, device: torch.device, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"a worker pool needs at least 1 worker, got {workers}")
        self.workers = (workers or torch.get_num_threads()) if device.type == "cpu" else 1
        self.pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> WorkerPool:
        if self.workers > 1:
            before = torch.get_num_threads()
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="ganlab-metrics")
            barrier = threading.Barrier(self.workers + 1)  # forces one thread per task

            def init() -> None:
                torch.set_num_threads(1)
                barrier.wait()

            futures = [self.pool.submit(init) for _ in range(self.workers)]
            barrier.wait()
            for f in futures:
                f.result()
            torch.set_num_threads(before)  # the workers' call also set the process default
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on one worker (serial, without OpenMP regions), or inline."""
        return fn() if self.pool is None else self.pool.submit(fn).result()

    def map(self, fn: Callable[..., T], *iterables: Iterable) -> list[T]:
        """``[fn(*args) for args in zip(*iterables)]``, one task per item, in order."""
        return list(map(fn, *iterables) if self.pool is None else self.pool.map(fn, *iterables))

    def map_rows(self, fn: Callable[[int, int], T], n: int, min_rows: int = 2048) -> list[T]:
        """``fn(start, end)`` over up to one contiguous slab of ``>= min_rows`` rows per worker."""
        parts = max(1, min(self.workers, n // min_rows))
        bounds = [n * i // parts for i in range(parts + 1)]
        return self.map(fn, bounds[:-1], bounds[1:])
