"""Does an AC-GAN's own auxiliary classifier agree with the independent one? (issue 19's result table)

Loads a finished AC-GAN run (``model.conditional_head=acgan``) from its folder: its config (``.hydra/config.yaml``)
and ``checkpoints/last.pt``. Prints D's auxiliary classifier accuracy (Odena et al. 2017's class head) on 2,000
held-out real images, and on 1,000 generated images (100 per class) against the class each was made for, with
the histogram of the classes D's head assigns to them. Compare with the run's ``class/mean/class_accuracy`` (the
evaluator's independent classifier on the same kind of samples)::

    OMP_NUM_THREADS=1 python scripts/acgan_classifier_check.py <out>/runs/acgan_s0 [<out>/runs/acgan_s1 ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(run: Path) -> None:
    from ganlab.models.conditional import make_codes
    from ganlab.run.build import build_trainer

    torch.manual_seed(0)
    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    t = build_trainer(cfg, Path("/tmp") / f"acgan_check_{run.name}")
    t.load_state_dict(torch.load(run / "checkpoints" / "last.pt", weights_only=False))
    G, D = t.G.eval(), t.D.eval()
    x, y = t.data.holdout[:2000], t.data.holdout_labels[:2000]
    k = int(G.num_classes)
    with torch.no_grad():
        real_logits = D(x, y, class_logits=True)[1]
        labels = torch.arange(k).repeat_interleave(100)
        fake = G(make_codes(torch.randn(len(labels), G.z_dim), labels))
        fake_logits = D(fake, labels, class_logits=True)[1]
    print(f"{run}: D's class head on held-out real images: accuracy {(real_logits.argmax(1) == y).float().mean():.3f}")
    print(f"{run}: D's class head on fakes, against the requested class: "
          f"{(fake_logits.argmax(1) == labels).float().mean():.3f}; classes it assigns: "
          f"{torch.bincount(fake_logits.argmax(1), minlength=k).tolist()}")


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        main(Path(folder))
