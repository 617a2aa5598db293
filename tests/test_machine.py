"""ganlab.machine: the CPU path torch takes, read without torch; by hand and against torch's own answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ganlab.machine import capability_of, cpu_capability


def test_capability_by_hand():
    """AVX-512 needs VL, BW and DQ with FMA (AVX-512F alone is not enough); AVX2 needs FMA; the override wins."""
    avx2 = {"sse4_2", "avx", "avx2", "fma"}
    assert capability_of(avx2) == "AVX2"
    assert capability_of(avx2 | {"avx512f"}) == "AVX2"
    assert capability_of(avx2 | {"avx512f", "avx512vl", "avx512bw", "avx512dq"}) == "AVX512"
    assert capability_of({"avx2"}) == "DEFAULT" and capability_of(set()) == "DEFAULT"
    assert capability_of(avx2, override="default") == "DEFAULT"
    assert capability_of(avx2, override="AVX512") == "AVX2"  # ATen compares exactly: upper case is ignored
    assert capability_of(avx2, override="foo") == "AVX2"


def test_this_machine_agrees_with_torch(monkeypatch):
    """The reference: torch's own dispatch on the machine the tests run on (x86-64 Linux)."""
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    if not Path("/proc/cpuinfo").is_file() or "flags" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("no x86 /proc/cpuinfo flags here")
    assert cpu_capability() == torch.backends.cpu.get_cpu_capability()


def test_no_cpuinfo_is_unknown_unless_overridden(tmp_path, monkeypatch):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert cpu_capability(tmp_path / "absent") is None
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 100\n")  # an ARM-style file: no flags line
    assert cpu_capability(tmp_path / "cpuinfo") is None
    (tmp_path / "x86").write_text("processor\t: 0\nflags\t\t: fpu avx2 fma avx512f\n")
    assert cpu_capability(tmp_path / "x86") == "AVX2"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert cpu_capability(tmp_path / "absent") == "AVX2"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "AVX2")  # not ATen's spelling: ignored, as torch ignores it
    assert cpu_capability(tmp_path / "absent") is None and cpu_capability(tmp_path / "x86") == "AVX2"
