"""Data sets: IDX reading against torchvision, file search, stacking, batch order, bad data."""

import gzip
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


def test_fashion_mnist_search_order_and_scaling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_fake_fmnist(tmp_path / "env" / "FashionMNIST" / "raw")  # torchvision layout under $GANLAB_DATA
    monkeypatch.setenv("GANLAB_DATA", str(tmp_path / "env"))
    monkeypatch.setattr(images_mod, "DEBIAN_FASHION_MNIST", str(tmp_path / "nowhere"))
    data = fashion_mnist(root=str(tmp_path / "empty"), image_size=32)
    assert data.x.shape == (40, 1, 32, 32) and data.holdout.shape == (20, 1, 32, 32)
    # a constant image of value 10*label maps to 10*label/255*2-1 everywhere (resizing keeps constants)
    expect = (data.labels.float() * 10 / 255 * 2 - 1)[:, None, None, None].expand_as(data.x)
    assert torch.allclose(data.x, expect, atol=1e-5)
    assert data.info["source"].endswith("FashionMNIST/raw")
    make_fake_fmnist(tmp_path / "root", n_train=30, gz=False)  # the config's root wins over $GANLAB_DATA
    assert len(fashion_mnist(root=str(tmp_path / "root"), image_size=32)) == 30


def test_missing_fashion_mnist_names_every_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GANLAB_DATA", str(tmp_path / "env"))
    monkeypatch.setattr(images_mod, "DEBIAN_FASHION_MNIST", str(tmp_path / "debian"))
    with pytest.raises(FileNotFoundError) as err:
        fashion_mnist(root=str(tmp_path / "cfgroot"))
    msg = str(err.value)
    for place in ("cfgroot", "env", "debian", "FashionMNIST/raw", "apt-get install dataset-fashion-mnist",
                  "dataset.download=true"):
        assert place in msg


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
