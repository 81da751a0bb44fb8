"""PyTorch reference implementations of the paged-attention kernels.

These are the ground truth the Triton kernels are tested against, and the path the engine
runs on CPU. They read the KV cache *through the block table* exactly as the kernels do,
but they gather each sequence's blocks into a contiguous tensor first (which a real kernel
avoids) and then call ``torch.nn.functional.scaled_dot_product_attention``.

Layout (vLLM's, per layer): ``key_cache`` and ``value_cache`` are
``[num_blocks, block_size, num_kv_heads, head_dim]``; token position ``p`` of a sequence
lives at ``block_table[p // block_size]``, row ``p % block_size``. The attention ops take the
cache, block tables and lengths as one :class:`~pagedlab.kernels.paged_kv.PagedKV` ``kv``.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from pagedlab.kernels.paged_kv import PagedKV


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write new K/V rows into the paged cache through the slot mapping (vLLM ``reshape_and_cache``).

    Args:
        key, value: ``[num_tokens, num_kv_heads, head_dim]``.
        key_cache, value_cache: ``[num_blocks, block_size, num_kv_heads, head_dim]``, written in place.
        slot_mapping: int64 ``[num_tokens]``; ``slot = block_id * block_size + offset``.
            A slot of -1 marks padding and is skipped.
    """
    num_blocks, block_size = key_cache.shape[:2]
    valid = slot_mapping >= 0
    if not bool(valid.all()):
        key, value, slot_mapping = key[valid], value[valid], slot_mapping[valid]
    flat_k = key_cache.view(num_blocks * block_size, *key_cache.shape[2:])
    flat_v = value_cache.view(num_blocks * block_size, *value_cache.shape[2:])
    flat_k.index_copy_(0, slot_mapping, key.to(key_cache.dtype))
    flat_v.index_copy_(0, slot_mapping, value.to(value_cache.dtype))


def gather_kv(cache: torch.Tensor, block_table: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The first ``seq_len`` rows of one sequence, read through its block table.

    Args:
        cache: ``[num_blocks, block_size, num_kv_heads, head_dim]``.
        block_table: int ``[>= ceil(seq_len / block_size)]`` physical block ids.
    Returns:
        ``[seq_len, num_kv_heads, head_dim]`` (a copy).
    """
    block_size = cache.shape[1]
    n = (seq_len + block_size - 1) // block_size
    blocks = cache.index_select(0, block_table[:n].long())
    return blocks.reshape(n * block_size, *cache.shape[2:])[:seq_len]


def load_kv_tile(
    cache: torch.Tensor, block_table: torch.Tensor, tile_start: int, tile_size: int, seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The decode kernel's tile load (lab 08; the ``kv_tile_load`` slot's kit part): rows
    ``[tile_size, num_kv_heads, head_dim]`` of positions ``tile_start ..`` and their mask
    ``pos < seq_len``. Masked lanes read zeros and never index ``block_table``."""
    block_size = cache.shape[1]
    pos = tile_start + torch.arange(tile_size)
    mask = pos < seq_len
    logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))
    rows = cache[block_table[logical], pos % block_size]
    return torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype)), mask


