"""The callback protocol: how an observer of training (a monitor) plugs into the loop, as a strategy does.

A callback is one class (a subclass of :class:`Callback`) plus one YAML in ``conf/callbacks/`` with its
``_target_``; :func:`ganlab.run.build.build_trainer` instantiates every entry of the ``callbacks`` node and the loop
calls each, in config order, at these points, never branching on which callbacks there are:

1. ``on_start(trainer)`` once, before the first step or evaluation (after a resume, after ``load_state_dict``).
2. ``after_step(trainer, out, monitor)`` after each applied generator update (``trainer.state.step`` counts it):
   ``out`` is the step's :class:`~ganlab.trainer.loop.StepResult` (loss terms, D's outputs), ``monitor`` the
   health monitor's scalars of this step (gradient norms, update ratios; empty except every ``monitor.every``
   steps).
3. ``after_eval(trainer, generator, result)`` at each evaluation, once the scored generator (the EMA copy when
   the run keeps one) has been scored (``result``), inside the evaluation's isolated RNG; callbacks that
   come earlier in the config have reported already (their values are in ``trainer.stats``).
4. ``summary(trainer)`` at the end of :meth:`~ganlab.trainer.loop.Trainer.fit`: entries added to ``metrics.json``.
5. ``state_dict()`` / ``load_state_dict(state)``: what a resume needs, saved under the checkpoint's
   ``callbacks`` entry by :attr:`name` (tensors, numbers, strings, lists and dicts only).

A callback's settings are the keys of its own config node, ``callbacks.<name>.<key>``: its constructor's keyword
arguments and, when it declares :attr:`Callback.Settings` (a dataclass with a ``validate()`` method, such as the
collapse detector's thresholds), that dataclass's fields, the one place their defaults are written. The config layer
finds the class through the node's ``_target_``, makes the node's schema from it
(:func:`ganlab.config.schema.callback_schema`) and calls ``Settings(...).validate()`` before the run is built, so a
wrong key, type or value is refused with the rest of the config.

Scalars go through the one channel :attr:`Trainer.stats <ganlab.trainer.stats.Stats>`:
``trainer.stats.report(name, value)``. Reported in ``after_step`` they are written to TensorBoard at that step;
reported in ``after_eval`` as ``health/<key>`` they go to TensorBoard, to ``metrics.jsonl``'s ``"health"`` and to
the strategies' ``after_eval`` (which a triggered rollback acts on). Alerts: ``trainer.alerts.emit(kind, step,
message, **values)``. Anything that draws random numbers in ``after_step`` does it inside
``with trainer.isolated_rng():`` so the training streams stay those of a run without the callback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from torch import nn

if TYPE_CHECKING:  # the loop imports this module
    from ganlab.metrics.evaluator import EvalResult
    from ganlab.trainer.loop import StepResult, Trainer


class Callback:
    """Base class of the loop's observers; every hook is a no-op here. See the module docstring."""

    name: ClassVar[str] = "callback"  # its key in the checkpoint's ``callbacks`` entry (one callback per name)
    #: The dataclass of its settings (taken as keyword arguments by ``__init__``), or None: see the module docstring.
    Settings: ClassVar[type | None] = None

    def on_start(self, trainer: Trainer) -> None:
        """Once, before the first step or evaluation (after a resume, after :meth:`load_state_dict`)."""

    def after_step(self, trainer: Trainer, out: StepResult, monitor: dict[str, float]) -> None:
        """After each applied generator update; ``monitor``: the health monitor's scalars of this step."""

    def after_eval(self, trainer: Trainer, generator: nn.Module, result: EvalResult) -> None:
        """At each evaluation, after ``generator`` was scored (``result``); report ``health/<key>`` values."""

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        """Entries for ``metrics.json`` at the end of training (default none)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """State to carry across a resume (tensors, numbers, strings, lists, dicts only)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (called before :meth:`on_start` on a resume)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
