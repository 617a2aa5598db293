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
