"""Effective update ratio and gradient norms against hand-computed values and torch's own reference."""

import math
import statistics

import pytest
import torch

from ganlab.health.norms import RollingStats, global_norm, layer_norms, parameter_grad_norms
from ganlab.health.update_ratio import effective_update_ratios, requested_update, snapshot


def _one_step(opt_cls, p: torch.Tensor, grad: torch.Tensor, **kw) -> tuple[torch.optim.Optimizer, list]:
    opt = opt_cls([p], **kw)
    p.grad = grad.clone()
    before = snapshot(opt)
    opt.step()
    return opt, before


def test_sgd_requested_update_is_lr_times_gradient() -> None:
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    g = torch.tensor([0.5, 0.25, -1.0])
    opt, before = _one_step(torch.optim.SGD, p, g, lr=0.1)
    assert torch.allclose(requested_update(opt, opt.param_groups[0], p, before[0][0]), 0.1 * g)
    assert effective_update_ratios(opt, before) == [pytest.approx(1.0, abs=1e-6)]


def test_adam_first_step_is_lr_times_sign() -> None:
    # step 1: m_hat = g, v_hat = g^2, so u = lr * g / (|g| + eps) = lr * sign(g) up to eps
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    g = torch.tensor([0.5, 0.25, -1.0])
    opt, before = _one_step(torch.optim.Adam, p, g, lr=0.01, eps=1e-8)
    u = requested_update(opt, opt.param_groups[0], p, before[0][0])
    assert torch.allclose(u, 0.01 * torch.sign(g), atol=1e-7)
    assert torch.allclose(p.detach(), before[0][0] - u, atol=1e-7)
    assert effective_update_ratios(opt, before)[0] == pytest.approx(1.0, abs=1e-5)


def test_adamw_decoupled_decay_and_later_steps_give_ratio_one() -> None:
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(50))
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.1, betas=(0.5, 0.9))
    for _ in range(5):
        p.grad = torch.randn(50)
        before = snapshot(opt)
        opt.step()
        assert effective_update_ratios(opt, before)[0] == pytest.approx(1.0, abs=1e-4)


def test_bf16_parameters_swallow_small_updates() -> None:
    # bf16 has 8 significant bits: around 1.0 its spacing is 2^-7, so a step of 1e-4 rounds away entirely
    p = torch.nn.Parameter(torch.ones(16, dtype=torch.bfloat16))
    opt, before = _one_step(torch.optim.SGD, p, torch.ones(16, dtype=torch.bfloat16), lr=1e-4)
    assert effective_update_ratios(opt, before) == [0.0]


def test_unknown_optimiser_gives_nan() -> None:
    p = torch.nn.Parameter(torch.ones(3))
    opt, before = _one_step(torch.optim.RMSprop, p, torch.ones(3), lr=0.1)
    assert math.isnan(effective_update_ratios(opt, before)[0])


def test_norms_per_parameter_layer_and_global_match_torch() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    net(torch.randn(8, 3)).sum().backward()
    names, norms = parameter_grad_norms(net.named_parameters())
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    grads = [p.grad for p in net.parameters()]
    assert torch.allclose(torch.stack(norms), torch.stack([g.norm() for g in grads]))
    values = [float(n) for n in norms]
    assert global_norm(values) == pytest.approx(float(torch.nn.utils.get_total_norm(grads)), rel=1e-5)
    layers = layer_norms(names, values)
    assert list(layers) == ["0", "2"]
    assert layers["0"] == pytest.approx(float(torch.cat([grads[0].flatten(), grads[1]]).norm()), rel=1e-6)


def test_rolling_stats_match_statistics_module() -> None:
    stats = RollingStats(window=4)
    for v in [1.0, 2.0, float("nan"), 4.0, 8.0, 16.0]:
        stats.add(v)
    window = [2.0, 4.0, 8.0, 16.0]  # the NaN is skipped, the oldest finite value left the window
    s = stats.summary()
    assert s["mean"] == pytest.approx(statistics.fmean(window)) and s["max"] == 16.0
    assert s["std"] == pytest.approx(statistics.pstdev(window))
    assert s["cv"] == pytest.approx(statistics.pstdev(window) / statistics.fmean(window))
    with pytest.raises(ValueError, match="window"):
        RollingStats(0)
