"""Build a run from its Hydra config: data, G/D, loss, strategies, optimisers, evaluator, logger.

Everything is made with ``hydra.utils.instantiate`` from each YAML's ``_target_``; nothing here branches
on a component's name. The plain settings come checked and typed from :func:`ganlab.config.run.check_config`
(:class:`~ganlab.config.run.RunSettings`), run once per build; bad settings raise ValueError naming the config key
before any data, model or file is made.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from ganlab import distributed, layout
from ganlab.config.resume import adopt_checkpoint_config, explicit_overrides
from ganlab.config.run import RunSettings, check_config, repeated_strategies
from ganlab.data.base import GANData
from ganlab.distributed import seed_everything
from ganlab.lr import NETWORKS, LRSchedule
from ganlab.metrics.directions import higher_is_better
from ganlab.models.conditional import AuxiliaryClassLoss
from ganlab.quoting import hydra_override, shell_join
from ganlab.strategies.base import GANSpec, Part, Strategy, check_compatible, check_conditional, check_distributed
from ganlab.strategies.common import check_per_sample_critic
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer import speed
from ganlab.trainer.callback import Callback
from ganlab.trainer.loggers import NullLogger
from ganlab.trainer.loop import Trainer
from ganlab.trainer.update_scheme import check_update_scheme

log = logging.getLogger("ganlab")


def make(node: Any, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate`` that re-raises our own ValueError/FileNotFoundError unwrapped.

    A node typed by a schema (:mod:`ganlab.config.schema`) is instantiated from a plain copy of its values: a key
    the schema lacks but the ``_target_`` takes (``+optim.generator.weight_decay=0.01``) would stop Hydra's copy.

    Hydra wraps every error of a target in ``InstantiationException``; the clear message a component
    raised for bad input (naming the config key) is more useful to the user than the wrapper.
    """
    if OmegaConf.is_dict(node) and OmegaConf.get_type(node) not in (dict, None):  # a node typed by a schema
        node = OmegaConf.create(OmegaConf.to_container(node, resolve=True))  # keeps a +key its _target_ takes
    try:
        return instantiate(node, **kwargs)
    except InstantiationException as err:
        if isinstance(err.__cause__, (ValueError, FileNotFoundError)):
            raise err.__cause__ from None
        raise


def optimiser(node: DictConfig) -> Any:
    """``optim.generator`` / ``optim.discriminator`` made as :func:`make` does, a key set to null left out: the
    typed schema has Adam's keys and cannot delete one, so ``optim.generator._target_=torch.optim.SGD
    optim.generator.betas=null`` gives SGD."""
    plain = OmegaConf.to_container(node, resolve=True)
    return make(OmegaConf.create({k: v for k, v in plain.items() if v is not None}))


