"""What reaches the scores (issue 14 part 3): non-finite generated samples, embedder inputs in the wrong range
or dtype, the embedder's record, and what the TensorBoard logger writes (histograms, projector)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from ganlab.cli import evaluate
from ganlab.cli.compare import main as compare_main
from ganlab.data import digits, ring
from ganlab.health import read_alerts
from ganlab.metrics import Evaluator
from ganlab.metrics.embedders import ClassifierEmbedder, InceptionEmbedder, PixelEmbedder, image_inputs
from ganlab.metrics.scorers import MixtureScorer, SimilarityScorer
from ganlab.run.build import build_trainer
from ganlab.trainer.loggers import TensorBoardLogger


class FixedG(nn.Module):
    """A 'generator' that returns the rows of ``points`` in order, whatever the codes."""

    def __init__(self, points: torch.Tensor) -> None:
        super().__init__()
        self.z_dim, self.points = 2, nn.Parameter(points.clone(), requires_grad=False)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.points[: len(z)]


# ---------------------------------------------------------------- non-finite generated samples
def test_non_finite_samples_are_left_out_counted_and_the_rest_scored() -> None:
    data = ring(num_samples=2000, holdout_samples=400, seed=0)
    points = data.holdout[:100].clone()
    points[[5, 17, 40]] = torch.tensor([float("nan"), float("inf"), float("-inf")]).unsqueeze(1)
    make = lambda: Evaluator(num_samples=100, num_real=500, scorers={"mixture": MixtureScorer(),  # noqa: E731
                                                                      "similarity": SimilarityScorer()})
    result = make()(FixedG(points), data)
    finite = points[torch.isfinite(points).all(1)]
    expected = make().score(finite, data).scores
    assert result.scores["nonfinite_samples"] == 3.0 and len(result.samples) == 97
    for key, value in expected.items():
        assert result.scores[key] == value, key
    with pytest.raises(ValueError, match="fewer than 2 are finite.*nan_guard"):
        make()(FixedG(torch.full((100, 2), float("nan"))), data)


def test_a_training_run_alerts_on_non_finite_samples_and_goes_on(make_cfg, tmp_path: Path) -> None:
    """G's first output is NaN whenever it is evaluated (eval mode): the evaluation and the fixed-z collapse alarm
    score the finite samples, the run alerts at each evaluation and finishes."""
    trainer = build_trainer(make_cfg(["logger=none", "trainer.steps=2", "trainer.eval_every=1"]), tmp_path)
    assert trainer.callback("collapse_alarm").n_z > 0  # the fixed-z alarm embeds G's samples too

    def first_nan(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        if not module.training:
            out[0, 0] = float("nan")

    trainer.G.register_forward_hook(first_nan)
    metrics = trainer.fit()
    assert metrics["step"] == 2 and metrics["scores"]["nonfinite_samples"] == 1.0
    alerts = [a for a in read_alerts(tmp_path) if a["kind"] == "nonfinite_samples"]
    assert [a["step"] for a in alerts] == [1, 2] and alerts[0]["count"] == 1.0
    jsonl = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["scores"]["nonfinite_samples"] for r in jsonl] == [1.0, 1.0]
    assert all(0 <= r["health"]["fixed_z/high_similarity_fraction"] <= 1 for r in jsonl)


# ---------------------------------------------------------------- embedder inputs
def test_uint8_images_are_converted_to_the_models_range() -> None:
    """uint8 0..255 -> [-1, 1]: before the fix the pixel embedder returned 0..255 (and the classifier raised)."""
    x = torch.tensor([0, 51, 255], dtype=torch.uint8).view(1, 1, 1, 3).expand(2, 1, 1, 3)
    assert PixelEmbedder()(x).tolist() == [[-1.0, pytest.approx(-0.6), 1.0]] * 2
    assert image_inputs(x).dtype == torch.float32


@pytest.mark.parametrize(("x", "message"), [
    (torch.full((2, 1, 2, 2), 200.0), r"\[200, 200\], outside the stated range \[-1, 1\].*value_range=\(0, 255\)"),
    (torch.full((2, 1, 2, 2), -3.0), r"\[-3, -3\], outside the stated range \[-1, 1\].*state the range"),
    (torch.ones(2, 1, 2, 2, dtype=torch.int64), r"dtype torch.int64.*x.to\(torch.uint8\)"),
])
def test_images_outside_the_convention_are_refused_and_the_advice_works(x: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PixelEmbedder()(x)
    fixed = image_inputs(x, (0, 255)) if "255" in message else x.to(torch.uint8) if "uint8" in message \
        else image_inputs(x, (-3, 3))
    assert PixelEmbedder()(fixed).shape == (2, 4)


def test_no_range_is_guessed_from_the_values(caplog: pytest.LogCaptureFixture) -> None:
    """[0, 1] images gave a 10x larger FD with only a warning: now the caller states the range, and nothing is
    guessed (a [0, 1] batch is also a valid [-1, 1] batch of a generator saturated at +1)."""
    x = torch.rand(4, 1, 2, 2)
    with caplog.at_level(logging.WARNING, logger="ganlab"):
        assert torch.equal(PixelEmbedder()(x), x.flatten(1))  # read as stated: [-1, 1]
    assert caplog.text == ""
    assert torch.allclose(image_inputs(x, (0, 1)), x * 2 - 1, atol=1e-7)
    with pytest.raises(ValueError, match=r"outside the stated range \[0, 1\]"):
        image_inputs(x * 2 - 1.5, (0, 1))
    counts = torch.tensor([0, 51, 255], dtype=torch.uint8).view(1, 1, 1, 3)
    assert image_inputs(counts, (0, 1)).flatten().tolist() == [-1.0, pytest.approx(-0.6), 1.0]  # uint8: counts


# ---------------------------------------------------------------- the embedder's record
def test_embedder_records_name_the_class_weights_hash_size_and_resize(tmp_path: Path) -> None:
    assert PixelEmbedder().record() == {"class": "ganlab.metrics.embedders.PixelEmbedder", "weights": None,
                                        "weights_sha256": None, "input_size": None, "resize": "none"}
    weights = tmp_path / "inception.pth"
    weights.write_bytes(b"not really weights")
    record = InceptionEmbedder(weights_path=str(weights)).record()
    assert record == {"class": "ganlab.metrics.embedders.InceptionEmbedder", "weights": str(weights),
                      "weights_sha256": hashlib.sha256(b"not really weights").hexdigest(), "input_size": 299,
                      "resize": "bilinear"}
    data = digits(seed=0)
    emb = ClassifierEmbedder(epochs=1, max_train=300)
    emb.prepare(data)
    record = emb.record()
    assert record["class"].endswith("ClassifierEmbedder") and record["input_size"] == 8
    assert Path(record["weights"]).is_file()
    assert record["weights_sha256"] == hashlib.sha256(Path(record["weights"]).read_bytes()).hexdigest()


def test_metrics_json_and_eval_results_record_the_embedder(ring8_run: Path) -> None:
    identity = {"class": "ganlab.metrics.embedders.IdentityEmbedder", "weights": None, "weights_sha256": None,
                "input_size": None, "resize": "none"}
    assert json.loads((ring8_run / "metrics.json").read_text())["embedder"] == identity
    assert evaluate.evaluate_checkpoint(ring8_run, ["metrics.num_samples=100"])["embedder"] == identity


def _job(root: Path, name: str, embedder: dict | None) -> None:
    job = root / name
    job.mkdir(parents=True)
    record = {"step": 10, "dataset": "ring8", "seed": int(name[-1]), "strategies": [],
              "scores": {"modes_covered": 8.0}} | ({"embedder": embedder} if embedder else {})
    (job / "metrics.json").write_text(json.dumps(record))


def test_compare_warns_when_runs_were_scored_by_different_embedders(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    a, b = PixelEmbedder().record(), {**PixelEmbedder().record(), "class": "my.Other"}
    _job(tmp_path / "same", "run0", a)
    _job(tmp_path / "same", "run1", a)
    assert compare_main([str(tmp_path / "same"), "--no-files"]) == 0
    assert "different embedders" not in capsys.readouterr().err
    _job(tmp_path / "mixed", "run0", a)
    _job(tmp_path / "mixed", "run1", b)
    _job(tmp_path / "mixed", "run2", None)
    assert compare_main([str(tmp_path / "mixed"), "--no-files"]) == 0
    err = capsys.readouterr().err
    assert "WARNING" in err and "different embedders" in err and "my.Other" in err and "not recorded" in err


# ---------------------------------------------------------------- TensorBoard histograms and projector
class _Spy:
    """Stands in for SummaryWriter: keeps each call as (method, args, kwargs)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs))


