"""Anti-collapse strategies: each one ``.py`` here plus one ``conf/strategy/<name>.yaml``.

See :mod:`ganlab.strategies.base` for the hooks.
"""

from ganlab.strategies.base import GANSpec, StepContext, Strategy, TrainState, check_compatible, with_optim_kwargs

__all__ = ["GANSpec", "StepContext", "Strategy", "TrainState", "check_compatible", "with_optim_kwargs"]
