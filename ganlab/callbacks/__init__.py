"""Observers of training plugged into the loop as callbacks (:mod:`ganlab.trainer.callback`): the collapse alarm,
the collapse detector and the early-warning collapse risk. Each is one class here plus one YAML in
``conf/callbacks/`` with its ``_target_``; ``conf/callbacks/default.yaml`` selects the three. A callback owns its
settings (``callbacks.<name>.<key>``; the class named by its ``Settings``, see :mod:`ganlab.trainer.callback`)."""

from ganlab.trainer.callback import Callback

__all__ = ["Callback"]
