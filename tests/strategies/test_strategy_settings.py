"""Settings bounds of WGAN-GP, TTUR, EMA and spectral norm, each end checked (issue 15: these comparison
mutants survived), and spectral norm's power iterations reaching every layer."""

from __future__ import annotations

import pytest
from torch import nn

from ganlab.models import MLPDiscriminator
from ganlab.strategies.ema import EMA
from ganlab.strategies.spectral_norm import apply_spectral_norm
from ganlab.strategies.ttur import TTUR
from ganlab.strategies.wgan_gp import WGANGP


def test_wgan_gp_settings() -> None:
    """lambda_gp >= 0, n_critic >= 1, lr > 0 or null, betas two numbers in [0, 1) or null."""
    ok = WGANGP(lambda_gp=0.0, n_critic=1, lr=None, betas=None)
    assert (ok.lambda_gp, ok.n_critic, ok.lr, ok.betas) == (0.0, 1, None, None)
    assert WGANGP(lambda_gp=0.5, betas=[0.0, 0.99]).betas == (0.0, 0.99)
    for bad in ({"lambda_gp": -1.0}, {"n_critic": 0}, {"lr": 0.0}, {"betas": (0.5, 1.0)}, {"betas": (0.5, 1.5)},
                {"betas": (0.1, 0.2, 0.3)}, {"betas": (0.5,)}):
        with pytest.raises(ValueError, match="strategy.wgan_gp"):
            WGANGP(**bad)


def test_ttur_and_ema_settings() -> None:
    """TTUR needs both lrs positive (each refused on its own); EMA's beta lies in [0, 1)."""
    for bad in ({"d_lr": 0.0}, {"g_lr": 0.0}, {"d_lr": -1.0, "g_lr": 1e-4}):
        with pytest.raises(ValueError, match="strategy.ttur"):
            TTUR(**bad)
    assert EMA(beta=0.0).beta == 0.0
    for beta in (1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="strategy.ema.beta"):
            EMA(beta=beta)


def test_spectral_norm_runs_the_requested_power_iterations_on_every_layer() -> None:
    """Every Linear layer gets torch's spectral-norm parametrisation with n_power_iterations as asked."""
    d = MLPDiscriminator((2,), hidden=(8, 4))
    assert apply_spectral_norm(d, n_power_iterations=7) == 3
    layers = [m for m in d.modules() if isinstance(m, nn.Linear)]
    assert len(layers) == 3
    assert all(m.parametrizations.weight[0].n_power_iterations == 7 for m in layers)
