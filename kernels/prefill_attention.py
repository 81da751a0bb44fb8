"""Paged prefill / extend attention in Triton: variable-length query chunks attend causally to the cache.

Design source: vLLM's ``triton_unified_attention`` (queries of one sequence and the query heads of
one KV head packed into the rows of a tile, ``context_len = seq_len - query_len``, causal mask
``key_pos <= context_len + q_idx``, all K/V read through the block table) and LightLLM's
``prefix_prefill``. Written from those designs for teaching, not copied.

The story of the kernel
-----------------------
A scheduler step may give a sequence ``q_len`` new tokens (a whole prompt, one chunk of a long
prompt, or the tail after a prefix-cache hit). Their K/V rows are written into the cache first
(``reshape_and_cache``), so *every* key the queries may see is in the cache: the earlier chunks,
the prefix-cache hit, and the new tokens themselves. The kernel therefore reads all keys through
the block table and needs only one rule: query ``i`` of the chunk sits at position
``context_len + i`` and may see keys ``0 .. context_len + i``.

* **Varlen queries**: the queries of all sequences are concatenated; ``cu_seqlens_q`` holds the
  prefix sums, so sequence ``s`` owns query rows ``cu_seqlens_q[s] .. cu_seqlens_q[s + 1]``.
  ``q_len`` may be 0 (that sequence's programs return at once).
* **Grid** ``(num_seqs, cdiv(max_q_len, BLOCK_Q), num_kv_heads)``. A program takes ``BLOCK_Q``
  query tokens times the ``QUERIES_PER_KV`` query heads of one KV head: row ``m`` of its tile is
  token ``m // GROUP_P`` and head ``m % GROUP_P``, so K/V tiles are loaded once per group.
* **Key loop** from 0 to the position of the program's last query (causality: later keys can only
  be masked), in tiles of ``BLOCK_N`` keys; each key finds its block in the table (tile size and
  block size are independent). Loads are masked (``other=0``), scores get ``-inf`` where
  ``key_pos > query_pos``, and the softmax is the same fp32 online softmax as in decode.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from pagedlab.kernels.decode_attention import LOG2E, attention_launch_options
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.runtime import launcher, next_power_of_2, running_interpreted
from pagedlab.kernels.validate import validate_prefill_inputs


@triton.jit
def _paged_prefill_kernel(
    out_ptr,
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    cu_seqlens_q_ptr,
    qk_scale,  # softmax scale * log2(e)
    stride_q_tok,
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
    stride_o_tok,
    stride_o_head,
    stride_o_dim,
    QUERIES_PER_KV: tl.constexpr,  # Hq // Hkv
    GROUP_P: tl.constexpr,  # QUERIES_PER_KV padded to a power of two
    BLOCK_Q: tl.constexpr,  # query tokens per program
    BLOCK_M: tl.constexpr,  # rows of the tile = BLOCK_Q * GROUP_P
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_P: tl.constexpr,  # HEAD_DIM padded to a power of two
    BLOCK_SIZE: tl.constexpr,  # tokens per cache block
    BLOCK_N: tl.constexpr,  # keys per loop iteration
    UPCAST: tl.constexpr,  # dots in fp32 (bf16 in the interpreter)
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs: no TF32 on the GPU
):
    seq = tl.program_id(0)
    q_block = tl.program_id(1)
    kv_head = tl.program_id(2)

    # Where this sequence's queries are and where they sit in the sequence. The grid is sized for
    # the longest chunk; programs past the end of a shorter one (or of q_len = 0) have no work.
    q_start = tl.load(cu_seqlens_q_ptr + seq).to(tl.int32)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1).to(tl.int32) - q_start
    if q_block * BLOCK_Q >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + seq).to(tl.int32)
    context_len = seq_len - q_len

    # Rows: BLOCK_Q tokens x GROUP_P heads. Padded heads and tokens past q_len load zeros and are
    # never stored.
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM_P)
    offs_n = tl.arange(0, BLOCK_N)
    q_idx = q_block * BLOCK_Q + offs_m // GROUP_P
    head_in_group = offs_m % GROUP_P
    row_mask = (q_idx < q_len) & (head_in_group < QUERIES_PER_KV)
    dim_mask = offs_d < HEAD_DIM
    q_pos = context_len + q_idx  # position of each row's query in its sequence
    q_rows = (q_start + q_idx).to(tl.int64)
    q_heads = kv_head * QUERIES_PER_KV + head_in_group

    q = tl.load(
        q_ptr + q_rows[:, None] * stride_q_tok + q_heads[:, None] * stride_q_head + offs_d[None, :] * stride_q_dim,
        mask=row_mask[:, None] & dim_mask[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)

    # Running softmax state per row (fp32), exactly as in decode: max m_i, normaliser l_i, output acc.
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_P], dtype=tl.float32)

    # Keys beyond the last query of this program are in the future of every row: stop there.
    last_q = tl.minimum((q_block + 1) * BLOCK_Q, q_len) - 1
    kv_end = context_len + last_q + 1
    block_table_row = block_tables_ptr + seq.to(tl.int64) * stride_bt_seq
    for start_n in range(0, kv_end, BLOCK_N):
        key_pos = start_n + offs_n
        key_mask = key_pos < kv_end
        block_ids = tl.load(block_table_row + (key_pos // BLOCK_SIZE) * stride_bt_block, mask=key_mask, other=0)
        block_ids = block_ids.to(tl.int64)  # int64 before the stride multiply
        slot_in_block = key_pos % BLOCK_SIZE

        k_ptrs = (
            k_cache_ptr
            + block_ids[None, :] * stride_k_block
            + slot_in_block[None, :] * stride_k_slot
            + kv_head * stride_k_head
            + offs_d[:, None] * stride_k_dim
        )
        k = tl.load(k_ptrs, mask=dim_mask[:, None] & key_mask[None, :], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
        scores = tl.dot(q, k, input_precision=DOT_PRECISION) * qk_scale
        # Causal with a context offset. Every row sees key 0, which is in the first tile, so after
        # that tile m_i is finite and a row that is fully masked in a later tile gets alpha = 1, p = 0.
        visible = (key_pos[None, :] <= q_pos[:, None]) & key_mask[None, :]
        scores = tl.where(visible, scores, float("-inf"))

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
        v = tl.load(v_ptrs, mask=key_mask[:, None] & dim_mask[None, :], other=0.0)
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new

    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_ptrs = (
        out_ptr + q_rows[:, None] * stride_o_tok + q_heads[:, None] * stride_o_head + offs_d[None, :] * stride_o_dim
    )
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & dim_mask[None, :])


def prefill_block_sizes(
    num_q_heads: int,
    num_kv_heads: int,
    head_dim: int,
    interpreted: bool,
    block_m: int | None = None,
    block_n: int | None = None,
    dtype: torch.dtype = torch.float16,
) -> dict:
    """The constexpr tile sizes the launcher uses (also used by the offline compile test).

    ``block_m`` is the target number of rows (query tokens x heads of a group); the real tile has
    ``BLOCK_Q = max(1, block_m // GROUP_P)`` tokens.
    """
    group = num_q_heads // num_kv_heads
    group_p = next_power_of_2(group)
    # GPU: 64 x 64 tiles for 16-bit inputs; fp32 tiles take twice the registers and shared memory,
    # so 32 x 32. Interpreter: each op costs ~1 ms whatever its size (favouring big tiles), but its
    # tl.dot is a numpy matmul without BLAS (~40 ms for 128^3), so 64 x 64 was fastest (measured).
    small = dtype == torch.float32
    if block_m is None:
        block_m = 64 if interpreted else (32 if small else 64)
    if block_n is None:
        block_n = 64 if interpreted else (32 if small else 64)
    if block_n < 16 or block_n & (block_n - 1) or block_m < 1 or block_m & (block_m - 1):
        raise ValueError(f"block_m and block_n must be powers of two, block_n >= 16; got {block_m}, {block_n}")
    block_q = max(1, block_m // group_p)
    return dict(
        QUERIES_PER_KV=group,
        GROUP_P=group_p,
        BLOCK_Q=block_q,
        BLOCK_M=block_q * group_p,
        HEAD_DIM=head_dim,
        HEAD_DIM_P=max(16, next_power_of_2(head_dim)),
        BLOCK_N=block_n,
    )


def paged_prefill_attention(
    query: torch.Tensor,
    kv: PagedKV,
    scale: float,
    *,
    max_query_len: int | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    check_values: bool = True,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> torch.Tensor:
    """Triton paged prefill/extend attention (same contract as ``reference.paged_prefill_attention``).

    Args:
        query: ``[total_q, num_q_heads, head_dim]``, sequences concatenated; same dtype as the cache.
        kv: the cache (any strides; the new tokens' K/V already written), ``block_tables``,
            ``seq_lens`` (KV length after this step, ``>= q_len``) and ``cu_seqlens_q`` (prefix sums
            of query lengths; a length may be 0); shapes in ``pagedlab.kernels.paged_kv``.
        scale: softmax scale.
        max_query_len: longest ``q_len``, if the caller knows it (saves a host sync on CUDA).
        block_m, block_n: tile rows (tokens x group heads) and keys per iteration.
        check_values: also check the index tensors' values on the host (one sync on CUDA).
        num_warps, num_stages: GPU launch options for tuning (Triton's defaults when None).
    Returns:
        ``[total_q, num_q_heads, head_dim]`` in the query's dtype.
    Raises:
        KernelInputError: bad shapes, dtypes, head size, lengths, ``cu_seqlens_q`` (or none) or block ids.
        KernelUnavailableError: CPU tensors without ``TRITON_INTERPRET=1`` (see ``runtime``).
    """
    validate_prefill_inputs(query, kv, scale, check_values=check_values)
    kernel = launcher(_paged_prefill_kernel, query)
    interpreted = running_interpreted(_paged_prefill_kernel, query)
    total_q, num_q_heads, head_dim = query.shape
    cu_seqlens_q = kv.prefill_cu_seqlens()
    out = torch.empty((total_q, num_q_heads, head_dim), dtype=query.dtype, device=query.device)
    if total_q == 0 or kv.num_seqs == 0:
        return out
    if max_query_len is None:
        max_query_len = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max())
    if max_query_len == 0:
        return out
    meta = prefill_block_sizes(num_q_heads, kv.num_kv_heads, head_dim, interpreted, block_m, block_n, query.dtype)
    grid = (kv.num_seqs, triton.cdiv(max_query_len, meta["BLOCK_Q"]), kv.num_kv_heads)
    kernel[grid](
        out,
        query,
        kv.key_cache,
        kv.value_cache,
        kv.block_tables,
        kv.seq_lens,
        cu_seqlens_q,
        float(scale) * LOG2E,
        *query.stride(),
        *kv.strides(),
        *out.stride(),
        **meta,
        **attention_launch_options(query, kv, interpreted, num_warps, num_stages),
    )
    return out
