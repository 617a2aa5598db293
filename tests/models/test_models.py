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


# ------------------------------------------------------------------ model=resnet (SNGAN, Miyato et al. 2018, Table 4)
@pytest.mark.parametrize("size", [16, 32, 64])
@pytest.mark.parametrize("channels", [1, 3])
def test_resnet_shapes_and_gradients(size: int, channels: int) -> None:
    from ganlab.models import ResNetDiscriminator, ResNetGenerator

    shape = (channels, size, size)
    G, D = ResNetGenerator(shape, z_dim=8, width=4), ResNetDiscriminator(shape, width=4, spectral_norm=True)
    x = G(G.sample_z(4))
    assert x.shape == (4, *shape) and x.abs().max() <= 1
    assert D.features(x).shape == (4, 4) and D.feature_dim == 4
    out = D(x)
    assert out.shape == (4,) and torch.isfinite(out).all()
    out.sum().backward()
    for name, p in [*G.named_parameters(), *D.named_parameters()]:
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert has_batch_norm(G) and not has_batch_norm(D)  # no batch norm in the critic: gradient penalties apply


def test_resnet_at_the_papers_widths_has_the_papers_size() -> None:
    """Parameters counted by hand for CIFAR-10 (3 x 32 x 32), G width 256, D width 128 (SNGAN's 4.3 M and 1.05 M).

    G: dense 128 x 4096 + 4096 = 528,384; per up block BN 512 + conv3 590,080 + BN 512 + conv3 590,080 + conv1 65,792
    = 1,246,976, three of them; BN 512 + conv 256 x 3 x 9 + 3 = 6,915. D: optimised block 3,584 + 147,584 + 512 =
    151,680; down block 147,584 x 2 + 16,512 = 311,680; two blocks with identity shortcuts 295,168 each; dense 129.
    """
    from ganlab.models import ResNetDiscriminator, ResNetGenerator

    def count(m: torch.nn.Module) -> int:
        return sum(p.numel() for p in m.parameters())

    assert count(ResNetGenerator((3, 32, 32))) == 528_384 + 3 * 1_246_976 + 512 + 6_915 == 4_276_739
    assert count(ResNetDiscriminator((3, 32, 32))) == 151_680 + 311_680 + 2 * 295_168 + 129 == 1_053_825


@pytest.mark.parametrize("size,sides", [(16, [8, 8, 8]), (32, [16, 8, 8, 8]), (64, [32, 16, 8, 8, 8])])
def test_resnet_discriminator_pools_to_8x8_then_two_blocks(size: int, sides: list[int]) -> None:
    """Table 4c at 32 x 32: optimised block down (16), ResBlock down (8), ResBlock (8), ResBlock (8); one more down
    block at 64 x 64, one fewer at 16 x 16. G doubles the side log2(S / 4) times from 4 x 4."""
    from ganlab.models import ResNetDiscriminator, ResNetGenerator

    D = ResNetDiscriminator((1, size, size), width=4)
    h, seen = torch.randn(2, 1, size, size), []
    for block in D.features[:-1]:
        h = block(h)
        seen.append(h.shape[-1])
    assert seen == sides and [b.down for b in D.features[:-1]] == [s < p for s, p in zip(sides, [size, *sides])]
    assert D.features[0].optimized and not any(b.optimized for b in D.features[1:-1])
    G = ResNetGenerator((1, size, size), z_dim=8, width=4)
    assert len(G.blocks) == {16: 2, 32: 3, 64: 4}[size]


def test_resnet_blocks_by_hand() -> None:
    """Each block against its formula written out with torch.nn.functional (Miyato et al. 2018, Figure 8)."""
    import torch.nn.functional as F

    from ganlab.models.resnet import DBlock, GBlock

    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)

    def conv(m, t):
        return F.conv2d(t, m.weight, m.bias, padding=m.weight.shape[-1] // 2)

    def up(t):
        return t.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)  # nearest neighbour, 2x

    def pool(t):
        return (t[..., ::2, ::2] + t[..., 1::2, ::2] + t[..., ::2, 1::2] + t[..., 1::2, 1::2]) / 4

    def bn(t):  # training-mode batch norm with its initial affine (1, 0)
        return (t - t.mean((0, 2, 3), keepdim=True)) / (t.var((0, 2, 3), unbiased=False, keepdim=True) + 1e-5).sqrt()

    g = GBlock(3, 5)
    want = conv(g.c2, bn(conv(g.c1, up(bn(x).relu()))).relu()) + conv(g.c_sc, up(x))
    torch.testing.assert_close(g(x), want)
    opt = DBlock(3, 5, down=True, optimized=True)  # no ReLU on the image; shortcut pools first
    torch.testing.assert_close(opt(x), pool(conv(opt.c2, conv(opt.c1, x).relu())) + conv(opt.c_sc, pool(x)))
    down = DBlock(3, 5, down=True)
    torch.testing.assert_close(down(x), pool(conv(down.c2, conv(down.c1, x.relu()).relu())) + pool(conv(down.c_sc, x)))
    same = DBlock(3, 3, down=False)  # identity shortcut
    assert same.c_sc is None
    torch.testing.assert_close(same(x), conv(same.c2, conv(same.c1, x.relu()).relu()) + x)


