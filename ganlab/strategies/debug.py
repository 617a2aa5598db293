"""Fault injection for tests and demos, as strategies (they act only through the hooks): a NaN in D's loss, which
the NaN guard recovers from, and a failure after a given step, which a sweep records and goes on. Selected by the
``debug`` config group (``conf/debug/``; :func:`faults`): ``debug.inject_nan_at_step=k``, ``debug.fail_at_step=k``.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from ganlab.strategies.base import StepContext, Strategy, TrainState

log = logging.getLogger("ganlab")


class InjectedFailure(RuntimeError):
    """Raised on purpose by ``debug.fail_at_step``."""


class InjectNaN(Strategy):
    """Test/demo fault: adds a NaN term (``injected_nan``) to D's loss in generator step ``step``, once.

    ``state_dict`` is empty on purpose: a rollback to an earlier checkpoint does not re-arm the fault, so one
    injection makes exactly one recovery.

    Raises:
        ValueError: ``step`` < 1.
    """

    name = "inject_nan"

    def __init__(self, step: int) -> None:
        if int(step) < 1:
            raise ValueError(f"debug.inject_nan_at_step must be a positive step or null, got {step}")
        self.step, self.fired = int(step), False

    def d_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        if self.fired or ctx.step + 1 != self.step:
            return {}
        self.fired = True
        return {"injected_nan": torch.full((), float("nan"), device=ctx.real.device)}


class FailAtStep(Strategy):
    """Test-only fault: raise :class:`InjectedFailure` after generator step ``step``."""

    name = "debug_fail_at_step"

    def __init__(self, step: int) -> None:
        self.step = step

    def after_step(self, state: TrainState) -> dict[str, float]:
        if state.step >= self.step:
            raise InjectedFailure(f"debug.fail_at_step={self.step}: failure injected at step {state.step}")
        return {}


def faults(fail_at_step: int | None = None, inject_nan_at_step: int | None = None,
           steps: int | None = None) -> list[Strategy]:
    """The fault strategies the ``debug`` node asks for (none when every key is null), appended after the run's own.

    Args:
        fail_at_step: raise :class:`InjectedFailure` after this generator step (a failed job of a sweep).
        inject_nan_at_step: add a NaN to D's loss in this generator step, once (the NaN guard recovers).
        steps: ``trainer.steps``: a failure beyond it arms nothing, a NaN beyond it is warned about.

    Raises:
        ValueError: ``debug.fail_at_step`` or ``debug.inject_nan_at_step`` is not a positive integer.
    """
    out: list[Strategy] = []
    if inject_nan_at_step is not None:
        out.append(InjectNaN(int(inject_nan_at_step)))
        if steps is not None and int(inject_nan_at_step) > steps:
            log.warning("debug.inject_nan_at_step=%s is beyond trainer.steps=%d: no NaN will be injected",
                        inject_nan_at_step, steps)
    if fail_at_step is None:
        return out
    if int(fail_at_step) <= 0:
        raise ValueError(f"debug.fail_at_step must be a positive step or null, got {fail_at_step}")
    if steps is None or int(fail_at_step) <= steps:  # a step the run never reaches arms nothing
        out.append(FailAtStep(int(fail_at_step)))
    return out
