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

from pagedlab.kernels import native
from pagedlab.kernels.backends import AttentionBackend, get_backend
from pagedlab.kernels.paged_kv import PagedKV

#: ``(cache, block_table, tile_start, tile_size, seq_len) -> (rows [tile, Hkv, D], mask [tile])``.
KVTileLoad = Callable[[torch.Tensor, torch.Tensor, int, int, int], tuple[torch.Tensor, torch.Tensor]]

#: ``(query [S, Hq, D], kv, scale) -> [S, Hq, D]``: a decode attention that replaces the backend's.
DecodeAttention = Callable[[torch.Tensor, PagedKV, float], torch.Tensor]

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
        kv_tile_load: the decode kernel's K/V tile-load slot (``pagedlab.parts``);
            when set, decode attention reads the cache only through it (:func:`tiled_decode_attention`).
        decode_override: when set, decode attention is this call instead of the backend's (lab 08's
            Triton tile load inside the kit's kernel, ``pagedlab.parts.kernel.GuardedTritonTileLoad``).
        decode_plan: the backend's per-step decode state (``plan_decode``), built by the first layer's
            :func:`paged_attention` and reused by the others; None until then.
    """

    slot_mapping: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    cu_seqlens_q: torch.Tensor
    num_decodes: int
    logits_indices: torch.Tensor
    backend: str = "torch"
    kv_tile_load: KVTileLoad | None = None
    decode_override: DecodeAttention | None = None
    decode_plan: object | None = None

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

    Returns ``[T, Hq, D]``. Write-before-read: a sequence's new tokens see each other. The layer's
    cache and the step's tables are handed to the ops as one ``PagedKV`` (views only: no tensor is
    allocated for it).
    """
    ops = get_backend(meta.backend)
    ops.reshape_and_cache(k, v, key_cache, value_cache, meta.slot_mapping)
    kv = PagedKV(key_cache, value_cache, meta.block_tables, meta.seq_lens, meta.cu_seqlens_q)
    nd = meta.num_decodes
    if nd == kv.num_seqs:
        return _decode(ops, q, kv, meta, scale)
    out = torch.empty_like(q)
    if nd:
        out[:nd] = _decode(ops, q[:nd], kv.select(0, nd), meta, scale)
    out[nd:] = ops.paged_prefill_attention(q[nd:], kv.select(nd), scale)
    return out