def test_resnet_init_is_sngans() -> None:
    """Xavier uniform, bound gain * sqrt(6 / (fan_in + fan_out)): gain sqrt(2) in blocks, 1 for shortcuts and the
    dense/output layers; biases 0. A uniform sample's max is near its bound and its std near bound / sqrt(3)."""
    import math

    from ganlab.models import ResNetDiscriminator, ResNetGenerator

    torch.manual_seed(0)
    G, D = ResNetGenerator((1, 32, 32), z_dim=64, width=64), ResNetDiscriminator((1, 32, 32), width=64)
    cases = [(G.blocks[0].c1, math.sqrt(2), 64 * 9, 64 * 9), (G.blocks[0].c_sc, 1.0, 64, 64),
             (G.dense, 1.0, 64, 1024), (D.features[1].c2, math.sqrt(2), 64 * 9, 64 * 9), (D.head, 1.0, 64, 1)]
    for m, gain, fan_in, fan_out in cases:
        bound = gain * math.sqrt(6 / (fan_in + fan_out))
        w = m.weight.detach()
        assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.95 * bound
        if w.numel() >= 4000:
            assert abs(float(w.std()) - bound / math.sqrt(3)) < 0.03 * bound
        assert not m.bias.any()


def test_resnet_spectral_norm_makes_every_layer_1_lipschitz() -> None:
    """spectral_norm=True: after power iterations every conv/dense weight, reshaped to (out, -1), has largest
    singular value 1 (Miyato et al. 2018, eq. 8); without it the weights are the raw init."""
    from ganlab.models import ResNetDiscriminator

    torch.manual_seed(0)
    D = ResNetDiscriminator((1, 16, 16), width=8, spectral_norm=True)
    with torch.no_grad():
        for _ in range(20):  # one power iteration per training-mode forward pass (15 when registered)
            D(torch.randn(1, 1, 16, 16))
    layers = [m for m in D.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert len(layers) == 3 + 2 * 2 + 1  # 16 x 16: optimised block (3 convs), 2 blocks (2 convs each), the dense
    sigmas = [float(torch.linalg.matrix_norm(m.weight.detach().flatten(1), ord=2)) for m in layers]
    assert sigmas == pytest.approx([1.0] * len(layers), abs=1e-3)
    plain = ResNetDiscriminator((1, 16, 16), width=8)
    assert max(float(torch.linalg.matrix_norm(m.weight.detach().flatten(1), ord=2)) for m in plain.modules()
               if isinstance(m, torch.nn.Conv2d)) > 1.1


@pytest.mark.parametrize("shape,match", [((1, 8, 8), "dataset.image_size=8x8"), ((1, 28, 28), "side"),
                                         ((1, 128, 128), r"\(16, 32, 64\)"), ((2, 32, 32), "channels"),
                                         ((2,), "use model=mlp")])
def test_resnet_refuses_shapes_it_cannot_make(shape: tuple[int, ...], match: str) -> None:
    from ganlab.models import ResNetDiscriminator, ResNetGenerator

    for cls in (ResNetGenerator, ResNetDiscriminator):
        with pytest.raises(ValueError, match=match):
            cls(shape)


def test_resnet_refuses_bad_widths() -> None:
    from ganlab.models import ResNetDiscriminator, ResNetGenerator

    with pytest.raises(ValueError, match="model.generator.width must be a positive"):
        ResNetGenerator((1, 32, 32), width=0)
    with pytest.raises(ValueError, match="model.discriminator.width must be a positive"):
        ResNetDiscriminator((1, 32, 32), width=0)
    with pytest.raises(ValueError, match="model.generator.z_dim must be positive"):
        ResNetGenerator((1, 32, 32), z_dim=0)
