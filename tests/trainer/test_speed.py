"""Speed options: fused optimisers, channels-last weights, torch.compile's fallback, device-side batches."""

import logging

import pytest
import torch
from tiny_config import compose_cfg

from ganlab.data.base import Batcher
from ganlab.run.build import build_trainer
from ganlab.strategies.common import LRAdjust
from ganlab.strategies.r1 import R1
from ganlab.strategies.wgan_gp import WGANGP
from ganlab.trainer import speed

SMALL_DCGAN = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
               "model.discriminator.width=8", "model.generator.z_dim=8", "logger=none"]


def test_fused_adam_keeps_settings_and_computes_the_same_step() -> None:
    torch.manual_seed(0)
    p1 = torch.nn.Parameter(torch.randn(5, 3))
    p2 = torch.nn.Parameter(p1.detach().clone())
    factory = LRAdjust.wrap(torch.optim.Adam, factor=0.5)  # the lr set after construction must survive
    plain, fast = factory([p1], lr=1e-2, betas=(0.5, 0.9)), speed.fused(factory([p2], lr=1e-2, betas=(0.5, 0.9)))
    group = fast.param_groups[0]
    assert group["fused"] and group["lr"] == 5e-3 and group["betas"] == (0.5, 0.9)
    for _ in range(3):
        g = torch.randn(5, 3)
        p1.grad, p2.grad = g.clone(), g.clone()
        plain.step()
        fast.step()
    assert torch.allclose(p1, p2, atol=1e-6)
    rms = torch.optim.RMSprop([p1])
    assert speed.fused(rms) is rms  # no fused kernel: unchanged


def test_fused_setting() -> None:
    assert speed.wants_fused("auto", torch.device("cuda")) and not speed.wants_fused("auto", torch.device("cpu"))
    assert speed.wants_fused(True, torch.device("cpu")) and not speed.wants_fused(False, torch.device("cuda"))
    with pytest.raises(ValueError, match="trainer.fused_optim must be auto, true or false"):
        build_trainer(compose_cfg(["logger=none", "trainer.fused_optim=sometimes"]), "/nonexistent")


def test_compile_falls_back_to_eager_when_a_strategy_differentiates_twice(caplog: pytest.LogCaptureFixture) -> None:
    net = torch.nn.Linear(2, 1)
    with caplog.at_level(logging.WARNING, logger="ganlab"):
        assert speed.compile_models([net], [WGANGP(), R1()]) is False
    assert "wgan_gp, r1 differentiates twice" in caplog.text
    assert net._compiled_call_impl is None  # still eager


def test_channels_last_dcgan_trains_like_the_contiguous_one(tmp_path) -> None:
    steps = ["trainer.steps=3", "trainer.eval_every=3", "callbacks.collapse_alarm.n_z=0", "trainer.projector=false"]
    ref = build_trainer(compose_cfg([*SMALL_DCGAN, *steps]), tmp_path / "a")
    nhwc = build_trainer(compose_cfg([*SMALL_DCGAN, *steps, "trainer.channels_last=true"]), tmp_path / "b")
    convs = [p for p in nhwc.D.parameters() if p.dim() == 4]
    assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
    ref.fit()
    nhwc.fit()
    for a, b in zip(ref.G.parameters(), nhwc.G.parameters()):
        assert torch.allclose(a, b, atol=1e-4)


def _reference_batches(n: int, batch_size: int, seed: int, count: int) -> list[torch.Tensor]:
    """The documented order: a fresh CPU ``randperm`` per epoch from a generator seeded ``seed``, cut into
    batches, the last partial batch of each epoch dropped."""
    gen, out = torch.Generator().manual_seed(seed), []
    while len(out) < count:
        perm = torch.randperm(n, generator=gen)
        out += [perm[i:i + batch_size] for i in range(0, n - batch_size + 1, batch_size)]
    return out[:count]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_batcher_hands_out_indices_on_its_device_in_the_cpu_order(device: str) -> None:
    """7 batches of 3 out of 10 cross two epoch boundaries: every batch lives on the device and equals the
    reference order, so a device copy of the permutation that went stale at an epoch boundary would show."""
    expected = _reference_batches(10, 3, seed=0, count=7)
    assert not torch.equal(expected[0], expected[3])  # the epochs really are reshuffled
    batcher, meta = Batcher(10, 3, seed=0, device=device), Batcher(10, 3, seed=0, device="meta")
    for want in expected:
        got, on_meta = batcher.next(), meta.next()
        assert got.device.type == device and torch.equal(got.cpu(), want)
        assert on_meta.device.type == "meta" and on_meta.shape == want.shape and on_meta.dtype == torch.int64
    assert meta.epoch == 2 and torch.equal(meta.perm[:3], expected[6])  # the meta batcher drew the same order


@pytest.mark.slow  # torch.compile of G and D: ~10 s on 2 cores
def test_compiled_training_matches_eager(tmp_path) -> None:
    steps = ["logger=none", "trainer.steps=5", "trainer.eval_every=5", "callbacks.collapse_alarm.n_z=0"]
    eager = build_trainer(compose_cfg(steps), tmp_path / "eager")
    compiled = build_trainer(compose_cfg([*steps, "trainer.compile=true"]), tmp_path / "compiled")
    assert compiled.G._compiled_call_impl is not None  # about 30 s of compilation on a cold CPU cache
    eager.fit()
    compiled.fit()
    for a, b in zip(eager.G.parameters(), compiled.G.parameters()):
        assert torch.allclose(a, b, atol=1e-4)
    assert set(eager.G.state_dict()) == set(compiled.G.state_dict())  # checkpoints stay interchangeable


def test_auto_threads_follow_the_experiment_not_the_load(tmp_path, caplog) -> None:
    import logging

    from tiny_config import compose_cfg

    from ganlab.run.build import build_trainer
    from ganlab.trainer.speed import auto_threads

    assert auto_threads((2,), 256, 16) == (1, "vector data (an MLP pair)")
    assert auto_threads((1, 32, 32), 64, 16)[0] == 1                      # 65,536 values: the DCGAN preset
    assert auto_threads((3, 32, 32), 64, 16)[0] == 1                      # 196,608: the boundary, still small
    assert auto_threads((3, 32, 32), 65, 16)[0] == 4 and auto_threads((3, 64, 64), 64, 2)[0] == 2
    before = torch.get_num_threads()
    try:
        with caplog.at_level(logging.INFO, logger="ganlab"):
            trainer = build_trainer(compose_cfg(["logger=none"]), tmp_path)
        assert torch.get_num_threads() == 1
        assert "threads: 1 (auto, from the experiment: vector data (an MLP pair); threads=N to override)" in caplog.text
        trainer.save(tmp_path / "c.pt")
        assert torch.load(tmp_path / "c.pt", weights_only=True)["threads"] == 1
        build_trainer(compose_cfg(["logger=none", "threads=2"]), tmp_path / "b")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
