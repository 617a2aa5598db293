"""The classifier embedder on colour images (CIFAR-10, image folders): classified whole, labels are classes."""

from __future__ import annotations

from pathlib import Path

import torch

from ganlab.data import GANData
from ganlab.metrics.embedders import ClassifierEmbedder


def test_colour_images_are_classified_whole(tmp_path: Path) -> None:
    """A colour image's label is its class, not a stacked triple: the class here is the bright channel, which only
    a classifier seeing all three channels can tell (split into channels, each piece was labelled (0, 0, y))."""
    g = torch.Generator().manual_seed(0)

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 3, (n,), generator=g)
        x = -torch.ones(n, 3, 8, 8) + 0.1 * torch.rand(n, 3, 8, 8, generator=g)
        x[torch.arange(n), y] = 0.9
        return x, y

    (x, y), (hx, hy) = draw(600), draw(90)
    data = GANData("colours", x=x, labels=y, num_modes=3, holdout=hx, holdout_labels=hy)
    emb = ClassifierEmbedder(cache_dir=str(tmp_path), epochs=2)
    emb.prepare(data)
    assert emb(hx).shape == (90, 128) and emb.test_accuracy == 1.0
    assert torch.equal(emb.mode_labels(hx), hy)
    assert [p.name for p in (tmp_path / "classifiers").iterdir()] == ["colours_3ch_8px_seed0_epochs2.pt"]
    again = ClassifierEmbedder(cache_dir=str(tmp_path), epochs=2)  # from the cache: the 3-channel network comes back
    again.prepare(data)
    assert torch.equal(again.mode_labels(hx), hy)
