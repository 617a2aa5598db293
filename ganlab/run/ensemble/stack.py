"""S copies of one network as one module: parameters and buffers stacked along a new leading member dimension,
the forward pass the unchanged module's, vectorised over the members with ``torch.func.vmap`` of
``torch.func.functional_call`` (PyTorch's "model ensembling" recipe, ``torch.func.stack_module_state``).

The member networks keep their own classes (``MLPGenerator``, ``MaxoutDiscriminator``, PacGAN's packing, the
minibatch-stddev head...): nothing of a model is written again here. Under ``vmap`` each linear layer becomes one
batched matmul over the S members, so the S forward and backward passes cost one Python dispatch per layer.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap


def _key(name: str) -> str:
    """A parameter's dotted name as a legal attribute name (``net.0.weight`` -> ``net__0__weight``)."""
    return name.replace(".", "__")


class Stacked(nn.Module):
    """S networks of one architecture as one module: x (S, B, ...) -> (S, B, ...) outputs, member k through network k.

    Each parameter and buffer of the members is one tensor of shape (S, *shape) here (a leaf parameter whose
    gradient slice k is member k's gradient, since member k's output depends on slice k only); an optimiser over
    :meth:`parameters` that works element by element (SGD, Adam, AdamW) updates every member as its own optimiser
    would. Batch norm in training mode normalises each member's batch with that member's statistics and updates
    its own running statistics (the stacked buffers, in place).

    Args:
        members: S >= 1 modules of one architecture (the same parameter and buffer names and shapes).

    Raises:
        ValueError: no member, or members whose parameters or buffers differ in name or shape.
    """

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member network")
        shapes = [[(n, tuple(t.shape)) for n, t in (*m.named_parameters(), *m.named_buffers())] for m in members]
        if any(s != shapes[0] for s in shapes[1:]):
            raise ValueError("the ensemble's member networks differ in architecture (parameter names or shapes); "
                             "every member must be built from one config")
        params, buffers = stack_module_state(list(members))
        self.size = len(members)
        self.param_names, self.buffer_names = list(params), list(buffers)
        for name, t in params.items():
            self.register_parameter(_key(name), nn.Parameter(t.detach().clone()))
        for name, t in buffers.items():
            self.register_buffer(_key(name), t.clone())
        self._template = [copy.deepcopy(members[0]).to("meta")]  # a list: not a submodule, no parameters of its own
        self._template[0].train(members[0].training)

    def _state(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        return ({n: getattr(self, _key(n)) for n in self.param_names},
                {n: getattr(self, _key(n)) for n in self.buffer_names})

    def train(self, mode: bool = True) -> Stacked:
        super().train(mode)
        self._template[0].train(mode)
        return self

    def forward(self, x: Tensor) -> Tensor:
        """x (S, B, *in_shape) -> (S, B', *out_shape): member k's network on x[k] (B' = B / m for PacGAN-m)."""
        if x.shape[0] != self.size:
            raise ValueError(f"an ensemble of {self.size} members got inputs for {x.shape[0]} (shape {tuple(x.shape)})")
        template = self._template[0]

        def one(params: dict[str, Tensor], buffers: dict[str, Tensor], xk: Tensor) -> Tensor:
            return functional_call(template, (params, buffers), (xk,))

        params, buffers = self._state()
        return vmap(one)(params, buffers, x)

    @torch.no_grad()
    def copy_member_into(self, k: int, module: nn.Module) -> None:
        """Write member k's parameters and buffers into ``module`` (a network of the members' architecture)."""
        params, buffers = self._state()
        for name, t in module.named_parameters():
            t.copy_(params[name][k])
        for name, t in module.named_buffers():
            t.copy_(buffers[name][k])

    def member(self, k: int) -> nn.Module:
        """A new plain module holding member k's weights (on the ensemble's device), in the ensemble's mode."""
        params, buffers = self._state()
        device = next(iter(params.values())).device
        module = copy.deepcopy(self._template[0]).to_empty(device=device)
        self.copy_member_into(k, module)
        return module
