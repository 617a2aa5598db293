"""Seeds as a batch dimension: ``trainer.ensemble=S`` trains S seeds of one 2-D experiment in one process, each
member with its own data, batch order, latent codes, optimiser state and run folder (``seed_<k>/``)."""

from ganlab.run.ensemble.check import check_ensemble, supported_strategies
from ganlab.run.ensemble.run import build_ensemble
from ganlab.run.ensemble.stack import Stacked
from ganlab.run.ensemble.trainer import EnsembleTrainer

__all__ = ["EnsembleTrainer", "Stacked", "build_ensemble", "check_ensemble", "supported_strategies"]
