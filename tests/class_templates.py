"""Three hand-made classes of 4 x 4 images and a template 'classifier' for them, shared by the per-class score tests
(tests/models/test_conditional.py, tests/metrics/test_predicted_class.py)."""

from __future__ import annotations

import torch

from ganlab.metrics.embedders import Embedder


class TemplateEmbedder(Embedder):
    """Pixels as embeddings; the class of a sample is its nearest class template (a 'classifier')."""

    def __init__(self, templates: torch.Tensor) -> None:
        self.templates = templates.flatten(1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1).float()

    def mode_labels(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cdist(x.flatten(1).float(), self.templates).argmin(1)


def three_class_images(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(templates (3, 1, 4, 4), images (n, 1, 4, 4) = template + noise, labels (n,)), all divided by 3 so the
    images lie in the data's stated range [-1, 1] (nearest templates, k-means and k-NN balls do not change under
    a common scale)."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.zeros(3, 1, 4, 4)
    templates[0, 0, 0], templates[1, 0, 2], templates[2, 0, :, 1] = 1.0, 1.0, 1.0
    y = torch.arange(n) % 3
    images = templates[y] + 0.3 * torch.randn(n, 1, 4, 4, generator=g)
    return templates / 3, images / 3, y