def _logger(tmp_path: Path, **kwargs) -> tuple[TensorBoardLogger, _Spy]:
    logger = TensorBoardLogger(tmp_path, **kwargs)
    logger.writer.close()
    logger.writer = spy = _Spy()
    return logger, spy


def test_histograms_drop_non_finite_values_and_skip_empty_ones(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    logger, spy = _logger(tmp_path)
    with caplog.at_level(logging.WARNING, logger="ganlab"):
        logger.histogram("h", torch.tensor([1.0, float("nan"), 2.0, float("inf")]), 3)
        logger.histogram("h", torch.tensor([]), 4)  # raised "The input has no element"
        logger.histogram("h", torch.tensor([float("nan")]), 5)
        logger.histogram_counts("c", torch.tensor([1.0, float("nan")]), torch.linspace(-1, 1, 3), 6)  # raised
        logger.histogram_counts("c", torch.tensor([], dtype=torch.long), torch.tensor([0.0]), 7)  # wrote empty
    assert [(name, args[1].tolist(), args[2]) for name, args, _ in spy.calls] == [("add_histogram", [1.0, 2.0], 3)]
    assert logger.dropped == {"h": 3}
    assert "dropped 2 non-finite of 4" in caplog.text and caplog.text.count("skipped") == 4


def test_the_projector_is_subsampled_deterministically_with_the_row_indices(tmp_path: Path) -> None:
    logger, spy = _logger(tmp_path, projector_max_rows=4)
    mat, sprites = torch.arange(20.0).view(10, 2), torch.arange(10.0).view(10, 1, 1, 1).expand(10, 3, 2, 2)
    meta = [["real" if i < 5 else "generated", str(i % 3)] for i in range(10)]
    logger.embedding(mat, meta, ["source", "cluster"], sprites, "t", 1)
    logger.embedding(mat, meta, ["source", "cluster"], sprites, "t", 2)
    (_, (first_mat,), first), (_, _, second) = spy.calls
    rows = [int(m[2]) for m in first["metadata"]]
    assert len(rows) == 4 and rows == sorted(set(rows)) and first["metadata_header"] == ["source", "cluster", "row"]
    assert first["metadata"] == [[*meta[i], str(i)] for i in rows] == second["metadata"]  # the same rows each time
    assert first_mat[:, :2].tolist() == mat[rows].tolist() and first["label_img"][:, 0, 0, 0].tolist() == rows
    assert first_mat[:, 2].abs().sum() == 0  # 2-D points get a zero third column (pad_for_projector)
    small, small_spy = _logger(tmp_path / "small")
    small.embedding(mat, meta, ["source", "cluster"], None, "t", 1)
    assert len(small_spy.calls[0][2]["metadata"]) == 10 and small_spy.calls[0][2]["metadata_header"] == [
        "source", "cluster"]
    with pytest.raises(ValueError, match="projector_max_rows must be >= 1"):
        TensorBoardLogger(tmp_path / "bad", projector_max_rows=0)