def paged_decode_attention(query: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
    """One query token per sequence attends to its whole cached context.

    Args:
        query: ``[num_seqs, num_q_heads, head_dim]``.
        kv: the cache, ``block_tables`` and ``seq_lens`` (context length including the query token;
            0 gives a zero row); shapes in ``pagedlab.kernels.paged_kv``.
        scale: softmax scale, usually ``head_dim ** -0.5``.
    Returns:
        ``[num_seqs, num_q_heads, head_dim]`` in the query's dtype.
    """
    num_seqs, num_q_heads, head_dim = query.shape
    max_len = int(kv.seq_lens.max()) if num_seqs else 0
    if max_len == 0:  # nothing to attend to (or no sequences)
        return torch.zeros_like(query)
    block_size, num_kv_heads = kv.block_size, kv.num_kv_heads
    max_blocks = (max_len + block_size - 1) // block_size
    # Gather every sequence's blocks at once: [S, max_blocks] ids -> [S, max_blocks * bs, H, D].
    # Table entries past a sequence's length may hold any id; their rows are masked out below.
    ids = kv.block_tables[:, :max_blocks].long().clamp(0, kv.num_blocks - 1).reshape(-1)
    k = kv.key_cache.index_select(0, ids).view(num_seqs, max_blocks * block_size, num_kv_heads, head_dim)
    v = kv.value_cache.index_select(0, ids).view(num_seqs, max_blocks * block_size, num_kv_heads, head_dim)
    length = max_blocks * block_size
    lens = kv.seq_lens.to(device=query.device, dtype=torch.long)
    mask = torch.arange(length, device=query.device).unsqueeze(0) < lens.unsqueeze(1)  # [S, L]
    # GQA packing (as the Triton kernel does): the G = Hq / Hkv query heads that share a KV head
    # become G query rows of that head, so K/V are read once per KV head and never repeated.
    group = num_q_heads // num_kv_heads
    q = query.float().view(num_seqs, num_kv_heads, group, head_dim)  # [S, Hkv, G, D]
    out = F.scaled_dot_product_attention(
        q,
        k.transpose(1, 2).float(),
        v.transpose(1, 2).float(),  # [S, Hkv, L, D]
        attn_mask=mask[:, None, None, :],
        scale=scale,
    )
    out = out.reshape(num_seqs, num_q_heads, head_dim)
    # seq_len == 0 masks a whole row; define its output as 0 (as the Triton kernel does), not NaN.
    out = out.masked_fill((lens == 0)[:, None, None], 0.0)
    return out.to(query.dtype)


def paged_prefill_attention(query: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
    """Variable-length queries (prefill chunks) attend causally to cached context plus themselves.

    Query ``i`` of sequence ``s`` sits at position ``context_len + i`` where
    ``context_len = seq_lens[s] - q_len(s)``: tokens served from the prefix cache or computed by
    earlier chunks are read through the block table, never recomputed.

    Args:
        query: ``[total_q, num_q_heads, head_dim]``, sequences concatenated.
        kv: the cache (the new tokens' K/V already written by ``reshape_and_cache``), ``block_tables``,
            ``seq_lens`` (total KV length after this step) and ``cu_seqlens_q`` (``[num_seqs + 1]``
            prefix sums of query lengths; ``q_len`` may be 0); shapes in ``pagedlab.kernels.paged_kv``.
        scale: softmax scale.
    Returns:
        ``[total_q, num_q_heads, head_dim]``.
    Raises:
        KernelInputError: ``kv.cu_seqlens_q`` is None.
    """
    out = torch.empty_like(query)
    gqa = query.shape[1] != kv.num_kv_heads
    for rows, q, k, v, ctx in prefill_pieces(query, kv):
        # Causal with an offset: query i may see keys 0 .. ctx + i.
        q_len, seq_len, dev = q.shape[1], k.shape[1], query.device
        mask = torch.arange(seq_len, device=dev).unsqueeze(0) <= (ctx + torch.arange(q_len, device=dev)).unsqueeze(1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
        out[rows] = o.transpose(0, 1).to(query.dtype)
    return out


def prefill_pieces(
    query: torch.Tensor, kv: PagedKV
) -> Iterator[tuple[slice, torch.Tensor, torch.Tensor, torch.Tensor, int]]:
    """Each sequence of a prefill batch that has queries, as ``(rows, q, k, v, context_len)``.

    ``rows``: its rows of ``query``; ``q`` ``[Hq, q_len, D]``; ``k``, ``v`` ``[Hkv, seq_len, D]`` read
    through its block table; all fp32. ``context_len = seq_len - q_len`` tokens precede the queries.

    Raises:
        KernelInputError: ``kv.cu_seqlens_q`` is None.
    """
    starts = kv.query_starts()
    for s, seq_len in enumerate(kv.seq_lens.tolist()):
        q0, q1 = starts[s], starts[s + 1]
        if q1 == q0:
            continue
        k = gather_kv(kv.key_cache, kv.block_tables[s], seq_len).transpose(0, 1).float()
        v = gather_kv(kv.value_cache, kv.block_tables[s], seq_len).transpose(0, 1).float()
        yield slice(q0, q1), query[q0:q1].transpose(0, 1).float(), k, v, seq_len - (q1 - q0)
