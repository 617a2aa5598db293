"""Peak memory of the run: GPU allocations on CUDA, the process's resident set size on the CPU."""

from __future__ import annotations

import resource
import sys

import torch


def peak_memory_mib(device: torch.device) -> float:
    """Peak memory in MiB since the process started (or the last CUDA peak reset).

    CUDA: ``torch.cuda.max_memory_allocated(device)`` (tensors only, not the caching allocator's reserve).
    Otherwise: the peak resident set size from ``getrusage`` (KiB on Linux, bytes on macOS), which includes
    the Python interpreter and libraries.
    """
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10
