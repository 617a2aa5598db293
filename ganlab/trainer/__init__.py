"""The training loop, its checkpoints and loggers."""

from ganlab.trainer.config import TrainerConfig
from ganlab.trainer.loop import Trainer

__all__ = ["Trainer", "TrainerConfig"]
