"""``ganlab-sample <run dir | checkpoint> [key=value ...]``: a grid of samples and latent interpolations of a trained G.

The generator is rebuilt from the config stored in the checkpoint (the run's composed config, as in
``.hydra/config.yaml``, resolved), with the EMA copy's weights when the run kept one (``ema=true``, the default: the
generator the run's scores came from, its batch-norm statistics recomputed as :func:`ganlab.trainer.state.
scored_generator` does). Every latent code comes from a ``torch.Generator`` seeded with ``seed`` on the CPU, so
the same checkpoint and settings give the same pictures on any device:

* ``grid.png``: ``n`` samples, ``nrow`` per row (images); for 2-D points, a scatter of ``n`` samples on real data.
  A class-conditional G (``model.conditional=true``) gets one row per class instead: ``nrow`` samples of class 0,
  then of class 1, ... (K rows; ``n`` is not used).
* ``interpolation.png``: ``interpolation.paths`` rows, each from one fixed code to another in
  ``interpolation.steps`` codes, by ``slerp`` (White 2016) or ``lerp``; for 2-D points, the paths drawn on the data.
  A class-conditional G keeps one class along a path (path p: class p mod K); only z moves.
* ``sample.json``: the checkpoint, its step, which generator (``"ema"`` or ``"G"``), the seed, the settings and the
  overrides.

Settings and their defaults are ``conf/sample.yaml``; ``key=value`` overrides must name its keys (checked, with the
valid keys listed, before anything is loaded). ``truncation=t`` draws truncated codes: the truncation trick of Brock
et al. 2019 (BigGAN, Sec. 3.1), every entry with ``|z_i| > t`` redrawn until inside. Files go to
``<run dir>/sample/<checkpoint stem>/``, or ``.../<checkpoint stem>__<hash of the sorted overrides>/`` (as
``ganlab-eval``), or ``out=<folder>``; each is written atomically.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ganlab import CONFIG_DIR, layout
from ganlab.cli.common import checkpoint_command
from ganlab.cli.help import page, rows, yaml_settings
from ganlab.config.compose import compose_settings
from ganlab.data.base import GANData
from ganlab.models.base import eval_mode
from ganlab.models.conditional import make_codes
from ganlab.run.build import resolve_device
from ganlab.run.rebuild import find_run_checkpoint, load_generator, overrides_tag
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.visuals import (
    GRID_MIN_WIDTH,
    image_grid,
    label_grid,
    save_figure_png,
    save_grid_png,
    scatter_figure,
)

log = logging.getLogger("ganlab")

METHODS = ("slerp", "lerp")

#: ``ganlab-sample --help``.
HELP = page(
    ["ganlab-sample <run dir | checkpoint> [key=value ...]"],
    """Pictures of a trained generator: grid.png (samples; for 2-D points a scatter over the data; for a
    class-conditional G one row per class), interpolation.png (paths between fixed latent codes) and sample.json (the
    checkpoint, its step, which G, the settings). The generator is the one the run's scores came from: the EMA copy
    when the run kept one. Every code comes from one seed on the CPU, so the same settings give the same pictures on
    any device. Files go to <run dir>/sample/<checkpoint stem>/, or .../<checkpoint stem>__<hash of the settings>/
    when settings are given, or out=<folder>.""",
    [("ganlab-sample runs/ring8/<date>", "64 samples and 8 slerp paths of the last checkpoint"),
     ("ganlab-sample runs/digits/<date> n=100 nrow=10 seed=1", "a 10 x 10 grid from another seed"),
     ("ganlab-sample runs/digits/<date> truncation=1.0", "truncated codes (BigGAN's truncation trick)"),
     ("ganlab-sample runs/digits/<date> interpolation.method=lerp interpolation.steps=16", "straight-line paths"),
     ("ganlab-sample runs/digits/<date> ema=false out=pictures/raw_g", "the trained G, not its EMA copy"),
     ("ganlab-sample runs/digits/<date>/checkpoints/step_0002000.pt device=cuda", "an earlier checkpoint, on a GPU")],
    [("arguments", rows([
        ("<run dir | checkpoint>", "a run folder (its checkpoints/last.pt, else its newest intact checkpoint) or a "
                                   "checkpoint file"),
        ("-h, --help", "this page")])),
     ("settings (key=value; default in brackets; conf/sample.yaml)", rows(yaml_settings(CONFIG_DIR / "sample.yaml")))],
    """Exit status 0, or 2 for a missing checkpoint or a bad setting (the message names it and what to type
    instead).""")


@dataclass
class Interpolation:
    paths: int = 8
    steps: int = 10
    method: str = "slerp"


@dataclass
class SampleSettings:
    """``conf/sample.yaml`` (see there for each key). :meth:`validate` raises ValueError naming the key."""

    n: int = 64
    nrow: int = 8
    seed: int = 0
    truncation: float | None = None
    interpolation: Interpolation = field(default_factory=Interpolation)
    ema: bool = True
    device: str = "cpu"
    out: str | None = None

    def validate(self) -> SampleSettings:
        for key, value, low in (("n", self.n, 1), ("nrow", self.nrow, 1), ("interpolation.paths",
                                self.interpolation.paths, 1), ("interpolation.steps", self.interpolation.steps, 2)):
            if value < low:
                raise ValueError(f"{key} must be at least {low}, got {value}")
        if self.truncation is not None and not self.truncation > 0:
            raise ValueError(f"truncation must be positive (|z_i| <= truncation) or null (no truncation), "
                             f"got {self.truncation}")
        if self.interpolation.method not in METHODS:
            raise ValueError(f"interpolation.method must be one of {', '.join(METHODS)}, "
                             f"got {self.interpolation.method!r}")
        return self


def load_settings(overrides: list[str]) -> SampleSettings:
    """``conf/sample.yaml`` with the ``key=value`` ``overrides`` composed by Hydra, typed by :class:`SampleSettings`
    and validated (:func:`ganlab.config.compose.compose_settings`).

    Raises:
        ValueError: an override that is not ``key=value`` or that Hydra cannot read, a key ``conf/sample.yaml`` lacks
            (the closest key and the list), a value of the wrong type, or a value out of range; each names the key.
    """
    return compose_settings("sample", overrides, SampleSettings, "ganlab-sample").validate()


def latent_codes(n: int, z_dim: int, truncation: float | None = None,
                 generator: torch.Generator | None = None) -> Tensor:
    """(n, z_dim) standard normal codes; with ``truncation=t``, every entry with ``|z_i| > t`` is replaced by a draw
    of N(0, 1) truncated to [-t, t], so entries already inside keep their value and the result is N(0, 1) truncated
    to [-t, t] (the truncation trick, Brock et al. 2019, BigGAN Sec. 3.1).

    The replacements are drawn exactly, by the inverse CDF: ``Phi^-1(Phi(-t) + u (Phi(t) - Phi(-t)))`` with
    ``u ~ U[0, 1)`` (in float64, clamped to [-t, t] against rounding), one uniform draw per entry outside; so any
    ``t > 0`` takes the same time (redrawing until inside took about ``1 / (2 Phi(t) - 1)`` rounds: ~1.25 million
    for t = 1e-6).

    Raises:
        ValueError: ``truncation`` is not positive.
    """
    z = torch.randn(n, z_dim, generator=generator)
    if truncation is None:
        return z
    if not truncation > 0:
        raise ValueError(f"truncation must be positive, got {truncation}")
    t = float(truncation)
    outside = z.abs() > t
    k = int(outside.sum())
    if k:
        low = float(torch.special.ndtr(torch.tensor(-t, dtype=torch.float64)))  # Phi(-t); Phi(t) = 1 - Phi(-t)
        u = torch.rand(k, generator=generator, dtype=torch.float64)
        z[outside] = torch.special.ndtri(low + u * (1.0 - 2.0 * low)).clamp(-t, t).to(z.dtype)
    return z


def interpolate(a: Tensor, b: Tensor, steps: int, method: str = "slerp") -> Tensor:
    """(P, steps, d) codes from each row of ``a`` (P, d) to the matching row of ``b``, ends included, at
    ``t = 0, 1/(steps-1), ..., 1``.

    ``lerp``: ``(1 - t) a + t b``. ``slerp`` (White 2016, "Sampling Generative Networks", Sec. 2.2; Shoemake 1985):
    ``sin((1 - t) w) / sin w * a + sin(t w) / sin w * b`` with ``w`` the angle between ``a`` and ``b``; it follows
    the great circle, so between codes of equal norm every code keeps that norm, where ``lerp`` would pass through
    codes of low norm that a Gaussian prior almost never draws. Nearly parallel pairs (``sin w < 1e-6``) use lerp.

    Raises:
        ValueError: ``a`` and ``b`` differ in shape, ``steps < 2``, or an unknown ``method``.
    """
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"a and b must both be (P, d), got {tuple(a.shape)} and {tuple(b.shape)}")
    if steps < 2 or method not in METHODS:
        raise ValueError(f"need steps >= 2 and method in {METHODS}, got {steps}, {method!r}")
    t = torch.linspace(0, 1, steps, dtype=a.dtype, device=a.device)[None, :, None]  # (1, S, 1)
    a3, b3 = a[:, None, :], b[:, None, :]
    lerp = (1 - t) * a3 + t * b3
    if method == "lerp":
        return lerp
    cos = (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1)).clamp_min(1e-12)
    omega = torch.arccos(cos.clamp(-1, 1))[:, None, None]  # (P, 1, 1)
    sin = torch.sin(omega)
    safe = sin.clamp_min(1e-6)
    slerp = torch.sin((1 - t) * omega) / safe * a3 + torch.sin(t * omega) / safe * b3
    return torch.where(sin < 1e-6, lerp, slerp)


@torch.no_grad()
def generate(G: nn.Module, z: Tensor, batch_size: int = 256) -> Tensor:
    """G's samples (N, *data_shape) of the (N, z_dim) codes ``z`` (moved to G's device), in eval mode, on the CPU."""
    device = next(G.parameters()).device
    with eval_mode(G):
        return torch.cat([G(z[i:i + batch_size].to(device)).cpu() for i in range(0, len(z), batch_size)])


def paths_figure(data: GANData, paths: Tensor, title: str) -> Any:
    """A scatter of real points with (P, S, 2) generated paths drawn over it, each a line from a circle (start) to
    a cross (end); the legend names what is drawn (real points, the modes, the paths) and the title counts path
    points outside the frame."""
    means = data.mixture.means if data.mixture is not None else None
    fig = scatter_figure(data.x[:2500], paths.reshape(-1, 2), means, title=title, draw_fake=False)
    ax = fig.axes[0]
    for i, p in enumerate(paths.float()):
        ax.plot(p[:, 0], p[:, 1], "-", lw=1, c="tab:green", alpha=0.8,
                label="generated paths (o start, x end)" if i == 0 else None)
        ax.plot(p[:1, 0], p[:1, 1], "o", c="tab:green", ms=4)
        ax.plot(p[-1:, 0], p[-1:, 1], "x", c="tab:green")
    ax.legend(loc="upper right", fontsize=8, markerscale=2)
    return fig


def write_pictures(G: nn.Module, data: GANData, s: SampleSettings, out: Path, title: str) -> dict[str, Any]:
    """``grid.png`` and ``interpolation.png`` in ``out`` (see the module docstring); returns what the grid holds:
    ``grid_samples`` (``n``, or K x ``nrow`` for a G of K classes), ``classes`` (K, 0 when unconditional) and
    ``path_classes`` (each interpolation path's class; empty when unconditional)."""
    gen = torch.Generator().manual_seed(s.seed)
    it = s.interpolation
    k = int(getattr(G, "num_classes", 0))
    grid_z = latent_codes(k * s.nrow if k else s.n, G.z_dim, s.truncation, gen)
    ends = latent_codes(2 * it.paths, G.z_dim, s.truncation, gen)
    path_z = interpolate(ends[: it.paths], ends[it.paths:], it.steps, it.method).reshape(-1, G.z_dim)
    path_classes = torch.arange(it.paths) % k if k else torch.zeros(0, dtype=torch.long)
    if k:  # one class a grid row; one class a path
        grid_z = make_codes(grid_z, torch.arange(k).repeat_interleave(s.nrow))
        path_z = make_codes(path_z, path_classes.repeat_interleave(it.steps))
    samples, path_samples = generate(G, grid_z), generate(G, path_z)
    if data.is_image:  # captioned and at least GRID_MIN_WIDTH px wide, as the training grids
        rows, paths = (f", rows: classes 0-{k - 1}" if k else ""), f", {it.method} paths"
        if k:
            paths += f", rows: classes 0-{it.paths - 1}" if it.paths <= k else f", row p: class p mod {k}"
        save_grid_png(label_grid(image_grid(samples, nrow=s.nrow, min_width=GRID_MIN_WIDTH), title + rows),
                      out / "grid.png")
        save_grid_png(label_grid(image_grid(path_samples, nrow=it.steps, min_width=GRID_MIN_WIDTH), title + paths),
                      out / "interpolation.png")
    else:
        means = data.mixture.means if data.mixture is not None else None
        save_figure_png(scatter_figure(data.x[:2500], samples, means, title=title), out / "grid.png")
        paths = path_samples.reshape(it.paths, it.steps, -1)
        save_figure_png(paths_figure(data, paths, f"{title}, {it.method} paths"), out / "interpolation.png")
    return {"grid_samples": len(grid_z), "classes": k, "path_classes": path_classes.tolist()}


def sample_checkpoint(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Write the pictures of the generator at ``path`` (a run directory: its ``checkpoints/last.pt``, else its
    newest intact checkpoint; or a checkpoint file) and ``sample.json``; return what ``sample.json`` holds.

    Raises:
        ValueError: a bad override (before anything is loaded), or an unreadable checkpoint.
        FileNotFoundError: ``path`` does not exist or holds no checkpoint.
    """
    s = load_settings(list(overrides or []))
    ckpt_path, ckpt = find_run_checkpoint(path)
    G, which, data = load_generator(ckpt, resolve_device(s.device), ema=s.ema)
    out = Path(s.out).expanduser() if s.out else \
        layout.run_dir_of(ckpt_path) / layout.SAMPLE_DIR / (ckpt_path.stem + overrides_tag(overrides))
    title = f"{data.name}, step {int(ckpt['step'])}, {which}"
    drawn = write_pictures(G, data, s, out, title)
    record = {"checkpoint": str(ckpt_path.resolve()), "step": int(ckpt["step"]), "generator": which,
              "seed": s.seed, "data": data.name, "files": ["grid.png", "interpolation.png"], **drawn,
              "overrides": list(overrides or []), "settings": asdict(s)}
    ckpt_io.atomic_write_text(out / "sample.json", json.dumps(record, indent=2))
    log.debug("wrote %s, %s and %s", out / "grid.png", out / "interpolation.png", out / "sample.json")
    return record | {"out": str(out)}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point of ``ganlab-sample``."""
    return checkpoint_command(
        "ganlab-sample", HELP, argv, sample_checkpoint,
        lambda result: f"step {result['step']} of {result['checkpoint']} ({result['generator']}), seed "
                       f"{result['seed']}: {result['out']}/grid.png, interpolation.png, sample.json")


if __name__ == "__main__":
    sys.exit(main())
