"""Linear layers on x86 CPUs through oneDNN, with weights packed once after loading.

PyTorch's ``F.linear`` on CPU calls MKL's ``sgemm``; on this kit's AMD EPYC (Zen 4) MKL takes its
AVX2 path and reaches about half of what oneDNN's AVX-512 kernels reach on the same 2 cores
(``benchmarks/results/profile.md``). vLLM's CPU backend (vLLM >= 0.10,
``vllm/model_executor/layers/utils.py: dispatch_cpu_unquantized_gemm``) therefore re-packs each
unquantized linear weight into oneDNN's blocked layout in ``process_weights_after_loading`` and drops
the plain copy; :func:`pack_linears` does the same to a :class:`~pagedlab.model.llama.LlamaForCausalLM`.
:func:`unpack_linears` restores plain ``nn.Linear`` modules (the reorder is a permutation: bit-exact).

The results equal ``F.linear`` up to fp32 rounding (oneDNN sums in another order: relative error
~1e-6); the engine's greedy tokens stay identical to HF ``generate`` (``tests/engine/test_hf_parity.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from pagedlab.model.llama import LlamaForCausalLM

__all__ = ["PackedLinear", "onednn_available", "pack_linears", "unpack_linears"]


def onednn_available() -> bool:
    """Whether this torch build can run oneDNN's packed fp32 linear (x86 builds with MKL-DNN)."""
    has_op = hasattr(torch.ops.mkldnn, "_linear_pointwise")
    return has_op and bool(torch.backends.mkldnn.is_available())  # type: ignore[no-untyped-call]


class PackedLinear(nn.Module):
    """``y = x @ weight.T`` (no bias) with ``weight`` held in oneDNN's blocked layout.

    Args:
        weight: fp32 ``[out_features, in_features]`` on the CPU; not kept (the packed copy replaces it).
    Raises:
        RuntimeError: oneDNN is not available in this torch build, or ``weight`` is not a 2-D fp32 CPU tensor.
    """

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        if not onednn_available():
            raise RuntimeError("PackedLinear needs a torch build with oneDNN (MKL-DNN); use nn.Linear")
        if weight.dim() != 2 or weight.dtype != torch.float32 or weight.device.type != "cpu":
            raise RuntimeError(
                f"PackedLinear packs a 2-D fp32 CPU weight, got {tuple(weight.shape)} {weight.dtype} on {weight.device}"
            )
        self.out_features, self.in_features = weight.shape
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[..., in_features]`` fp32 -> ``[..., out_features]``."""
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")
        return out

    def to_linear(self) -> nn.Linear:
        """A plain ``nn.Linear`` with the same weight (exact: the reorder only permutes)."""
        lin = nn.Linear(self.in_features, self.out_features, bias=False)
        with torch.no_grad():
            lin.weight.copy_(self.packed.to_dense())
        return lin

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN packed"


_PROJECTIONS = (("self_attn", "qkv_proj"), ("self_attn", "o_proj"), ("mlp", "gate_up_proj"), ("mlp", "down_proj"))


def pack_linears(model: LlamaForCausalLM) -> bool:
    """Pack every projection of a ``LlamaForCausalLM`` and its LM head for oneDNN, in place.

    Layer by layer, so the plain and packed copies of only one weight coexist. The LM head gets a
    packed copy (``model.packed_lm_head``); the embedding table it is tied to stays plain for lookups.
    Idempotent. Returns False (and changes nothing) where oneDNN is unavailable or the model is not
    on the CPU in fp32.
    """
    emb = model.embed_tokens.weight
    if not onednn_available() or emb.device.type != "cpu" or emb.dtype != torch.float32:
        return False
    for layer in model.layers:
        for part, name in _PROJECTIONS:
            owner = getattr(layer, part)
            lin = getattr(owner, name)
            if isinstance(lin, nn.Linear):
                setattr(owner, name, PackedLinear(lin.weight))
    if model.packed_lm_head is None:
        head = emb if model.lm_head_weight is None else model.lm_head_weight
        model.packed_lm_head = PackedLinear(head)
    return True


def unpack_linears(model: LlamaForCausalLM) -> None:
    """Undo :func:`pack_linears`: plain ``nn.Linear`` projections, no packed LM head. Idempotent."""
    for layer in model.layers:
        for part, name in _PROJECTIONS:
            owner = getattr(layer, part)
            lin = getattr(owner, name)
            if isinstance(lin, PackedLinear):
                setattr(owner, name, lin.to_linear())
    model.packed_lm_head = None
