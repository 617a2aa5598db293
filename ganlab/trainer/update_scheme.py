"""What ``trainer.update=simultaneous`` and G's per-column passes (``GANSpec.g_groups``) can train, checked when the
run is built, before any step. The schemes themselves are written out in :mod:`ganlab.trainer.loop`
(:meth:`~ganlab.trainer.loop.Trainer.train_step`, :meth:`~ganlab.trainer.loop.Trainer.simultaneous_step`)."""

from __future__ import annotations

from collections.abc import Sequence

from ganlab.strategies.base import Mode, Part, Strategy, check_modes


def check_update_scheme(update: str, strategies: Sequence[Strategy], *, n_critic: int, n_critic_source: str,
                        acgan: bool, distributed: bool, g_groups: int) -> None:
    """Refuse, before training, what the chosen update scheme cannot train.

    ``trainer.update=simultaneous`` takes D's and G's gradients from one batch of fakes and one D pass at the
    current parameters (PacGAN's and ALI's code), so it refuses: more than one D update per G update
    (``n_critic`` > 1, e.g. WGAN-GP's default 5); a strategy whose G loss needs a second D pass (its ``refuses``
    names :attr:`Mode.SIMULTANEOUS`, as unrolled's does, or it replaces ``g_discriminator``); AC-GAN's auxiliary
    classifier (G's class term is not taken from the shared pass); lazy regularisation (a separate D update,
    ``Strategy.regularisation_update``); and several processes (DDP reduces each
    module's gradients once per backward pass over all its parameters; this step back-propagates two losses, each
    into one network's parameters, through one graph).
    G applied in several groups (``g_groups`` > 1, ``strategy.pacgan.g_per_column=true``) is refused with several
    processes too (DDP expects one forward pass per backward pass).

    Args:
        update: ``trainer.update`` (already validated: alternating | simultaneous).
        strategies: the selected strategies, configured.
        n_critic: D updates per G update after the strategies; ``n_critic_source`` says who set it (e.g.
            ``"trainer.n_critic"`` or ``"strategy wgan_gp (strategy.wgan_gp.n_critic)"``).
        acgan: the model has AC-GAN's auxiliary classifier (``model.conditional_head=acgan``).
        distributed: the run trains in several processes.
        g_groups: G's forward passes per batch of codes.

    Raises:
        ValueError: naming the setting or strategy, why, and what to set instead.
    """
    if g_groups > 1 and distributed:
        raise ValueError("strategy.pacgan.g_per_column=true applies G once per pack column, several forward passes "
                         "before one backward pass, which DistributedDataParallel does not support; set "
                         "strategy.pacgan.g_per_column=false or trainer.distributed=false")
    if update != "simultaneous":
        return
    check_modes(strategies, [Mode.SIMULTANEOUS])
    for s in strategies:  # one that did not declare the mode but scores G's fakes its own way
        if Part.G_DISCRIMINATOR in s.replaces or type(s).g_discriminator is not Strategy.g_discriminator:
            raise ValueError(f"strategy {s.name} replaces the function that scores G's fakes (g_discriminator), "
                             f"which trainer.update=simultaneous does not call: G's loss scores the fakes in the one "
                             f"D pass both gradients share; use trainer.update=alternating, or remove {s.name} from "
                             f"strategy=[...]")
    for s in strategies:  # lazy regularisation: a separate D update the one-pass step does not make
        if s.regularisation_update:
            raise ValueError(f"strategy {s.name} with lazy regularisation (strategy.{s.name}.interval > 1) adds a "
                             f"separate D update, which trainer.update=simultaneous does not make; set "
                             f"strategy.{s.name}.interval=1, or use trainer.update=alternating")
    if n_critic != 1:
        raise ValueError(f"trainer.update=simultaneous takes one D and one G gradient from the same batch of fakes, "
                         f"one D update per G update, but {n_critic_source} asks for n_critic={n_critic}; set it to "
                         f"1, or use trainer.update=alternating")
    if acgan:
        raise ValueError("trainer.update=simultaneous does not train AC-GAN's auxiliary classifier "
                         "(model.conditional_head=acgan): G's class term would need the fakes' class logits from the "
                         "shared D pass; use trainer.update=alternating or model.conditional_head=projection")
    if distributed:
        raise ValueError("trainer.update=simultaneous runs in one process: DistributedDataParallel reduces a "
                         "module's gradients once per backward pass over all its parameters, and this step "
                         "back-propagates D's and G's losses, each into one network, through one graph; use "
                         "trainer.update=alternating with trainer.distributed=true, or trainer.distributed=false")
