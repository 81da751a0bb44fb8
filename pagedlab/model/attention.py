"""Attention over the paged KV cache: metadata and backend dispatch.

The engine calls :func:`paged_attention` once per layer. It writes the step's new K/V rows
into the cache through the slot mapping, then runs decode attention (one query per sequence)
for the first ``num_decodes`` sequences and prefill/extend attention for the rest, with the ops of
``meta.backend`` as ``pagedlab.kernels.backends.get_backend`` selects them (``"torch"``: the PyTorch
references, CPU default; ``"triton"``: the Triton kernels, CUDA default or CPU under TRITON_INTERPRET=1).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pagedlab.kernels.backends import get_backend


@dataclass
class AttentionMetadata:
    """Where each scheduled token goes and what it may attend to.

    Sequences are ordered decodes first. For ``T`` tokens and ``S`` sequences:
        slot_mapping: int64 ``[T]``, ``block_table[pos // bs] * bs + pos % bs`` per token.
        block_tables: int32 ``[S, max_blocks]`` (rows padded with 0).
        seq_lens: int32 ``[S]``, KV length of each sequence after this step.
        cu_seqlens_q: int32 ``[S + 1]``, prefix sums of scheduled tokens per sequence.
        num_decodes: sequences ``[0, num_decodes)`` have exactly one query token.
        num_decode_tokens: equals ``num_decodes``.
        logits_indices: int64 rows of the flat batch whose logits are sampled.
        backend: ``"torch"`` or ``"triton"``.
    """

    slot_mapping: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    cu_seqlens_q: torch.Tensor
    num_decodes: int
    logits_indices: torch.Tensor
    backend: str = "torch"

    @property
    def num_decode_tokens(self) -> int:
        return self.num_decodes


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_cache: torch.Tensor,
                    value_cache: torch.Tensor, meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """Write ``k``/``v`` ``[T, Hkv, D]`` into the cache, then attend with ``q`` ``[T, Hq, D]``.

    Returns ``[T, Hq, D]``. Write-before-read: a sequence's new tokens see each other.
    """
    ops = get_backend(meta.backend)
    store, decode, prefill = ops.reshape_and_cache, ops.paged_decode_attention, ops.paged_prefill_attention
    store(k, v, key_cache, value_cache, meta.slot_mapping)
    nd = meta.num_decodes
    S = meta.seq_lens.shape[0]
    if nd == S:
        only_decodes: torch.Tensor = decode(q, key_cache, value_cache, meta.block_tables, meta.seq_lens, scale)
        return only_decodes
    out = torch.empty_like(q)
    if nd:
        out[:nd] = decode(q[:nd], key_cache, value_cache, meta.block_tables[:nd], meta.seq_lens[:nd], scale)
    cu = meta.cu_seqlens_q[nd:] - meta.cu_seqlens_q[nd]
    out[nd:] = prefill(q[nd:], key_cache, value_cache, meta.block_tables[nd:], cu, meta.seq_lens[nd:], scale)
    return out
