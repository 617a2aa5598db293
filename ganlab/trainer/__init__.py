"""The training loop, its checkpoints and loggers."""

from ganlab.trainer.loop import Trainer, TrainerConfig

__all__ = ["Trainer", "TrainerConfig"]
