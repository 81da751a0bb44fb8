"""Lab 02 helpers: block tables from a trace, the pool with its free queue, and two measurements.

* :func:`block_table_of` rebuilds a request's block table from the engine's tracer events.
* :func:`render_pool_and_queue` draws a pool snapshot and, under it, the free queue in order.
* :func:`time_free_queue` times the free-queue operations for a range of pool sizes, for any
  queue class with vLLM's interface (the kit's, the learner's) and for two naive containers.
* :func:`tail_waste` is the memory lost in the last, partly filled block of each request.
* :func:`mamba2_state_bytes` and :func:`hybrid_layer_bytes`: what one request keeps per layer in an
  attention layer (grows with its length, paged by tokens) and in a Mamba-2 layer (a fixed state).
"""

from __future__ import annotations

import functools
import math
import random
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pagedlab.core.block_pool import BlockPool, KVCacheBlock
from pagedlab.viz._svg import COLORS, svg_doc, text
from pagedlab.viz.pool import render_pool_and_queue  # re-exported: lab 02's notebook imports it from here

__all__ = [
    "block_table_of",
    "render_pool_and_queue",
    "time_free_queue",
    "tail_waste",
    "growth_per_tenfold",
    "render_paging_analogy",
    "sliding_window_blocks",
    "mamba2_state_bytes",
    "hybrid_layer_bytes",
]


def block_table_of(events: Sequence[dict[str, Any]], request_id: str) -> list[int]:
    """The block table ``request_id`` ended with: its ``alloc`` events' blocks, in order.

    Valid for a request that was never preempted, forked or copied (its table only grew).
    """
    return [b for e in events if e["kind"] == "alloc" and e.get("owner") == request_id for b in e["block_ids"]]


