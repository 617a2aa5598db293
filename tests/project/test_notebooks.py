"""Both notebooks executed headless (nbclient, this venv's ipykernel) against tiny runs and a tiny sweep."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ganlab.analysis.plots import score_curves
from ganlab.analysis.table import collect_runs, summarise, table_keys

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

#: A 2 strategies x 2 seeds sweep of ganlab-train -m, each job a second or so on one core.
SWEEP = ["-m", "strategy=[],[ema]", "seed=0,1", "device=cpu", "threads=1", "logger=none", "trainer.steps=20",
         "trainer.batch_size=32", "trainer.eval_every=5", "trainer.log_every=5", "trainer.ckpt_every=20",
         "trainer.grid_size=16", "trainer.progress=false", "trainer.projector=false", "metrics.num_samples=200",
         "metrics.num_real=400", "metrics.scorers.ndb.k=20", "dataset.num_samples=2000"]


@pytest.fixture(scope="module")
def sweep_dir(runs_root: Path) -> Path:
    """``runs/multirun/<date>/`` made by the real ``ganlab-train -m``."""
    out = runs_root / "multirun" / "2026-01-02_00-00-00"
    res = subprocess.run([str(Path(sys.executable).with_name("ganlab-train")), *SWEEP, f"hydra.sweep.dir={out}"],
                         cwd=runs_root.parent, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def execute(name: str, cwd: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run every cell of ``notebooks/<name>`` in a fresh kernel (this interpreter) started in ``cwd``."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for key, value in {"OMP_NUM_THREADS": "1", **env}.items():  # the kernel inherits this process's environment
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("MPLBACKEND", raising=False)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=180, allow_errors=False,
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()  # raises CellExecutionError naming the cell when one raises
    return nb


def outputs(nb: Any) -> list[dict[str, Any]]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


def stderr(nb: Any) -> str:
    """What the cells wrote to stderr (warnings): nothing, in a quiet notebook."""
    return "".join(o.text for o in outputs(nb) if o.output_type == "stream" and o.name == "stderr")


def pngs(nb: Any) -> int:
    return sum("image/png" in out.get("data", {}) for out in outputs(nb) if out.output_type in ("display_data",
                                                                                                   "execute_result"))


def test_committed_notebooks_have_no_outputs() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear the outputs"


@pytest.mark.parametrize("which", [pytest.param("ring8_run", marks=pytest.mark.slow),  # ring8: -m slow
                                   pytest.param("digits_run", marks=pytest.mark.e2e)])
def test_inspect_clusters_runs_on_a_run(which: str, request: pytest.FixtureRequest, runs_root: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir: Path = request.getfixturevalue(which)
    nb = execute("inspect_clusters.ipynb", runs_root.parent, {"GANLAB_RUN": str(run_dir)}, monkeypatch)
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    assert stderr(nb) == ""  # no "TqdmWarning: IProgress not found" (tqdm.auto without ipywidgets)
    assert pngs(nb) == 6  # occupancy, projection, samples, similarity, over checkpoints, pairs
    printed = "".join(o.get("text", "") for o in outputs(nb) if o.output_type == "stream")
    assert f"{run_dir}\nstep {dict(ring8_run=40, digits_run=10)[which]}, data set" in printed
    covered = json.loads((run_dir / "metrics.json").read_text())["scores"]["clusters_covered"]
    assert f"clusters_covered: {covered} of " in printed  # the count of metrics.json, by the scorer's rule
    tables = [o["data"]["text/markdown"] for o in outputs(nb) if "text/markdown" in o.get("data", {})]
    assert len(tables) == 1 and "| clusters_covered | ↑ |" in tables[0]


@pytest.mark.e2e
def test_compare_strategies_runs_on_the_newest_sweep(sweep_dir: Path, runs_root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    notebooks = runs_root.parent / "notebooks"  # started where Jupyter starts it: runs/ is found in the parent
    notebooks.mkdir(exist_ok=True)
    monkeypatch.delenv("GANLAB_SWEEP", raising=False)
    nb = execute("compare_strategies.ipynb", notebooks, {}, monkeypatch)
    assert not [o for o in outputs(nb) if o.output_type == "error"] and stderr(nb) == ""
    printed = "".join(o.get("text", "") for o in outputs(nb) if o.output_type == "stream")
    assert f"{sweep_dir}: 4 finished jobs, 0 failed" in printed
    table = next(o["data"]["text/markdown"] for o in outputs(nb) if "text/markdown" in o.get("data", {}))
    assert "| ring8 [plain] | 2 |" in table and "| ring8 [ema] | 2 |" in table
    runs, _ = collect_runs(sweep_dir)
    curves = [k for k in table_keys(summarise(runs)) if score_curves(runs, k)]
    assert "modes_covered" in curves and pngs(nb) == len(curves)  # one figure per score with a curve


@pytest.mark.slow  # about 45 s: two kernels started by the command line
def test_jupyter_execute_runs_a_notebook_headless(sweep_dir: Path, tmp_path: Path) -> None:
    """README's headless command, ``jupyter execute NOTEBOOK --output=NAME_executed`` (nbclient's command line,
    installed by the test extra): exit status 0, the executed copy saved beside the notebook, and what it prints;
    exit status 1 with the error when a cell raises."""
    nb = tmp_path / "compare_strategies.ipynb"
    shutil.copy(NOTEBOOKS / nb.name, nb)
    env = {**os.environ, "GANLAB_SWEEP": str(sweep_dir), "OMP_NUM_THREADS": "1"}
    res = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "execute", str(nb),
                          "--output=compare_strategies_executed"], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"[NbClientApp] Executing {nb}" in res.stderr
    assert f"[NbClientApp] Save executed results to {tmp_path / 'compare_strategies_executed.ipynb'}" in res.stderr
    done = nbformat.read(tmp_path / "compare_strategies_executed.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for o in outputs(done) if o.output_type == "stream")
    assert f"{sweep_dir}: 4 finished jobs, 0 failed" in printed and stderr(done) == ""
    broken = nbformat.read(nb, as_version=4)  # a cell that raises: exit status 1, the error named
    broken.cells.insert(1, nbformat.v4.new_code_cell("raise RuntimeError('cell failed on purpose')"))
    nbformat.write(broken, nb)
    res = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "execute", str(nb)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert "RuntimeError: cell failed on purpose" in re.sub(r"\x1b\[[0-9;]*m", "", res.stderr)  # less colours


@pytest.mark.slow
def test_inspect_clusters_looks_inside_one_class_of_a_conditional_run(runs_root: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tiny_config import TINY_COND, train_tiny

    run_dir = train_tiny(TINY_COND, runs_root / "digits" / "2026-01-01_00-00-09")
    here = str(Path(__file__).resolve().parents[2])  # the kernel imports this checkout's ganlab
    nb = execute("inspect_clusters.ipynb", runs_root.parent,
                 {"GANLAB_RUN": str(run_dir), "GANLAB_CLASS": "2", "PYTHONPATH": here}, monkeypatch)
    printed = "".join(o.get("text", "") for o in outputs(nb) if o.output_type == "stream")
    covered = json.loads((run_dir / "metrics.json").read_text())["scores"]["class/2/clusters_covered"]
    assert "data set digits, class 2: " in printed
    assert f"class/2/clusters_covered: {covered:.0f} of " in printed  # the per-class count of metrics.json
    assert pngs(nb) == 6
