"""A Llama forward pass over a paged KV cache, written out in torch for SmolLM2-135M.

The model sees one flat batch of ``T`` scheduled tokens from many requests (prefill chunks
and decodes mixed, as vLLM v1 does). Per layer it projects Q/K/V, applies RoPE, writes the
new K/V rows into the paged cache through ``slot_mapping`` and then attends through the
block tables. Nothing here knows about requests: the engine builds an ``AttentionMetadata``.

Architecture (``LlamaForCausalLM`` in HF transformers): RMSNorm -> GQA attention with RoPE ->
residual -> RMSNorm -> SwiGLU MLP -> residual, 30 times; final RMSNorm; the LM head is tied
to the token embedding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from pagedlab.model.attention import AttentionMetadata, paged_attention


@dataclass
class LlamaConfig:
    """The subset of HF's ``LlamaConfig`` the forward pass needs (defaults: SmolLM2-135M's values)."""

    #: Rows of the token embedding (and of the tied LM head's logits).
    vocab_size: int = 49152
    #: Width of the residual stream, ``[T, hidden_size]`` between layers.
    hidden_size: int = 576
    #: Width of the SwiGLU MLP's gate and up projections.
    intermediate_size: int = 1536
    #: Decoder layers; each has its own ``(key_cache, value_cache)`` pair.
    num_hidden_layers: int = 30
    #: Query heads per layer.
    num_attention_heads: int = 9
    #: K/V heads per layer (GQA: each serves ``num_attention_heads // num_key_value_heads`` query heads);
    #: the KV cache stores only these.
    num_key_value_heads: int = 3
    #: Width of one head (``hidden_size // num_attention_heads`` when HF's config has none).
    head_dim: int = 64
    rms_norm_eps: float = 1e-5
    #: RoPE base: position ``p`` rotates pair ``i`` by ``p / rope_theta ** (2i / head_dim)``.
    rope_theta: float = 100000.0
    #: Longest sequence RoPE's table covers (``LlamaForCausalLM.rope_table`` rows).
    max_position_embeddings: int = 8192
    #: The LM head reuses ``embed_tokens``' weight (SmolLM2 has no separate head).
    tie_word_embeddings: bool = True

    @classmethod
    def from_hf(cls, hf: Any) -> LlamaConfig:
        """The fields of an HF ``LlamaConfig`` (``rope_parameters`` or the older ``rope_theta``).

        The fields HF always carries are copied by name; ``head_dim``, ``rope_theta`` and
        ``tie_word_embeddings`` may be missing and get HF's defaults.
        """
        rope = getattr(hf, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(hf, "rope_theta", 10000.0))
        derived = {
            "head_dim": getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads,
            "rope_theta": float(theta),
            "tie_word_embeddings": bool(getattr(hf, "tie_word_embeddings", True)),
        }
        copied = {f.name: getattr(hf, f.name) for f in fields(cls) if f.name not in derived}
        return cls(**copied, **derived)

    def kv_bytes_per_token(self, dtype_bytes: int = 4) -> int:
        """2 (K and V) x layers x kv_heads x head_dim x bytes: 46,080 B for SmolLM2 in fp32."""
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * dtype_bytes


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``weight * x / sqrt(mean(x^2) + eps)`` over the last dim, with HF's LlamaRMSNorm arithmetic.

        HF computes ``var = x.float().pow(2).mean(-1, keepdim=True)`` and
        ``weight * (x.float() * torch.rsqrt(var + eps)).to(x.dtype)``; for fp32 ``F.rms_norm`` gives the
        same bits in one pass (tests/engine/test_cpu_linear.py), so greedy tokens match exactly.
        """
        if x.dtype == torch.float32:
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        var = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables ``[T, head_dim]`` for the given absolute positions (HF "default" RoPE)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``[T, heads, head_dim]`` by position (rotate-half convention, as HF Llama)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


@dataclass(frozen=True)
class ForwardContext:
    """What every decoder layer of one forward pass reads besides its input and its own KV cache,
    built once per step by :meth:`LlamaForCausalLM.forward` (vLLM >= 0.7 hands ``attn_metadata`` to
    every layer the same way, through the ``ForwardContext`` of ``vllm/forward_context.py``; here it
    is an argument, not a global).

    Attributes:
        cos, sin: RoPE tables of the step's tokens, ``[T, head_dim]`` (rows of ``rope_table``).
        meta: the step's ``AttentionMetadata`` (slot mapping, block tables, sequence lengths).
    """

    cos: torch.Tensor
    sin: torch.Tensor
    meta: AttentionMetadata


#: One layer's ``(key_cache, value_cache)``, each ``[num_blocks, block_size, num_kv_heads, head_dim]``.
LayerKVCache = tuple[torch.Tensor, torch.Tensor]


class LlamaAttention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        # Q, K and V projections fused into one matmul (as vLLM's QKVParallelLinear).
        self.qkv_proj = nn.Linear(cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=False)
        self.o_proj = nn.Linear(self.q_size, cfg.hidden_size, bias=False)
        self.scale = self.head_dim**-0.5

    def forward(self, x: torch.Tensor, kv_cache: LayerKVCache, ctx: ForwardContext) -> torch.Tensor:
        """``x`` ``[T, hidden]`` -> ``[T, hidden]``; writes this layer's K/V rows into ``kv_cache``."""
        T, cos, sin, meta = x.shape[0], ctx.cos, ctx.sin, ctx.meta
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = apply_rope(q.view(T, self.num_heads, self.head_dim), cos, sin)
        k = apply_rope(k.view(T, self.num_kv_heads, self.head_dim), cos, sin)
        v = v.view(T, self.num_kv_heads, self.head_dim)
        out = paged_attention(q, k, v, kv_cache[0], kv_cache[1], meta, self.scale)
        result: torch.Tensor = self.o_proj(out.reshape(T, self.q_size))
        return result


