"""The vector instruction set torch's CPU kernels take on this machine, read without importing torch.

A run repeats bit for bit only on CPUs where torch takes the same code path (:mod:`ganlab.provenance` records it per
run as ``cpu_capability``), and a run's speed depends on it too, so ``ganlab-study status`` (which imports no torch)
estimates the time left from the finished runs made on this machine's path where there are some. The rule is ATen's
``compute_cpu_capability`` (``aten/src/ATen/native/DispatchStub.cpp``): the ``ATEN_CPU_CAPABILITY`` environment
variable when it is one of ATen's x86 names (``default``, ``avx2``, ``avx512``, lower case, as ATen compares it;
another value ATen ignores, and so does this), else ``AVX512`` when the CPU has AVX-512 VL, BW and DQ and FMA, else
``AVX2`` with AVX2 and FMA, else ``DEFAULT`` (x86-64 builds; ``torch.backends.cpu.get_cpu_capability()`` gives the
same on a torch built with both paths, which the tests check on the machine that runs them).
"""

from __future__ import annotations

import os
from pathlib import Path

#: Where Linux lists the CPU's flags.
CPUINFO = Path("/proc/cpuinfo")


#: The ``ATEN_CPU_CAPABILITY`` values ATen takes on x86 (compared exactly).
OVERRIDES = ("default", "avx2", "avx512")


def capability_of(flags: set[str], override: str | None = None) -> str:
    """The capability name (``"AVX512"``, ``"AVX2"``, ``"DEFAULT"``) of a CPU with ``flags`` (as /proc/cpuinfo
    names them: ``avx512vl``, ``fma``, ...), or ``override`` (an ``ATEN_CPU_CAPABILITY`` value) when it is one of
    :data:`OVERRIDES`."""
    if override in OVERRIDES:
        return override.upper()
    if {"avx512vl", "avx512bw", "avx512dq", "fma"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"


def cpu_capability(cpuinfo: Path = CPUINFO) -> str | None:
    """This machine's capability (:func:`capability_of` of the first processor's flags in ``cpuinfo``, or
    ``ATEN_CPU_CAPABILITY``); None where ``cpuinfo`` cannot be read or lists no flags (not Linux x86)."""
    override = os.environ.get("ATEN_CPU_CAPABILITY")
    fixed = override.upper() if override in OVERRIDES else None
    try:
        text = cpuinfo.read_text()
    except OSError:
        return fixed
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), None)
    if line is None:
        return fixed
    return capability_of(set(line.split(":", 1)[1].split()), override)
