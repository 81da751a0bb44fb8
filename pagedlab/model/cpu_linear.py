"""Linear layers on x86 CPUs through oneDNN, with weights packed once after loading.

PyTorch's ``F.linear`` on CPU calls MKL's ``sgemm``; on this kit's AMD EPYC (Zen 4) MKL takes its
AVX2 path and reaches about half of what oneDNN's AVX-512 kernels reach on the same 2 cores
(``benchmarks/results/profile.md``). vLLM's CPU backend (vLLM >= 0.10,
``vllm/model_executor/layers/utils.py: dispatch_cpu_unquantized_gemm``) therefore re-packs each
unquantized linear weight into oneDNN's blocked layout in ``process_weights_after_loading`` and drops
the plain copy; :func:`pack_linears` does the same to a :class:`~pagedlab.model.llama.LlamaForCausalLM`,
turning each decoder layer into a :class:`PackedDecoderLayer` (the CPU path: the readable layer's
function with fewer passes over memory) and running the tied LM head on the embedding table itself.
:func:`unpack_linears` restores the readable layers (the reorder is a permutation: bit-exact).

The results equal the readable model's up to fp32 rounding (oneDNN sums in another order: relative
error ~1e-6); the engine's greedy tokens stay identical to HF ``generate`` (``tests/engine/test_hf_parity.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pagedlab.kernels import native
from pagedlab.kernels.cpu import SINGLE_THREAD_TOKENS, single_threaded
from pagedlab.model.attention import paged_attention
from pagedlab.model.llama import (
    ForwardContext,
    LayerKVCache,
    LlamaConfig,
    LlamaDecoderLayer,
    LlamaForCausalLM,
    RMSNorm,
)

__all__ = [
    "PackedLinear",
    "PackedDecoderLayer",
    "apply_rope_flipped",
    "onednn_available",
    "pack_linears",
    "unpack_linears",
]


def onednn_available() -> bool:
    """Whether this torch build can run oneDNN's packed fp32 linear (x86 builds with MKL-DNN)."""
    has_op = hasattr(torch.ops.mkldnn, "_linear_pointwise")
    return has_op and bool(torch.backends.mkldnn.is_available())  # type: ignore[no-untyped-call]


#: The weight dtypes oneDNN's packed linear takes here.
_DTYPES = (torch.float32, torch.bfloat16)


