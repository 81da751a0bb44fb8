"""Lab 08's measurement of what paging costs the attention kernel itself (issue 23).

Kwon et al. 2023 (SOSP, "Efficient Memory Management for Large Language Model Serving with
PagedAttention", section 7.1 / figure 18a) report 20-26% higher attention kernel latency for their
paged kernel than for FasterTransformer's contiguous one. :func:`paged_overhead` measures the same
comparison on this machine, with one kernel both ways so that only the layout differs: the kit's
``"cpu"`` decode attention (``pagedlab.kernels.cpu``: the C kernel where it built, else its torch
path) reads

* **paged**: the keys and values scattered over a cache in shuffled ``block_size`` blocks, through a
  block table (``pagedlab.kernels.testing.PagedCase``), and
* **contiguous**: the very same keys and values in one contiguous ``[num_seqs, seq_len, Hkv, D]``
  tensor, handed to the kernel as one block per sequence (table ``[[0], [1], ...]``: one lookup per
  sequence, then a single run of consecutive rows).

Rounds alternate the two (which one goes first too), so a noisy neighbour slows both alike; the
ratio of medians and the ratio of minima are reported.

Next to the kit's kernel, vLLM v0's (0.6.3, ``csrc/attention/attention_kernels.cu``): its key cache is
*x-packed*, ``[num_blocks, num_kv_heads, head_size / x, block_size, x]`` with ``x = 16 bytes / element
size`` (8 in fp16, 4 in fp32), its value cache ``[num_blocks, num_kv_heads, head_size, block_size]``,
and each warp of a thread block takes one block of the table per iteration
(``for (block_idx = start_block_idx + warp_idx; block_idx < end_block_idx; block_idx += NUM_WARPS)``).
:func:`kit_kv_offset`, :func:`v0_key_offset` and :func:`v0_value_offset` map ``(block, head, pos, dim)``
to the flat element offset in each layout; :func:`to_v0_layout` rearranges a kit cache into v0's;
:func:`v0_warp_blocks` lists the table columns each warp visits.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from pagedlab.i18n.messages import tr_lines
from pagedlab.kernels import cpu, native
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.testing import PagedCase

__all__ = [
    "PAPER_CLAIM",
    "PagedOverhead",
    "contiguous_kv",
    "paged_overhead",
    "v0_x",
    "kit_kv_offset",
    "v0_key_offset",
    "v0_value_offset",
    "to_v0_layout",
    "v0_warp_blocks",
]

#: The paper's figure, quoted (not used in any computation).
PAPER_CLAIM = (
    'Kwon et al. 2023 (SOSP), PagedAttention: "20-26% higher attention kernel latency" than a contiguous kernel'
)


@dataclass(frozen=True)
class PagedOverhead:
    """Decode attention times through the block table and on contiguous storage (seconds per call)."""

    paged_s: list[float]
    contiguous_s: list[float]
    backend: str  #: "C kernel" or "torch (gather + SDPA)"
    max_abs_diff: float  #: largest difference between the two outputs (same keys and values)
    shape: str

    @property
    def median_ratio(self) -> float:
        return statistics.median(self.paged_s) / statistics.median(self.contiguous_s)

    @property
    def min_ratio(self) -> float:
        return min(self.paged_s) / min(self.contiguous_s)

    def report(self) -> str:
        """The measurement and the paper's figure, in the learner's language (:mod:`pagedlab.i18n`)."""
        med = statistics.median(self.paged_s) * 1e3, statistics.median(self.contiguous_s) * 1e3
        return tr_lines(
            f"decode attention, {self.shape}, {self.backend}, {len(self.paged_s)} interleaved rounds:\n"
            f"  paged (shuffled blocks, block table): median {med[0]:.3f} ms, min {min(self.paged_s) * 1e3:.3f} ms\n"
            f"  contiguous (same K/V, one run/seq):   median {med[1]:.3f} ms, "
            f"min {min(self.contiguous_s) * 1e3:.3f} ms\n"
            f"  paged / contiguous: median {self.median_ratio:.2f}x ({(self.median_ratio - 1) * 100:+.0f}%), "
            f"min {self.min_ratio:.2f}x ({(self.min_ratio - 1) * 100:+.0f}%); outputs differ by {self.max_abs_diff:.1e}\n"
            f"  the paper: {PAPER_CLAIM}"
        )


def contiguous_kv(case: PagedCase) -> PagedKV:
    """``case``'s keys and values as one contiguous ``[num_seqs, seq_len, Hkv, D]`` tensor each, passed as one
    block per sequence (all sequences of ``case`` must have the same length)."""
    lens = set(case.seq_lens_list)
    if len(lens) != 1:
        raise ValueError(f"contiguous_kv needs sequences of one length, got {sorted(lens)}")
    k = torch.stack(case.k_seqs).contiguous()  # [S, L, Hkv, D]: block s is sequence s
    v = torch.stack(case.v_seqs).contiguous()
    table = torch.arange(len(case.k_seqs), dtype=torch.int32).unsqueeze(1)
    return PagedKV(k, v, table, case.seq_lens.cpu())


def _time(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def paged_overhead(
    num_seqs: int = 8,
    seq_len: int = 1024,
    num_q_heads: int = 9,
    num_kv_heads: int = 3,
    head_dim: int = 64,
    block_size: int = 16,
    rounds: int = 7,
    calls: int = 20,
    seed: int = 0,
) -> PagedOverhead:
    """Time the kit's CPU decode attention on the same K/V paged (shuffled blocks) and contiguous.

    Defaults: SmolLM2-135M's heads, 8 sequences of 1024 tokens (a few ms per round on 2 cores).
    """
    if rounds < 1 or calls < 1:
        raise ValueError(f"rounds and calls must be >= 1, got rounds={rounds}, calls={calls}")
    case = PagedCase([seq_len] * num_seqs, num_kv_heads, head_dim, block_size, torch.float32, seed=seed, device="cpu")
    paged, contiguous = case.kv(clean=True), contiguous_kv(case)
    gen = torch.Generator().manual_seed(seed + 1)
    query = torch.randn(num_seqs, num_q_heads, head_dim, generator=gen)
    scale = head_dim**-0.5
    plans = cpu.plan_decode(paged), cpu.plan_decode(contiguous)
    runs = (
        lambda: cpu.paged_decode_attention(query, paged, scale, plans[0]),
        lambda: cpu.paged_decode_attention(query, contiguous, scale, plans[1]),
    )
    diff = (runs[0]() - runs[1]()).abs().max().item()  # also the warm-up
    times: tuple[list[float], list[float]] = ([], [])
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for i in order:
            times[i].append(_time(runs[i], calls))
    backend = "C kernel" if isinstance(plans[0], cpu.NativeDecode) else "torch (gather + SDPA)"
    if backend == "C kernel" and not native.reads(paged):  # pragma: no cover - plan_decode checked it
        backend = "torch (gather + SDPA)"
    shape = (
        f"{num_seqs} seqs x {seq_len} tokens, Hq={num_q_heads} Hkv={num_kv_heads} D={head_dim}, block_size={block_size}"
    )
    return PagedOverhead(times[0], times[1], backend, diff, shape)


# --- vLLM v0's layout and loop, next to the kit's -------------------------------------------------


def v0_x(dtype_bytes: int) -> int:
    """Elements per 16-byte vector: vLLM v0's ``x = 16 / sizeof(cache_t)`` (8 for fp16/bf16, 4 for fp32)."""
    if dtype_bytes not in (1, 2, 4):
        raise ValueError(f"dtype_bytes must be 1, 2 or 4, got {dtype_bytes}")
    return 16 // dtype_bytes


