"""Giving the C heap's freed memory back to the system, and looking at it (glibc only).

Every engine step allocates tensors whose sizes follow the step's token count (activations
``[T, 3072]``, logits ``[rows, 49152]``, attention scores): a few KB to ~10 MB, a different mix
each step. glibc's ``malloc`` serves most of them from its heaps (arenas) and, when they are freed,
keeps the pages: its mmap threshold rises to the largest block freed so far (up to 32 MB), so
after the first big prefill even multi-MB tensors come from a heap, and a heap only shrinks from its
top. Measured (``benchmarks/soak.py``, and the oneDNN linears at all 56 padded row counts): the
process held ~75 MB of freed memory (``mallinfo2().fordblks``) that no Python object used, and
RSS kept rising with every new mix of sizes. ``malloc_trim(0)`` returns those free pages (in the
middle of every arena too) to the system: RSS 576 -> 501 MB on that probe, in a few ms.

So an engine calls :func:`trim` every :data:`pagedlab.engine.llm_engine.MALLOC_TRIM_EVERY` steps.
Off glibc (macOS, musl) both functions do nothing.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@functools.cache
def _libc() -> Any:
    """glibc's handle, or None where ``malloc_trim`` / ``mallinfo2`` are missing (not glibc, glibc < 2.33)."""
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallinfo2.argtypes, libc.mallinfo2.restype = [], _Mallinfo2
    except (OSError, AttributeError):
        return None
    return libc


def trim() -> bool:
    """Return the C heap's free pages to the system (``malloc_trim(0)``); True if any were returned."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def heap_mb() -> dict[str, float]:
    """glibc's view of the C heap (``mallinfo2``), in MB; empty off glibc.

    ``in_use``: live blocks (heaps and mmapped); ``mmapped``: the mmapped part; ``free_held``:
    freed blocks malloc keeps in its heaps. RSS growing with ``in_use`` flat is the allocator
    holding freed memory; ``in_use`` growing is live memory (a cache filling, or a leak).
    """
    libc = _libc()
    if libc is None:
        return {}
    m = libc.mallinfo2()
    return dict(
        malloc_in_use_mb=round((m.uordblks + m.hblkhd) / 2**20, 1),
        malloc_mmapped_mb=round(m.hblkhd / 2**20, 1),
        malloc_free_held_mb=round(m.fordblks / 2**20, 1),
    )
