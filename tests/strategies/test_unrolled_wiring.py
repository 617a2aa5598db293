"""Unrolled GAN through the real loop: the G step scores its fakes with the look-ahead D (issue 15).

The unit tests in ``test_extras.py`` check ``Unrolled`` on its own; these check that the training loop uses
what it returns. A loop that dropped ``Strategy.g_discriminator`` would train a plain GAN and still pass them.
The expected values are built by hand from the networks and batches the step used (recorded with forward
hooks on G and D, so nothing here depends on the loop's internals or the hooks' signatures).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ganlab.build import build_trainer
from ganlab.trainer.loop import Trainer

#: G trains with plain SGD, so one G step is G - lr * grad exactly (Adam's first step is about lr * sign(grad),
#: which would hide most of the difference between two gradients).
G_SGD = ["optim.generator._target_=torch.optim.SGD", "~optim.generator.betas", "optim.generator.lr=0.1"]
ETA, K = 0.5, 2  # a large unrolling step, so the look-ahead D differs clearly from D


def _record_inputs(net: nn.Module) -> list[tuple[Tensor, bool]]:
    """Every input ``net`` is called with from now on, with whether autograd was recording."""
    calls: list[tuple[Tensor, bool]] = []
    net.register_forward_pre_hook(lambda _m, args: calls.append((args[0].detach().clone(), torch.is_grad_enabled())))
    return calls


def _one_step(make_cfg: Callable[..., object], tmp_path, *overrides: str) -> tuple[Trainer, nn.Module, Tensor, Tensor, dict]:
    """Build a trainer, run one ``train_step``; return (trainer, G before it, the D step's real batch, the G
    step's z, the G terms)."""
    trainer = build_trainer(make_cfg(*G_SGD, *overrides), tmp_path)
    trainer.start()
    g_before = copy.deepcopy(trainer.G)
    g_calls, d_calls = _record_inputs(trainer.G), _record_inputs(trainer.D)
    _, g_terms, _, _ = trainer.train_step()
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
    assert abs(float(plain_adv.detach()) - float(unrolled_adv.detach())) > 1e-3  # the look-ahead changes the loss itself

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
