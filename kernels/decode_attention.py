"""Paged decode attention in Triton: one new query token per sequence reads its context through the block table.

Design source: vLLM's ``triton_unified_attention`` (GQA heads packed into the rows of a tile, a
token tile independent of the cache block size, per-token block-table lookups, int64 addresses)
and SGLang/LightLLM's ``decode_attention`` (flash-decoding: split the context, merge by
log-sum-exp). Written from those designs for teaching, not copied.

The story of the kernel
-----------------------
The cache is ``[num_blocks, block_size, num_kv_heads, head_dim]``. A sequence's token ``p`` lives in
physical block ``block_tables[seq, p // block_size]`` at row ``p % block_size``. The kernel never
copies a sequence's blocks into a contiguous buffer (that is what the torch reference does);
each program walks the table and loads K/V rows straight from wherever the blocks are.

* **Grid** ``(num_seqs, num_kv_heads, NUM_SPLITS)``. With grouped-query attention
  ``QUERIES_PER_KV = Hq / Hkv`` query heads read the same K/V, so one program serves all of them:
  they become the rows of a ``[BLOCK_H, head_dim]`` query tile and each K/V tile is loaded once
  for the whole group (SmolLM2: 3 query heads per KV head).
* **Token tiles** of ``BLOCK_N`` positions, independent of ``block_size``: each position looks up its
  own block id, so block sizes 1, 16 or 32 give the same answer.
* **Masks**: positions ``>= seq_len`` (the partial last block, the tail of the last tile) are
  masked *in the load* with ``other=0`` (not only in the scores: ``0 * NaN`` from a stale slot
  would still poison ``P @ V``), and so are the padded head dims (80 and 96 are padded to 128).
* **Online softmax** in fp32 (base 2: scores are pre-multiplied by ``scale * log2(e)``).
* **Split-KV** (flash-decoding): with ``NUM_SPLITS > 1`` each program handles a contiguous chunk
  of the context and writes a normalised partial output and its log-sum-exp; ``_merge_splits_kernel``
  combines them. A split can be empty (short sequence, many splits): it writes ``lse = -inf``
  and zeros, and the merge gives it weight 0.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from pagedlab.errors import KernelInputError
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.runtime import launcher, next_power_of_2, runnable, running_interpreted
from pagedlab.kernels.validate import validate_decode_inputs

LOG2E = 1.4426950408889634


@triton.jit
def _paged_decode_kernel(
    out_ptr,
    part_out_ptr,
    part_lse_ptr,
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    qk_scale,  # softmax scale * log2(e)
    stride_q_seq,
    stride_q_head,
    stride_q_dim,
    stride_k_block,
    stride_k_slot,
    stride_k_head,
    stride_k_dim,
    stride_v_block,
    stride_v_slot,
    stride_v_head,
    stride_v_dim,
    stride_bt_seq,
    stride_bt_block,
    stride_o_seq,
    stride_o_head,
    stride_o_dim,
    stride_po_seq,
    stride_po_head,
    stride_po_split,  # partial outputs [S, Hq, NUM_SPLITS, D]
    stride_pl_seq,
    stride_pl_head,  # partial lse [S, Hq, NUM_SPLITS]
    QUERIES_PER_KV: tl.constexpr,  # Hq // Hkv
    BLOCK_H: tl.constexpr,  # QUERIES_PER_KV padded to a power of two (>= 16)
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_P: tl.constexpr,  # HEAD_DIM padded to a power of two
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    BLOCK_N: tl.constexpr,  # tokens per loop iteration
    NUM_SPLITS: tl.constexpr,
    UPCAST: tl.constexpr,  # dots in fp32 (bf16 in the interpreter)
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs: no TF32 on the GPU
    LOAD_TILE: tl.constexpr = None,  # a learner's @triton.jit K/V tile load (lab 08), or None: the kit's loads
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)

    # Rows of the tile are the query heads of this KV head's group; padded rows load zeros and are
    # never stored. Columns are head dims, padded to a power of two and masked.
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, HEAD_DIM_P)
    offs_n = tl.arange(0, BLOCK_N)
    head_mask = offs_h < QUERIES_PER_KV
    dim_mask = offs_d < HEAD_DIM
    q_heads = kv_head * QUERIES_PER_KV + offs_h

    # This program's share of the context: ceil(seq_len / NUM_SPLITS) rounded up to whole tiles, so
    # a split ends on a tile boundary; with more splits than tiles the last splits are empty
    # (start >= end).
    seq_len = tl.load(seq_lens_ptr + seq).to(tl.int32)
    tiles_per_split = ((seq_len + NUM_SPLITS - 1) // NUM_SPLITS + BLOCK_N - 1) // BLOCK_N
    tokens_per_split = tiles_per_split * BLOCK_N
    split_start = split * tokens_per_split
    split_end = tl.minimum(split_start + tokens_per_split, seq_len)

    q = tl.load(
        q_ptr + seq * stride_q_seq + q_heads[:, None] * stride_q_head + offs_d[None, :] * stride_q_dim,
        mask=head_mask[:, None] & dim_mask[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)

    # Running softmax state per row: max m_i, normaliser l_i, un-normalised output acc (all fp32).
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM_P], dtype=tl.float32)

    block_table_row = block_tables_ptr + seq.to(tl.int64) * stride_bt_seq
    for start_n in range(split_start, split_end, BLOCK_N):
        # Each position finds its own physical block. Ids are widened to int64 *before* they are
        # multiplied by a stride: block_id * stride overflows int32 in a large cache (vLLM #47671).
        pos = start_n + offs_n
        pos_mask = pos < split_end
        block_ids = tl.load(block_table_row + (pos // BLOCK_SIZE) * stride_bt_block, mask=pos_mask, other=0)
        block_ids = block_ids.to(tl.int64)
        slot_in_block = pos % BLOCK_SIZE

        # K is loaded transposed, [HEAD_DIM_P, BLOCK_N], so that q @ k is a plain tl.dot.
        k_ptrs = (
            k_cache_ptr
            + block_ids[None, :] * stride_k_block
            + slot_in_block[None, :] * stride_k_slot
            + kv_head * stride_k_head
            + offs_d[:, None] * stride_k_dim
        )
        if LOAD_TILE is None:
            k = tl.load(k_ptrs, mask=dim_mask[:, None] & pos_mask[None, :], other=0.0)
        else:  # the learner's tile load (power-of-two head dim, contiguous: the launcher checks)
            k_rows, _ = LOAD_TILE(
                k_cache_ptr, block_table_row, start_n, split_end, kv_head,
                stride_k_block, stride_k_slot, stride_k_head, BLOCK_SIZE, BLOCK_N, HEAD_DIM_P,
            )  # fmt: skip
            k = tl.trans(k_rows)
        if UPCAST:
            k = k.to(tl.float32)
        scores = tl.dot(q, k, input_precision=DOT_PRECISION) * qk_scale
        scores = tl.where(pos_mask[None, :], scores, float("-inf"))

        # Online softmax. The tile's first position is < split_end, so every row has a finite
        # maximum and m_new is never -inf: no NaN from (-inf) - (-inf). On the first tile
        # m_i = -inf gives alpha = 0, which clears the (zero) initial state.
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)

        v_ptrs = (
            v_cache_ptr
            + block_ids[:, None] * stride_v_block
            + slot_in_block[:, None] * stride_v_slot
            + kv_head * stride_v_head
            + offs_d[None, :] * stride_v_dim
        )
        if LOAD_TILE is None:
            v = tl.load(v_ptrs, mask=pos_mask[:, None] & dim_mask[None, :], other=0.0)
        else:
            v, _ = LOAD_TILE(
                v_cache_ptr, block_table_row, start_n, split_end, kv_head,
                stride_v_block, stride_v_slot, stride_v_head, BLOCK_SIZE, BLOCK_N, HEAD_DIM_P,
            )  # fmt: skip
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new

    # An empty split (or seq_len == 0) never entered the loop: l_i = 0. Divide by 1 instead so
    # the output is 0, not 0/0.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_safe[:, None]
    store_mask = head_mask[:, None] & dim_mask[None, :]
    if NUM_SPLITS == 1:
        o_ptrs = out_ptr + seq * stride_o_seq + q_heads[:, None] * stride_o_head + offs_d[None, :] * stride_o_dim
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=store_mask)
    else:
        # Flash-decoding stage 1: the normalised partial output and its log2-sum-exp. The launcher
        # allocates the scratch contiguous, so head dims and splits have stride 1 there.
        po_ptrs = (
            part_out_ptr
            + seq * stride_po_seq
            + q_heads[:, None] * stride_po_head
            + split * stride_po_split
            + offs_d[None, :]
        )
        tl.store(po_ptrs, out, mask=store_mask)
        lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.log2(l_safe))
        tl.store(part_lse_ptr + seq * stride_pl_seq + q_heads * stride_pl_head + split, lse, mask=head_mask)


@triton.jit
def _merge_splits_kernel(
    out_ptr,
    part_out_ptr,
    part_lse_ptr,
    stride_o_seq,
    stride_o_head,
    stride_o_dim,
    stride_po_seq,
    stride_po_head,
    stride_po_split,
    stride_pl_seq,
    stride_pl_head,
    NUM_SPLITS: tl.constexpr,
    SPLITS_P: tl.constexpr,  # NUM_SPLITS padded to a power of two
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_P: tl.constexpr,
):
    # Flash-decoding stage 2, one program per (sequence, query head):
    #   out = sum_s 2^(lse_s - lse_max) * o_s / sum_s 2^(lse_s - lse_max).
    seq = tl.program_id(0)
    head = tl.program_id(1)
    offs_s = tl.arange(0, SPLITS_P)
    offs_d = tl.arange(0, HEAD_DIM_P)
    split_mask = offs_s < NUM_SPLITS
    dim_mask = offs_d < HEAD_DIM

    lse = tl.load(
        part_lse_ptr + seq * stride_pl_seq + head * stride_pl_head + offs_s, mask=split_mask, other=float("-inf")
    )
    # All splits empty only when seq_len == 0; use 0 as the reference max so nothing is NaN.
    lse_max = tl.max(lse, 0)
    lse_max = tl.where(lse_max == float("-inf"), 0.0, lse_max)
    weight = tl.exp2(lse - lse_max)  # an empty split (lse = -inf) weighs 0

    part = tl.load(
        part_out_ptr
        + seq * stride_po_seq
        + head * stride_po_head
        + offs_s[:, None] * stride_po_split
        + offs_d[None, :],
        mask=split_mask[:, None] & dim_mask[None, :],
        other=0.0,
    )
    # Never multiply an empty split's scratch, even by 0: 0 * NaN = NaN.
    part = tl.where(weight[:, None] > 0.0, part, 0.0)
    total = tl.sum(weight, 0)
    out = tl.sum(weight[:, None] * part, 0) / tl.where(total == 0.0, 1.0, total)
    tl.store(
        out_ptr + seq * stride_o_seq + head * stride_o_head + offs_d * stride_o_dim,
        out.to(out_ptr.dtype.element_ty),
        mask=dim_mask,
    )


def decode_block_sizes(
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    interpreted: bool,
    block_n: int | None = None,
    dtype: torch.dtype = torch.float16,
) -> dict:
    """The constexpr tile sizes the launcher uses (also used by the offline compile test)."""
    group = num_q_heads // num_kv_heads
    if block_n is None:
        # The interpreter pays ~6 ms per loop iteration whatever the tile size: use big tiles there.
        # On a GPU, fp32 tiles take twice the registers and shared memory: halve them.
        block_n = 128 if interpreted else (32 if dtype == torch.float32 else 64)
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two >= 16 (tl.dot needs K >= 16 on NVIDIA), got {block_n}")
    return dict(
        QUERIES_PER_KV=group,
        BLOCK_H=max(16, next_power_of_2(group)),
        HEAD_DIM=head_dim,
        HEAD_DIM_P=max(16, next_power_of_2(head_dim)),
        BLOCK_N=block_n,
    )


def attention_launch_options(
    query: torch.Tensor, kv: PagedKV, interpreted: bool, num_warps: int | None, num_stages: int | None
) -> dict[str, Any]:
    """The launch keywords the decode and prefill kernels share: ``BLOCK_SIZE`` (tokens per cache
    block), ``UPCAST`` (bf16 dots in fp32 under the interpreter, which multiplies bf16 bit patterns
    as integers: triton #11584), ``DOT_PRECISION`` (``"ieee"`` for fp32: no TF32 on the GPU) and the
    GPU options ``num_warps``/``num_stages`` that are set."""
    opts: dict[str, Any] = {k: v for k, v in (("num_warps", num_warps), ("num_stages", num_stages)) if v is not None}
    return dict(
        BLOCK_SIZE=kv.block_size,
        UPCAST=interpreted and query.dtype == torch.bfloat16,
        DOT_PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        **opts,
    )


def paged_decode_attention(
    query: torch.Tensor,
    kv: PagedKV,
    scale: float,
    *,
    num_splits: int = 1,
    block_n: int | None = None,
    check_values: bool = True,
    num_warps: int | None = None,
    num_stages: int | None = None,
    load_tile: object = None,
) -> torch.Tensor:
    """Triton paged decode attention (same contract as ``reference.paged_decode_attention``).

    Args:
        query: ``[num_seqs, num_q_heads, head_dim]``, fp16, bf16 or fp32 (same dtype as the cache).
        kv: the cache (any strides), ``block_tables`` and ``seq_lens`` (context length including the
            new token; 0 gives a zero output row); shapes in ``pagedlab.kernels.paged_kv``.
        scale: softmax scale, usually ``head_dim ** -0.5``.
        num_splits: split-KV factor (flash-decoding); > 1 helps when ``num_seqs * num_kv_heads``
            programs cannot fill the GPU. Any value >= 1 is correct, even more splits than tiles.
        block_n: tokens per loop iteration (power of two >= 16); default 64 on GPU, 128 interpreted.
        check_values: also check the index tensors' values on the host (one sync on CUDA).
        num_warps, num_stages: GPU launch options for tuning (Triton's defaults when None).
        load_tile: a ``@triton.jit`` K/V tile load with lab 08's signature (exercise
            ``08.triton_load_kv_tile``) used instead of the kernel's own loads (passed as a
            ``tl.constexpr``); it needs a power-of-two head dim >= 16, contiguous head dims and
            block-table rows.
    Returns:
        ``[num_seqs, num_q_heads, head_dim]`` in the query's dtype.
    Raises:
        KernelInputError: bad shapes, dtypes, head size, lengths or block ids (before launch).
        KernelUnavailableError: CPU tensors without ``TRITON_INTERPRET=1`` (see ``runtime``).
    """
    # One piece: check, size the launch, launch with every stride spelled out (as vLLM's host wrappers).
    validate_decode_inputs(query, kv, scale, check_values=check_values)
    if int(num_splits) < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    num_splits = int(num_splits)
    kernel = launcher(_paged_decode_kernel, query)
    interpreted = running_interpreted(_paged_decode_kernel, query)
    num_seqs, num_q_heads, head_dim = query.shape
    out = torch.empty((num_seqs, num_q_heads, head_dim), dtype=query.dtype, device=query.device)
    if num_seqs == 0:
        return out
    meta = decode_block_sizes(num_q_heads, kv.num_kv_heads, head_dim, interpreted, block_n, query.dtype)
    if num_splits > 1:
        part_out = torch.empty((num_seqs, num_q_heads, num_splits, head_dim), dtype=torch.float32, device=query.device)
        part_lse = torch.empty((num_seqs, num_q_heads, num_splits), dtype=torch.float32, device=query.device)
    else:
        part_out, part_lse = out, out  # unused placeholders
    opts = attention_launch_options(query, kv, interpreted, num_warps, num_stages)
    if load_tile is not None:
        _check_tile_load_layout(kv, head_dim, meta["HEAD_DIM_P"])
        opts["LOAD_TILE"] = runnable(load_tile)  # run as the kernel runs (the process's Triton mode)
    kernel[(num_seqs, kv.num_kv_heads, num_splits)](
        out,
        part_out,
        part_lse,
        query,
        kv.key_cache,
        kv.value_cache,
        kv.block_tables,
        kv.seq_lens,
        float(scale) * LOG2E,
        *query.stride(),
        *kv.strides(),
        *out.stride(),
        *(part_out.stride()[:3] if num_splits > 1 else (0, 0, 0)),
        *(part_lse.stride()[:2] if num_splits > 1 else (0, 0)),
        NUM_SPLITS=num_splits,
        **meta,
        **opts,
    )
    if num_splits > 1:
        merge = launcher(_merge_splits_kernel, query)
        merge[(num_seqs, num_q_heads)](
            out,
            part_out,
            part_lse,
            *out.stride(),
            *part_out.stride()[:3],
            *part_lse.stride()[:2],
            NUM_SPLITS=num_splits,
            SPLITS_P=next_power_of_2(num_splits),
            HEAD_DIM=head_dim,
            HEAD_DIM_P=meta["HEAD_DIM_P"],
        )
    return out


def _check_tile_load_layout(kv: PagedKV, head_dim: int, head_dim_p: int) -> None:
    """What lab 08's tile load assumes: no padded head dims, head dims and block-table rows contiguous.

    Raises:
        KernelInputError: the layout does not fit.
    """
    if (
        head_dim != head_dim_p
        or kv.key_cache.stride(3) != 1
        or kv.value_cache.stride(3) != 1
        or kv.block_tables.stride(1) != 1
    ):
        raise KernelInputError(
            f"a learner's tile load needs a power-of-two head dim >= 16 (got {head_dim}) and contiguous head "
            "dims and block-table rows"
        )


def choose_num_splits(num_seqs: int, num_kv_heads: int, max_seq_len: int, num_sms: int, block_n: int = 64) -> int:
    """A simple flash-decoding heuristic: split until the grid covers the GPU about twice.

    Never more splits than tiles of the longest sequence (they would be empty) and at most 16.
    """
    programs = max(1, num_seqs * num_kv_heads)
    want = math.ceil(2 * num_sms / programs)
    return max(1, min(want, 16, math.ceil(max(1, max_seq_len) / block_n)))
