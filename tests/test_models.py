"""Every G/D pair: output shapes for every supported size, gradients reach every parameter, bad shapes."""

import pytest
import torch

from ganlab.models import DCGANDiscriminator, DCGANGenerator, MLPDiscriminator, MLPGenerator, has_batch_norm


@pytest.mark.parametrize("size", [8, 16, 32, 64])
@pytest.mark.parametrize("channels", [1, 3])
def test_dcgan_shapes_and_gradients(size: int, channels: int) -> None:
    shape = (channels, size, size)
    G, D = DCGANGenerator(shape, z_dim=8, width=8), DCGANDiscriminator(shape, width=8)
    x = G(torch.randn(4, 8))
    assert x.shape == (4, *shape) and x.abs().max() <= 1
    out = D(x)
    assert out.shape == (4,) and torch.isfinite(out).all()
    out.sum().backward()
    for name, p in [*G.named_parameters(), *D.named_parameters()]:
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("shape", [(1, 28, 28), (1, 128, 128), (2, 32, 32), (3, 16, 32)])
def test_dcgan_refuses_shapes_it_cannot_make(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="dataset.image_size|channels"):
        DCGANGenerator(shape)


def test_mlp_shapes_and_gradients() -> None:
    G, D = MLPGenerator((2,), z_dim=4, hidden=(16, 16)), MLPDiscriminator((2,), hidden=(16,))
    x = G(torch.randn(5, 4))
    assert x.shape == (5, 2)
    D(x).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in [*G.parameters(), *D.parameters()])
    assert D.feature_dim == 16 and D.features(x).shape == (5, 16)


def test_model_data_mismatch_is_explained() -> None:
    with pytest.raises(ValueError, match="use model=dcgan"):
        MLPGenerator((1, 8, 8))
    with pytest.raises(ValueError, match="use model=mlp"):
        DCGANDiscriminator((2,))


def test_norm_choice() -> None:
    assert has_batch_norm(DCGANDiscriminator((1, 16, 16), norm="batch"))
    assert not has_batch_norm(DCGANDiscriminator((1, 16, 16), norm="layer"))
    with pytest.raises(ValueError, match="norm"):
        DCGANDiscriminator((1, 16, 16), norm="instance")


def test_maxout_unit_is_the_max_over_its_pieces() -> None:
    """Goodfellow et al. 2013, eq. 1 by hand: 1 input, 2 units of 3 pieces with known weights and biases."""
    from ganlab.models.maxout import Maxout

    layer = Maxout(1, 2, pieces=3)
    with torch.no_grad():  # rows: unit 0 pieces (w, b) = (1, 0), (-1, 0), (0, 0.5); unit 1: (2, 1), (3, -1), (0, 0)
        layer.linear.weight.copy_(torch.tensor([[1.0], [-1.0], [0.0], [2.0], [3.0], [0.0]]))
        layer.linear.bias.copy_(torch.tensor([0.0, 0.0, 0.5, 1.0, -1.0, 0.0]))
    out = layer(torch.tensor([[2.0], [-0.25], [-3.0]]))
    # x=2: max(2, -2, 0.5)=2, max(5, 5, 0)=5; x=-0.25: max(-0.25, 0.25, 0.5)=0.5, max(0.5, -1.75, 0)=0.5;
    # x=-3: max(-3, 3, 0.5)=3, max(-5, -10, 0)=0
    assert torch.equal(out, torch.tensor([[2.0, 5.0], [0.5, 0.5], [3.0, 0.0]]))


def test_pacgan_pair_shapes_init_and_gradients() -> None:
    """PacGAN's 2-D pair: G 2 -> 4 x 400 (no bias, batch norm) -> 2 with bias; D 3 maxout layers of 200 x 5
    pieces; every linear weight ~ N(0, 0.02^2) (sample std within 10 % of 0.02 for >= 800 weights), biases 0."""
    from ganlab.models import MaxoutDiscriminator

    torch.manual_seed(0)
    G = MLPGenerator((2,), z_dim=2, hidden=(400,) * 4, batch_norm=True, bias=False, init_std=0.02)
    D = MaxoutDiscriminator((2,), in_channels=6)  # PacGAN3
    linears = [m for m in G.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.bias is None for m in linears] == [True] * 4 + [False] and torch.equal(linears[-1].bias, torch.zeros(2))
    assert has_batch_norm(G) and not has_batch_norm(D)
    for m in [*linears, *(m for m in D.modules() if isinstance(m, torch.nn.Linear))]:
        assert abs(float(m.weight.detach().std()) - 0.02) < 0.002 or m.weight.numel() < 800
        assert m.bias is None or not m.bias.any()
    assert D.features[0].linear.weight.shape == (1000, 6) and D.feature_dim == 200
    x = G(torch.randn(9, 2))
    out = D(x.reshape(3, 6))  # 3 packs of 3 samples
    assert x.shape == (9, 2) and out.shape == (3,)
    out.sum().backward()
    assert all(p.grad is not None for p in [*G.parameters(), *D.parameters()])
    with pytest.raises(ValueError, match="init_std"):
        MaxoutDiscriminator((2,), init_std=0.0)
    with pytest.raises(ValueError, match="pieces"):
        MaxoutDiscriminator((2,), pieces=0)
