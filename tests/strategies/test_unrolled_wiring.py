"""Unrolled GAN through the real loop: the G step scores its fakes with the look-ahead D (issue 15).

The unit tests in ``test_extras.py`` check ``Unrolled`` on its own; these check that the training loop uses
what it returns. A loop that dropped ``Strategy.g_discriminator`` would train a plain GAN and still pass them.
The expected values are built by hand from the networks and batches the step used (recorded with forward
hooks on G and D, so nothing here depends on the loop's internals or the hooks' signatures).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn
from torch.func import functional_call

from ganlab.run.build import build_trainer
from ganlab.strategies.unrolled import Unrolled
from ganlab.trainer.loop import Trainer

#: G trains with plain SGD, so one G step is G - lr * grad exactly (Adam's first step is about lr * sign(grad),
#: which would hide most of the difference between two gradients).
G_SGD = ["optim.generator._target_=torch.optim.SGD", "optim.generator.betas=null", "optim.generator.lr=0.1"]
ETA, K = 0.5, 2  # a large unrolling step, so the look-ahead D differs clearly from D


def _record_inputs(net: nn.Module) -> list[tuple[Tensor, bool]]:
    """Every input ``net`` is called with from now on, with whether autograd was recording."""
    calls: list[tuple[Tensor, bool]] = []
    net.register_forward_pre_hook(lambda _m, args: calls.append((args[0].detach().clone(), torch.is_grad_enabled())))
    return calls


def _one_step(make_cfg: Callable[..., object], tmp_path,
              *overrides: str) -> tuple[Trainer, nn.Module, Tensor, Tensor, dict]:
    """Build a trainer, run one ``train_step``; return (trainer, G before it, the D step's real batch, the G
    step's z, the G terms)."""
    trainer = build_trainer(make_cfg(*G_SGD, *overrides), tmp_path)
    trainer.start()
    g_before = copy.deepcopy(trainer.G)
    g_calls, d_calls = _record_inputs(trainer.G), _record_inputs(trainer.D)
    g_terms = trainer.train_step().g_terms
    real = d_calls[0][0]  # the D step scores the real batch first
    z = [x for x, grad in g_calls if grad][-1]  # the G step's forward pass is the one autograd records
    return trainer, g_before, real, z, g_terms


def _look_ahead(d: nn.Module, loss, real: Tensor, fake: Tensor) -> dict[str, Tensor]:
    """theta_D^K by K plain gradient steps of D's adversarial loss, differentiable w.r.t. ``fake``."""
    params = {n: p.detach().clone().requires_grad_(True) for n, p in d.named_parameters()}
    for _ in range(K):
        d_loss = loss.d_loss(functional_call(d, params, (real,)), functional_call(d, params, (fake,)))
        grads = torch.autograd.grad(d_loss, list(params.values()), create_graph=True)
        params = {n: p - ETA * g for (n, p), g in zip(params.items(), grads)}
    return params


def _sgd_step(g: nn.Module, objective: Tensor, lr: float) -> list[Tensor]:
    """G's parameters after one SGD step on ``objective``."""
    grads = torch.autograd.grad(objective, list(g.parameters()), retain_graph=True)
    return [(p - lr * gr).detach() for p, gr in zip(g.parameters(), grads)]


def test_unrolled_g_step_follows_the_hand_built_look_ahead(make_cfg, tmp_path) -> None:
    """One G step with strategy=[unrolled] equals G's SGD step on g_loss(D_K(G(z))), D_K built by hand, and
    differs from the plain step on g_loss(D(G(z))) by far more than the float tolerance."""
    trainer, g0, real, z, g_terms = _one_step(
        make_cfg, tmp_path, "strategy=[unrolled]", f"strategy.unrolled.k={K}", "strategy.unrolled.optimizer=sgd",
        f"strategy.unrolled.lr={ETA}")
    d, loss = trainer.D, trainer.loss  # D after the D step; the G step leaves it unchanged
    fake = g0(z)
    theta_k = _look_ahead(d, loss, real, fake)
    unrolled_adv = loss.g_loss(functional_call(d, theta_k, (fake,)))
    plain_adv = loss.g_loss(d(fake))
    assert torch.allclose(g_terms["adv"].detach(), unrolled_adv.detach(), atol=1e-6)
    assert abs(float(plain_adv.detach()) - float(unrolled_adv.detach())) > 1e-3  # the look-ahead moves the loss

    expected = _sgd_step(g0, unrolled_adv, lr=0.1)
    plain = _sgd_step(g0, plain_adv, lr=0.1)
    trained = [p.detach() for p in trainer.G.parameters()]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(trained, expected))
    gap = max(float((a - b).abs().max()) for a, b in zip(trained, plain))
    assert gap > 1e-4, "the unrolled G step moved G like a plain G step"


