"""Guards of the decode kernel's K/V tile load (lab 08): the PyTorch tile load, checked lane by lane,
and the ``@triton.jit`` one, checked by the kernel's output."""

from __future__ import annotations

from typing import Any

import torch

from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.reference import load_kv_tile
from pagedlab.kernels.reference import paged_decode_attention as reference
from pagedlab.parts.contracts import LOAD_KV_TILE, LOAD_KV_TILE_MUTATES
from pagedlab.parts.guard import Guard
from pagedlab.parts.poison import poisoned_allocations
from pagedlab.parts.protocols import KVTileLoadFn
from pagedlab.parts.triton_source import CHECKS, source_findings

__all__ = ["guarded_kv_tile_load", "GuardedTritonTileLoad"]


def guarded_kv_tile_load(fn: KVTileLoadFn, guard: Guard) -> KVTileLoadFn:
    """``fn`` checked against the kit's :func:`load_kv_tile`, lane by lane, on every call.

    The engine calls it once per step and tile (``pagedlab.model.attention.plan_tile_loads``, on a
    cache of slot numbers: the rows it returns are the slots each lane reads), so a wrong lane is
    named by the slot it read.
    """

    def call(
        cache: torch.Tensor, block_table: torch.Tensor, tile_start: int, tile_size: int, seq_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        table_copy = block_table.clone()  # the learner's function reads copies: the engine's stay as they are
        cache_copy = cache.clone() if cache.numel() <= 1 << 22 else cache  # the engine's slot cache is small
        with poisoned_allocations():  # rows it allocates and never writes hold NaN: the lane check sees them
            got = guard.call(fn, cache_copy, table_copy, tile_start, tile_size, seq_len)
        cache_same = cache_copy is cache or bool(((cache_copy == cache) | (cache_copy.isnan() & cache.isnan())).all())
        LOAD_KV_TILE_MUTATES.enforce_read_only(guard, "cache", cache_same)
        LOAD_KV_TILE_MUTATES.enforce_read_only(guard, "block_table", torch.equal(table_copy, block_table))
        LOAD_KV_TILE.enforce(guard, got, cache=cache, tile_size=tile_size)  # a tuple of tensors: shapes, dtypes
        rows, mask = got
        want_rows, want_mask = load_kv_tile(cache, block_table, tile_start, tile_size, seq_len)
        if not torch.equal(mask, want_mask):
            raise guard.fail(f"the mask must be pos < seq_len ({seq_len}) for positions from {tile_start}")
        bad = (rows != want_rows).flatten(1).any(1).nonzero().flatten().tolist()
        if bad:
            lane = bad[0]
            why = (
                "a masked lane (past the sequence) is not zero: stale KV leaks"
                if not want_mask[lane]
                else "a lane read the wrong slot of the cache"
            )
            where = f"lane {lane}, position {tile_start + lane}, seq_len {seq_len}"
            if cache.shape[2:] == (1, 1):  # the engine's cache of slot numbers: name the slots
                want = int(want_rows[lane].sum()) - 1
                read = rows[lane].sum()  # NaN: a row it allocated and never wrote (poisoned memory)
                where += f"; it read {'memory it never wrote (NaN)' if read.isnan() else f'slot {int(read) - 1}'}, " + (
                    f"the block table says slot {want}" if want >= 0 else "a masked lane reads none"
                )
            raise guard.fail(f"{why} ({where})")
        return rows, mask

    return call


class GuardedTritonTileLoad:
    """Lab 08's ``@triton.jit`` tile load run inside the kit's Triton decode kernel (``load_tile=`` of
    ``kernels.decode_attention.paged_decode_attention``, a ``tl.constexpr``), checked after every call
    against the kit's PyTorch reference decode: the kernel's lanes cannot be watched one by one, so a
    wrong block, a wrong row or a stale (NaN) slot shows as a different output, named here.

    ``decode_attention`` has the decode contract of ``pagedlab.model.attention`` (``ModelRunner`` uses
    it as ``decode_override``, on the ``"triton"`` backend only).
    """

    #: The largest difference from the reference tolerated (fp32 sums in another order).
    ATOL = 1e-3

    def __init__(self, fn: Any, guard: Guard) -> None:
        self.fn, self.guard = fn, guard
        self._source_read = False

    def _check_source(self) -> None:
        """Once: what only a GPU would show, read from the helper's code (:mod:`pagedlab.parts.triton_source`):
        the interpreter this engine runs on a CPU reads past a table, gives 0 for a masked lane without
        ``other`` and never overflows int32, so these mistakes serve correctly here and fail on a GPU. A source
        that cannot be read is not held against the helper.

        Raises:
            ComponentError: a check fails (its hint says what a GPU would do).
        """
        if self._source_read:
            return

        self._source_read = True
        failed = [name for name, ok in source_findings(self.fn).items() if ok is False]
        if failed:
            raise self.guard.fail(f"read from its code, on a GPU: {failed[0]} fails - {CHECKS[failed[0]]}")

    def __call__(self, query: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
        """:meth:`decode_attention` (the model's ``AttentionMetadata.decode_override``)."""
        return self.decode_attention(query, kv, scale)

    def decode_attention(self, query: torch.Tensor, kv: PagedKV, scale: float) -> torch.Tensor:
        """``[num_seqs, num_q_heads, head_dim]`` from the kit's kernel with the learner's tile load
        (``kv``: the cache, block tables and lengths, ``pagedlab.kernels.paged_kv``).

        Raises:
            ComponentError: the kernel raised (a compile error in the tile load, a bad layout), or
                its output is not finite or differs from the reference by more than ``ATOL``.
        """
        from pagedlab.kernels.decode_attention import paged_decode_attention  # lazy: optional dependency (Triton)

        self._check_source()

        def run() -> torch.Tensor:
            out: torch.Tensor = paged_decode_attention(query, kv, scale, load_tile=self.fn)
            return out

        got: torch.Tensor = self.guard.call(run)
        want = reference(query, kv, scale)
        if not torch.isfinite(got).all():
            raise self.guard.fail("the decode output holds NaN/inf: masked lanes must load 0.0 (a stale slot leaks)")
        err = float((got - want).abs().max()) if got.numel() else 0.0
        if err > self.ATOL:
            raise self.guard.fail(
                f"the decode output differs from the reference by {err:.3g}: a lane read the wrong block or row"
            )
        return got
