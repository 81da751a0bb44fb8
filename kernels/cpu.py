"""Paged attention for the engine on a CPU: the reference's results with less memory traffic.

The ``"cpu"`` backend of ``pagedlab.kernels.backends``. It computes what ``pagedlab.kernels.reference``
computes (tests/kernels/test_cpu_backend.py checks them equal) and reuses its pieces, changing two
things that cost time on a CPU:

* Decode: the reference pads every sequence's gathered context to the longest one in the batch, so
  a batch mixing 40-token chats with 500-token summaries copies and attends over ~2x the keys it
  needs. Here sequences are grouped by length (at most 4 groups, each padded at most 25 % beyond
  its shortest member's block count); one ``index_select`` per cache gathers every group's blocks
  and each group is one SDPA call. The index tensors are built once per step (:func:`plan_grouped_decode`)
  and reused by all layers.
* Decode, where the machine can build it: the C kernel of ``pagedlab.kernels.native``, which reads
  the blocks in place instead (no gather at all); the grouped torch path above is the fallback.
* Prefill, where the machine can build it: the C kernel of ``pagedlab.kernels.native`` again, reading
  the context's blocks in place (no gather), the queries in tiles with an online softmax.
* Prefill, the torch fallback: SDPA's grouped-query path (``enable_gqa``) falls back to an unfused kernel
  on a CPU; here each chunk's attention is two batched matmuls around a softmax with the query heads
  packed per KV head (:func:`causal_gqa_attention`), K and V never repeated.

(vLLM >= 0.6 runs CPU attention with its own C++ kernels; its ``vllm/attention/backends/torch_sdpa.py``
also loops over sequences for prefill.) Layout and argument contracts: see the reference.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pagedlab.kernels import native, reference
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.reference import prefill_pieces

__all__ = [
    "reshape_and_cache",
    "paged_decode_attention",
    "plan_decode",
    "plan_grouped_decode",
    "grouped_decode_attention",
    "DecodePlan",
    "NativeDecode",
    "paged_prefill_attention",
    "torch_prefill_attention",
    "length_groups",
    "causal_gqa_attention",
    "single_threaded",
    "SINGLE_THREAD_TOKENS",
]

#: Steps of at most this many query tokens run the torch attention paths on one thread (:func:`single_threaded`).
SINGLE_THREAD_TOKENS = 64


@contextlib.contextmanager
def single_threaded(enabled: bool = True) -> Iterator[None]:
    """Run the block on one torch thread, then restore the thread count (also on an exception).

    Under ``OMP_WAIT_POLICY=PASSIVE`` every parallel op wakes the sleeping OpenMP threads, which costs
    more than the work of a decode step's small gathers and attention (measured on 2 cores, torch
    2.13: a 1 MB ``index_select`` 25 us on one thread, 66 us on two); the matmuls keep every thread.
    Changing the count costs well under a microsecond.
    """
    threads = torch.get_num_threads()
    if not enabled or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """The reference's cache write (same contract), as one C loop where ``native.writes`` says the C kernel
    can take these tensors (the engine's layout); else the reference."""
    if native.writes(key, value, key_cache, value_cache, slot_mapping):
        native.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)
    else:
        reference.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)


