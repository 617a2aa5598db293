"""dataset=cifar10 from a local copy in CIFAR-10's python layout: a tiny pickle fixture, read as torchvision reads
it, searched as every loader searches (ganlab.data.root), damaged batches named, and a run that trains on it."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from ganlab.data import cifar as cifar_mod
from ganlab.data import cifar10

NAMES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


def make_fake_cifar10(root: Path, per_batch: int = 8, seed: int = 0) -> Path:
    """``<root>/cifar-10-batches-py`` with the six batches (``per_batch`` random images each) and batches.meta."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        entry = {"batch_label": name, "labels": rng.integers(0, 10, per_batch).tolist(),
                 "data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 "filenames": [f"{name}_{i}.png" for i in range(per_batch)]}
        (folder / name).write_bytes(pickle.dumps(entry))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"class{i}" for i in range(10)]}))
    return folder


@pytest.fixture
def no_default_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$GANLAB_DATA and ~/.cache/ganlab point at empty places under ``tmp_path / "defaults"``; returns that folder."""
    monkeypatch.setenv("GANLAB_DATA", str(tmp_path / "defaults" / "env"))
    monkeypatch.setattr(cifar_mod, "DEFAULT_HOME", str(tmp_path / "defaults" / "home"))
    return tmp_path / "defaults"


def test_reads_what_torchvision_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchvision
    from torchvision.datasets import cifar as tv_cifar

    make_fake_cifar10(tmp_path)
    data = cifar10(root=str(tmp_path), image_size=32)
    assert data.x.shape == (40, 3, 32, 32) and data.holdout.shape == (8, 3, 32, 32) and data.num_modes == 10
    # torchvision's class, its MD5 checks switched off (they accept only the published files)
    monkeypatch.setattr(tv_cifar, "check_integrity", lambda *a, **k: True)
    for train, x, y in ((True, data.x, data.labels), (False, data.holdout, data.holdout_labels)):
        ref = torchvision.datasets.CIFAR10(str(tmp_path), train=train, download=False)
        ref_x = torch.from_numpy(ref.data).permute(0, 3, 1, 2).float() / 255 * 2 - 1  # HWC uint8 -> CHW [-1, 1]
        assert torch.equal(x, ref_x) and y.tolist() == ref.targets


def test_channel_order_by_hand(tmp_path: Path) -> None:
    folder = make_fake_cifar10(tmp_path)
    row = np.concatenate([np.full(1024, 0), np.full(1024, 255), np.arange(1024) % 256]).astype(np.uint8)
    entry = pickle.loads((folder / "test_batch").read_bytes())
    entry["data"][0] = row  # red 0, green 255, blue = (32 * row + column) mod 256
    (folder / "test_batch").write_bytes(pickle.dumps(entry))
    img = cifar10(root=str(folder), image_size=32).holdout[0]  # root may also be the batches' folder itself
    assert (img[0] == -1).all() and (img[1] == 1).all()
    assert img[2, 0, 5] == pytest.approx(5 / 255 * 2 - 1) and img[2, 1, 0] == pytest.approx(32 / 255 * 2 - 1)


def test_an_explicit_root_without_the_files_is_refused(tmp_path: Path, no_default_data: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    make_fake_cifar10(no_default_data / "env")  # never a fallback for an explicit root
    monkeypatch.chdir(tmp_path)
    make_fake_cifar10(tmp_path / "mine")
    (tmp_path / "mine" / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError) as err:
        cifar10(root="mine")
    msg = str(err.value)
    assert msg.startswith(f"dataset.root=mine (relative, so taken from the launch folder {tmp_path}: "
                          f"{tmp_path / 'mine'}) does not hold CIFAR-10's python batches: data_batch_3 not found in "
                          f"{tmp_path / 'mine' / 'cifar-10-batches-py'}")
    # each piece of advice works: dataset.root=null searches the defaults ...
    assert "set dataset.root=null to search $GANLAB_DATA" in msg and len(cifar10(root=None)) == 40
    # ... dataset.download=true fetches into the root (torchvision stubbed: nothing is downloaded in tests) ...
    assert "add dataset.download=true to fetch it into it through torchvision" in msg
    fetched: list[str] = []

    def fake_torchvision_cifar10(root: str, train: bool, download: bool) -> None:
        fetched.append(root)
        make_fake_cifar10(Path(root), per_batch=4)
    monkeypatch.setattr("torchvision.datasets.CIFAR10", fake_torchvision_cifar10)
    assert len(cifar10(root="mine", download=True)) == 20 and fetched == [str(tmp_path / "mine")]
    # ... and so does extracting the archive into the folder named (it makes cifar-10-batches-py/ there)
    (tmp_path / "mine" / "cifar-10-batches-py" / "data_batch_3").unlink()
    assert f"Extract cifar-10-python.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html) into {tmp_path / 'mine'}" \
        in msg
    make_fake_cifar10(tmp_path / "mine", per_batch=6)
    assert len(cifar10(root="mine")) == 30


def test_nothing_found_names_every_place_and_never_downloads(no_default_data: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torchvision.datasets.CIFAR10", None)  # any use of it would fail here
    with pytest.raises(FileNotFoundError) as err:
        cifar10(root=None)
    for place in (no_default_data / "env" / "cifar-10-batches-py", no_default_data / "home", "dataset.download=true"):
        assert str(place) in str(err.value)


def test_files_read_are_logged_and_a_damaged_batch_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = make_fake_cifar10(tmp_path)
    with caplog.at_level(logging.INFO, logger="ganlab"):
        data = cifar10(root=str(tmp_path))
    assert data.info["files"] == [str(folder / n) for n in NAMES]
    assert f"cifar10: read {', '.join(str(folder / n) for n in NAMES)}" in caplog.text
    bad = folder / "data_batch_2"
    intact = bad.read_bytes()
    bad.write_bytes(intact[: len(intact) // 2])
    with pytest.raises(ValueError, match=rf"^{bad} is damaged \(.*replace it with an intact copy"):
        cifar10(root=str(tmp_path))
    bad.write_bytes(pickle.dumps({"data": np.zeros((2, 100), np.uint8), "labels": [0, 1]}))
    with pytest.raises(ValueError, match=rf"^{bad} is not a CIFAR-10 python batch"):
        cifar10(root=str(tmp_path))
    bad.write_bytes(intact)  # the advice: an intact copy loads
    assert len(cifar10(root=str(tmp_path))) == 40


def test_cifar10_trains(tmp_path: Path) -> None:
    from tiny_config import compose_cfg

    from ganlab.run.build import build_trainer

    make_fake_cifar10(tmp_path / "data", per_batch=16)
    cfg = compose_cfg(["dataset=cifar10", f"dataset.root={tmp_path / 'data'}", "dataset.image_size=8",
                       "model=dcgan", "model.generator.width=8", "model.discriminator.width=8",
                       "model.generator.z_dim=8", "logger=none", "trainer.steps=2", "trainer.eval_every=2",
                       "trainer.projector=false", "metrics.num_samples=16", "metrics.num_real=16",
                       "metrics.scorers.ndb.k=4"])
    metrics = build_trainer(cfg, tmp_path / "run").fit()
    assert metrics["step"] == 2 and metrics["dataset"] == "cifar10"
    assert 1 <= metrics["scores"]["modes_covered"] <= 10  # the auto embedder's classifier labels 10 classes
    assert all(np.isfinite(v) for k, v in metrics["scores"].items() if not k.startswith("data/"))
