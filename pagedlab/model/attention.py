"""Attention over the paged KV cache: metadata and backend dispatch.

The engine calls :func:`paged_attention` once per layer. It writes the step's new K/V rows
into the cache through the slot mapping, then runs decode attention (one query per sequence)
for the first ``num_decodes`` sequences and prefill/extend attention for the rest, with the ops of
``meta.backend`` as ``pagedlab.kernels.backends.get_backend`` selects them (``"torch"``: the PyTorch
references, CPU default; ``"triton"``: the Triton kernels, CUDA default or CPU under TRITON_INTERPRET=1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from pagedlab.kernels.backends import get_backend

#: ``(cache, block_table, tile_start, tile_size, seq_len) -> (rows [tile, Hkv, D], mask [tile])``.
KVTileLoad = Callable[[torch.Tensor, torch.Tensor, int, int, int], tuple[torch.Tensor, torch.Tensor]]

#: Lanes per tile of :func:`tiled_decode_attention`.
DECODE_TILE = 64


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
        kv_tile_load: the decode kernel's K/V tile-load slot (``pagedlab.engine.components``);
            when set, decode attention reads the cache only through it (:func:`tiled_decode_attention`).
    """

    slot_mapping: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    cu_seqlens_q: torch.Tensor
    num_decodes: int
    logits_indices: torch.Tensor
    backend: str = "torch"
    kv_tile_load: KVTileLoad | None = None

    @property
    def num_decode_tokens(self) -> int:
        return self.num_decodes


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Write ``k``/``v`` ``[T, Hkv, D]`` into the cache, then attend with ``q`` ``[T, Hq, D]``.

    Returns ``[T, Hq, D]``. Write-before-read: a sequence's new tokens see each other.
    """
    ops = get_backend(meta.backend)
    store, decode, prefill = ops.reshape_and_cache, ops.paged_decode_attention, ops.paged_prefill_attention
    store(k, v, key_cache, value_cache, meta.slot_mapping)
    nd = meta.num_decodes
    S = meta.seq_lens.shape[0]
    if meta.kv_tile_load is not None:
        tile_load = meta.kv_tile_load
        whole = getattr(tile_load, "decode_attention", None)  # lab 08's Triton tile load runs in the kernel

        def decode(
            q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, bt: torch.Tensor, sl: torch.Tensor, sc: float
        ) -> torch.Tensor:
            if whole is not None:
                out: torch.Tensor = whole(q, kc, vc, bt, sl, sc)
                return out
            return tiled_decode_attention(q, kc, vc, bt, sl, sc, tile_load)

    if nd == S:
        only_decodes: torch.Tensor = decode(q, key_cache, value_cache, meta.block_tables, meta.seq_lens, scale)
        return only_decodes
    out = torch.empty_like(q)
    if nd:
        out[:nd] = decode(q[:nd], key_cache, value_cache, meta.block_tables[:nd], meta.seq_lens[:nd], scale)
    cu = meta.cu_seqlens_q[nd:] - meta.cu_seqlens_q[nd]
    out[nd:] = prefill(q[nd:], key_cache, value_cache, meta.block_tables[nd:], cu, meta.seq_lens[nd:], scale)
    return out


def tiled_decode_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    kv_tile_load: KVTileLoad,
) -> torch.Tensor:
    """Decode attention that reads K/V only through ``kv_tile_load``, ``DECODE_TILE`` lanes at a time.

    The loop of the paged decode kernel (vLLM ``paged_attention_v1``, 0.11; the Triton kernel of
    ``pagedlab.kernels.decode_attention``): each tile of positions is loaded through the block
    table, masked lanes (``pos >= seq_len``) contribute nothing. Shapes as
    ``kernels.reference.paged_decode_attention``: query ``[S, Hq, D]``, caches
    ``[num_blocks, block_size, Hkv, D]``, returns ``[S, Hq, D]``.
    """
    num_seqs, num_q_heads, head_dim = query.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    lens = [int(n) for n in seq_lens.tolist()]
    length = max([0, *lens]) + (-max([0, *lens])) % DECODE_TILE  # padded to whole tiles
    if length == 0:
        return torch.zeros_like(query)
    k_all = key_cache.new_zeros(num_seqs, length, num_kv_heads, head_dim)
    v_all = torch.zeros_like(k_all)
    mask = torch.zeros(num_seqs, length, dtype=torch.bool)
    for s, seq_len in enumerate(lens):
        table = block_tables[s, : (seq_len + block_size - 1) // block_size].long()
        for start in range(0, seq_len, DECODE_TILE):
            k_all[s, start : start + DECODE_TILE], mask[s, start : start + DECODE_TILE] = kv_tile_load(
                key_cache, table, start, DECODE_TILE, seq_len
            )
            v_all[s, start : start + DECODE_TILE] = kv_tile_load(value_cache, table, start, DECODE_TILE, seq_len)[0]
    # GQA packing as ``kernels.reference.paged_decode_attention``: [S, Hkv, G, D] against [S, Hkv, L, D].
    q = query.float().view(num_seqs, num_kv_heads, num_q_heads // num_kv_heads, head_dim)
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k_all.transpose(1, 2).float(), v_all.transpose(1, 2).float(), attn_mask=mask[:, None, None, :], scale=scale
    )
    out = out.reshape(num_seqs, num_q_heads, head_dim).masked_fill(torch.tensor(lens)[:, None, None] == 0, 0.0)
    return out.to(query.dtype)