def resolve_device(device: str) -> torch.device:
    """``auto`` -> CUDA when present, else CPU; otherwise ``torch.device(device)``.

    Raises:
        ValueError: CUDA asked for but not available, or an unknown device string.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"device={device!r} is not a torch device; use auto, cpu or cuda[:N]") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device} but CUDA is not available here; use device=auto or device=cpu")
    return dev


def set_threads(threads: Any, shape: tuple[int, ...], batch_size: int, device: torch.device) -> None:
    """``threads``: ``auto`` (:func:`ganlab.trainer.speed.auto_threads`, logged with its reason), an integer, or
    None (torch's default). On CUDA, ``auto`` leaves torch's default (the CPU only feeds the GPU).

    The number limits torch's intra-op pool and, through :func:`limit_native_threads`, every BLAS and OpenMP pool
    NumPy, SciPy and scikit-learn use (the scores' KID, Vendi, k-means and PRDC run there), for the rest of the
    process."""
    n: int | None = None
    if threads == "auto" and device.type == "cpu":
        n, why = speed.auto_threads(shape, batch_size, os.cpu_count())
        log.info("threads: %d (auto, from the experiment: %s; threads=N to override)", n, why)
    elif threads not in (None, "auto"):
        n = int(threads)
    if n is not None:
        torch.set_num_threads(n)
        limit_native_threads(n)


def limit_native_threads(n: int) -> None:
    """Limit every BLAS (OpenBLAS, MKL, BLIS) and OpenMP thread pool loaded in this process to ``n`` threads, for
    the rest of the process (``threadpoolctl.threadpool_limits(limits=n)``, kept, not used as a context): without
    it NumPy's and SciPy's BLAS take every core whatever ``threads`` says.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"threads={n}: need at least one thread (threads=1, threads=N or threads=auto)")
    import numpy  # noqa: F401  (load NumPy's BLAS, so that its pool is found and limited now)
    import scipy.linalg  # noqa: F401  (SciPy's own BLAS/LAPACK, used by the k-means and Frechet scores)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)


def _warn_if_schedule_retimed(ckpt: dict[str, Any], steps: int, schedules: dict[str, LRSchedule]) -> None:
    """A decaying schedule's horizon is ``trainer.steps``; say so when a resume changes it."""
    before = (ckpt.get("config") or {}).get("trainer", {}).get("steps")
    decaying = [NETWORKS[n] for n, s in schedules.items() if s.kind != "constant"]
    if decaying and before is not None and int(before) != steps:
        log.warning("resuming a run of trainer.steps=%s with trainer.steps=%d: the lr schedule of %s now decays "
                    "over %d steps from here on, not over %s", before, steps, " and ".join(decaying), steps, before)


def load_data(cfg: DictConfig, device: torch.device, data: GANData | None = None) -> GANData:
    """Instantiate ``cfg.dataset`` (unless ``data`` is given, as to :func:`build_trainer`), refuse NaN/Inf samples
    (ValueError naming the first bad sample), move it to ``device``."""
    data = data if data is not None else make(cfg.dataset)
    data.check_finite()
    return data.to(device)


def build_strategies(cfg: DictConfig) -> list[Strategy]:
    """One strategy per entry under ``cfg.strategy`` (``strategy=[a,b]``), refused when incompatible.

    Raises:
        ValueError: a strategy typed twice in ``strategy=[...]``, or an incompatible combination.
    """
    twice = repeated_strategies(list(HydraConfig.get().overrides.task)) if HydraConfig.initialized() else []
    if twice:
        raise ValueError(f"strategy {', '.join(twice)} is listed twice in strategy=[...]; list each strategy once "
                         "(its settings go in strategy.<name>.<key>=...)")
    strategies = [make(node) for node in (cfg.get("strategy") or {}).values()] + debug_strategies(cfg)
    check_compatible(strategies)
    return strategies


def debug_strategies(cfg: DictConfig) -> list[Strategy]:
    """The fault strategies of the ``debug`` node (``conf/debug/``, :func:`ganlab.strategies.debug.faults`); none when
    every key is null. A node without ``_target_`` (a config stored before the ``debug`` group) is read as the
    ``faults`` settings.

    Raises:
        ValueError: a fault step that is not a positive integer, naming the key.
    """
    node = cfg.get("debug")
    if not node:
        return []
    settings = OmegaConf.to_container(node, resolve=True)
    assert isinstance(settings, dict)
    target = settings.pop("_target_", "ganlab.strategies.debug.faults")
    return make(OmegaConf.create({"_target_": target, **settings}), steps=int(cfg.trainer.steps))


def build_callbacks(cfg: DictConfig) -> list[Callback]:
    """One callback per entry under ``cfg.callbacks`` (``conf/callbacks/``), in config order.

    Raises:
        ValueError: an entry whose ``_target_`` is not a :class:`~ganlab.trainer.callback.Callback`, naming it.
    """
    callbacks = []
    for key, node in (cfg.get("callbacks") or {}).items():
        callback = make(node)
        if not isinstance(callback, Callback):
            raise ValueError(f"callbacks.{key}: {type(callback).__name__} is not a ganlab.callbacks.Callback; "
                             "subclass it (hooks: on_start, after_step, after_eval, summary, state_dict)")
        callbacks.append(callback)
    return callbacks


def join_process_group(settings: RunSettings, strategies: list[Strategy]) -> distributed.Dist:
    """``trainer.distributed=true``: join the launcher's process group (:func:`ganlab.distributed.init`)
    and refuse what cannot run there; otherwise (or when no launcher started the process) one process.

    Raises:
        ValueError: a strategy that cannot run under DDP, or ``trainer.sync_batchnorm`` on the CPU.
    """
    if not settings.trainer.distributed:
        return distributed.SINGLE
    dist = distributed.init(settings.device, float(settings.trainer.dist_timeout_s))
    if not dist.active:
        return dist
    check_distributed(strategies)
    if settings.trainer.sync_batchnorm and resolve_device(settings.device).type != "cuda":
        raise ValueError("trainer.sync_batchnorm=true needs CUDA (torch's SyncBatchNorm has no CPU kernel); "
                         "set trainer.sync_batchnorm=false: each rank then normalises with its own batch's "
                         "statistics and DDP broadcasts rank 0's running statistics")
    return dist


def class_loss(settings: RunSettings) -> AuxiliaryClassLoss | None:
    """AC-GAN's class loss when ``model.conditional_head`` is ``acgan`` (its checked weight,
    :attr:`RunSettings.class_loss_weight`), None for the default ``projection`` head."""
    weight = settings.class_loss_weight
    return None if weight is None else AuxiliaryClassLoss(weight)


def check_conditional_model(cfg: DictConfig, settings: RunSettings, strategies: list[Strategy]) -> None:
    """When ``model.conditional`` is true (:attr:`RunSettings.conditional`), before any data are loaded: that G and
    D take ``num_classes`` (class-conditional layers), that every strategy can train a conditional model, and, for
    the ``acgan`` head, that D takes ``class_head`` and no strategy replaces the function that scores G's fakes (the
    AC-GAN head scores and classifies them in one pass).

    Raises:
        ValueError: a model without class-conditional layers (naming its classes and model=resnet and
            model=dcgan, which have them), or a strategy that cannot train one
            (:func:`~ganlab.strategies.base.check_conditional`) or that replaces the AC-GAN head's scoring.
    """
    if not settings.conditional:
        return
    acgan = settings.class_loss_weight is not None
    for net in ("generator", "discriminator"):
        target = cfg.model[net]._target_
        params = inspect.signature(get_class(target)).parameters
        if "num_classes" not in params or (acgan and net == "discriminator" and "class_head" not in params):
            raise ValueError(f"model.conditional=true needs class-conditional layers, which {target} does not have; "
                             "use model=resnet or model=dcgan (conditional batch norm in G, projection or AC-GAN head "
                             "in D), or set model.conditional=false")
    check_conditional(strategies)
    replacing = [s.name for s in strategies if Part.G_DISCRIMINATOR in s.replaces]
    if acgan and replacing:
        raise ValueError(f"strategy {replacing[0]!r} replaces the function that scores G's fakes, which the AC-GAN "
                         "head needs for its class logits; drop it from strategy=[...], or set "
                         "model.conditional_head=projection")


def class_count(data: GANData) -> int:
    """The number of classes K a conditional model is built for: ``data.num_modes``, once every training label
    is known to lie in [0, K).

    Raises:
        ValueError: the data set has no class labels (naming labelled ones), or a label outside [0, K).
    """
    if data.labels is None or not data.num_modes:
        raise ValueError(f"model.conditional=true needs class labels, and data set {data.name!r} has none; use a "
                         "labelled one (dataset=fashion_mnist, digits, mnist, cifar10, or image_folder with one "
                         "subfolder per class), or set model.conditional=false")
    k = int(data.num_modes)
    lo, hi = int(data.labels.min()), int(data.labels.max())
    if lo < 0 or hi >= k:
        raise ValueError(f"data set {data.name!r}: class labels span [{lo}, {hi}] but it declares {k} classes; "
                         "fix its labels before training with model.conditional=true")
    return k


def check_steps_left(steps: int, at: int, checkpoint: Path, run_dir: str | Path) -> None:
    """Refuse to resume ``checkpoint`` (saved at generator step ``at``) for ``trainer.steps=steps`` when no work is
    left.

    ``steps`` > ``at``: training goes on. ``steps`` == ``at``: allowed only when the run continues in the folder of
    the checkpoint's run (``run_dir``/``checkpoints/``) and that run did not finish there (no ``metrics.json`` at step
    ``at``): a run stopped by a signal after its last step (during its last evaluation) was saved at that step, and
    resuming it writes its final record beside its curve. ``steps`` < ``at``, a finished run, another folder (it would
    get a final record and no curve) or a checkpoint outside a run folder: refused.

    Raises:
        ValueError: naming the steps and what to set instead.
    """
    if steps > at:
        return
    run = checkpoint.parent.parent if checkpoint.parent.name == layout.CHECKPOINT_DIR else None
    if steps == at and run is not None and (layout.read_metrics(run) or {}).get("step", -1) < at:  # unfinished
        if run.resolve() == Path(run_dir).resolve():
            log.info("%s is at the run's last step %d: no step left, writing the run's final record", checkpoint, at)
            return
        here = shell_join([hydra_override("hydra.run.dir", str(run))])
        raise ValueError(f"{checkpoint} is at its run's last step {at} with no final record: resume it in its own "
                         f"folder to write that record ({here}), or give a trainer.steps above {at} to train on")
    raise ValueError(f"trainer.steps={steps} is not beyond the checkpoint's step {at}: trainer.steps is the new "
                     "total number of generator steps; give a larger one to train on")


def build_trainer(cfg: DictConfig, run_dir: str | Path, data: GANData | None = None,
                  finished_ok: bool = False, score_baseline: bool = True) -> Trainer:
    """Build a ready-to-``fit`` :class:`Trainer` from a composed config (resumed when ``trainer.resume``).

    On resume the experiment's settings come from the checkpoint (see :mod:`ganlab.config.resume`), and
    ``trainer.steps`` must go beyond the checkpoint's step unless ``finished_ok`` (re-scoring a checkpoint). The
    config (the checkpoint's settings adopted) is then checked once (:func:`ganlab.config.run.check_config`), before
    any data, model or file is made; what follows composes the components from its :class:`RunSettings` and the
    ``_target_`` nodes.
    ``score_baseline=False`` leaves the evaluator's held-out ``data/`` baseline unscored
    (:meth:`~ganlab.metrics.evaluator.Evaluator.prepare_baseline` does it, or else the first evaluation).
    """
    path, ckpt = ckpt_io.find_checkpoint(cfg.trainer.resume) if cfg.trainer.get("resume") else (None, None)
    if path is not None and ckpt is not None:
        if not finished_ok:
            check_steps_left(int(cfg.trainer.steps), int(ckpt["step"]), path, run_dir)
        adopted = adopt_checkpoint_config(cfg, ckpt["config"], explicit_overrides())
        if adopted:
            log.info("resuming with the checkpoint's %s", ", ".join(adopted))
    settings = check_config(cfg)  # the config the run is built from, the checkpoint's settings adopted
    strategies = build_strategies(cfg)
    check_conditional_model(cfg, settings, strategies)
    dist = join_process_group(settings, strategies)
    device = distributed.device_for(resolve_device(settings.device), dist)
    seed_everything(settings.seed)  # the same initial weights on every rank
    data = load_data(cfg, device, data)  # passed-in data get the same checks as loaded data
    shape = data.sample_shape
    batch_size = settings.trainer.batch_size
    set_threads(settings.threads, shape, batch_size, device)
    classes = {"num_classes": class_count(data)} if settings.conditional else {}  # model.conditional=true: K classes
    aux = class_loss(settings)  # AC-GAN (model.conditional_head=acgan): D gets an auxiliary classifier
    d_classes = classes | ({"class_head": "acgan"} if aux is not None else {})
    build_d = functools.partial(make, cfg.model.discriminator, data_shape=shape, **d_classes)
    spec = GANSpec(generator=make(cfg.model.generator, data_shape=shape, **classes), discriminator=build_d(),
                   loss=make(cfg.loss), g_optim=optimiser(cfg.optim.generator),
                   d_optim=optimiser(cfg.optim.discriminator), n_critic=settings.trainer.n_critic,
                   data_shape=shape, build_discriminator=build_d,
                   batch_size=batch_size, accumulate=settings.trainer.accumulate, score_direction=higher_is_better)
    configured_loss, n_critic_source = type(spec.loss), "trainer.n_critic"
    for s in strategies:
        n_critic = spec.n_critic
        s.configure(spec)
        if spec.n_critic != n_critic:
            n_critic_source = f"strategy {s.name} (strategy.{s.name}.n_critic)"
        if type(spec.loss) is not configured_loss:
            log.warning("strategy %s replaces loss=%s with %s", s.name, cfg.loss._target_.rsplit(".", 1)[-1],
                        type(spec.loss).__name__)
            configured_loss = type(spec.loss)
    check_per_sample_critic(spec.discriminator, strategies)  # a mixing head installed after a penalty's configure
    if dist.active and settings.trainer.sync_batchnorm:  # batch statistics over all ranks' samples
        spec.generator = torch.nn.SyncBatchNorm.convert_sync_batchnorm(spec.generator)
        spec.discriminator = torch.nn.SyncBatchNorm.convert_sync_batchnorm(spec.discriminator)
    G, D = spec.generator.to(device), spec.discriminator.to(device)
    # the loop's settings with the strategies' effective n_critic and, e.g. for PacGAN-m (D scores
    # trainer.batch_size packs of m samples), the samples each update draws
    tcfg = dataclasses.replace(settings.trainer, n_critic=spec.n_critic,
                               batch_size=batch_size * spec.samples_per_score)
    check_update_scheme(tcfg.update, strategies, n_critic=spec.n_critic, n_critic_source=n_critic_source,
                        acgan=aux is not None, distributed=dist.active, g_groups=spec.g_groups)
    if spec.samples_per_score != 1 and not finished_ok:  # a re-scoring (ganlab-eval) trains nothing
        log.info("each update draws %d samples (trainer.batch_size %d x %d per D score)", tcfg.batch_size,
                 batch_size, spec.samples_per_score)
    if tcfg.channels_last:
        speed.to_channels_last([G, D])
    opt_g, opt_d = spec.g_optim(G.parameters()), spec.d_optim(D.parameters())
    if speed.wants_fused(tcfg.fused_optim, device):
        opt_g, opt_d = speed.fused(opt_g), speed.fused(opt_d)
    if tcfg.compile:
        speed.compile_models([G, D], strategies)
    logger = make(cfg.logger, log_dir=str(run_dir), purge_step=ckpt["step"] + 1 if ckpt else None) \
        if dist.main else NullLogger()  # only rank 0 writes
    evaluator = make(cfg.metrics)
    if settings.conditional:  # the per-class scores' sample counts, before the embedder is prepared and training
        evaluator.check_class_counts(data, classes["num_classes"])
    evaluator.dist = dist  # generation and embedding split between the ranks
    # a cached classifier or a trained one leave the same global RNG (D's augmentations draw from it)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        # every rank together: the embedder in turn, the reference embedded in shares
        evaluator.prepare(data, baseline=score_baseline)
    if dist.rank > 0:  # each rank its own augmentation draws; rank 0 keeps the run's stream
        seed_everything(distributed.rank_seed(settings.seed, dist.rank))
    trainer = Trainer(data=data, generator=G, discriminator=D, loss=spec.loss, opt_g=opt_g,
                      opt_d=opt_d, strategies=strategies, evaluator=evaluator,
                      run_dir=run_dir, cfg=tcfg, seed=settings.seed, logger=logger,
                      config=OmegaConf.to_container(cfg, resolve=True),  # type: ignore[arg-type]
                      monitor=settings.monitor, lr_schedules=settings.schedules, dist=dist, class_loss=aux,
                      g_groups=spec.g_groups, callbacks=build_callbacks(cfg))
    if ckpt is not None:
        trainer.load_state_dict(ckpt)
        _warn_if_schedule_retimed(ckpt, tcfg.steps, trainer.lr.schedules)
        if finished_ok:  # re-scoring (ganlab-eval, notebooks): nothing is resumed
            log.info("loaded %s (step %d)", tcfg.resume, trainer.state.step)
        else:
            log.info("resumed from %s at step %d", tcfg.resume, trainer.state.step)
    return trainer
