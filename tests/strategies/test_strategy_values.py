"""Values the strategies put into the losses, checked against hand-worked answers or an independent autograd
computation (issue 15: mutants of these formulas survived the suite).

Loss terms are read from ``Trainer.train_step``'s output and recomputed from the networks and batches of that
step (recorded with forward hooks), so the tests hold whatever the hooks' signatures become.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch import Tensor, nn

from ganlab.losses import NonSaturatingLoss
from ganlab.models import MLPDiscriminator, MLPGenerator
from ganlab.run.build import build_trainer
from ganlab.strategies.base import GANSpec
from ganlab.strategies.minibatch_stddev import MinibatchStdDev, minibatch_stddev
from ganlab.strategies.mode_seeking import ModeSeeking, mode_seeking_ratio
from ganlab.strategies.r1 import R1, r1_penalty
from ganlab.strategies.rollback import Rollback


def _record_inputs(net: nn.Module) -> list[Tensor]:
    """Every input ``net`` is called with from now on."""
    calls: list[Tensor] = []
    net.register_forward_pre_hook(lambda _m, args: calls.append(args[0].detach().clone()))
    return calls


# ---------------------------------------------------------------- R1
def test_r1_term_of_a_training_step_is_half_gamma_times_the_mean_squared_input_gradient(make_cfg, tmp_path) -> None:
    """d_terms["r1"] = gamma / 2 * mean_i ||grad_x D(x_i)||^2 on the D step's real batch, D before the step."""
    trainer = build_trainer(make_cfg("strategy=[r1]", "strategy.r1.gamma=3.0"), tmp_path)
    trainer.start()
    d_before = copy.deepcopy(trainer.D)
    calls = _record_inputs(trainer.D)
    d_terms = trainer.train_step().d_terms
    x = calls[0].requires_grad_(True)  # the D step scores its real batch first
    (grad,) = torch.autograd.grad(d_before(x).sum(), x)
    expected = 0.5 * 3.0 * grad.pow(2).sum(1).mean()
    assert float(d_terms["r1"].detach()) == pytest.approx(float(expected), rel=1e-5)
    assert float(expected) > 1e-4


def test_r1_penalty_of_a_linear_critic_is_its_squared_weight_norm_and_reaches_the_critic() -> None:
    """D(x) = <w, x>: penalty ||w||^2 (in float64 for float64 input), and d penalty / d w = 2 w (create_graph)."""
    torch.manual_seed(0)
    w = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    critic = lambda x: (x * w).flatten(1).sum(1)  # noqa: E731
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    penalty = r1_penalty(critic, x)
    assert float(penalty.detach()) == pytest.approx(float(w.detach().pow(2).sum()), rel=1e-12)
    (dw,) = torch.autograd.grad(penalty, w)
    assert torch.allclose(dw, 2 * w.detach())


def test_r1_accepts_gamma_zero_and_below_one() -> None:
    """gamma >= 0 is valid (0 switches the penalty off); only a negative gamma is refused."""
    assert R1(gamma=0.0).gamma == 0.0 and R1(gamma=0.5).gamma == 0.5
    with pytest.raises(ValueError, match="gamma"):
        R1(gamma=-0.1)


# ---------------------------------------------------------------- mode seeking
def test_mode_seeking_ratio_pairs_the_two_halves_and_leaves_an_odd_sample_out() -> None:
    """B = 5: pairs (0, 2), (1, 3); sample 4 is left out. |G(z1) - G(z2)| = 2 everywhere, |z1 - z2| = 1."""
    fake = torch.tensor([[0.0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3], [100, 100, 100]])
    z = torch.tensor([[0.0, 0], [0, 0], [1, 1], [1, 1], [50, 50]])
    assert float(mode_seeking_ratio(fake, z)) == pytest.approx(2.0)
    two = mode_seeking_ratio(torch.tensor([[1.0, 3.0], [2.0, 5.0]]), torch.tensor([[0.0], [4.0]]))  # B = 2
    assert float(two) == pytest.approx(1.5 / 4.0)


