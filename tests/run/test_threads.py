"""``threads`` limits NumPy's and SciPy's BLAS/OpenMP pools as well as torch's (``ganlab.run.build.set_threads``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Run in a fresh interpreter: the limits last for the rest of the process, and the pools should start unlimited
# (no OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS inherited from the test runner).
SCRIPT = """
import json, torch
from threadpoolctl import threadpool_info
from ganlab.run.build import set_threads
import numpy, scipy.linalg, sklearn.cluster  # the libraries whose pools the scores use
set_threads(1, (2,), 64, torch.device("cpu"))
print(json.dumps({"torch": torch.get_num_threads(),
                  "pools": [(p["internal_api"], p["filepath"], p["num_threads"]) for p in threadpool_info()]}))
"""


@pytest.mark.e2e
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: every pool has one thread anyway")
def test_threads_one_limits_every_blas_and_openmp_pool() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["torch"] == 1
    apis = {api for api, _, _ in found["pools"]}
    assert "openmp" in apis and apis & {"openblas", "mkl", "blis", "flexiblas"}  # the pools are really there
    assert [p for p in found["pools"] if p[2] != 1] == []


def test_threads_below_one_is_refused() -> None:
    from ganlab.run.build import limit_native_threads

    with pytest.raises(ValueError, match="at least one thread"):
        limit_native_threads(0)
