"""Seeds as a batch dimension: ``trainer.ensemble=S`` trains S seeds of one 2-D experiment in one process, each
member with its own data, batch order, latent codes, optimiser state and run folder (``seed_<k>/``)."""

from ganlab.ensemble.check import check_ensemble, supported_strategies
from ganlab.ensemble.run import build_ensemble
from ganlab.ensemble.stack import Stacked
from ganlab.ensemble.trainer import EnsembleTrainer

__all__ = ["EnsembleTrainer", "Stacked", "build_ensemble", "check_ensemble", "supported_strategies"]
