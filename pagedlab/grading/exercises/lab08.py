"""Lab 08 - the block-table lookup and masking of the paged decode kernel, in plain torch:
``load_kv_tile(cache, block_table, tile_start, tile_size, seq_len) -> (rows, mask)``.

The reference agrees with ``pagedlab.kernels.reference.gather_kv`` (checked in ``tests/grading``);
failure pictures come from ``pagedlab.viz.render_kernel_walk``. Needs torch (imported lazily).
"""

from __future__ import annotations

import random
from typing import Any

from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts


def _render(state: dict[str, Any], expected: Any, path: Any) -> str:
    from pagedlab.viz import kernel_walk_steps, render_kernel_walk

    bt, seq_len, bs = state["block_table"], state["seq_len"], state["block_size"]
    size = state["tile_size"]
    steps = kernel_walk_steps(bt, min(seq_len, len(bt) * bs), bs, tile_size=size, num_blocks=state["num_blocks"])
    tile = min(state["tile_start"] // size, len(steps) - 1)
    return render_kernel_walk(
        steps[tile],
        title=f"tile at positions {state['tile_start']}..{state['tile_start'] + size - 1} (seq_len {seq_len})",
    )


TILE = register(
    Exercise(
        "08.load_kv_tile",
        "load_kv_tile",
        "read one tile of a sequence's KV through its block table, masking positions past seq_len",
        render=_render,
        components=("kernel", "load_kv_tile"),
        needs=("torch",),
    )
)


def make_cache(num_blocks: int, block_size: int, num_kv_heads: int = 2, head_dim: int = 3):
    """A cache whose every element names its place: block*1000 + row*10 + head + dim/10."""
    import torch

    b = torch.arange(num_blocks, dtype=torch.float32).view(-1, 1, 1, 1) * 1000
    r = torch.arange(block_size, dtype=torch.float32).view(1, -1, 1, 1) * 10
    h = torch.arange(num_kv_heads, dtype=torch.float32).view(1, 1, -1, 1)
    d = torch.arange(head_dim, dtype=torch.float32).view(1, 1, 1, -1) / 10
    return b + r + h + d


def _hint(expected: Any, got: Any, state: Any) -> str | None:
    return (
        "lane i reads position pos = tile_start + i: block block_table[pos // block_size], row pos % block_size; "
        "masked lanes (pos >= seq_len) are all zeros"
    )


#: What an unused block-table entry holds in :func:`_case`'s padded tables (the engine pads a batch's tables
#: to its longest one; nothing may read an entry past the sequence's last block).
GARBAGE = 987_654


def _case(
    fn: Any,
    rec: Any,
    num_blocks: int,
    block_size: int,
    table: list[int],
    seq_len: int,
    tile_start: int,
    tile_size: int,
    *,
    dtype: str = "float32",
    table_dtype: str = "int64",
    pad: int = 0,
) -> None:
    """One recorded call: a cache of ``dtype``, ``table`` (of ``table_dtype``) followed by ``pad`` entries
    of :data:`GARBAGE`."""
    import torch

    cache = make_cache(num_blocks, block_size).to(getattr(torch, dtype))
    table = list(table) + [GARBAGE] * pad
    rec.step(
        f"load_kv_tile(cache, block_table={table}, tile_start={tile_start}, tile_size={tile_size}, "
        f"seq_len={seq_len})  # block_size {block_size}"
        + (f", a {dtype} cache" if dtype != "float32" else "")
        + (f", an {table_dtype} table" if table_dtype != "int64" else "")
    )
    rec.state(
        {
            "block_table": list(table),
            "seq_len": seq_len,
            "block_size": block_size,
            "tile_start": tile_start,
            "tile_size": tile_size,
            "num_blocks": num_blocks,
        }
    )
    given_cache, given_table = cache.clone(), torch.tensor(table, dtype=getattr(torch, table_dtype))
    before = snapshot(contracts.LOAD_KV_TILE_MUTATES, cache=given_cache, block_table=given_table)
    try:
        out = fn(given_cache, given_table, tile_start, tile_size, seq_len)
    except IndexError as e:
        if tile_start + tile_size <= seq_len:
            raise
        from pagedlab.grading.recorder import safe_str, where_raised

        where = where_raised(e)
        rec.fail(
            f"your code raised IndexError: {safe_str(e)}" + (f"\n  at {where}" if where else "") + "\n  hint: a lane "
            "past seq_len looked up the block table beyond the sequence's last block"
            + (f" (a padding entry, {GARBAGE})" if pad else "")
            + ": masked lanes must not look it up - give them block 0 (torch.where(mask, pos // block_size, 0)), "
            "then zero their rows"
        )
    observe_contract(rec, contracts.LOAD_KV_TILE, out, cache=cache, tile_size=tile_size)
    try:
        rows, mask = out
    except (TypeError, ValueError):
        rec.fail(f"load_kv_tile must return a pair (rows, mask); it returned {type(out).__name__}")
    rec.observe("mask", mask, hint="mask[i] is True exactly when tile_start + i < seq_len (a bool per lane)")
    rec.observe("rows", rows, hint=_hint)
    observe_read_only(rec, contracts.LOAD_KV_TILE_MUTATES, before, cache=given_cache, block_table=given_table)


@TILE.test("a tile inside one block")
def _(fn: Any, rec: Any) -> None:
    _case(fn, rec, 6, 4, [3, 1], 8, 0, 4)
    _case(fn, rec, 6, 4, [3, 1], 8, 4, 4)


@TILE.test("a tile across two blocks, in block-table order")
def _(fn: Any, rec: Any) -> None:
    _case(fn, rec, 8, 4, [5, 0, 7], 12, 2, 4)
    _case(fn, rec, 8, 4, [5, 0, 7], 12, 0, 8)


@TILE.test("the last tile: positions past seq_len are masked and never look up the table")
def _(fn: Any, rec: Any) -> None:
    _case(fn, rec, 8, 4, [2, 0, 5], 10, 8, 8)
    _case(fn, rec, 8, 4, [6], 1, 0, 8)


@TILE.test("random block tables, tiles and block sizes")
def _(fn: Any, rec: Any) -> None:
    rng = random.Random(8)
    for bs in (1, 2, 4, 8):
        for _ in range(3):
            seq_len = rng.randint(1, 20)
            nblocks = -(-seq_len // bs)
            table = rng.sample(range(24), nblocks)
            size = rng.choice([2, 4, 8])
            start = rng.randrange(0, seq_len + size, size) // size * size
            _case(fn, rec, 24, bs, table, seq_len, start, size)


@TILE.test("fp16 and bf16 caches: the tile keeps the cache's dtype")
def _(fn: Any, rec: Any) -> None:
    _case(fn, rec, 6, 4, [3, 1], 7, 4, 4, dtype="float16")
    _case(fn, rec, 6, 4, [3, 1], 7, 4, 4, dtype="bfloat16")


@TILE.test("a padded block table: entries past the sequence hold garbage and are never read")
def _(fn: Any, rec: Any) -> None:
    _case(fn, rec, 8, 4, [2, 0, 5], 10, 8, 8, pad=2)
    _case(fn, rec, 8, 4, [6], 3, 0, 8, pad=3, table_dtype="int32")