def test_mode_seeking_term_of_a_training_step_is_weight_over_ratio_plus_eps(make_cfg, tmp_path) -> None:
    """g_terms["ms"] = weight / (ratio(G(z), z) + eps) on the G step's codes (a large eps so its sign shows)."""
    trainer = build_trainer(make_cfg("strategy=[mode_seeking]", "strategy.mode_seeking.weight=2.0",
                                     "strategy.mode_seeking.eps=0.25"), tmp_path)
    trainer.start()
    g_before = copy.deepcopy(trainer.G)  # the D step does not change G
    calls = _record_inputs(trainer.G)
    g_terms = trainer.train_step().g_terms
    z = calls[-1]  # the G step's forward pass comes last
    fake = g_before(z).detach()
    h = z.shape[0] // 2
    ratio = (fake[:h] - fake[h:2 * h]).abs().mean() / (z[:h] - z[h:2 * h]).abs().mean()
    assert float(g_terms["ms"].detach()) == pytest.approx(2.0 / (float(ratio) + 0.25), rel=1e-5)


def test_mode_seeking_settings() -> None:
    """weight >= 0 (0 and 0.5 accepted) and eps > 0."""
    assert ModeSeeking(weight=0.0).weight == 0.0 and ModeSeeking(weight=0.5).weight == 0.5
    for bad in ({"weight": -1.0}, {"eps": 0.0}):
        with pytest.raises(ValueError, match="weight >= 0 and eps > 0"):
            ModeSeeking(**bad)


# ---------------------------------------------------------------- minibatch stddev
def test_minibatch_stddev_groups_of_one_have_zero_spread() -> None:
    """group_size 1 is valid: every sample is its own group, std 0, value sqrt(eps) = 1e-4."""
    s = minibatch_stddev(torch.randn(6, 3), group_size=1)
    assert s.shape == (6, 1) and torch.allclose(s, torch.full((6, 1), 1e-4))


def test_minibatch_stddev_discriminator_uses_the_configured_group_size() -> None:
    """After configure(group_size=2), D(x) = w . [features(x), minibatch_stddev(features(x), 2)] + b, shape (N,);
    the default group of 4 gives other values on this batch."""
    torch.manual_seed(0)
    d = MLPDiscriminator((2,), hidden=(8, 6))
    adam = functools.partial(torch.optim.Adam, lr=2e-4)
    MinibatchStdDev(group_size=2).configure(GANSpec(MLPGenerator((2,)), d, NonSaturatingLoss(), adam, adam, 1, (2,),
                                                    lambda **kw: d))
    x = torch.randn(8, 2)
    with torch.no_grad():
        f = d.features(x)
        linear = d.head.linear
        want = (torch.cat([f, minibatch_stddev(f, 2)], 1) @ linear.weight.T + linear.bias).squeeze(1)
        other = (torch.cat([f, minibatch_stddev(f, 4)], 1) @ linear.weight.T + linear.bias).squeeze(1)
        out = d(x)
    assert out.shape == (8,) and torch.allclose(out, want, atol=1e-6)
    assert not torch.allclose(want, other, atol=1e-4)


# ---------------------------------------------------------------- rollback (triggered)
def test_collapse_reason_boundaries() -> None:
    """A coverage drop of exactly min_drop counts, a smaller one does not; a similarity equal to the threshold
    does not; several reasons are joined by '; '."""
    rb = Rollback(mode="triggered", period=10, lag=1, min_drop=1.0, similarity_threshold=0.5,
                  best_decay=1.0)  # the decay is tested in test_rollback.py
    assert rb.collapse_reason({"modes_covered": 8.0}) is None
    assert rb.collapse_reason({"modes_covered": 7.5}) is None  # dropped 0.5 < min_drop
    assert rb.collapse_reason({"modes_covered": 7.0}) is not None  # dropped exactly min_drop
    assert rb.collapse_reason({"high_similarity_fraction": 0.5}) is None  # not above the threshold
    both = rb.collapse_reason({"modes_covered": 6.0, "high_similarity_fraction": 0.75})
    assert both == "modes_covered fell to 6 from its best 8; high_similarity_fraction=0.75 > 0.5"
