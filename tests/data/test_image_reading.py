"""image_folder reads every supported file as a viewer shows it (orientation, bit depth, palette, transparency,
colour mode) or refuses it with its name; each case on a small image made here with PIL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ganlab.data.image_folder import image_folder, load_image


def _read(tmp_path: Path, img: Image.Image, name: str, channels: int = 3, **save: object) -> np.ndarray:
    """Save ``img`` as ``name`` and read it back as image_folder does, at its own (square) size: (H, W, C) uint8."""
    path = tmp_path / name
    img.save(path, **save)
    return load_image(path, img.width, channels).permute(1, 2, 0).numpy()


def _distinct(size: int = 4) -> np.ndarray:
    """(size, size, 3) uint8 with every pixel different."""
    v = np.arange(size * size * 3, dtype=np.uint8).reshape(size, size, 3) * 5
    return v


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    """Orientation 6: the stored pixels are shown turned 90 degrees clockwise."""
    a = _distinct()
    exif = Image.Exif()
    exif[0x0112] = 6
    got = _read(tmp_path, Image.fromarray(a), "turned.png", exif=exif)
    assert np.array_equal(got, np.rot90(a, k=-1))  # before: the stored, unturned pixels


def test_16_bit_grey_is_scaled_not_clipped(tmp_path: Path) -> None:
    v = np.array([[0, 257, 32768, 65535]] * 4, dtype=np.uint16)
    img = Image.fromarray(v)
    assert img.mode == "I;16"
    want = np.array([0, 1, 128, 255], dtype=np.uint8)  # round(v * 255 / 65535); PIL's convert clips 257 and up to 255
    assert np.array_equal(_read(tmp_path, img, "deep.png", channels=1)[0, :, 0], want)
    assert np.array_equal(_read(tmp_path, img, "deep_rgb.png")[0], np.stack([want] * 3, axis=1))


def test_a_palette_image_gives_its_colours(tmp_path: Path) -> None:
    img = Image.new("P", (4, 4))
    img.putpalette([255, 0, 0, 0, 0, 255] + [0] * (254 * 3))
    img.putdata([0, 1] * 8)
    got = _read(tmp_path, img, "palette.png")
    assert got[0, 0].tolist() == [255, 0, 0] and got[0, 1].tolist() == [0, 0, 255]


def test_transparency_is_composited_over_white(tmp_path: Path) -> None:
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)  # fully transparent black: a viewer shows the page, white
    rgba[0, 0] = [255, 0, 0, 255]  # opaque red
    rgba[0, 1] = [255, 0, 0, 128]  # half-transparent red over white: (255, 127, 127)
    got = _read(tmp_path, Image.fromarray(rgba), "alpha.png")
    assert got[0, 0].tolist() == [255, 0, 0] and got[0, 1].tolist() == [255, 127, 127]
    assert got[3, 3].tolist() == [255, 255, 255]  # before: black
    la = Image.fromarray(np.stack([np.full((4, 4), 0, np.uint8), np.full((4, 4), 0, np.uint8)], axis=2), mode="LA")
    assert _read(tmp_path, la, "grey_alpha.png", channels=1)[0, 0, 0] == 255  # transparent black grey: white


def test_a_palette_transparent_colour_is_composited(tmp_path: Path) -> None:
    img = Image.new("P", (4, 4))
    img.putpalette([0, 0, 0, 0, 255, 0] + [0] * (254 * 3))
    img.putdata([0, 1] * 8)
    got = _read(tmp_path, img, "palette_alpha.png", transparency=0)
    assert got[0, 0].tolist() == [255, 255, 255] and got[0, 1].tolist() == [0, 255, 0]


def test_cmyk_is_converted(tmp_path: Path) -> None:
    cmyk = np.zeros((4, 4, 4), dtype=np.uint8)  # no ink: white
    cmyk[0, 1] = [0, 0, 0, 255]  # full black ink
    cmyk[0, 2] = [255, 0, 0, 0]  # full cyan ink
    got = _read(tmp_path, Image.fromarray(cmyk, mode="CMYK"), "print.tif")
    assert got[0, 0].tolist() == [255, 255, 255] and got[0, 1].tolist() == [0, 0, 0]
    assert got[0, 2].tolist() == [0, 255, 255]


def test_files_without_a_stated_range_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"float\.tif holds floating-point pixels \(mode F\)"):
        _read(tmp_path, Image.fromarray(np.full((4, 4), 0.5, dtype=np.float32)), "float.tif")
    with pytest.raises(ValueError, match=r"wide\.tif holds 32-bit values in \[70000, 70000\]"):
        _read(tmp_path, Image.fromarray(np.full((4, 4), 70000, dtype=np.int32)), "wide.tif")


def test_image_folder_reads_a_folder_of_such_files(tmp_path: Path) -> None:
    """The data set holds the viewed pixels in [-1, 1]: a transparent PNG is white (1.0), not black (-1.0)."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    Image.fromarray(np.zeros((4, 4, 4), dtype=np.uint8)).save(folder / "clear.png")
    Image.fromarray(np.zeros((4, 4, 3), dtype=np.uint8)).save(folder / "black.png")
    data = image_folder(str(folder), image_size=4, holdout_fraction=0, cache_dir=str(tmp_path / "cache"))
    assert torch.equal(data.x[0], -torch.ones(3, 4, 4)) and torch.equal(data.x[1], torch.ones(3, 4, 4))  # sorted