class PackedLinear(nn.Module):
    """``y = x @ weight.T`` (no bias) with ``weight`` held in oneDNN's blocked layout.

    Args:
        weight: fp32 or bf16 ``[out_features, in_features]`` on the CPU; not kept (the packed copy replaces it).
            In bf16 oneDNN runs its AMX / AVX512-BF16 kernels (fp32 accumulation, bf16 result).
        pack: False runs oneDNN on ``weight`` as it is, sharing its storage: no copy, equal results up
            to fp32 rounding, ~15% slower than the packed layout; for an LM head tied to the embedding.
    Raises:
        RuntimeError: oneDNN is not available in this torch build, or ``weight`` is not a 2-D fp32/bf16 CPU tensor.
    """

    def __init__(self, weight: torch.Tensor, pack: bool = True) -> None:
        super().__init__()
        if not onednn_available():
            raise RuntimeError("PackedLinear needs a torch build with oneDNN (MKL-DNN); use nn.Linear")
        if weight.dim() != 2 or weight.dtype not in _DTYPES or weight.device.type != "cpu":
            raise RuntimeError(
                f"PackedLinear packs a 2-D fp32 or bf16 CPU weight, got {tuple(weight.shape)} {weight.dtype} on {weight.device}"
            )
        self.out_features, self.in_features = weight.shape
        # pack=False: oneDNN runs on the plain weight itself, sharing its storage (no second copy).
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None) if pack else weight.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[..., in_features]`` (the weight's dtype) -> ``[..., out_features]``; 2-D ``x`` runs padded to
        :func:`padded_rows` rows."""
        t = x.shape[0]
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(_pad_rows(x), self.packed, None, "none", [], "")
        return out[:t] if x.dim() == 2 else out

    def binary(self, x: torch.Tensor, other: torch.Tensor, op: str) -> torch.Tensor:
        """``(x @ weight.T) <op> other`` in one oneDNN call: ``op`` is ``"add"`` or ``"mul"``; ``other``
        has the output's shape ``[..., out_features]``. Padded as ``forward``."""
        t = x.shape[0]
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise.binary(
            _pad_rows(x), _pad_rows(other), self.packed, None, op
        )
        return out[:t] if x.dim() == 2 else out

    def to_linear(self) -> nn.Linear:
        """A plain ``nn.Linear`` with the same weight (exact: the reorder only permutes)."""
        lin = nn.Linear(self.in_features, self.out_features, bias=False, dtype=self.packed.dtype)
        with torch.no_grad():
            lin.weight.copy_(self.packed.to_dense())
        return lin

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN packed"


def padded_rows(t: int) -> int:
    """``t`` rounded up to a multiple of ``2 ** (bit_length(t) - 4)``: exact below 16, then 8 sizes per
    power of two (at most 1/8 more rows).

    oneDNN compiles (and caches, ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``) one kernel per matrix shape. An
    engine's steps have every row count from 1 to ``max_num_batched_tokens``; unpadded, each new count
    compiled new kernels and the process grew by ~0.35 MB per new shape without bound in practice
    (``benchmarks/soak.py``: ~0.6 MB per step). Padded, a 512-token budget has 56 shapes.
    """
    step = 1 << max(t.bit_length() - 4, 0)
    return -(-t // step) * step


def _pad_rows(x: torch.Tensor) -> torch.Tensor:
    """A 2-D ``x`` with zero rows appended up to :func:`padded_rows`; anything else unchanged."""
    if x.dim() != 2 or (pad := padded_rows(x.shape[0]) - x.shape[0]) == 0:
        return x
    return F.pad(x, (0, 0, 0, pad))


def pack_linears(model: LlamaForCausalLM) -> bool:
    """Turn every decoder layer of a ``LlamaForCausalLM`` into a :class:`PackedDecoderLayer` and pack its
    LM head for oneDNN, in place.

    Layer by layer, so the plain and packed copies of only one layer's weights coexist. The LM head
    (``model.packed_lm_head``) runs oneDNN on the plain table it is tied to, which serves lookups too.
    Idempotent. Returns False (and changes nothing) where oneDNN is unavailable, the model is not
    on the CPU in fp32 or bf16, or it is bf16 and oneDNN cannot pack bf16 on this CPU (AVX2 only).
    """
    emb = model.embed_tokens.weight
    if not onednn_available() or emb.device.type != "cpu" or emb.dtype not in _DTYPES:
        return False
    if emb.dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return False  # oneDNN packs bf16 only with AVX512 (BW/VL/DQ) or AVX-NE-CONVERT: F.linear runs it instead
    for i, layer in enumerate(model.layers):
        if isinstance(layer, LlamaDecoderLayer):
            model.layers[i] = PackedDecoderLayer(layer)
    if model.packed_lm_head is None:
        # fp32: the LM head shares the table's storage: a packed copy would hold another 113 MB for SmolLM2
        # (HF transformers keeps one tied copy) to save ~3% of a decode step. bf16: oneDNN reorders a plain
        # bf16 weight for its AMX kernels on every call (batch 32: 18 ms plain, 6 ms packed, on 2 Xeon cores),
        # so the head is packed: 57 MB more, the bf16 model's table and head together the fp32 table's size.
        head = emb if model.lm_head_weight is None else model.lm_head_weight
        model.packed_lm_head = PackedLinear(head, pack=head.dtype != torch.float32)
    return True


def unpack_linears(model: LlamaForCausalLM) -> None:
    """Undo :func:`pack_linears`: readable ``LlamaDecoderLayer`` modules, no packed LM head. Idempotent."""
    for i, layer in enumerate(model.layers):
        if isinstance(layer, PackedDecoderLayer):
            model.layers[i] = layer.to_layer(model.config)
    model.packed_lm_head = None


def apply_rope_flipped(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``pagedlab.model.llama.apply_rope`` in 5 ops instead of 6 + 2 copies, bit for bit the same result.

    ``rotate_half(x) * sin`` equals ``flip_halves(x) * (sign * sin)`` with ``sign`` = -1 on the first
    half: the same products up to an exact sign change, so the sums round the same way.

    Args:
        x: ``[T, heads, head_dim]`` (any strides; Q and K heads may be rotated together).
        cos, sin: ``[T, head_dim]`` tables of the tokens' positions.
    Returns:
        A new contiguous ``[T, heads, head_dim]`` tensor.
    """
    t, heads, d = x.shape
    signed_sin = sin.view(t, 2, d // 2) * _HALF_SIGNS
    flipped = x.reshape(t, heads, 2, d // 2).flip(2).mul_(signed_sin[:, None])
    return (x * cos[:, None, :]).add_(flipped.view(t, heads, d))


_HALF_SIGNS = torch.tensor([-1.0, 1.0]).view(2, 1)


class PackedDecoderLayer(nn.Module):
    """A ``LlamaDecoderLayer``'s function for the CPU path: packed weights, fewer passes over memory.

    Same ``forward(x, kv_cache, ctx)`` and result (to fp32 rounding) as the readable layer
    in ``pagedlab.model.llama``, built from one and consuming its weights:
    Q and K rotated in one pass (:func:`apply_rope_flipped`); the residual adds fused into ``o_proj``
    and ``down_proj`` (oneDNN's ``add`` post-op, as vLLM's CPU backend fuses through IPEX/oneDNN,
    vLLM >= 0.6); RMSNorm and RoPE by the C kernels of ``pagedlab.kernels.native`` where they are
    built, in fp32 and in bf16 (one call each instead of four to seven torch ops; RoPE bit for bit the
    same, RMSNorm to the order of its fp32 sum); RoPE (without
    them) and SiLU-times-up on one thread for steps of at most ``SINGLE_THREAD_TOKENS`` tokens
    (:func:`single_threaded`; the attention backend picks its own threads).

    Raises:
        RuntimeError: as :class:`PackedLinear` (no oneDNN, or weights that are not fp32/bf16 on the CPU).
    """

    def __init__(self, layer: LlamaDecoderLayer) -> None:
        super().__init__()
        attn, mlp = layer.self_attn, layer.mlp
        self.input_layernorm, self.post_attention_layernorm = layer.input_layernorm, layer.post_attention_layernorm
        self.num_heads, self.num_kv_heads, self.head_dim = attn.num_heads, attn.num_kv_heads, attn.head_dim
        self.scale = attn.scale
        self.qkv_proj = _packed(attn.qkv_proj)
        self.o_proj = _packed(attn.o_proj)
        self.inter = mlp.inter
        self.gate_up_proj = _packed(mlp.gate_up_proj)
        self.down_proj = _packed(mlp.down_proj)

    def forward(self, x: torch.Tensor, kv_cache: LayerKVCache, ctx: ForwardContext) -> torch.Tensor:
        """``x`` ``[T, hidden]`` -> ``[T, hidden]``; writes this layer's K/V rows into ``kv_cache``."""
        t, hq, hkv, d = x.shape[0], self.num_heads, self.num_kv_heads, self.head_dim
        cos, sin, meta = ctx.cos, ctx.sin, ctx.meta
        c = x.dtype in native.LAYER_DTYPES and native.load() is not None  # C RMSNorm and RoPE, else torch's
        qkv = self.qkv_proj(_rms_norm(self.input_layernorm, x, c))
        qk_rows = qkv[:, : (hq + hkv) * d].view(t, hq + hkv, d)
        if c:
            qk = native.rotary_embedding(qk_rows, cos, sin)
        else:
            with single_threaded(t <= SINGLE_THREAD_TOKENS):
                qk = apply_rope_flipped(qk_rows, cos, sin)
        v = qkv[:, (hq + hkv) * d :].view(t, hkv, d)
        # The "cpu" backend picks its own threads: its C decode kernel uses them all, its torch paths one.
        out = paged_attention(qk[:, :hq], qk[:, hq:], v, kv_cache[0], kv_cache[1], meta, self.scale)
        x = self.o_proj.binary(out.reshape(t, hq * d), x, "add")
        gate, up = self.gate_up_proj(_rms_norm(self.post_attention_layernorm, x, c)).split(self.inter, dim=-1)
        with single_threaded(t <= SINGLE_THREAD_TOKENS):
            act = F.silu(gate).mul_(up)
        return self.down_proj.binary(act, x, "add")

    def to_layer(self, cfg: LlamaConfig) -> LlamaDecoderLayer:
        """The readable ``LlamaDecoderLayer`` with these weights (exact: the reorders only permute)."""
        layer = LlamaDecoderLayer(cfg)
        layer.input_layernorm, layer.post_attention_layernorm = self.input_layernorm, self.post_attention_layernorm
        attn, mlp = layer.self_attn, layer.mlp
        attn.qkv_proj, attn.o_proj = self.qkv_proj.to_linear(), self.o_proj.to_linear()
        mlp.gate_up_proj, mlp.down_proj = self.gate_up_proj.to_linear(), self.down_proj.to_linear()
        return layer


def _rms_norm(norm: RMSNorm, x: torch.Tensor, c: bool) -> torch.Tensor:
    """``norm(x)``: by the C kernel when ``c`` (equal to fp32 rounding), else by the module itself."""
    out: torch.Tensor = native.rms_norm(x, norm.weight, norm.eps) if c else norm(x)
    return out


def _packed(lin: nn.Module) -> PackedLinear:
    """``lin`` itself when already packed, else a :class:`PackedLinear` of its weight."""
    if isinstance(lin, PackedLinear):
        return lin
    if not isinstance(lin, nn.Linear):
        raise TypeError(f"can pack an nn.Linear or a PackedLinear, got {type(lin).__name__}")
    return PackedLinear(lin.weight)
