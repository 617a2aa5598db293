"""ganlab.inspection on its own: finding runs, rebuilding them, clusters, projections, similarity, figures."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from sklearn.metrics.pairwise import cosine_similarity
from tiny_config import RING8_RUN, train_tiny

from ganlab import inspection as gi
from ganlab.metrics.clusters import cluster_scores
from ganlab.metrics.evaluator import Evaluator
from ganlab.metrics.numeric.kmeans import kmeans


def evaluator_scores(saved: dict[str, float], scores: dict[str, float]) -> dict[str, float]:
    """The evaluator's scores out of a stored record (the training loop may add scores of its own)."""
    assert set(scores) <= set(saved)
    return {k: saved[k] for k in scores}


def touch(path: Path, mtime: float, text: str = "{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


# ---------------------------------------------------------------- finding runs and sweeps
def test_find_latest_run_picks_the_newest_run(tmp_path: Path) -> None:
    touch(tmp_path / "ring8" / "old" / "metrics.json", 1000)
    touch(tmp_path / "grid25" / "mid" / "checkpoints" / "last.pt", 2000)
    touch(tmp_path / "ring8" / "old" / "eval" / "last" / "metrics.json", 9000)  # ganlab-eval output: not a run
    touch(tmp_path / "multirun" / "s" / "0_plain_s0" / "metrics.json", 1500)
    (tmp_path / "ring8" / "empty").mkdir()
    assert gi.find_latest_run(tmp_path) == tmp_path / "grid25" / "mid"
    touch(tmp_path / "ring8" / "old" / "metrics.json", 3000)  # written again: now the newest
    assert gi.find_latest_run(tmp_path) == tmp_path / "ring8" / "old"
    assert gi.find_latest_run(tmp_path / "grid25" / "mid") == tmp_path / "grid25" / "mid"  # a run itself


def test_find_latest_run_explains_a_missing_or_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        gi.find_latest_run(tmp_path / "nope")
    (tmp_path / "ring8" / "x").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no run under .*GANLAB_RUN"):
        gi.find_latest_run(tmp_path)


def test_find_latest_sweep_and_runs_root(tmp_path: Path) -> None:
    multirun = tmp_path / "runs" / "multirun"
    touch(multirun / "2026-01-01" / "0_plain_s0" / "metrics.json", 1000)
    touch(multirun / "2026-01-02" / "0_plain_s0" / "metrics.json", 3000)
    touch(multirun / "2026-01-03" / "0_plain_s0" / "metrics.json", 2000)  # later name, older files
    (multirun / "2026-01-04").mkdir()  # no job: not a sweep
    assert gi.find_latest_sweep(multirun) == multirun / "2026-01-02"
    (tmp_path / "notebooks").mkdir()
    assert gi.find_runs_root(tmp_path / "notebooks") == tmp_path / "runs"
    assert gi.find_latest_sweep(gi.find_runs_root(tmp_path) / "multirun") == multirun / "2026-01-02"
    with pytest.raises(FileNotFoundError, match="no sweep under"):
        gi.find_latest_sweep(multirun / "2026-01-04")
    with pytest.raises(FileNotFoundError, match="GANLAB_SWEEP"):
        gi.find_latest_sweep(tmp_path / "none")


# ---------------------------------------------------------------- loading a run
@pytest.fixture(scope="module")
def ring(ring8_run: Path) -> tuple[gi.LoadedRun, object]:
    run = gi.load_run(ring8_run)
    return run, gi.evaluate_run(run)


def test_load_run_rebuilds_the_run_and_rescoring_reproduces_its_scores(ring8_run: Path, ring) -> None:
    run, result = ring
    assert run.step == 40 and run.checkpoint == ring8_run / "checkpoints" / "last.pt" and not run.uses_ema
    assert run.cfg.dataset.name == "ring8" and run.data.name == "ring8"
    saved = json.loads((ring8_run / "metrics.json").read_text())["scores"]
    assert result.scores == pytest.approx(evaluator_scores(saved, result.scores))
    assert run.stored_scores == pytest.approx(saved)
    assert result.samples.shape == (200, 2) and result.embeddings.shape == (200, 2)
    at_20 = gi.load_run(ring8_run, checkpoint=20)  # the same at an intermediate checkpoint
    first = json.loads((ring8_run / "metrics.jsonl").read_text().splitlines()[0])
    assert at_20.step == first["step"] == 20
    scores_20 = gi.evaluate_run(at_20).scores
    assert scores_20 == pytest.approx(evaluator_scores(first["scores"], scores_20))
    assert gi.load_run(ring8_run / "checkpoints" / "step_0000020.pt").step == 20  # a checkpoint file works too
    steps = [s for s, _ in gi.list_checkpoints(ring8_run)]
    assert [s for s in steps if s > 0] == [20, 40] and steps == sorted(steps)  # (a step-0 one with the NaN guard)


@pytest.fixture(scope="module", params=[False, True], ids=["mlp", "mlp_batch_norm"])
def ema_run(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A finished tiny ring8 run with ``strategy=[ema]`` (20 steps, beta 0.9: the average differs from G), with
    and without batch norm in G (then the EMA copy is scored with batch-norm statistics of its own)."""
    return train_tiny(RING8_RUN + ["strategy=[ema]", "strategy.ema.beta=0.9", "trainer.steps=20",
                                   f"model.generator.batch_norm={str(request.param).lower()}"],
                      tmp_path_factory.mktemp("ema") / "run")


def test_load_run_scores_the_ema_generator(ema_run: Path) -> None:
    run = gi.load_run(ema_run)
    assert run.uses_ema and run.generator is run.trainer.state.g_ema and run.generator is not run.trainer.G
    saved = json.loads((ema_run / "metrics.json").read_text())["scores"]
    scores = gi.evaluate_run(run).scores
    assert scores == pytest.approx(evaluator_scores(saved, scores))  # the loop scored the EMA copy, so do we
    raw = gi.evaluate_run(dataclasses.replace(run, generator=run.trainer.G)).scores
    assert raw["reverse_kl"] != pytest.approx(saved["reverse_kl"])  # so scoring G instead would be caught


def test_evaluate_checkpoint_scores_the_ema_generator(ema_run: Path) -> None:
    from ganlab.cli.evaluate import evaluate_checkpoint

    result = evaluate_checkpoint(ema_run)  # ganlab-eval: Trainer.start restores the checkpoint's EMA weights
    saved = json.loads((ema_run / "metrics.json").read_text())["scores"]
    assert result["step"] == 20
    assert result["scores"] == pytest.approx(evaluator_scores(saved, result["scores"]))
    written = json.loads((ema_run / "eval" / "last" / "metrics.json").read_text())
    assert written["scores"] == pytest.approx(result["scores"])


def test_load_run_explains_bad_directories(tmp_path: Path, ring8_run: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gi.load_run(tmp_path / "nope")
    (tmp_path / "plain").mkdir()
    with pytest.raises(FileNotFoundError, match="not a ganlab run directory.*metrics.json"):
        gi.load_run(tmp_path / "plain")
    touch(tmp_path / "no_ckpt" / "metrics.json", 1000)
    with pytest.raises(FileNotFoundError, match="no checkpoint at all"):
        gi.load_run(tmp_path / "no_ckpt")
    with pytest.raises(FileNotFoundError, match=r"no checkpoint 7 .*steps \[(0, )?20, 40\]"):
        gi.load_run(ring8_run, checkpoint=7)
    with pytest.raises(ValueError, match="checkpoint must be"):
        gi.load_run(ring8_run, checkpoint=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="key=value"):
        gi.load_run(ring8_run, overrides=["device"])


def test_evaluator_reference_needs_prepare() -> None:
    with pytest.raises(RuntimeError, match="prepare"):
        _ = Evaluator().reference


# ---------------------------------------------------------------- clusters
def test_cluster_occupancy_is_the_bincount_of_nearest_centres(ring) -> None:
    run, result = ring
    fit = gi.fit_clusters(run)
    assert gi.fit_clusters(run) is fit  # the clusters scorer's cached fit, not a new one
    real_emb = run.evaluator.reference[1]
    k = int(run.data.num_modes)
    fresh = kmeans(real_emb, k, n_init=3, generator=torch.Generator().manual_seed(int(run.cfg.seed)))
    assert torch.equal(fit.centers, fresh.centers)
    clusters = gi.assign_clusters(run, result)
    real_counts, fake_counts = gi.cluster_occupancy(clusters)
    centers = fit.centers.numpy()
    for emb, counts in ((real_emb, real_counts), (result.embeddings, fake_counts)):
        d = ((emb.numpy()[:, None, :] - centers[None]) ** 2).sum(-1)
        assert counts.tolist() == np.bincount(d.argmin(1), minlength=k).tolist()
    assert int(real_counts.sum()) == 400 and int(fake_counts.sum()) == 200
    m = int(fake_counts.sum())  # the clusters scorer's coverage, from the same counts
    covered = int(((fake_counts >= 1) & (fake_counts >= 0.1 / k * m)).sum())
    assert covered == result.scores["clusters_covered"]
    direct = cluster_scores(real_emb, result.embeddings, k, fit=fit)["cluster_kl"]
    assert direct == pytest.approx(result.scores["cluster_kl"])


def test_samples_by_cluster_takes_the_first_of_each_cluster() -> None:
    samples = torch.arange(10.0).unsqueeze(1)
    labels = torch.tensor([2, 0, 2, 2, 0, 1, 2, 0, 0, 2])
    groups = gi.samples_by_cluster(samples, labels, k=4, per_cluster=3)
    assert [g.flatten().tolist() for g in groups] == [[1, 4, 7], [5], [0, 2, 3], []]
    assert groups[3].shape == (0, 1)
    with pytest.raises(ValueError, match=r"lie in \[0, 2\)"):
        gi.samples_by_cluster(samples, labels, k=2)
    with pytest.raises(ValueError, match="integers"):
        gi.samples_by_cluster(samples, labels.float(), k=4)


def test_project_2d_pca_uses_the_real_datas_main_directions() -> None:
    gen = torch.Generator().manual_seed(0)
    real = torch.randn(300, 5, generator=gen, dtype=torch.float64) * torch.tensor([5.0, 3.0, 1.0, 0.5, 0.1],
                                                                                  dtype=torch.float64)
    fake = torch.randn(50, 5, generator=gen, dtype=torch.float64)
    r2, f2 = gi.project_2d(real, fake)
    x = real.numpy()
    evals, evecs = np.linalg.eigh(np.cov(x, rowvar=False))
    top = evecs[:, ::-1][:, :2]
    assert np.allclose(np.abs(r2), np.abs((x - x.mean(0)) @ top), atol=1e-8)
    assert np.allclose(np.abs(f2), np.abs((fake.numpy() - x.mean(0)) @ top), atol=1e-8)
    assert np.allclose(np.var(r2, axis=0, ddof=1), evals[::-1][:2])
    points = torch.randn(20, 2, generator=gen)
    same, _ = gi.project_2d(points, points[:3])  # 2-D data is shown as is
    assert np.allclose(same, points.numpy())
    t_real, t_fake = gi.project_2d(real[:30], fake[:10], method="tsne")
    assert t_real.shape == (30, 2) and t_fake.shape == (10, 2)
    with pytest.raises(ValueError, match="'pca' or 'tsne'"):
        gi.project_2d(real, fake, method="umap")
    with pytest.raises(ValueError, match="D=5 but fake has D=2"):
        gi.project_2d(real, points)


# ---------------------------------------------------------------- similarity
def brute_force_pairs(x: np.ndarray, n: int) -> list[tuple[int, int, float]]:
    sim = cosine_similarity(x)
    pairs = [(i, j, sim[i, j]) for i in range(len(x)) for j in range(i + 1, len(x))]
    return sorted(pairs, key=lambda t: -t[2])[:n]


@pytest.mark.parametrize("block_size", [7, 1 << 22])
def test_most_similar_pairs_agrees_with_brute_force_cosine(block_size: int) -> None:
    x = torch.randn(60, 6, generator=torch.Generator().manual_seed(1))
    x[17] = x[42] * 3  # an exact duplicate direction: cosine 1
    got = gi.most_similar_pairs(x, n=10, block_size=block_size)
    want = brute_force_pairs(x.numpy(), 10)
    # x[17] = 3 x[42]: the pairs (13, 17) and (13, 42) have one cosine, which float32 rounding (1 ulp, the CPU's
    # kernels) orders either way: the same pairs, each with its cosine, in decreasing order up to that tie.
    assert {(i, j) for i, j, _ in got} == {(i, j) for i, j, _ in want}
    by_pair = {(i, j): s for i, j, s in want}
    assert [s for *_, s in got] == pytest.approx([by_pair[i, j] for i, j, _ in got], abs=1e-5)
    assert all(a[2] >= b[2] - 1e-6 for a, b in zip(got, got[1:]))
    assert {got[7][:2], got[8][:2]} == {(13, 17), (13, 42)}  # the tie, ranked 8th and 9th either way
    assert got[0][:2] == (17, 42) and got[0][2] == pytest.approx(1.0)
    assert len(gi.most_similar_pairs(x[:4], n=100)) == 6  # all 4 * 3 / 2 pairs
    with pytest.raises(ValueError, match="positive integer"):
        gi.most_similar_pairs(x, n=0)
    with pytest.raises(ValueError, match="at least 2"):
        gi.most_similar_pairs(x[:1])


def test_similarity_histograms_are_the_scores(ring) -> None:
    run, result = ring
    hists = gi.similarity_histograms(run, result)
    assert hists["generated"].high_similarity_fraction == pytest.approx(result.scores["high_similarity_fraction"])
    assert hists["real"].high_similarity_fraction == pytest.approx(result.scores["data/high_similarity_fraction"])
    assert torch.equal(hists["generated"].counts, result.histograms["similarity"][0])
    assert int(hists["real"].counts.sum()) == 200 * 199 // 2


def test_histograms_over_checkpoints_follow_training(ring8_run: Path, ring, tmp_path: Path) -> None:
    run, result = ring
    hists = gi.histograms_over_checkpoints(run)
    assert [h.step for h in hists] == [s for s, _ in gi.list_checkpoints(ring8_run)] and hists[-1].step == 40
    assert torch.equal(hists[-1].histogram.counts, result.histograms["similarity"][0])
    first = json.loads((ring8_run / "metrics.jsonl").read_text().splitlines()[0])["scores"]
    at_20 = next(h for h in hists if h.step == 20)
    assert at_20.histogram.high_similarity_fraction == pytest.approx(first["high_similarity_fraction"])
    assert [h.step for h in gi.histograms_over_checkpoints(ring8_run, include_last=False)] == [h.step for h in hists]
    bare = tmp_path / "bare"  # only last.pt kept
    shutil.copytree(ring8_run, bare, ignore=shutil.ignore_patterns("step_*.pt"))
    assert [h.step for h in gi.histograms_over_checkpoints(dataclasses.replace(run, run_dir=bare))] == [40]
    with pytest.raises(FileNotFoundError, match="trainer.ckpt_every"):
        gi.histograms_over_checkpoints(dataclasses.replace(run, run_dir=bare), include_last=False)


# ---------------------------------------------------------------- tables and figures
def test_scores_table_puts_the_baseline_beside_each_score() -> None:
    table = gi.scores_table({"reverse_kl": 2.0794, "data/reverse_kl": 0.0289, "modes_covered": 1, "vendi": 3.5},
                            stored={"reverse_kl": 2.0794})
    lines = table.splitlines()
    assert lines[0] == "| score |  | generated | data (held-out) | at training |"
    assert lines[2:] == ["| modes_covered | ↑ | 1 |  |  |", "| reverse_kl | ↓ | 2.079 | 0.0289 | 2.079 |",
                         "| vendi |  | 3.5 |  |  |"]


def test_figures_for_points(ring) -> None:
    run, result = ring
    clusters = gi.assign_clusters(run, result)
    real_counts, fake_counts = gi.cluster_occupancy(clusters)
    r2, f2 = gi.project_2d(clusters.real_embeddings, clusters.fake_embeddings)
    pairs = gi.most_similar_pairs(result.embeddings, n=4)
    figs = [gi.plot_occupancy(real_counts, fake_counts),
            gi.plot_projection(r2, f2, clusters.real_labels, clusters.fake_labels, clusters.k),
            gi.plot_samples_by_cluster(clusters),
            gi.plot_similarity_histograms(gi.similarity_histograms(run, result)),
            gi.plot_histograms_over_checkpoints(gi.histograms_over_checkpoints(run)),
            gi.plot_most_similar_pairs(result.samples, pairs)]
    assert all(isinstance(f, Figure) for f in figs)
    assert [len(f.axes) for f in figs] == [1, 2, 1, 1, 2, 1]
    with pytest.raises(ValueError, match=r"shape \(k,\)"):
        gi.plot_occupancy(real_counts, fake_counts[:3])
    with pytest.raises(ValueError, match="no pairs"):
        gi.plot_most_similar_pairs(result.samples, [])
    with pytest.raises(ValueError, match="images .* or 2-D points"):
        gi.plot_samples_by_cluster(dataclasses.replace(clusters, fake_samples=torch.zeros(5, 3)))


def test_occupancy_counts_covered_clusters_as_the_scorer_does(ring) -> None:
    real, fake = torch.tensor([20, 20, 20, 20, 20]), torch.tensor([50, 30, 1, 0, 19])  # 100 generated, k = 5
    ax = gi.plot_occupancy(real, fake).axes[0]  # covered: >= 1 and >= 0.1 / 5 * 100 = 2 samples: 50, 30, 19
    assert ax.get_title() == "3 of 5 clusters covered (clusters_covered); 4 hold any generated sample"
    (crosses,) = [c for c in ax.collections if c.get_label() == "not covered"]
    assert crosses.get_offsets()[:, 0].tolist() == [2, 3]
    assert gi.plot_occupancy(real, fake, min_share=0.25).axes[0].get_title().startswith("2 of 5 clusters covered")
    run, result = ring  # on a run: the title's count is the run's clusters_covered
    clusters = gi.assign_clusters(run, result)
    title = gi.plot_occupancy(*gi.cluster_occupancy(clusters), min_share=clusters.min_share).axes[0].get_title()
    assert title.startswith(f"{int(result.scores['clusters_covered'])} of {clusters.k} clusters covered")


def test_figures_for_images(digits_run: Path) -> None:
    run = gi.load_run(digits_run)
    result = gi.evaluate_run(run)
    clusters = gi.assign_clusters(run, result)
    assert clusters.k == 10 and result.samples.shape[1:] == (1, 8, 8)
    fig = gi.plot_samples_by_cluster(clusters, per_cluster=4, max_clusters=6)
    assert len(fig.axes) == 12  # real and generated per cluster
    pairs = gi.most_similar_pairs(result.samples.flatten(1), n=3)  # pixel space
    assert len(gi.plot_most_similar_pairs(result.samples, pairs).axes) == 6


def test_relative_paths_resolve_against_the_shell_folder(ring8_run, tmp_path, monkeypatch) -> None:
    # a notebook kernel runs in notebooks/; GANLAB_RUN=runs/... was typed at the folder Jupyter started from
    from ganlab.inspection import resolve_user_path

    project = ring8_run.parents[2]  # <project>/runs/ring8/<date>
    relative = ring8_run.relative_to(project)
    kernel_dir = tmp_path / "notebooks"
    kernel_dir.mkdir()
    monkeypatch.chdir(kernel_dir)
    monkeypatch.setenv("PWD", str(project))
    assert resolve_user_path(relative) == project / relative
    monkeypatch.setenv("PWD", str(tmp_path))  # nowhere to find it: returned unchanged, so the error names it
    assert resolve_user_path(relative) == relative
