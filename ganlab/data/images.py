"""Image data sets: Fashion-MNIST (real IDX files), scikit-learn's digits, MNIST via torchvision, and their
"stacked" 1,000-mode variants (VEEGAN / PacGAN stacked-MNIST protocol). CIFAR-10: :mod:`ganlab.data.cifar`;
any folder of images: :mod:`ganlab.data.image_folder`."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
import torch.nn.functional as F

from ganlab.data.base import GANData
from ganlab.data.idx import read_idx
from ganlab.data.root import describe, env_root, resolve_root

log = logging.getLogger("ganlab")

DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
_FMNIST_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                 "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _to_model_range(x: torch.Tensor, image_size: int, max_value: float) -> torch.Tensor:
    """(N, C, H, W) integers in [0, max_value] -> float32 in [-1, 1], resized to image_size x image_size."""
    x = x.float() / max_value * 2.0 - 1.0
    if x.shape[-1] != image_size or x.shape[-2] != image_size:
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", antialias=True, align_corners=False)
        x = x.clamp_(-1.0, 1.0)
    return x


def _with_raw(folder: Path, subdir: str) -> list[Path]:
    """A folder and torchvision's layout under it (``<folder>/<subdir>/raw``)."""
    return [folder, folder / subdir / "raw"]


def _missing(folder: Path, names: list[str]) -> list[str]:
    """The names in ``names`` that ``folder`` lacks, plain or ``.gz``."""
    return [n for n in names if not ((folder / n).exists() or (folder / f"{n}.gz").exists())]


def find_fashion_mnist(root: str | None = None) -> Path:
    """Return the folder holding all four Fashion-MNIST IDX files (plain or ``.gz``).

    An explicit ``root`` (relative: to the launch folder, see :func:`ganlab.data.root.resolve_root`) is the only
    place searched, with torchvision's ``<root>/FashionMNIST/raw`` under it. Without one, ``$GANLAB_DATA`` and
    Debian's ``/usr/share/datasets/fashion-mnist`` are searched in that order (each with the torchvision layout).

    Raises:
        FileNotFoundError: an explicit root lacks the files (naming the resolved folder and the files missing),
            or no default place holds them (naming every folder searched); both say how to get the files.
    """
    names = [n for pair in _FMNIST_FILES.values() for n in pair]
    if root is not None and str(root) != "":
        resolved = resolve_root(root)
        assert resolved is not None
        for d in _with_raw(resolved, "FashionMNIST"):
            if not _missing(d, names):
                return d
        missing = ", ".join(f"{n}[.gz]" for n in _missing(resolved, names))
        raise FileNotFoundError(
            f"{describe(root, resolved)} does not hold the Fashion-MNIST IDX files: {missing} not found there "
            f"(nor all four under {resolved / 'FashionMNIST' / 'raw'}). Put the four files (plain or .gz) in that "
            f"folder, set dataset.root=null to search $GANLAB_DATA and {DEBIAN_FASHION_MNIST}, or add "
            "dataset.download=true to fetch them into it through torchvision.")
    bases = [b for b in (env_root(), Path(DEBIAN_FASHION_MNIST)) if b is not None]
    searched = [d for b in bases for d in _with_raw(b, "FashionMNIST")]
    for d in searched:
        if not _missing(d, names):
            return d
    raise FileNotFoundError(
        "Fashion-MNIST IDX files (train-images-idx3-ubyte[.gz] and the other three) were not found in: "
        + ", ".join(str(d) for d in searched)
        + ". Install them with `sudo apt-get install dataset-fashion-mnist` (Debian/Ubuntu), point "
          "dataset.root or $GANLAB_DATA at a folder holding them, or set dataset.download=true to fetch them "
          "through torchvision.")


def _read_fmnist_split(folder: Path, split: str) -> tuple[torch.Tensor, torch.Tensor, list[Path]]:
    """(images (N, 28, 28) uint8, labels (N,) int64, the two files read) of ``split`` in ``folder``."""
    def pick(n: str) -> Path:
        return folder / n if (folder / n).exists() else folder / f"{n}.gz"
    img_path, lab_path = (pick(n) for n in _FMNIST_FILES[split])
    return read_idx(img_path), read_idx(lab_path).long(), [img_path, lab_path]


def fashion_mnist(root: str | None = None, image_size: int = 32, download: bool = False,
                  name: str = "fashion_mnist") -> GANData:
    """Fashion-MNIST (Xiao et al. 2017): 60,000 training and 10,000 test 28x28 garments, 10 classes.

    Returns images (60000, 1, image_size, image_size) in [-1, 1] with class labels; the test split is the
    hold-out. Where the files are searched: :func:`find_fashion_mnist` (only in ``root`` when it is given);
    ``download=True`` fetches them via torchvision into ``root`` (default ``$GANLAB_DATA``, else
    ``~/.cache/ganlab``) when none is found. The four files read are logged and kept in ``info["files"]``.

    Raises:
        FileNotFoundError: no files found and ``download`` is false.
        ValueError: a file is damaged (truncated, not IDX; see :func:`ganlab.data.idx.read_idx`).
    """
    try:
        folder = find_fashion_mnist(root)
    except FileNotFoundError:
        if not download:
            raise
        import torchvision
        target = resolve_root(root) or env_root() or Path("~/.cache/ganlab").expanduser()
        torchvision.datasets.FashionMNIST(str(target), train=True, download=True)
        torchvision.datasets.FashionMNIST(str(target), train=False, download=True)
        folder = find_fashion_mnist(str(target))
    (x, y, train_files), (hx, hy, test_files) = _read_fmnist_split(folder, "train"), _read_fmnist_split(folder, "test")
    files = [str(f) for f in train_files + test_files]
    log.info("%s: read %s", name, ", ".join(files))
    return GANData(name=name, x=_to_model_range(x[:, None], image_size, 255.0), labels=y, num_modes=10,
                   holdout=_to_model_range(hx[:, None], image_size, 255.0), holdout_labels=hy,
                   info={"source": str(folder), "files": files, "image_size": image_size})


