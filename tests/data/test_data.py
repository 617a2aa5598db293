"""Data sets: IDX reading against torchvision, file search, stacking, batch order, bad data."""

import gzip
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.datasets.mnist import read_image_file, read_label_file

from ganlab.data import Batcher, GANData, digits, fashion_mnist, stack, stacked_digits
from ganlab.data import images as images_mod
from ganlab.data.idx import read_idx


def write_idx(path: Path, array: np.ndarray, gz: bool = False) -> None:
    """Write a uint8 IDX file (magic 0x0000 08 ndim, big-endian int32 dims, then data)."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    raw = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if gz else raw)


def make_fake_fmnist(folder: Path, n_train: int = 40, n_test: int = 20, gz: bool = True) -> None:
    """Small IDX files in the Fashion-MNIST layout: image i is filled with value 10 * label."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, n)
        imgs = np.repeat((labels * 10)[:, None, None], 28, axis=1).repeat(28, axis=2)
        write_idx(folder / f"{split}-images-idx3-ubyte{'.gz' if gz else ''}", imgs, gz)
        write_idx(folder / f"{split}-labels-idx1-ubyte{'.gz' if gz else ''}", labels, gz)


def test_read_idx_matches_torchvision(tmp_path: Path) -> None:
    imgs = np.random.default_rng(1).integers(0, 256, (7, 28, 28))
    labels = np.arange(7)
    write_idx(tmp_path / "i-idx3-ubyte", imgs)
    write_idx(tmp_path / "l-idx1-ubyte", labels)
    write_idx(tmp_path / "i-idx3-ubyte.gz", imgs, gz=True)
    assert torch.equal(read_idx(tmp_path / "i-idx3-ubyte"), read_image_file(str(tmp_path / "i-idx3-ubyte")))
    assert torch.equal(read_idx(tmp_path / "l-idx1-ubyte"), read_label_file(str(tmp_path / "l-idx1-ubyte")))
    assert torch.equal(read_idx(tmp_path / "i-idx3-ubyte.gz"), torch.from_numpy(imgs.astype(np.uint8)))


def test_read_idx_rejects_garbage(tmp_path: Path) -> None:
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "bad")


@pytest.fixture
def no_default_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$GANLAB_DATA and Debian's folder point at empty places under ``tmp_path / "defaults"``; returns that folder."""
    monkeypatch.setenv("GANLAB_DATA", str(tmp_path / "defaults" / "env"))
    monkeypatch.setattr(images_mod, "DEBIAN_FASHION_MNIST", str(tmp_path / "defaults" / "debian"))
    return tmp_path / "defaults"


def test_fashion_mnist_search_order_and_scaling(tmp_path: Path, no_default_data: Path) -> None:
    make_fake_fmnist(no_default_data / "env" / "FashionMNIST" / "raw")  # torchvision layout under $GANLAB_DATA
    data = fashion_mnist(root=None, image_size=32)
    assert data.x.shape == (40, 1, 32, 32) and data.holdout.shape == (20, 1, 32, 32)
    # a constant image of value 10*label maps to 10*label/255*2-1 everywhere (resizing keeps constants)
    expect = (data.labels.float() * 10 / 255 * 2 - 1)[:, None, None, None].expand_as(data.x)
    assert torch.allclose(data.x, expect, atol=1e-5)
    assert data.info["source"].endswith("FashionMNIST/raw")
    make_fake_fmnist(tmp_path / "root", n_train=30, gz=False)  # the config's root wins over $GANLAB_DATA
    assert len(fashion_mnist(root=str(tmp_path / "root"), image_size=32)) == 30
    make_fake_fmnist(no_default_data / "debian", n_train=25)  # $GANLAB_DATA before Debian's folder
    assert len(fashion_mnist(image_size=32)) == 40


