"""Anti-collapse strategies: each one ``.py`` here plus one ``conf/strategy/<name>.yaml``.

See :mod:`ganlab.strategies.base` for the hooks. Shipped: ``minibatch_discrimination``, ``wgan_gp``,
``d_lr_damping``, ``rollback``, ``minibatch_stddev``, ``pacgan``, ``spectral_norm``, ``r1``, ``ttur``,
``unrolled``, ``ema``, ``mode_seeking``, ``diffaugment``, ``ada`` (select with ``strategy=[a,b]``); shared
helpers in ``common``.
"""

from ganlab.strategies.base import GANSpec, Part, StepContext, Strategy, TrainState, check_compatible, with_optim_kwargs

__all__ = ["GANSpec", "Part", "StepContext", "Strategy", "TrainState", "check_compatible", "with_optim_kwargs"]