def _decode(ops: AttentionBackend, q: torch.Tensor, kv: PagedKV, meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """Decode attention of ``kv``'s sequences (all decodes) with the op ``meta`` selects: lab 08's Triton
    tile load inside the kernel, the learner's tile-load plan, or the backend's op (with its per-step
    plan, built by the first layer and kept in ``meta.decode_plan``)."""
    if meta.decode_override is not None:
        return meta.decode_override(q, kv, scale)
    if meta.kv_tile_load is not None and kv.num_seqs:
        if meta.decode_plan is None:
            meta.decode_plan = plan_tile_loads(meta.kv_tile_load, kv)
        assert isinstance(meta.decode_plan, TilePlan)
        return tiled_decode_attention(q, kv, scale, plan=meta.decode_plan)
    if ops.plan_decode is not None and kv.num_seqs:
        if meta.decode_plan is None:
            meta.decode_plan = ops.plan_decode(kv)
        out: torch.Tensor = ops.paged_decode_attention(q, kv, scale, plan=meta.decode_plan)
    else:
        out = ops.paged_decode_attention(q, kv, scale)
    return out


@dataclass(frozen=True)
class TilePlan:
    """Which cache slot each lane of each decode tile reads, as the tile-load function decided.

    ``slots``: int64 ``[S, L]`` (``L`` padded to whole tiles), the flat slot ``block * block_size +
    row`` plus one, 0 for a lane that reads nothing (a zero row); ``mask``: bool ``[S, L]``, the
    lanes that attend (``pos < seq_len``), as the tile load returned it.
    """

    slots: torch.Tensor
    mask: torch.Tensor


def plan_tile_loads(kv_tile_load: KVTileLoad, kv: PagedKV) -> TilePlan:
    """Run ``kv_tile_load`` once per tile of every decoding sequence of ``kv`` on a cache of slot numbers
    (``kv``'s block tables and lengths; its cache gives the block count and size only).

    The paged decode kernel's loop (vLLM ``paged_attention_v1``, 0.11; the Triton kernel of
    ``pagedlab.kernels.decode_attention``) loads each tile of positions through the block table,
    and every layer repeats the same lookups on its own cache. So the tile load runs here, once a
    step, on a ``[num_blocks, block_size, 1, 1]`` float64 cache whose row ``r`` of block ``b`` holds
    ``b * block_size + r + 1``: the rows it returns *are* the slots each lane reads (0 where it
    returns a zero row), and :func:`tiled_decode_attention` gathers every layer's K/V by them.
    """
    num_blocks, block_size, block_tables = kv.num_blocks, kv.block_size, kv.block_tables
    slot_cache = torch.arange(1, num_blocks * block_size + 1, dtype=torch.float64).view(num_blocks, block_size, 1, 1)
    lens = [int(n) for n in kv.seq_lens.tolist()]
    length = max([0, *lens]) + (-max([0, *lens])) % DECODE_TILE  # padded to whole tiles
    slots = torch.zeros(len(lens), length, dtype=torch.int64)
    mask = torch.zeros(len(lens), length, dtype=torch.bool)
    for s, seq_len in enumerate(lens):
        table = block_tables[s, : (seq_len + block_size - 1) // block_size].long()
        for start in range(0, seq_len, DECODE_TILE):
            rows, lanes = kv_tile_load(slot_cache, table, start, DECODE_TILE, seq_len)
            slots[s, start : start + DECODE_TILE] = rows.reshape(DECODE_TILE, -1)[:, 0].long()
            mask[s, start : start + DECODE_TILE] = lanes
    return TilePlan(slots, mask)


def tiled_decode_attention(query: torch.Tensor, kv: PagedKV, scale: float, plan: TilePlan) -> torch.Tensor:
    """Decode attention that reads K/V only through the lanes of ``plan`` (:func:`plan_tile_loads`).

    Each lane's row is gathered from the slot the tile load chose (a zero row where it chose none);
    masked lanes contribute nothing. Where the CPU path's C kernels are built (fp32 CPU tensors), the
    same lanes are read in place by ``pagedlab.kernels.native.lane_decode_attention``; the torch code
    below is the readable version (and the fallback). Shapes as ``kernels.reference.paged_decode_attention``: query
    ``[S, Hq, D]``, returns ``[S, Hq, D]``. ``kv`` is the one the plan was made from (the plan holds
    its block-table lookups; only its cache and ``seq_lens`` are read here).
    """
    num_seqs, num_q_heads, head_dim = query.shape
    key_cache, value_cache, num_kv_heads = kv.key_cache, kv.value_cache, kv.num_kv_heads
    if plan.slots.shape[1] == 0:
        return torch.zeros_like(query)
    if native.reads(kv, query):  # the same computation in C (pagedlab.kernels.native), no gather
        out: torch.Tensor = native.lane_decode_attention(query, kv, scale, plan.slots, plan.mask)
        return out
    read = plan.slots > 0
    index = (plan.slots - 1).clamp(min=0)
    zero = key_cache.new_zeros(())
    k_all = torch.where(read[..., None, None], key_cache.view(-1, num_kv_heads, head_dim)[index], zero)
    v_all = torch.where(read[..., None, None], value_cache.view(-1, num_kv_heads, head_dim)[index], zero)
    # GQA packing as ``kernels.reference.paged_decode_attention``: [S, Hkv, G, D] against [S, Hkv, L, D].
    q = query.float().view(num_seqs, num_kv_heads, num_q_heads // num_kv_heads, head_dim)
    mask = plan.mask[:, None, None, :]
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k_all.transpose(1, 2).float(), v_all.transpose(1, 2).float(), attn_mask=mask, scale=scale
    )
    out = out.reshape(num_seqs, num_q_heads, head_dim).masked_fill((kv.seq_lens == 0)[:, None, None], 0.0)
    return out.to(query.dtype)