class LlamaMLP(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.inter = cfg.intermediate_size
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """SwiGLU: ``down(silu(gate(x)) * up(x))``, ``[T, hidden]`` -> ``[T, hidden]``."""
        gate, up = self.gate_up_proj(x).split(self.inter, dim=-1)
        result: torch.Tensor = self.down_proj(F.silu(gate) * up)
        return result


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = LlamaMLP(cfg)

    def forward(self, x: torch.Tensor, kv_cache: LayerKVCache, ctx: ForwardContext) -> torch.Tensor:
        """Pre-norm attention and MLP, each with a residual: ``[T, hidden]`` -> ``[T, hidden]``."""
        x = x + self.self_attn(self.input_layernorm(x), kv_cache, ctx)
        out: torch.Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out


class LlamaForCausalLM(nn.Module):
    """Llama over a paged KV cache.

    ``forward(input_ids, positions, kv_caches, meta)`` takes the flat batch:
        input_ids: int64 ``[T]``; positions: int64 ``[T]`` (absolute position in its sequence);
        kv_caches: one ``(key_cache, value_cache)`` pair per layer, each
        ``[num_blocks, block_size, num_kv_heads, head_dim]``;
        meta: ``AttentionMetadata`` (slot mapping, block tables, sequence lengths).
    Returns logits ``[len(meta.logits_indices), vocab_size]`` (fp32) for the rows to sample.
    The model computes in its parameters' dtype: float32, or bfloat16 after ``.to(torch.bfloat16)``
    (``pagedlab.model.precision``: where bf16 keeps fp32 sums).
    """

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head_weight: torch.Tensor | None = None  # None = tied to embed_tokens
        # The LM head packed for oneDNN (pagedlab.model.cpu_linear.pack_linears), or None: plain matmul.
        self.packed_lm_head: nn.Module | None = None
        self._rope_table: tuple[torch.Tensor, torch.Tensor] | None = None

    def rope_table(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin ``[max_position_embeddings, head_dim]``, computed once (the rows equal ``rope_cos_sin``'s)."""
        if self._rope_table is None or self._rope_table[0].device != device:
            c = self.config
            self._rope_table = rope_cos_sin(
                torch.arange(c.max_position_embeddings, device=device), c.head_dim, c.rope_theta
            )
        return self._rope_table

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: list[LayerKVCache],
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        cos_table, sin_table = self.rope_table(positions.device)
        # The tables in the model's dtype (HF's LlamaRotaryEmbedding returns ``cos.to(x.dtype)``): bf16 in bf16.
        dt = self.embed_tokens.weight.dtype
        ctx = ForwardContext(cos_table[positions].to(dt), sin_table[positions].to(dt), meta)
        x = self.embed_tokens(input_ids)
        for layer, kv in zip(self.layers, kv_caches):
            x = layer(x, kv, ctx)
        # Only rows that will be sampled need the (vocab x hidden) LM head.
        x = self.norm(x.index_select(0, meta.logits_indices))
        if self.packed_lm_head is not None:
            logits: torch.Tensor = self.packed_lm_head(x)
            return logits.float()
        w = self.embed_tokens.weight if self.lm_head_weight is None else self.lm_head_weight
        plain: torch.Tensor = x @ w.t()
        return plain.float()

    def load_hf_state_dict(self, sd: Mapping[str, torch.Tensor]) -> None:
        """Load weights named as HF's ``LlamaForCausalLM`` (``model.layers.0.self_attn.q_proj.weight`` ...).

        Raises:
            KeyError: a weight is missing from ``sd``.
            ValueError: the model is packed for oneDNN (``pagedlab.model.cpu_linear.pack_linears``, which
                replaces its layers); unpack it first with ``cpu_linear.unpack_linears``.
        """
        if self.packed_lm_head is not None or any(type(layer) is not LlamaDecoderLayer for layer in self.layers):
            raise ValueError(
                "load_hf_state_dict on a model packed for oneDNN: call "
                "pagedlab.model.cpu_linear.unpack_linears(model) first"
            )

        def g(name: str) -> torch.Tensor:
            return sd[name]

        with torch.no_grad():
            self.embed_tokens.weight.copy_(g("model.embed_tokens.weight"))
            self.norm.weight.copy_(g("model.norm.weight"))
            for i, layer in enumerate(cast(list[LlamaDecoderLayer], list(self.layers))):
                p = f"model.layers.{i}."
                layer.input_layernorm.weight.copy_(g(p + "input_layernorm.weight"))
                layer.post_attention_layernorm.weight.copy_(g(p + "post_attention_layernorm.weight"))
                layer.self_attn.qkv_proj.weight.copy_(
                    torch.cat([g(p + f"self_attn.{n}_proj.weight") for n in "qkv"], dim=0)
                )
                layer.self_attn.o_proj.weight.copy_(g(p + "self_attn.o_proj.weight"))
                layer.mlp.gate_up_proj.weight.copy_(
                    torch.cat([g(p + "mlp.gate_proj.weight"), g(p + "mlp.up_proj.weight")], dim=0)
                )
                layer.mlp.down_proj.weight.copy_(g(p + "mlp.down_proj.weight"))
            if not self.config.tie_word_embeddings and "lm_head.weight" in sd:
                self.lm_head_weight = g("lm_head.weight").clone()