def kit_kv_offset(
    block: int, head: int, pos: int, dim: int, *, block_size: int, num_kv_heads: int, head_dim: int
) -> int:
    """Flat offset of element ``dim`` of token row ``pos`` of ``block``, KV head ``head``, in the kit's
    ``[num_blocks, block_size, num_kv_heads, head_dim]`` key (and value) cache."""
    return ((block * block_size + pos) * num_kv_heads + head) * head_dim + dim


def v0_key_offset(
    block: int, head: int, pos: int, dim: int, *, block_size: int, num_kv_heads: int, head_dim: int, dtype_bytes: int
) -> int:
    """Flat offset of the same element in vLLM v0's key cache ``[num_blocks, num_kv_heads, head_dim / x, block_size, x]``:
    dimension ``dim`` sits in vector ``dim // x``, lane ``dim % x``; the ``x`` lanes of one token are 16
    contiguous bytes, and the same vector of the block's next token follows them."""
    x = v0_x(dtype_bytes)
    if head_dim % x:
        raise ValueError(f"head_dim={head_dim} is not a multiple of x={x}")
    return (((block * num_kv_heads + head) * (head_dim // x) + dim // x) * block_size + pos) * x + dim % x


def v0_value_offset(
    block: int, head: int, pos: int, dim: int, *, block_size: int, num_kv_heads: int, head_dim: int
) -> int:
    """Flat offset in vLLM v0's value cache ``[num_blocks, num_kv_heads, head_dim, block_size]``
    (a block's tokens are contiguous for each dimension: the ``P @ V`` loop reads along tokens)."""
    return ((block * num_kv_heads + head) * head_dim + dim) * block_size + pos


def to_v0_layout(key_cache: torch.Tensor, value_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kit's ``[num_blocks, block_size, num_kv_heads, head_dim]`` caches rearranged (copied) into
    vLLM v0's x-packed key layout and its value layout."""
    n, b, h, d = key_cache.shape
    x = v0_x(key_cache.element_size())
    key = key_cache.reshape(n, b, h, d // x, x).permute(0, 2, 3, 1, 4).contiguous()
    value = value_cache.permute(0, 2, 3, 1).contiguous()
    return key, value


def v0_warp_blocks(num_table_blocks: int, num_warps: int = 4, start_block: int = 0) -> list[list[int]]:
    """Block-table columns each warp of one v0 thread block visits, in order: warp ``w`` takes
    ``start_block + w``, then every ``num_warps``-th (``NUM_WARPS = NUM_THREADS / WARP_SIZE``: 128 / 32 = 4
    in v0's launch). The kit's Triton program instead walks the table alone, tile after tile."""
    if num_warps < 1:
        raise ValueError(f"num_warps must be >= 1, got {num_warps}")
    return [list(range(start_block + w, num_table_blocks, num_warps)) for w in range(num_warps)]
