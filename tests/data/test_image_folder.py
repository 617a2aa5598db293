"""dataset=image_folder: class folders as labels (or none), resize + centre crop by hand, the decoded tensor cached
and invalidated, unreadable files named, bad layouts refused with advice that works, and a run that trains."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ganlab.data import image_folder

folder_mod = importlib.import_module("ganlab.data.image_folder")  # the module (the package exports the function)


def solid(path: Path, rgb: tuple[int, int, int], size: tuple[int, int] = (20, 12)) -> Path:
    """A (width, height) image of one colour; the format follows the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, rgb).save(path)
    return path


def classes_tree(root: Path) -> Path:
    """cat/ 3 red PNGs (one in a sub-folder), dog/ 2 blue JPEGs, empty/ nothing, .hidden/ ignored."""
    for i in range(2):
        solid(root / "cat" / f"c{i}.png", (255, 0, 0))
    solid(root / "cat" / "more" / "c2.PNG", (255, 0, 0))
    for i in range(2):
        solid(root / "dog" / f"d{i}.jpg", (0, 0, 255))
    (root / "empty").mkdir()
    solid(root / ".hidden" / "x.png", (0, 255, 0))
    (root / "dog" / "notes.txt").write_text("not an image")
    return root


def to_range(v: float) -> float:
    return v / 255 * 2 - 1


def test_class_folders_are_labels(tmp_path: Path) -> None:
    data = image_folder(root=str(classes_tree(tmp_path / "pets")), image_size=8, holdout_fraction=0.2, seed=0)
    assert data.info["classes"] == ["cat", "dog"] and data.num_modes == 2 and data.info["num_files"] == 5
    assert data.x.shape == (4, 3, 8, 8) and data.holdout.shape == (1, 3, 8, 8)
    x = torch.cat([data.x, data.holdout])
    y = torch.cat([data.labels, data.holdout_labels])
    assert sorted(y.tolist()) == [0, 0, 0, 1, 1]
    red, blue = x[y == 0], x[y == 1]
    assert torch.allclose(red[:, 0], torch.ones(1)) and torch.allclose(red[:, 1:], -torch.ones(1))  # PNG: exact
    assert torch.allclose(blue[:, 2], torch.ones(1), atol=0.02) and torch.allclose(blue[:, :2], -torch.ones(1),
                                                                                    atol=0.02)  # JPEG: near


def test_top_level_images_are_unlabelled_and_grayscale_works(tmp_path: Path) -> None:
    for i in range(4):
        solid(tmp_path / f"{i}.png", (60 * i, 60 * i, 60 * i))
    data = image_folder(root=str(tmp_path), image_size=4, channels=1, holdout_fraction=0)
    assert data.labels is None and data.num_modes is None and data.holdout is None
    assert data.x.shape == (4, 1, 4, 4)
    assert sorted(round(float(v), 4) for v in data.x[:, 0, 0, 0]) == [round(to_range(60 * i), 4) for i in range(4)]


def test_shorter_side_resized_then_centre_cropped(tmp_path: Path) -> None:
    """60 x 20 image, white in columns 15-44, black outside: resized to 24 x 8, the centre 8 columns come from
    source columns 22.5-37.5, well inside the white band: all 1. A 20 x 60 image the same way, turned."""
    wide = np.zeros((20, 60, 3), np.uint8)
    wide[:, 15:45] = 255
    Image.fromarray(wide).save(tmp_path / "a.png")
    Image.fromarray(wide.transpose(1, 0, 2).copy()).save(tmp_path / "b.png")
    data = image_folder(root=str(tmp_path), image_size=8, holdout_fraction=0)
    assert data.x.shape == (2, 3, 8, 8) and torch.allclose(data.x, torch.ones(1))


