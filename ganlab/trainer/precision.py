"""Mixed precision: the ``trainer.precision`` setting, autocast for the forward passes and one loss scaler per
network.

``"32"``: no autocast, no scaling. ``"bf16"``: autocast to bfloat16, no loss scaling (bf16 has float32's exponent
range). ``"fp16"``: autocast to float16 and one ``torch.amp.GradScaler`` per network (D and G), the dynamic loss
scaling of Micikevicius et al. 2018, "Mixed Precision Training" (ICLR), Sec. 3.2: the loss is multiplied by a scale
before backward, the gradients are unscaled before clipping and stepping, an update whose gradients overflow is
skipped and the scale halved, and the scale grows again after a run of finite updates.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

__all__ = ["PRECISIONS", "MixedPrecision", "parse_precision"]

#: ``trainer.precision`` -> the autocast dtype (None: no autocast).
PRECISIONS = {"32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
_NO_AUTOCAST = contextlib.nullcontext()  # reusable: entering it does nothing


def parse_precision(value: Any) -> str:
    """``32``/``"32"``/``"fp32"`` -> ``"32"``; ``"bf16"``, ``"fp16"`` unchanged. Raises ValueError otherwise."""
    text = str(value).lower()
    text = "32" if text in ("32", "fp32", "float32") else text
    if text not in PRECISIONS:
        raise ValueError(f"trainer.precision must be 32, bf16 or fp16, got {value!r}")
    return text


class MixedPrecision:
    """The autocast and the loss scalers of one run.

    Args:
        precision: ``32``, ``bf16`` or ``fp16`` (see :func:`parse_precision`).
        device: the training device (autocast's and the scalers' device type).

    Attributes:
        precision: the parsed setting; dtype: the autocast dtype or None; scalers: ``{"D", "G"}`` ->
            ``torch.amp.GradScaler`` (enabled under fp16 only).

    Raises:
        ValueError: an unknown ``precision``.
    """

    def __init__(self, precision: Any, device: torch.device) -> None:
        self.precision, self.device = parse_precision(precision), device
        self.dtype = PRECISIONS[self.precision]
        fp16 = self.precision == "fp16"
        self.scalers = {net: torch.amp.GradScaler(device.type, enabled=fp16) for net in "DG"}

    def autocast(self) -> contextlib.AbstractContextManager:
        """Autocast to bf16/fp16 for the forward passes; a no-op context at precision 32."""
        if self.dtype is None:
            return _NO_AUTOCAST
        return torch.autocast(self.device.type, dtype=self.dtype)