def digits(image_size: int = 8, holdout_fraction: float = 0.2, seed: int = 0, name: str = "digits") -> GANData:
    """scikit-learn's bundled 8x8 handwritten digits (1,797 images, values 0-16, 10 classes).

    A seeded random ``holdout_fraction`` of the images is held out. Returns (N, 1, S, S) in [-1, 1].
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.as_tensor(bunch.images, dtype=torch.float32)[:, None]  # (1797, 1, 8, 8)
    y = torch.as_tensor(bunch.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_hold = int(round(holdout_fraction * len(y)))
    hold, train = perm[:n_hold], perm[n_hold:]
    x = _to_model_range(x, image_size, 16.0)
    return GANData(name=name, x=x[train], labels=y[train], num_modes=10, holdout=x[hold], holdout_labels=y[hold],
                   info={"source": "sklearn.datasets.load_digits", "image_size": image_size})


def _torchvision_data(cls_name: str, root: str | None, image_size: int, download: bool, name: str) -> GANData:
    import torchvision

    root = str(resolve_root(root) or env_root() or Path("~/.cache/ganlab").expanduser())
    cls = getattr(torchvision.datasets, cls_name)
    try:
        train, test = cls(root, train=True, download=download), cls(root, train=False, download=download)
    except RuntimeError as err:  # torchvision: "Dataset not found. You can use download=True to download it"
        raise FileNotFoundError(f"{cls_name} files were not found under {root} ({err}). Point dataset.root or "
                                "$GANLAB_DATA at torchvision's folder layout, or set dataset.download=true.") from err

    def as_tensors(ds) -> tuple[torch.Tensor, torch.Tensor]:
        data = torch.as_tensor(ds.data)
        data = data[:, None] if data.dim() == 3 else data.permute(0, 3, 1, 2)  # (N, C, H, W)
        return _to_model_range(data, image_size, 255.0), torch.as_tensor(ds.targets, dtype=torch.long)

    (x, y), (hx, hy) = as_tensors(train), as_tensors(test)
    log.info("%s: read torchvision's %s files under %s", name, cls_name, root)
    return GANData(name=name, x=x, labels=y, num_modes=10, holdout=hx, holdout_labels=hy,
                   info={"source": root, "image_size": image_size})


def mnist(root: str | None = None, image_size: int = 32, download: bool = False, name: str = "mnist") -> GANData:
    """MNIST through torchvision (``<root>/MNIST/raw``); images in [-1, 1], test split as hold-out."""
    return _torchvision_data("MNIST", root, image_size, download, name)


def stack(base: GANData, num_samples: int, holdout_samples: int, seed: int, name: str) -> GANData:
    """Stack three independently drawn single-channel images as RGB channels (Metz et al. 2017; VEEGAN).

    The mode of a stacked image is its label triple, encoded ``100 * a + 10 * b + c`` (1,000 modes for
    10 classes). Returns (num_samples, 3, S, S) images; the hold-out is stacked from the base hold-out.

    Raises:
        ValueError: the base data set is not single-channel or has no labels.
    """
    if base.x.shape[1] != 1 or base.labels is None:
        raise ValueError(f"stacking needs a labelled single-channel data set; {base.name!r} is not")
    g = torch.Generator().manual_seed(seed)

    def draw(x: torch.Tensor, y: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(x.shape[0], (n, 3), generator=g)  # (n, 3) independent draws per channel
        return x[idx, 0], y[idx[:, 0]] * 100 + y[idx[:, 1]] * 10 + y[idx[:, 2]]

    x, y = draw(base.x, base.labels, num_samples)
    hx, hy = (draw(base.holdout, base.holdout_labels, holdout_samples) if base.holdout is not None
              and base.holdout_labels is not None else (None, None))
    return GANData(name=name, x=x, labels=y, num_modes=base.num_modes ** 3, holdout=hx, holdout_labels=hy,
                   info={**base.info, "stacked_from": base.name})


def stacked_fashion_mnist(root: str | None = None, image_size: int = 32, download: bool = False,
                          num_samples: int = 60_000, holdout_samples: int = 10_000, seed: int = 0,
                          name: str = "stacked_fashion_mnist") -> GANData:
    """Stacked Fashion-MNIST: 1,000 modes (label triples); see :func:`stack`."""
    return stack(fashion_mnist(root, image_size, download), num_samples, holdout_samples, seed, name)


def stacked_digits(image_size: int = 8, num_samples: int = 20_000, holdout_samples: int = 5_000, seed: int = 0,
                   name: str = "stacked_digits") -> GANData:
    """Stacked scikit-learn digits: 1,000 modes (label triples); see :func:`stack`."""
    return stack(digits(image_size, seed=seed), num_samples, holdout_samples, seed, name)