def test_decoded_once_then_read_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    root, cache = classes_tree(tmp_path / "pets"), tmp_path / "cache"
    with caplog.at_level(logging.INFO, logger="ganlab"):
        first = image_folder(root=str(root), image_size=8, cache_dir=str(cache))
    files = list((cache / "image_folder").iterdir())
    assert len(files) == 1 and files[0].name.startswith("pets_8px_3ch_") and f"cached at {files[0]}" in caplog.text
    decoded: list[Path] = []
    real_load = folder_mod.load_image
    monkeypatch.setattr(folder_mod, "load_image", lambda p, *a: decoded.append(p) or real_load(p, *a))
    second = image_folder(root=str(root), image_size=8, cache_dir=str(cache))
    assert decoded == [] and torch.equal(first.x, second.x) and torch.equal(first.labels, second.labels)
    solid(root / "dog" / "d1.jpg", (0, 0, 200), size=(21, 12))  # a changed file: decoded again, a new cache file
    third = image_folder(root=str(root), image_size=8, cache_dir=str(cache))
    assert len(third) == 4 and len(decoded) == 5 and len(list((cache / "image_folder").iterdir())) == 2
    Path(third.info["cache"]).write_bytes(b"damaged")  # a damaged cache is rebuilt (with a warning), never trusted
    with caplog.at_level(logging.WARNING, logger="ganlab"):
        again = image_folder(root=str(root), image_size=8, cache_dir=str(cache))
    assert "is unreadable" in caplog.text and len(decoded) == 10 and torch.equal(again.x, third.x)


def test_unreadable_files_are_all_named(tmp_path: Path) -> None:
    root = classes_tree(tmp_path / "pets")
    (root / "cat" / "broken.png").write_bytes(b"not a png at all")
    good = (root / "dog" / "d0.jpg").read_bytes()
    (root / "dog" / "cut.jpg").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError) as err:
        image_folder(root=str(root), image_size=8)
    msg = str(err.value)
    assert msg.startswith("2 of 7 files cannot be read as images: ")
    assert f"{root / 'cat' / 'broken.png'} cannot be read as an image (UnidentifiedImageError" in msg
    assert f"{root / 'dog' / 'cut.jpg'} cannot be read as an image (OSError" in msg
    assert msg.endswith("Replace or remove them, then run again")
    (root / "cat" / "broken.png").unlink()  # the advice: remove (or replace) them
    (root / "dog" / "cut.jpg").write_bytes(good)
    assert image_folder(root=str(root), image_size=8).info["num_files"] == 6


def test_bad_roots_and_layouts_are_refused_with_advice_that_works(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="dataset=image_folder needs the folder of images: dataset.root=DIR"):
        image_folder(root=None)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=rf"^dataset.root=pics \(relative, so taken from the launch folder "
                                                rf"{tmp_path}: {tmp_path / 'pics'}\) is not a folder"):
        image_folder(root="pics")
    (tmp_path / "pics" / "a").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"holds no images \(\.jpg, \.jpeg, \.png"):
        image_folder(root="pics")
    root = classes_tree(tmp_path / "pics")
    solid(root / "stray.png", (1, 2, 3))
    with pytest.raises(ValueError, match=r"holds both images at its top level \(1, e.g. stray.png\) and class "
                                         r"folders with images \(cat, dog\): move the top-level images into a class "
                                         "folder"):
        image_folder(root="pics", image_size=8)
    (root / "stray.png").rename(root / "dog" / "stray.png")  # the advice, followed
    assert image_folder(root="pics", image_size=8).info["num_files"] == 6
    with pytest.raises(ValueError, match="dataset.channels must be 1 or 3"):
        image_folder(root="pics", channels=2)


def test_image_folder_trains(tmp_path: Path) -> None:
    from tiny_config import compose_cfg

    from ganlab.run.build import build_trainer

    for i in range(40):
        solid(tmp_path / "imgs" / ("a" if i % 2 else "b") / f"{i}.png", (6 * i, 255 - 6 * i, 128), size=(10 + i, 12))
    cfg = compose_cfg(["dataset=image_folder", "dataset.root=imgs", "dataset.image_size=8",
                       "dataset.holdout_fraction=0.5", "model=dcgan",
                       "model.generator.width=8", "model.discriminator.width=8", "model.generator.z_dim=8",
                       "logger=none", "trainer.steps=2", "trainer.eval_every=2", "trainer.projector=false",
                       "metrics.num_samples=16", "metrics.num_real=16", "metrics.scorers.ndb.k=2"])
    import os
    cwd = os.getcwd()
    os.chdir(tmp_path)  # a relative root: from the launch folder
    try:
        metrics = build_trainer(cfg, tmp_path / "run").fit()
    finally:
        os.chdir(cwd)
    assert metrics["step"] == 2 and metrics["dataset"] == "image_folder"
