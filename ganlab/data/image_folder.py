"""Any folder of images (``dataset=image_folder dataset.root=DIR``): PNG, JPEG and the other formats of
torchvision's ``IMG_EXTENSIONS``, decoded with PIL, resized once and cached as a tensor.

Layout: either the images lie in ``DIR`` itself (no labels), or in class folders ``DIR/<class>/...`` (any depth
below the class folder; classes in sorted order get labels 0, 1, ..., as torchvision's ``ImageFolder`` gives
them). Names starting with a dot are skipped. Each image is read as a viewer shows it (:func:`as_viewed`: turned
by its EXIF orientation, palette resolved, 16-bit grey scaled to 8 bits, transparency composited over white, CMYK
and the other colour modes converted) or refused with its name (floating-point pixels, 32-bit values beyond 16
bits, modes PIL cannot convert), then converted to RGB (``channels=3``) or grayscale (``channels=1``), its shorter
side resized to ``image_size`` (bilinear, antialiased) and its centre cropped to a
square (the usual GAN preprocessing: ``transforms.Resize`` then ``CenterCrop``).

The resized uint8 images go to ``<cache_dir>/image_folder/<folder>_<S>px_<C>ch_<key>.pt``, where the key hashes
the folder, the settings and every file's path, size and modification time: a changed, added or removed file
makes a new cache file, and a later run with the same folder reads the tensor instead of decoding again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ganlab.data.base import GANData
from ganlab.data.images import _to_model_range
from ganlab.data.root import describe, resolve_root
from ganlab.io import atomic_save

log = logging.getLogger("ganlab")

CACHE_FORMAT = 2  # bump when the cached content or the preprocessing changes (2: images read as viewed)

#: 16-bit grey modes (PNG and TIFF 16-bit greyscale), scaled by 255 / 65535 to 8 bits.
GREY16_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
#: Colour of the background transparent pixels are composited over (a viewer's white page).
BACKGROUND = (255, 255, 255)


def _extensions() -> tuple[str, ...]:
    from torchvision.datasets.folder import IMG_EXTENSIONS

    return IMG_EXTENSIONS


def _is_image(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and p.suffix.lower() in _extensions()


def list_images(folder: Path) -> tuple[list[Path], list[int] | None, list[str]]:
    """The images of ``folder`` in a fixed order, their labels and the class names.

    Returns:
        (files, labels, classes): with class folders, the files of each class in sorted order, ``labels[i]`` the
        index of ``files[i]``'s class in ``classes`` (sorted folder names holding at least one image); without,
        the images of ``folder`` itself, sorted, with ``labels`` None and ``classes`` [].

    Raises:
        ValueError: both images at the top and class folders with images (the labels would be ambiguous), or
            no image at all; the message names the folder and what was found.
    """
    top = sorted(p for p in folder.iterdir() if _is_image(p))
    classes: list[str] = []
    files: list[Path] = []
    labels: list[int] = []
    for d in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        inside = sorted(p for p in d.rglob("*") if _is_image(p)
                        and not any(part.startswith(".") for part in p.relative_to(d).parts))
        if inside:
            files += inside
            labels += [len(classes)] * len(inside)
            classes.append(d.name)
    if top and classes:
        raise ValueError(f"{folder} holds both images at its top level ({len(top)}, e.g. {top[0].name}) and class "
                         f"folders with images ({', '.join(classes[:5])}{', ...' if len(classes) > 5 else ''}): move "
                         "the top-level images into a class folder, or point dataset.root at a folder with only one "
                         "of the two")
    if top:
        return top, None, []
    if not files:
        raise ValueError(f"{folder} holds no images ({', '.join(_extensions())}), neither at its top level nor in "
                         "class folders: point dataset.root at a folder of images")
    return files, labels, classes


def as_viewed(img: Any, name: str) -> Any:
    """``img`` (a PIL image) as a viewer shows it, in mode ``RGB`` or ``L``:

    * turned and mirrored by its EXIF orientation tag (``PIL.ImageOps.exif_transpose``);
    * 16-bit grey (``I;16*``, and ``I`` holding values in [0, 65535]) scaled to 8 bits, round(v * 255 / 65535)
      (PIL's own conversion clips everything above 255 to white);
    * transparency (an alpha band, ``LA``, ``RGBA``, ``PA``, or a palette's or grey/RGB image's transparent colour)
      composited over white (:data:`BACKGROUND`), as a page shows it;
    * palette (``P``), bilevel (``1``), CMYK, YCbCr and the other colour modes converted to RGB by PIL.

    Raises:
        ValueError: naming ``name``: floating-point pixels (mode ``F``: no stated range), 32-bit values outside
            [0, 65535], or a mode PIL cannot convert to RGB.
    """
    from PIL import Image, ImageOps

    img = ImageOps.exif_transpose(img)
    if img.mode == "F":
        raise ValueError(f"{name} holds floating-point pixels (mode F), whose range no file states: save it as an "
                         "8- or 16-bit image")
    if img.mode in GREY16_MODES:
        a = np.asarray(img).astype(np.int64)
        if a.size and (a.min() < 0 or a.max() > 65535):
            raise ValueError(f"{name} holds 32-bit values in [{a.min()}, {a.max()}], beyond 16 bits: save it as an "
                             "8- or 16-bit image")
        img = Image.fromarray(((a * 255 + 32767) // 65535).astype(np.uint8))  # mode L; round(v * 255 / 65535)
    if img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in img.info:
        rgba = img.convert("RGBA")
        img = Image.alpha_composite(Image.new("RGBA", rgba.size, (*BACKGROUND, 255)), rgba)
    if img.mode not in ("RGB", "L"):
        img = img.convert("RGB")  # palette, bilevel, CMYK, YCbCr, LAB, HSV, RGBA (composited), ...
    return img


def load_image(path: Path, image_size: int, channels: int) -> torch.Tensor:
    """One image as (channels, image_size, image_size) uint8, read as a viewer shows it (:func:`as_viewed`): shorter
    side resized (bilinear, antialiased), centre cropped. Raises ValueError naming the file when it cannot be read or
    is refused."""
    from PIL import Image
    from torchvision.transforms.v2 import functional as TF

    try:
        with Image.open(path) as img:
            img.load()  # decodes the whole file (a truncated one fails)
            img = as_viewed(img, str(path)).convert("RGB" if channels == 3 else "L")
    except ValueError as err:
        if str(path) in str(err):
            raise
        raise ValueError(f"{path} cannot be read as an image ({type(err).__name__}: {err})") from err
    except Exception as err:  # PIL raises UnidentifiedImageError, OSError, SyntaxError... for damaged files
        raise ValueError(f"{path} cannot be read as an image ({type(err).__name__}: {err})") from err
    x = TF.pil_to_tensor(img)  # (C, H, W) uint8
    x = TF.resize(x, [image_size], antialias=True)
    return TF.center_crop(x, [image_size, image_size])


def _cache_path(cache_dir: Path, folder: Path, files: list[Path], image_size: int, channels: int) -> Path:
    """Where the decoded tensor of these files and settings is kept (see the module docstring)."""
    stats = []
    for f in files:
        st = f.stat()
        stats.append((str(f.relative_to(folder)), st.st_size, st.st_mtime_ns))
    text = json.dumps({"format": CACHE_FORMAT, "folder": str(folder), "size": image_size, "channels": channels,
                       "files": stats})
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    return cache_dir / "image_folder" / f"{folder.name}_{image_size}px_{channels}ch_{key}.pt"


def _decode_all(files: list[Path], image_size: int, channels: int) -> torch.Tensor:
    """(N, C, S, S) uint8 of every file. Raises ValueError naming every unreadable file (up to 10)."""
    images, bad = [], []
    for f in files:
        try:
            images.append(load_image(f, image_size, channels))
        except ValueError as err:
            bad.append(str(err))
    if bad:
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise ValueError(f"{len(bad)} of {len(files)} files cannot be read as images: " + "; ".join(bad[:10]) + more
                         + ". Replace or remove them, then run again")
    return torch.stack(images)


def _load_or_decode(folder: Path, files: list[Path], image_size: int, channels: int,
                    cache_dir: Path) -> tuple[torch.Tensor, Path, bool]:
    """(images (N, C, S, S) uint8, the cache file, whether it was read from there)."""
    path = _cache_path(cache_dir, folder, files, image_size, channels)
    if path.is_file():
        try:
            x = torch.load(path, map_location="cpu", weights_only=True)["images"]
            if x.shape == (len(files), channels, image_size, image_size):
                return x, path, True
        except Exception as err:  # a damaged cache is rebuilt, never trusted
            log.warning("image_folder: cache %s is unreadable (%s); decoding the images again", path, err)
    x = _decode_all(files, image_size, channels)
    atomic_save({"images": x}, path)
    return x, path, False


def image_folder(root: str | None = None, image_size: int = 32, channels: int = 3, holdout_fraction: float = 0.1,
                 seed: int = 0, cache_dir: str | None = None, name: str = "image_folder") -> GANData:
    """The images of a folder (see the module docstring) as (N, channels, image_size, image_size) in [-1, 1].

    Args:
        root: the folder (``dataset.root``; relative: to the launch folder, :func:`ganlab.data.root.resolve_root`).
        image_size: side of the square images made (the DCGAN pair makes 8, 16, 32 or 64).
        channels: 3 (RGB) or 1 (grayscale).
        holdout_fraction: a seeded random share of the images held out for the data baseline, in [0, 1);
            at least one image is held out when it is above 0.
        seed: seeds the hold-out split.
        cache_dir: where decoded tensors are cached (under ``image_folder/``); None: ``$GANLAB_CACHE``, else
            ``~/.cache/ganlab``.
        name: the data set's name.

    Returns:
        Labelled data (``num_modes`` = number of classes) when the images are in class folders, else unlabelled.
        ``info`` holds the folder, the number of files, the classes and the cache file.

    Raises:
        ValueError: no root, bad settings, an ambiguous layout or no images (:func:`list_images`), unreadable
            images (every one named), or too few images to hold some out.
        FileNotFoundError: the root is not a folder (naming the folder it resolved to).
    """
    if root is None or str(root) == "":
        raise ValueError("dataset=image_folder needs the folder of images: dataset.root=DIR")
    if channels not in (1, 3) or int(image_size) < 1 or not 0 <= holdout_fraction < 1:
        raise ValueError(f"dataset.channels must be 1 or 3, dataset.image_size positive and dataset.holdout_fraction "
                         f"in [0, 1); got {channels}, {image_size}, {holdout_fraction}")
    folder = resolve_root(root)
    assert folder is not None
    if not folder.is_dir():
        raise FileNotFoundError(f"{describe(root, folder)} is not a folder: point dataset.root at a folder of images")
    files, labels, classes = list_images(folder)
    cache = Path(cache_dir or os.environ.get("GANLAB_CACHE") or "~/.cache/ganlab").expanduser()
    raw, cache_file, cached = _load_or_decode(folder, files, int(image_size), channels, cache)
    log.info("%s: %s %d images under %s (%s)", name, "read the cached" if cached else "decoded", len(files), folder,
             f"cache {cache_file}" if cached else f"cached at {cache_file}")
    x = _to_model_range(raw, int(image_size), 255.0)
    y = torch.tensor(labels, dtype=torch.long) if labels is not None else None
    n_hold = 0 if holdout_fraction == 0 else max(1, int(round(holdout_fraction * len(files))))
    if n_hold >= len(files):
        raise ValueError(f"{folder} holds {len(files)} images: too few to hold out {n_hold} and train on the rest; "
                         "add images or set dataset.holdout_fraction=0")
    perm = torch.randperm(len(files), generator=torch.Generator().manual_seed(seed))
    hold, train = perm[:n_hold], perm[n_hold:]
    info: dict[str, Any] = {"source": str(folder), "num_files": len(files), "classes": classes,
                            "image_size": image_size, "cache": str(cache_file), "fingerprint": cache_file.stem}
    return GANData(name=name, x=x[train], labels=y[train] if y is not None else None,
                   num_modes=len(classes) if classes else None,
                   holdout=x[hold] if n_hold else None,
                   holdout_labels=y[hold] if y is not None and n_hold else None, info=info)