def _per_op_us(fn: Callable[[], None], n_ops: int, repeats: int) -> float:
    """Median over ``repeats`` of the time of ``fn`` (which performs ``n_ops`` operations), in µs per op."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / n_ops * 1e6)
    return statistics.median(times)


def _take_put(take: Callable[[], Any], put: Callable[[Any], Any], k: int) -> Callable[[], None]:
    """``k`` times: ``put(take())`` (pop a block and give it back)."""

    def run() -> None:
        for _ in range(k):
            put(take())

    return run


def _remove_append(container: Any, picks: Sequence[KVCacheBlock]) -> Callable[[], None]:
    """For each pick: pull it out of ``container`` and append it at the tail."""

    def run() -> None:
        for b in picks:
            container.remove(b)
            container.append(b)

    return run


def time_free_queue(
    queue_cls: Any,
    pool_sizes: Iterable[int] = (1_000, 10_000, 100_000),
    n_ops: int = 2_000,
    n_ops_naive: int = 200,
    repeats: int = 3,
    seed: int = 0,
) -> dict[str, dict[int, float]]:
    """Microseconds per operation of a free queue, by pool size.

    For each pool size the queue starts full (every block free), then:

    * ``"popleft + append"``: take the front block and put it back at the tail (allocate, then free);
    * ``"remove + append"``: pull a random block out of the middle and put it back at the tail (a
      prefix-cache hit on a free block, then its release);

    * ``"BlockPool: ..."``: the kit's ``BlockPool`` allocating one block and freeing it (what the
      engine calls; its queue is the kit's);

    and, for comparison, the same two operations on a Python ``list`` (``pop(0)`` and
    ``remove(block)`` search and shift the list) and ``remove`` on a ``collections.deque``.

    Args:
        queue_cls: a class with vLLM's ``FreeKVCacheBlockQueue`` interface (``__init__(blocks)``,
            ``popleft``, ``remove``, ``append``).
        pool_sizes: numbers of blocks.
        n_ops / n_ops_naive: operations timed per repeat for the linked queue / the naive containers.

    Returns:
        ``{operation label: {pool size: µs per operation}}``.
    """
    out: dict[str, dict[int, float]] = {}
    rng = random.Random(seed)
    for n in pool_sizes:
        blocks = [KVCacheBlock(i) for i in range(n)]
        q = queue_cls(blocks)
        picks = [blocks[rng.randrange(n)] for _ in range(n_ops)]
        pool = BlockPool(n, enable_caching=False)
        lst, dq, few = list(blocks), deque(blocks), picks[:n_ops_naive]
        cases = [
            ("linked list: popleft + append", _take_put(q.popleft, q.append, n_ops), n_ops),
            ("linked list: remove + append", _remove_append(q, picks), n_ops),
            (
                "BlockPool: get_new_blocks(1) + free_blocks",
                _take_put(functools.partial(pool.get_new_blocks, 1), pool.free_blocks, n_ops),
                n_ops,
            ),
            (
                "Python list: pop(0) + append",
                _take_put(functools.partial(lst.pop, 0), lst.append, n_ops_naive),
                n_ops_naive,
            ),
            ("Python list: remove + append", _remove_append(lst, few), n_ops_naive),
            ("deque: remove + append", _remove_append(dq, few), n_ops_naive),
        ]
        for label, run, k in cases:  # in this order: each case starts from the state the last one left
            out.setdefault(label, {})[n] = _per_op_us(run, k, repeats)
    return out


def tail_waste(lengths: Sequence[int], block_size: int) -> dict[str, float]:
    """Memory lost in the partly filled last block of each sequence, at its final length.

    Returns:
        ``waste_frac``: unused slots / allocated slots; ``blocks_per_seq``: mean block-table
        length; ``mean_waste_tokens``: mean unused slots per sequence.
    """
    alloc = [-(-L // block_size) * block_size for L in lengths]
    waste = sum(a - L for a, L in zip(alloc, lengths))
    return {
        "waste_frac": waste / sum(alloc),
        "blocks_per_seq": sum(alloc) / block_size / len(lengths),
        "mean_waste_tokens": waste / len(lengths),
    }


def growth_per_tenfold(cost: dict[str, dict[int, float]]) -> dict[str, float]:
    """How many times slower each operation gets per tenfold pool size, from :func:`time_free_queue`.

    The geometric mean over the measured range: ``(t(n_max) / t(n_min)) ** (1 / log10(n_max / n_min))``.
    About 1 means O(1), about 10 means linear in the pool size.

    Raises:
        ValueError: an operation timed at fewer than two pool sizes, or a non-positive time.
    """
    out: dict[str, float] = {}
    for label, by_n in cost.items():
        sizes = sorted(by_n)
        if len(sizes) < 2 or sizes[0] == sizes[-1]:
            raise ValueError(f"{label!r}: need times at two pool sizes at least, got {sizes}")
        lo, hi = by_n[sizes[0]], by_n[sizes[-1]]
        if lo <= 0 or hi <= 0:
            raise ValueError(f"{label!r}: times must be positive, got {lo} and {hi}")
        out[label] = (hi / lo) ** (1 / math.log10(sizes[-1] / sizes[0]))
    return out


def _mapping_panel(x0: float, names: Sequence[str], table: Sequence[int], num_physical: int, color: str) -> list[str]:
    """One side of :func:`render_paging_analogy`: logical units -> table -> physical units."""
    head, left, mid, table_name, right = names
    parts = [text(x0 + 150, 22, head, size=13, weight="bold", anchor="middle")]
    for col, label in ((x0 + 10, left), (x0 + 120, table_name), (x0 + 220, right)):
        parts.append(text(col + 30, 44, label, size=10, color=COLORS["muted"], anchor="middle"))
    h = 22
    for i, phys in enumerate(table):
        y = 58 + i * (h + 6)
        parts.append(
            f'<rect x="{x0 + 10}" y="{y}" width="60" height="{h}" fill="{color}" fill-opacity="0.35" '
            f'stroke="{color}" data-logical="{i}"/>'
        )
        parts.append(text(x0 + 40, y + h / 2, f"{mid} {i}", size=10, anchor="middle"))
        parts.append(
            f'<rect x="{x0 + 120}" y="{y}" width="60" height="{h}" fill="#ffffff" stroke="#1f2430" '
            f'data-entry="{i}" data-physical="{phys}"/>'
        )
        parts.append(text(x0 + 150, y + h / 2, phys, size=11, anchor="middle", weight="bold"))
    ph = 14
    for b in range(num_physical):
        y = 58 + b * (ph + 2)
        used = b in table
        parts.append(
            f'<rect x="{x0 + 220}" y="{y}" width="60" height="{ph}" '
            f'fill="{color if used else COLORS["empty"]}" fill-opacity="{0.8 if used else 1}" '
            f'stroke="{COLORS["empty_stroke"]}" data-physical-id="{b}"/>'
        )
        parts.append(text(x0 + 250, y + ph / 2, b, size=9, anchor="middle"))
    for i, phys in enumerate(table):
        y1, y2 = 58 + i * (h + 6) + h / 2, 58 + phys * (ph + 2) + ph / 2
        parts.append(
            f'<line x1="{x0 + 180}" y1="{y1:.1f}" x2="{x0 + 218}" y2="{y2:.1f}" stroke="{color}" stroke-width="1.5"/>'
        )
    return parts


def render_paging_analogy(
    block_table: Sequence[int], num_gpu_blocks: int, page_table: Sequence[int] | None = None
) -> str:
    """An OS page table beside a request's block table: the same indirection, side by side.

    Left: a process's virtual pages -> page table (walked by the MMU) -> physical frames of RAM.
    Right: a request's logical blocks -> block table (read by the attention kernel) -> physical
    blocks of the KV pool. ``page_table`` defaults to a fixed pseudo-random table of the same length.

    Raises:
        ValueError: an entry outside ``range(num_gpu_blocks)``, or an empty table.
    """
    if page_table is None:
        page_table = random.Random(1).sample(range(num_gpu_blocks), min(len(block_table), num_gpu_blocks))
    for name, table in (("block_table", block_table), ("page_table", page_table)):
        if not table or any(not 0 <= b < num_gpu_blocks for b in table):
            raise ValueError(f"{name} must be non-empty with entries in range({num_gpu_blocks}), got {list(table)}")
    body = _mapping_panel(
        0,
        ("OS: virtual memory", "virtual pages", "page", "page table", "frames (RAM)"),
        page_table,
        num_gpu_blocks,
        "#b07aa1",
    )
    body += _mapping_panel(
        320,
        ("pagedlab / vLLM: KV cache", "logical blocks", "block", "block table", "blocks (KV pool)"),
        block_table,
        num_gpu_blocks,
        "#4e79a7",
    )
    height = 70 + max(len(block_table), len(page_table)) * 28
    height = max(height, 70 + num_gpu_blocks * 16)
    return svg_doc(640, height, body, cls="pl-paging", title="page table vs block table")


def sliding_window_blocks(num_tokens: int, window: int, block_size: int) -> dict[str, int]:
    """Blocks a sequence of ``num_tokens`` holds under full attention and under a sliding window of
    ``window`` tokens, as vLLM 0.32.0's ``SlidingWindowManager`` frees them
    (``vllm/v1/core/single_type_kv_cache_manager.py``): the next token attends to the last ``window``
    tokens, so ``skipped = max(0, num_tokens - window + 1)`` tokens are never read again and every block
    made only of skipped tokens (``skipped // block_size``) goes back to the pool (its table entry becomes
    the null block).

    Returns:
        ``full`` (blocks under full attention), ``sliding`` (blocks still held), ``freed``, ``skipped_tokens``.
    """
    if num_tokens < 0 or window < 1 or block_size < 1:
        raise ValueError(
            f"sliding_window_blocks needs num_tokens >= 0, window >= 1, block_size >= 1, got "
            f"{num_tokens=}, {window=}, {block_size=}"
        )
    full = -(-num_tokens // block_size)
    skipped = max(0, num_tokens - window + 1)
    freed = min(skipped // block_size, full)
    return {"full": full, "sliding": full - freed, "freed": freed, "skipped_tokens": skipped}


def mamba2_state_bytes(
    hidden_size: int,
    dtype_bytes: int,
    expand: int = 2,
    state_size: int = 128,
    head_dim: int = 64,
    n_groups: int = 1,
    conv_kernel: int = 4,
) -> int:
    """Bytes of one request's state in one Mamba-2 layer: whatever the sequence's length.

    The shapes are vLLM 0.32.0's ``MambaStateShapeCalculator.mamba2_state_shape``
    (``vllm/model_executor/layers/mamba/mamba_utils.py``, one GPU, no speculative decoding): a
    convolution state of ``(conv_kernel - 1)`` columns of ``intermediate + 2 n_groups state_size``
    channels (the last inputs the causal convolution needs) and an SSM state of
    ``num_heads x head_dim x state_size``, with ``intermediate = expand x hidden_size`` and
    ``num_heads = intermediate / head_dim``. The defaults are ``mamba_ssm``'s ``Mamba2`` layer's
    (``d_state=128, d_conv=4, expand=2, headdim=64, ngroups=1``).
    """
    intermediate = expand * hidden_size
    if intermediate % head_dim:
        raise ValueError(f"expand x hidden_size = {intermediate} is not a multiple of head_dim={head_dim}")
    conv = (conv_kernel - 1) * (intermediate + 2 * n_groups * state_size)
    ssm = (intermediate // head_dim) * head_dim * state_size
    return (conv + ssm) * dtype_bytes


def hybrid_layer_bytes(num_tokens: int, block_size: int, attn_bytes_per_token: int, state_bytes: int) -> dict[str, int]:
    """One request's memory in one layer of each kind, at ``num_tokens`` tokens.

    * attention: its K and V for every token, paged: ``ceil(num_tokens / block_size)`` blocks of
      ``block_size x attn_bytes_per_token`` (``attn_bytes_per_token = 2 x kv_heads x head_dim x bytes``);
    * Mamba-2 (or any linear-attention/SSM layer): ``state_bytes``, overwritten in place at every
      token, from the first token on. Paging it by tokens would buy nothing: there is no tail to
      waste, nothing grows, nothing to share block by block. vLLM 0.32.0 gives such a layer one
      page per request sized to the state (``MambaSpec`` in ``vllm/v1/kv_cache_interface.py``),
      next to the ``FullAttentionSpec`` layers' token blocks.

    Returns:
        ``attention`` and ``ssm`` bytes, and ``breakeven_tokens``: the length from which one
        attention layer holds more than one SSM layer (``ceil(state_bytes / attn_bytes_per_token)``).
    """
    if num_tokens < 0 or block_size < 1:
        raise ValueError(f"need num_tokens >= 0 and block_size >= 1, got {num_tokens=}, {block_size=}")
    blocks = -(-num_tokens // block_size)
    return {
        "attention": blocks * block_size * attn_bytes_per_token,
        "ssm": state_bytes if num_tokens else 0,
        "breakeven_tokens": -(-state_bytes // attn_bytes_per_token),
    }