def length_groups(seq_lens: list[int], block_size: int, max_groups: int = 4, waste: float = 0.25) -> list[list[int]]:
    """Sequence indices grouped by length so padding each group to its longest costs little.

    Sequences are taken longest first; a new group starts when a sequence's block count falls
    below ``(1 - waste)`` times the current group's longest, unless ``max_groups`` are open.

    Returns:
        Groups of indices into ``seq_lens`` (each sorted ascending), longest group first; every
        index appears once.
    """
    order = sorted(range(len(seq_lens)), key=lambda i: -seq_lens[i])
    groups: list[list[int]] = []
    top = 0
    for i in order:
        blocks = -(-seq_lens[i] // block_size)
        if not groups or (blocks < (1 - waste) * top and len(groups) < max_groups):
            groups.append([])
            top = blocks
        groups[-1].append(i)
    return [sorted(g) for g in groups]


@dataclass(frozen=True)
class DecodeGroup:
    """One length group of a :class:`DecodePlan`: its query rows and their padded context."""

    rows: torch.Tensor | slice  #: rows of the query/output (a slice when they are consecutive)
    num_seqs: int
    num_blocks: int  #: blocks gathered per sequence (the group's longest)
    offset: int  #: first row of the group in the step's gathered blocks
    mask: torch.Tensor  #: bool ``[num_seqs, 1, 1, num_blocks * block_size]``, True = attend


@dataclass
class DecodePlan:
    """Index tensors of one step's decode attention, built once and reused by every layer.

    ``block_ids`` (int64) lists the blocks of every group, group after group, sequence after
    sequence; each group's blocks are gathered into the rows ``[offset : offset + num_seqs *
    num_blocks]`` of two buffers (``buffers``, allocated by the first layer and reused by the others:
    a fresh multi-MB tensor per layer costs page faults). ``zero_rows`` marks sequences with
    ``seq_len == 0`` (their output is 0), or is None when there are none. (vLLM builds such per-step
    state once, in its backend's ``AttentionMetadataBuilder.build``, vLLM >= 0.9.)
    """

    block_ids: torch.Tensor
    groups: tuple[DecodeGroup, ...]
    zero_rows: torch.Tensor | None
    buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def gather_buffers(self, cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The K and V gather buffers ``[len(block_ids), block_size * Hkv * D]`` for ``cache``'s dtype."""
        row = cache[0].numel()
        if self.buffers is None or self.buffers[0].shape[1] != row or self.buffers[0].dtype != cache.dtype:
            shape = (self.block_ids.numel(), row)
            self.buffers = (cache.new_empty(shape), cache.new_empty(shape))
        return self.buffers


@dataclass(frozen=True)
class NativeDecode:
    """The plan of a step whose decode attention runs in the C kernel (``pagedlab.kernels.native``):
    the block tables and lengths as the kernel reads them (int32, contiguous) and the longest length,
    converted once per step instead of once per layer."""

    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    max_seq_len: int


def plan_decode(kv: PagedKV) -> DecodePlan | NativeDecode:
    """This step's decode plan: :class:`NativeDecode` where the C kernel can run (it built, and the cache
    is fp32, contiguous, on the CPU), else the grouped torch path's :class:`DecodePlan`."""
    if native.reads(kv):
        lens, tables = native.as_int32("seq_lens", kv.seq_lens), native.as_int32("block_tables", kv.block_tables)
        return NativeDecode(tables, lens, int(lens.max()) if lens.numel() else 0)
    return plan_grouped_decode(kv)


def paged_decode_attention(
    query: torch.Tensor, kv: PagedKV, scale: float, plan: DecodePlan | NativeDecode | None = None
) -> torch.Tensor:
    """The reference's decode attention: the C kernel where :func:`plan_decode` chose it, else
    :func:`grouped_decode_attention` (on one thread for up to ``SINGLE_THREAD_TOKENS`` sequences).

    ``plan`` (:func:`plan_decode` of the same ``kv``) is built here when not given; the engine builds
    it once per step. Shapes, dtypes and the zero row for ``seq_len == 0`` as
    ``reference.paged_decode_attention``.
    """
    if plan is None:
        plan = plan_decode(kv)
    if isinstance(plan, NativeDecode):
        if native.reads(kv, query):
            tables = PagedKV(kv.key_cache, kv.value_cache, plan.block_tables, plan.seq_lens)
            return native.paged_decode_attention(query, tables, scale, max_seq_len=plan.max_seq_len)
        plan = None  # a query the kernel cannot read (not fp32, heads not contiguous)
    with single_threaded(query.shape[0] <= SINGLE_THREAD_TOKENS):
        return grouped_decode_attention(query, kv, scale, plan if isinstance(plan, DecodePlan) else None)


def plan_grouped_decode(kv: PagedKV) -> DecodePlan:
    """The torch path's :class:`DecodePlan` of a decode batch: ``kv``'s block tables and lengths (its cache gives the
    block count and size only).

    Table entries past a sequence's length may hold any id and are clamped into ``[0, num_blocks)``
    (their rows are masked), as the reference does.
    """
    block_tables, block_size, num_blocks = kv.block_tables, kv.block_size, kv.num_blocks
    lens = [int(n) for n in kv.seq_lens.tolist()]
    dev = block_tables.device
    ids, groups, offset = [], [], 0
    for g in length_groups(lens, block_size):
        width = max(-(-lens[i] // block_size) for i in g)
        if width == 0:  # only empty sequences: zero rows, nothing to gather
            continue
        rows: torch.Tensor | slice = (
            slice(g[0], g[-1] + 1) if g[-1] - g[0] + 1 == len(g) else torch.tensor(g, device=dev)
        )
        sel = block_tables[rows] if isinstance(rows, slice) else block_tables.index_select(0, rows)
        ids.append(sel[:, :width].long().clamp(0, num_blocks - 1).reshape(-1))
        g_lens = torch.tensor([lens[i] for i in g], device=dev)
        mask = torch.arange(width * block_size, device=dev)[None, :] < g_lens[:, None]
        groups.append(DecodeGroup(rows, len(g), width, offset, mask[:, None, None, :]))
        offset += len(g) * width
    block_ids = torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long, device=dev)
    zero = [i for i, n in enumerate(lens) if n == 0]
    return DecodePlan(block_ids, tuple(groups), torch.tensor(zero, device=dev) if zero else None)


def grouped_decode_attention(
    query: torch.Tensor, kv: PagedKV, scale: float, plan: DecodePlan | None = None
) -> torch.Tensor:
    """The reference's decode attention in torch ops, with one gather of K and of V for the whole batch.

    Sequences are grouped by length (:func:`length_groups`); every group's blocks are gathered by one
    ``index_select`` per cache and each group is one SDPA call over its contiguous slice, GQA-packed
    as in the reference. ``plan`` (:func:`plan_grouped_decode` of the same ``kv``) is built here when
    not given. Shapes, dtypes and the zero row for ``seq_len == 0``
    as ``reference.paged_decode_attention``.
    """
    num_q_heads, head_dim = query.shape[1:]
    key_cache, value_cache = kv.key_cache, kv.value_cache
    block_size, num_kv_heads = kv.block_size, kv.num_kv_heads
    if plan is None:
        plan = plan_grouped_decode(kv)
    out = torch.empty_like(query)
    # Every group's blocks in one index_select per cache (one call, not one per group: 8% less
    # gather time per layer at batch 23, measured on 2 cores); each group then reads its slice.
    k_buf, v_buf = plan.gather_buffers(key_cache)
    _gather_blocks(key_cache, plan.block_ids, k_buf)
    _gather_blocks(value_cache, plan.block_ids, v_buf)
    group = num_q_heads // num_kv_heads
    for g in plan.groups:
        n, shape = g.num_seqs * g.num_blocks, (g.num_seqs, g.num_blocks * block_size, num_kv_heads, head_dim)
        k = k_buf[g.offset : g.offset + n].view(shape).transpose(1, 2)  # [S_g, Hkv, L, D]
        v = v_buf[g.offset : g.offset + n].view(shape).transpose(1, 2)
        q = query[g.rows] if isinstance(g.rows, slice) else query.index_select(0, g.rows)
        o = F.scaled_dot_product_attention(
            q.float().reshape(g.num_seqs, num_kv_heads, group, head_dim),
            k.float(),
            v.float(),
            attn_mask=g.mask,
            scale=scale,
        ).reshape(g.num_seqs, num_q_heads, head_dim)
        if isinstance(g.rows, slice):
            out[g.rows] = o.to(out.dtype)
        else:
            out.index_copy_(0, g.rows, o.to(out.dtype))
    if plan.zero_rows is not None:  # seq_len == 0: every key masked; defined as 0, as in the reference
        out.index_fill_(0, plan.zero_rows, 0.0)
    return out


def _gather_blocks(cache: torch.Tensor, block_ids: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``cache[block_ids]`` written into ``out`` ``[n, bs * Hkv * D]`` (contiguous) and returned.

    A contiguous cache is gathered as rows of a 2-D view (torch 2.13 copies these several times faster
    than rows of the 4-D tensor); any other layout through a 4-D ``index_select``.
    """
    if cache.is_contiguous():
        return torch.index_select(cache.view(cache.shape[0], -1), 0, block_ids, out=out)
    out.copy_(cache.index_select(0, block_ids).reshape(out.shape))
    return out


def paged_prefill_attention(query: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
    """Variable-length causal attention over cached context plus the chunk itself: the C kernel
    (``native.paged_prefill_attention``) where ``native.reads`` says it can take ``kv`` and ``query``, else
    :func:`torch_prefill_attention`.

    Same contract as ``reference.paged_prefill_attention``: ``query`` ``[total_q, Hq, D]``, sequence
    ``s``'s queries at ``cu_seqlens_q[s]:cu_seqlens_q[s+1]`` sit at positions ``seq_lens[s] - q_len ..``;
    returns ``[total_q, Hq, D]`` in the query's dtype.

    Raises:
        KernelInputError: ``kv.cu_seqlens_q`` is None.
    """
    if native.reads(kv, query):
        return native.paged_prefill_attention(query, kv, scale)
    return torch_prefill_attention(query, kv, scale)


def torch_prefill_attention(query: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
    """:func:`paged_prefill_attention` in torch ops: each sequence's context gathered
    (``reference.prefill_pieces``), then :func:`causal_gqa_attention`."""
    out = torch.empty_like(query)
    with single_threaded(query.shape[0] <= SINGLE_THREAD_TOKENS):
        for rows, q, k, v, ctx in prefill_pieces(query, kv):  # q [Hq, q_len, D], k/v [Hkv, seq_len, D]
            out[rows] = causal_gqa_attention(q, k, v, ctx, scale).transpose(0, 1).to(query.dtype)
    return out


#: Query rows per piece of :func:`causal_gqa_attention`: bounds its score matrices to
#: ``Hq x QUERY_CHUNK x L`` floats (4.7 MB at L = 1024) whatever the chunk length.
QUERY_CHUNK = 128


def causal_gqa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: int, scale: float) -> torch.Tensor:
    """Attention of ``q`` ``[Hq, n, D]`` over ``k``/``v`` ``[Hkv, ctx + n, D]``; query ``i`` sees keys ``0 .. ctx + i``.

    GQA-packed (the ``G = Hq / Hkv`` query heads sharing a KV head become ``G * n`` rows of one matrix)
    and written as two batched matmuls around a softmax: on a CPU this runs 1.5-3x faster than SDPA,
    whose ``enable_gqa`` path falls back to its unfused math kernel (torch 2.13). The queries go
    ``QUERY_CHUNK`` rows at a time, each piece over the keys it can see, so the scores never take more
    than a few MB (a 512-token chunk over 1,024 keys would otherwise hold ~40 MB of them). Returns
    ``[Hq, n, D]``.
    """
    n = q.shape[1]
    if n <= QUERY_CHUNK:
        return _causal_gqa_piece(q, k, v, ctx, scale)
    pieces = []
    for a in range(0, n, QUERY_CHUNK):
        b = min(n, a + QUERY_CHUNK)
        pieces.append(_causal_gqa_piece(q[:, a:b], k[:, : ctx + b], v[:, : ctx + b], ctx + a, scale))
    return torch.cat(pieces, dim=1)


def _causal_gqa_piece(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: int, scale: float) -> torch.Tensor:
    """:func:`causal_gqa_attention` of one piece: ``q`` ``[Hq, n, D]``, keys ``[Hkv, ctx + n, D]``."""
    hq, n, d = q.shape
    hkv, length, _ = k.shape
    group = hq // hkv
    pos = torch.arange(length, device=q.device)
    bias = torch.zeros(n, length, device=q.device, dtype=q.dtype)
    bias.masked_fill_(pos[None, :] > ctx + torch.arange(n, device=q.device)[:, None], float("-inf"))
    scores = torch.baddbmm(
        bias.repeat(group, 1).expand(hkv, group * n, length),
        q.reshape(hkv, group * n, d),
        k.transpose(1, 2),
        alpha=scale,
    )  # [Hkv, G*n, L]
    return torch.bmm(torch.softmax(scores, dim=-1), v).view(hq, n, d)