def test_missing_fashion_mnist_names_every_place(no_default_data: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        fashion_mnist(root=None)
    msg = str(err.value)
    for place in (str(no_default_data / "env"), str(no_default_data / "debian"), "FashionMNIST/raw",
                  "apt-get install dataset-fashion-mnist", "dataset.download=true"):
        assert place in msg


def test_an_explicit_root_without_the_files_is_refused(tmp_path: Path, no_default_data: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    make_fake_fmnist(no_default_data / "debian", n_train=25)  # the old code fell back to this silently
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    write_idx(tmp_path / "mine" / "train-labels-idx1-ubyte", np.arange(3))  # one file of four
    with pytest.raises(FileNotFoundError) as err:
        fashion_mnist(root="mine")
    msg = str(err.value)
    assert f"dataset.root=mine (relative, so taken from the launch folder {tmp_path}: {tmp_path / 'mine'})" in msg
    assert "train-images-idx3-ubyte[.gz], t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] not found" in msg
    assert "train-labels" not in msg.split("not found")[0]
    with pytest.raises(FileNotFoundError, match=r"^dataset\.root=/nonexistent does not hold"):
        fashion_mnist(root="/nonexistent")
    # each piece of advice works: dataset.root=null searches the defaults ...
    assert "set dataset.root=null to search $GANLAB_DATA and " + str(no_default_data / "debian") in msg
    assert len(fashion_mnist(root=None)) == 25
    # ... dataset.download=true fetches into the root (torchvision stubbed: nothing is downloaded in tests) ...
    assert "add dataset.download=true to fetch them into it" in msg
    fetched: list[str] = []

    def fake_torchvision_fashion_mnist(root: str, train: bool, download: bool) -> None:
        fetched.append(root)
        make_fake_fmnist(Path(root) / "FashionMNIST" / "raw", n_train=35)
    monkeypatch.setattr("torchvision.datasets.FashionMNIST", fake_torchvision_fashion_mnist)
    assert len(fashion_mnist(root="mine", download=True)) == 35 and fetched[0] == str(tmp_path / "mine")
    # ... and so does putting the four files in the folder named
    make_fake_fmnist(tmp_path / "mine", n_train=30)
    assert len(fashion_mnist(root="mine")) == 30


def test_relative_roots_resolve_against_the_launch_folder(tmp_path: Path, no_default_data: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from ganlab import CONFIG_DIR
    from ganlab.data.root import env_root, resolve_root

    launch, job = tmp_path / "launch", tmp_path / "launch" / "runs" / "job0"
    job.mkdir(parents=True)
    make_fake_fmnist(launch / "data", n_train=30)
    monkeypatch.chdir(launch)
    assert resolve_root("data") == launch / "data" and resolve_root(None) is None
    assert resolve_root("~/x") == Path.home() / "x" and resolve_root("/abs") == Path("/abs")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=["hydra.job.chdir=true"], return_hydra_config=True)
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # undone after the test
    HydraConfig.instance().set_config(cfg)
    monkeypatch.chdir(job)  # what hydra.job.chdir=true and joblib/submitit jobs do
    monkeypatch.setenv("GANLAB_DATA", "data")
    assert resolve_root("data") == launch / "data" == env_root()
    assert len(fashion_mnist(root="data")) == 30 and len(fashion_mnist(root=None)) == 30


def test_the_files_read_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_fake_fmnist(tmp_path, gz=False)
    with caplog.at_level(logging.INFO, logger="ganlab"):
        data = fashion_mnist(root=str(tmp_path))
    names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    assert data.info["files"] == [str(tmp_path / n) for n in names]
    assert f"fashion_mnist: read {', '.join(str(tmp_path / n) for n in names)}" in caplog.text


def test_a_truncated_gz_file_is_named(tmp_path: Path) -> None:
    from tiny_config import compose_cfg

    from ganlab.run.build import load_data

    make_fake_fmnist(tmp_path)
    bad = tmp_path / "t10k-images-idx3-ubyte.gz"
    intact = bad.read_bytes()
    bad.write_bytes(intact[: len(intact) // 2])
    cfg = compose_cfg(["dataset=fashion_mnist", f"dataset.root={tmp_path}", "dataset.image_size=8"])
    with pytest.raises(ValueError, match=rf"^{bad} is damaged \(EOFError: Compressed file ended.*"
                                         "replace it with an intact copy"):
        load_data(cfg, torch.device("cpu"))
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match=rf"^{bad} is damaged \(BadGzipFile"):
        load_data(cfg, torch.device("cpu"))
    bad.write_bytes(intact)  # the advice: an intact copy loads
    assert load_data(cfg, torch.device("cpu")).holdout.shape == (20, 1, 8, 8)


def test_real_fashion_mnist_when_installed() -> None:
    if not Path(images_mod.DEBIAN_FASHION_MNIST).exists():
        pytest.skip("Debian package dataset-fashion-mnist not installed")
    data = fashion_mnist(image_size=32)
    assert data.x.shape == (60000, 1, 32, 32) and data.holdout.shape == (10000, 1, 32, 32)
    assert torch.bincount(data.labels).tolist() == [6000] * 10  # Fashion-MNIST is balanced
    assert data.x.min() >= -1 and data.x.max() <= 1


def test_digits_split_and_range() -> None:
    data = digits(seed=0)
    assert len(data) + len(data.holdout) == 1797
    assert data.x.shape[1:] == (1, 8, 8) and data.x.min() == -1 and data.x.max() == 1


def test_stacking_channels_come_from_the_labelled_images() -> None:
    base = GANData("toy", x=torch.arange(10).float().view(10, 1, 1, 1).expand(10, 1, 8, 8).clone(),
                   labels=torch.arange(10), num_modes=10)
    st = stack(base, num_samples=500, holdout_samples=0, seed=0, name="st")
    assert st.x.shape == (500, 3, 8, 8) and st.num_modes == 1000
    channel_labels = st.x[:, :, 0, 0].long()  # image value == its label here
    assert torch.equal(st.labels, channel_labels[:, 0] * 100 + channel_labels[:, 1] * 10 + channel_labels[:, 2])
    assert st.labels.unique().numel() > 350  # 500 draws from 1000 equally likely modes: ~394 distinct
    assert stacked_digits(num_samples=100, holdout_samples=10).x.shape == (100, 3, 8, 8)


def test_batcher_reshuffles_every_epoch_and_resumes() -> None:
    b = Batcher(10, 3, seed=0)
    epoch0 = torch.cat([b.next() for _ in range(3)])  # 9 of 10, last partial batch dropped
    assert epoch0.unique().numel() == 9
    state = b.state_dict()
    epoch1 = torch.cat([b.next() for _ in range(3)])
    assert not torch.equal(epoch0, epoch1) and b.epoch == 1
    b2 = Batcher(10, 3, seed=0)
    b2.load_state_dict(state)
    assert torch.equal(torch.cat([b2.next() for _ in range(3)]), epoch1)
    assert torch.equal(Batcher(10, 3, seed=0).next(), epoch0[:3])  # same seed, same order


def test_batcher_bad_sizes() -> None:
    with pytest.raises(ValueError, match="trainer.batch_size=11 is larger than the data set"):
        Batcher(10, 11, seed=0)
    with pytest.raises(ValueError, match="trainer.batch_size must be positive"):
        Batcher(10, 0, seed=0)


def test_non_finite_sample_is_named() -> None:
    x = torch.zeros(6, 2)
    x[4, 1] = float("nan")
    x[5, 0] = float("inf")
    with pytest.raises(ValueError, match="training sample 4 contains NaN or Inf"):
        GANData("toy", x=x).check_finite()


@pytest.mark.e2e
def test_a_relative_root_in_a_joblib_multirun_with_chdir(tmp_path: Path) -> None:
    """The issue's case end to end: each job runs in its own folder, the root is relative to the launch folder."""
    import os
    import subprocess
    import sys

    make_fake_fmnist(tmp_path / "data" / "fm", n_train=64, n_test=32)
    small = ["device=cpu", "trainer.steps=2", "trainer.batch_size=16", "trainer.eval_every=2", "trainer.ckpt_every=2",
             "trainer.progress=false", "metrics.num_samples=20", "metrics.num_real=20", "metrics/embedder=pixels",
             "metrics.scorers.ndb.k=5", "logger=none", "model=dcgan", "dataset.image_size=8",
             "model.generator.width=8", "model.discriminator.width=8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env.pop("GANLAB_DATA", None)
    res = subprocess.run([str(Path(sys.executable).with_name("ganlab-train")), "-m", "hydra/launcher=joblib",
                          "hydra.launcher.n_jobs=1", "hydra.job.chdir=true", "dataset=fashion_mnist",
                          "dataset.root=data/fm", *small, f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    log = (tmp_path / "sweep" / "0_plain_s0" / "train.log").read_text()
    assert f"fashion_mnist: read {tmp_path / 'data' / 'fm' / 'train-images-idx3-ubyte.gz'}" in log, log
    assert (tmp_path / "sweep" / "0_plain_s0" / "metrics.json").is_file()
