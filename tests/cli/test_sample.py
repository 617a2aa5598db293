"""ganlab-sample (issue 16 part 5): truncated codes, slerp/lerp, settings checked up front, and the pictures of a run
(from the EMA copy when it kept one, the same generator the run's scores came from)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
import torch
from PIL import Image
from tiny_config import DIGITS_RUN, train_tiny

from ganlab.cli import sample
from ganlab.cli.sample import interpolate, latent_codes, load_settings
from ganlab.run import rebuild
from ganlab.run.rebuild import overrides_tag, rebuild_from_checkpoint
from ganlab.trainer.state import scored_generator


def test_truncated_codes_redraw_only_the_entries_outside() -> None:
    plain = latent_codes(2000, 50, None, torch.Generator().manual_seed(0))
    assert torch.equal(plain, torch.randn(2000, 50, generator=torch.Generator().manual_seed(0)))
    cut = latent_codes(2000, 50, 1.0, torch.Generator().manual_seed(0))
    inside = plain.abs() <= 1.0
    assert cut.abs().max() <= 1.0 and torch.equal(cut[inside], plain[inside])
    # N(0, 1) truncated to [-1, 1]: variance 1 - 2 phi(1) / (2 Phi(1) - 1) = 0.29112 (100,000 draws: s.e. 0.001)
    phi, big_phi = math.exp(-0.5) / math.sqrt(2 * math.pi), 0.5 * (1 + math.erf(1 / math.sqrt(2)))
    assert float(cut.var()) == pytest.approx(1 - 2 * phi / (2 * big_phi - 1), abs=0.005)
    with pytest.raises(ValueError, match="truncation must be positive"):
        latent_codes(2, 3, 0.0)


@pytest.mark.parametrize("t", [1e-2, 1e-6, 1e-300])
def test_small_truncations_end_and_are_truncated_normals(t: float) -> None:
    """Redrawing until inside took ~1 / (2 Phi(t) - 1) rounds (1.25 million at 1e-6): the exact sampler ends at once.
    Near 0 the truncated normal is uniform on [-t, t]: variance 1 - 2 t phi(t) / (2 Phi(t) - 1) ~ t^2 / 3."""
    import signal

    def stuck(*_: object) -> None:
        raise TimeoutError(f"latent_codes(truncation={t}) did not end within 10 s")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(10)
    try:
        cut = latent_codes(500, 100, t, torch.Generator().manual_seed(0))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert cut.shape == (500, 100) and float(cut.abs().max()) <= t
    if t >= 1e-6:  # 50,000 draws: the variance's s.e. is about 0.6 % of it
        assert float(cut.double().var()) == pytest.approx(t * t / 3, rel=0.03)
    else:  # below float32's smallest number every entry rounds to 0
        assert torch.equal(cut, torch.zeros_like(cut))


def test_slerp_and_lerp_hand_worked() -> None:
    a, b = torch.tensor([[1.0, 0.0], [2.0, 0.0]]), torch.tensor([[0.0, 1.0], [0.0, 2.0]])
    s = interpolate(a, b, 3, "slerp")
    assert s.shape == (2, 3, 2)
    torch.testing.assert_close(s[:, 0], a)
    torch.testing.assert_close(s[:, -1], b)
    torch.testing.assert_close(s[0, 1], torch.tensor([1.0, 1.0]) / math.sqrt(2))  # the great circle's midpoint
    torch.testing.assert_close(s.norm(dim=2), torch.tensor([[1.0] * 3, [2.0] * 3]))  # equal ends: norm kept
    torch.testing.assert_close(interpolate(a, b, 3, "lerp")[0, 1], torch.tensor([0.5, 0.5]))  # norm 0.71
    parallel = interpolate(a[:1], 3 * a[:1], 3, "slerp")  # angle 0: lerp, no 0/0
    torch.testing.assert_close(parallel[0, 1], torch.tensor([2.0, 0.0]))
    with pytest.raises(ValueError, match="steps >= 2"):
        interpolate(a, b, 1)


def test_settings_are_checked_before_anything_is_loaded(tmp_path: Path) -> None:
    assert load_settings(["truncation=0.5", "interpolation.method=lerp"]).truncation == 0.5
    assert load_settings(["out='~/pics'", "truncation=null", "device=cuda:0"]).out == "~/pics"  # Hydra's grammar
    keys = "n, nrow, seed, truncation, interpolation.paths, interpolation.steps, interpolation.method, ema, device, out"
    unknown = "is not a setting of ganlab-sample; did you mean"
    for bad, match in ((["nn=3"], f"^nn=3: nn {unknown} n[?] its settings: {keys}$"),
                       (["n"], "^n: settings are given as key=value, e.g. n=64$"),
                       (["n=abc"], "^n=abc: n must be an integer, got 'abc'$"),
                       (["ema=maybe"], "^ema=maybe: ema must be true or false, got 'maybe'$"),
                       (["n=10,20"], "^n=10,20: a comma [(]or choice, range[)] makes a sweep, which this command "
                                     "does not run; give one value"),
                       (["ema=no"], "^ema=no: ema must be true or false, got 'no'$"),  # OmegaConf would read False
                       (["n=0"], "n must be at least 1"),
                       (["truncation=-1"], "truncation must be positive"),
                       (["interpolation.steps=1"], "interpolation.steps must be at least 2"),
                       (["interpolation.method=cubic"], "one of slerp, lerp"),
                       (["nrows=4"], f"^nrows=4: nrows {unknown} nrow[?]"),
                       (["+x=1"], "^[+]x=1: x is not a setting of ganlab-sample; its settings: n, nrow"),
                       (["interpolation=3"], "^interpolation=3: interpolation holds settings [(]paths, steps, "
                                             "method[)], not a value; set one of them, e.g. interpolation.paths=8$"),
                       (["out=~/pics"], "^out=~/pics: Hydra cannot read this value; quote it for both the shell and "
                                        "Hydra: \"out='~/pics'\"$"),
                       (["interpolation.step=4"], "did you mean interpolation.steps[?]")):
        with pytest.raises(ValueError, match=match):
            sample.sample_checkpoint(tmp_path / "no-such-run", bad)  # the settings fail first, not the path
    with pytest.raises(FileNotFoundError, match=r"no-such-run: no such file or folder; give a run directory "
                                                r"\(runs/<dataset>/<date>: its checkpoints/last\.pt, else its newest "
                                                r"intact checkpoints/step_\*\.pt\) or a checkpoint file$"):
        sample.sample_checkpoint(tmp_path / "no-such-run")
    (tmp_path / "empty-run").mkdir()
    with pytest.raises(FileNotFoundError, match=r"^no checkpoint at .*empty-run: give a run directory"):
        sample.sample_checkpoint(tmp_path / "empty-run")


def _png_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as im:
        return im.size


def test_a_run_gives_a_grid_an_interpolation_strip_and_its_record(digits_run: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    small = ["n=12", "nrow=4", "interpolation.paths=3", "interpolation.steps=5"]
    assert sample.main([str(digits_run), *small]) == 0
    out = digits_run / "sample" / f"last{overrides_tag(small)}"
    assert str(out) in capsys.readouterr().out
    # 8x8 digits upscaled by the smallest integer making the grid >= 512 px wide (4 columns: x16, 5 columns: x13),
    # 2 px padding, a 24 px caption strip on top: 4 x 3 tiles, and 5 steps x 3 paths
    assert _png_size(out / "grid.png") == (4 * 130 + 2, 24 + 3 * 130 + 2)
    assert _png_size(out / "interpolation.png") == (5 * 106 + 2, 24 + 3 * 106 + 2)
    record = json.loads((out / "sample.json").read_text())
    assert record["checkpoint"] == str((digits_run / "checkpoints" / "last.pt").resolve())
    assert (record["step"], record["generator"], record["seed"]) == (10, "G", 0)  # no EMA in this run
    assert (record["grid_samples"], record["classes"], record["path_classes"]) == (12, 0, [])
    first = (out / "grid.png").read_bytes()
    sample.sample_checkpoint(digits_run, small)
    assert (out / "grid.png").read_bytes() == first  # same settings, same picture
    other = sample.sample_checkpoint(digits_run, ["n=12", "nrow=4", "seed=1", f"out={out}_seed1"])
    assert (Path(other["out"]) / "grid.png").read_bytes() != first


def test_the_ema_copy_is_the_generator_the_run_scored(tmp_path: Path) -> None:
    run = train_tiny([*DIGITS_RUN, "strategy=[ema]", "strategy.ema.beta=0.5", "strategy.ema.bn_batches=2",
                      "strategy.ema.bn_batch_size=16", "trainer.eval_every=10"], tmp_path / "run")
    step5 = run / "checkpoints" / "step_0000005.pt"  # between evaluations: its EMA copy holds G's batch-norm stats
    ckpt = torch.load(step5, weights_only=True)
    state = rebuild_from_checkpoint(step5).trainer.state
    z = torch.randn(6, state.generator.z_dim, generator=torch.Generator().manual_seed(3))
    for ema, which, want in ((True, "ema", scored_generator(state)), (False, "G", state.generator)):
        G, got_which, _ = rebuild.load_generator(ckpt, torch.device("cpu"), ema=ema)
        assert got_which == which
        torch.testing.assert_close(sample.generate(G, z), sample.generate(want, z))
    ema_out = sample.sample_checkpoint(run, ["n=4"])
    g_out = sample.sample_checkpoint(run, ["n=4", "ema=false"])
    assert (ema_out["generator"], g_out["generator"]) == ("ema", "G")
    assert (Path(ema_out["out"]) / "grid.png").read_bytes() != (Path(g_out["out"]) / "grid.png").read_bytes()


def test_points_get_a_scatter_and_drawn_paths(ring8_run: Path) -> None:
    out = Path(sample.sample_checkpoint(ring8_run, ["n=500", "interpolation.paths=4"])["out"])
    for name in ("grid.png", "interpolation.png"):
        assert _png_size(out / name) == (500, 500)  # the 5 x 5 in, 100 dpi scatter figure


def test_the_command_prints_its_paths_once(ring8_run: Path, capsys: pytest.CaptureFixture,
                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO"):
        assert sample.main([str(ring8_run), "n=100", "interpolation.paths=2"]) == 0
    printed = capsys.readouterr()
    logged = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    shown = printed.out + printed.err + logged  # what a terminal shows: the printed line and the INFO log
    assert shown.count("interpolation.png") == 1 and shown.count("sample.json") == 1


def test_the_2d_paths_figure_draws_and_names_only_what_it_shows() -> None:
    """Ring data, 2 paths of 3 points: the legend lists real, modes and the paths (no undrawn 'generated' dots), and
    the one path point beyond the frame is counted in the title."""
    from ganlab.data.mixtures import ring

    data = ring(num_samples=200, holdout_samples=0)
    paths = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]], [[0.0, 1.0], [0.0, 2.0], [0.0, 40.0]]])
    fig = sample.paths_figure(data, paths, "t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["real", "modes", "generated paths (o start, x end)"]
    assert "1 of 6 generated points outside the frame" in ax.get_title()
    assert [c.get_label() for c in ax.collections] == ["real", "modes"]