def test_unrolled_and_plain_runs_share_d_but_not_g(make_cfg, tmp_path) -> None:
    """From one seed, unrolled and plain runs make the same D step (the real D is not unrolled) and
    different G steps (the look-ahead reaches G)."""
    unrolled, *_ = _one_step(make_cfg, tmp_path / "u", "strategy=[unrolled]", "strategy.unrolled.k=1")
    plain, *_ = _one_step(make_cfg, tmp_path / "p")
    for a, b in zip(unrolled.D.parameters(), plain.D.parameters()):
        assert torch.equal(a, b)
    gap = max(float((a - b).detach().abs().max()) for a, b in zip(unrolled.G.parameters(), plain.G.parameters()))
    assert gap > 1e-5


def _adam_look_ahead(d: nn.Module, loss, real: Tensor, fake: Tensor, lr: float) -> dict[str, Tensor]:
    """theta_D^K by K textbook Adam steps (betas 0.9, 0.999, eps 1e-8) from zero moments (D trained by SGD
    has none), differentiable w.r.t. ``fake``."""
    b1, b2, eps = 0.9, 0.999, 1e-8
    params = {n: p.detach().clone().requires_grad_(True) for n, p in d.named_parameters()}
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    v = {n: torch.zeros_like(p) for n, p in params.items()}
    for t in range(1, K + 1):
        d_loss = loss.d_loss(functional_call(d, params, (real,)), functional_call(d, params, (fake,)))
        grads = torch.autograd.grad(d_loss, list(params.values()), create_graph=True)
        new = {}
        for (n, p), g in zip(params.items(), grads):
            m[n] = b1 * m[n] + (1 - b1) * g
            v[n] = b2 * v[n] + (1 - b2) * g * g
            new[n] = p - lr * (m[n] / (1 - b1**t)) / ((v[n] / (1 - b2**t)).sqrt() + eps)
        params = new
    return params


def test_unrolled_adam_for_an_sgd_trained_d_uses_adam_defaults_and_d_lr(make_cfg, tmp_path) -> None:
    """D trained by SGD (no betas, eps or moments in its optimiser): the look-ahead takes K Adam steps with
    Adam's default betas and eps from zero moments, at D's learning rate (strategy.unrolled.lr=null)."""
    d_sgd = ["optim.discriminator._target_=torch.optim.SGD", "optim.discriminator.betas=null",
             "optim.discriminator.lr=0.01"]
    trainer, g0, real, z, g_terms = _one_step(make_cfg, tmp_path, *d_sgd, "strategy=[unrolled]",
                                              f"strategy.unrolled.k={K}", "strategy.unrolled.optimizer=adam")
    d, loss = trainer.D, trainer.loss
    fake = g0(z)
    unrolled_adv = loss.g_loss(functional_call(d, _adam_look_ahead(d, loss, real, fake, lr=0.01), (fake,)))
    assert torch.allclose(g_terms["adv"].detach(), unrolled_adv.detach(), atol=1e-6)
    expected = _sgd_step(g0, unrolled_adv, lr=0.1)
    assert all(torch.allclose(a.detach(), b, atol=1e-6) for a, b in zip(trainer.G.parameters(), expected))


def test_unrolled_settings() -> None:
    """k >= 1, optimizer adam or sgd, lr > 0 or null, each refused on its own; second order differentiates
    twice (so torch.compile falls back to eager), first order does not."""
    assert Unrolled(k=1).k == 1 and Unrolled(lr=0.5).lr == 0.5 and Unrolled(lr=2.0).lr == 2.0
    for bad in ({"k": 0}, {"optimizer": "rmsprop"}, {"lr": 0.0}, {"lr": -1.0}):
        with pytest.raises(ValueError, match="strategy.unrolled needs"):
            Unrolled(**bad)
    assert Unrolled(second_order=True).double_backward is True
    assert Unrolled(second_order=False).double_backward is False


def test_deleting_a_typed_optimiser_key_is_answered_with_advice_that_works() -> None:
    from ganlab.config.check import ConfigError, check_command_line

    with pytest.raises(ConfigError, match=r"^~optim.generator.betas: optim.generator.betas is a typed setting and "
                                          r"cannot be deleted; set it to null to leave it out: "
                                          r"optim.generator.betas=null$"):
        check_command_line(["optim.generator._target_=torch.optim.SGD", "~optim.generator.betas"])
    check_command_line(G_SGD)  # the advice, followed (the SGD runs above train with it)
