"""The training loop's checkpoints: what a bitwise-identical resume and a NaN rollback save and restore.

:class:`Checkpointing` is a mixin of :class:`ganlab.trainer.loop.Trainer` (kept apart so that the loop reads in
one sitting); it uses the trainer's networks, ``state``, ``batcher``, ``noise``, monitors and ``dist``. The file
format is :mod:`ganlab.trainer.checkpoint`'s.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import torch

from ganlab import layout
from ganlab.distributed import rank_seed, seed_everything
from ganlab.health.recovery import all_finite
from ganlab.trainer import checkpoint as ckpt_io

log = logging.getLogger("ganlab")


class Checkpointing:
    """:meth:`state_dict`, :meth:`save` and :meth:`load_state_dict` of :class:`~ganlab.trainer.loop.Trainer`."""

    def state_dict(self, after_eval: dict[str, float] | None = None) -> dict[str, Any]:
        """Everything a bitwise-identical resume needs (see :mod:`ganlab.trainer.checkpoint`); ``after_eval``:
        the scores the strategies are about to react to (last.pt), or None."""
        st = self.state
        return {"format": ckpt_io.FORMAT, "step": st.step, "generator": self.G.state_dict(),
                "discriminator": self.D.state_dict(), "opt_g": st.opt_g.state_dict(), "opt_d": st.opt_d.state_dict(),
                "g_ema": st.g_ema.state_dict() if st.g_ema is not None else None,
                "strategies": {s.name: s.state_dict() for s in self.strategies}, "batcher": self.batcher.state_dict(),
                "noise_rng": self.noise.get_state(), "rng": ckpt_io.rng_state(), "config": self.config,
                "scores": self.last_scores, "health": self.health.state_dict(), "lr": self.lr.state_dict(),
                "callbacks": {c.name: c.state_dict() for c in self.callbacks}, "after_eval": after_eval,
                "threads": torch.get_num_threads()}

    def save(self, path: Path, after_eval: dict[str, float] | None = None) -> None:
        """Write a checkpoint atomically (``after_eval``: see :meth:`state_dict`).

        One whose parameters and buffers (G, D, the EMA copy) are all finite becomes :attr:`good_checkpoint`;
        one that is not, written over the current good checkpoint, leaves none (the NaN guard then stops
        instead of rolling back to non-finite weights).
        """
        path = Path(path)
        state = self.state_dict(after_eval)
        if self.dist.active:  # each rank's global RNGs (augmentation draws differ per rank)
            state["rng_ranks"] = self.dist.gather_objects(ckpt_io.rng_state())
        if self.dist.main:
            ckpt_io.atomic_save(state, path)
        self.dist.barrier()  # the file exists before any rank reads it (a NaN rollback)
        nets = [self.G, self.D] + ([self.state.g_ema] if self.state.g_ema is not None else [])
        if all_finite(itertools.chain.from_iterable(itertools.chain(n.parameters(), n.buffers()) for n in nets)):
            self.good_checkpoint = path
        elif self.good_checkpoint == path:
            self.good_checkpoint = None

    def load_state_dict(self, ckpt: dict[str, Any]) -> None:
        """Restore a checkpoint made by :meth:`state_dict` (weights, optimisers, strategies, data order, RNGs).

        A last.pt's ``after_eval`` scores are kept for :meth:`fit`, which replays the strategies' reaction to
        them (tools that only score the checkpoint, such as ganlab-eval, see the scored G).
        """
        self._load_training_state(ckpt)
        self._drop_records_after(self.state.step)
        self._pending_after_eval = ckpt.get("after_eval")
        self.batcher.load_state_dict(ckpt["batcher"])
        self.noise.set_state(ckpt["noise_rng"])
        self._load_rng(ckpt)
        self.health.load_state_dict(ckpt.get("health", {}))
        states = ckpt_io.callback_states(ckpt)
        for c in self.callbacks:
            c.load_state_dict(states.get(c.name, {}))

    def _load_rng(self, ckpt: dict[str, Any]) -> None:
        """The global RNGs of this rank: the checkpoint's ``rng`` in one process; under several, this rank's
        entry of ``rng_ranks``, or (a checkpoint of another number of processes) rank 0 the ``rng``, the others
        fresh streams from :func:`~ganlab.distributed.rank_seed`."""
        ranks = ckpt.get("rng_ranks")
        if not self.dist.active:
            ckpt_io.set_rng_state(ckpt["rng"])
        elif ranks is not None and len(ranks) == self.dist.world:
            ckpt_io.set_rng_state(ranks[self.dist.rank])
        else:
            log.warning("the checkpoint was written by %s process(es), this run has %d: rank 0 continues its "
                        "global RNG streams, the other ranks start fresh ones", len(ranks) if ranks else 1,
                        self.dist.world)
            if self.dist.main:
                ckpt_io.set_rng_state(ckpt["rng"])
            else:
                seed_everything(rank_seed(self.seed, self.dist.rank))

    def _load_training_state(self, ckpt: dict[str, Any]) -> None:
        """Weights, optimisers, EMA copy, strategies, step and scores (what a NaN rollback restores)."""
        st = self.state
        self.G.load_state_dict(ckpt["generator"])
        self.D.load_state_dict(ckpt["discriminator"])
        st.opt_g.load_state_dict(ckpt["opt_g"])
        st.opt_d.load_state_dict(ckpt["opt_d"])
        if st.g_ema is not None and ckpt.get("g_ema") is not None:
            st.g_ema.load_state_dict(ckpt["g_ema"])
        else:
            self._pending_g_ema = ckpt.get("g_ema")  # restored in fit(), once strategies have made state.g_ema
        for s in self.strategies:
            s.load_state_dict(ckpt["strategies"].get(s.name, {}))
        st.step, self.last_scores = int(ckpt["step"]), layout.current_names(ckpt.get("scores") or {})
        legacy = {"guard": ckpt["health"]["lr_scale"]} if "lr_scale" in ckpt.get("health", {}) else {}
        self.lr.load_state_dict(ckpt.get("lr", legacy))  # a NaN rollback then cuts the guard it had
