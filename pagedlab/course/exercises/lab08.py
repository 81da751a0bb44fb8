"""Lab 08 - the block-table lookup and masking of the paged decode kernel, in plain torch:
``load_kv_tile(cache, block_table, tile_start, tile_size, seq_len) -> (rows, mask)``.

The reference agrees with ``pagedlab.kernels.reference.gather_kv`` (checked in ``tests/grading``);
failure pictures come from ``pagedlab.viz.render_kernel_walk``. Needs torch (imported lazily).
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.differential import differential
from pagedlab.grading.recorder import safe_str, where_raised
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.parts.poison import poisoned_allocations
from pagedlab.viz import kernel_walk_steps, render_kernel_walk


def _render(state: dict[str, Any], expected: Any, path: Any) -> str:

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
    import torch  # lazy: seconds to import; lab 08's tests only

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
    import torch  # lazy: seconds to import; lab 08's tests only

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
        with poisoned_allocations():  # a tile left uninitialised holds NaN, not the allocator's luck of the day
            out = fn(given_cache, given_table, tile_start, tile_size, seq_len)
    except IndexError as e:
        if tile_start + tile_size <= seq_len:
            raise

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


# --- the differential test: random cases against the reference, whole state compared -------------------------
#: How a case's cache sits in memory. The engine's caches are contiguous; a cache sliced from a wider one (padded
#: KV heads or head dim, padded blocks) or allocated heads-outermost and transposed has other strides, and a
#: load that assumes contiguity reads the wrong rows there.
LAYOUTS = ("contiguous", "padded KV heads", "padded head dim", "padded blocks", "KV heads outermost")
DTYPES = ("float32", "float16", "bfloat16")


def cache_in_layout(values: Any, layout: str) -> tuple[Any, Any]:
    """``(cache, storage)``: a tensor equal to ``values`` ``[num_blocks, block_size, num_kv_heads, head_dim]`` laid
    out as ``layout`` says (:data:`LAYOUTS`), and the whole tensor it is a view of (padding holds NaN)."""
    import torch  # lazy: seconds to import; lab 08's tests only

    nb, bs, heads, dim = values.shape
    if layout == "KV heads outermost":
        storage = values.transpose(1, 2).contiguous()  # [num_blocks, num_kv_heads, block_size, head_dim]
        return storage.transpose(1, 2), storage
    pad = {
        "contiguous": (0, 0, 0),
        "padded KV heads": (0, 1, 0),
        "padded head dim": (0, 0, 3),
        "padded blocks": (2, 0, 0),
    }
    extra_slots, extra_heads, extra_dims = pad[layout]
    storage = torch.full(
        (nb, bs + extra_slots, heads + extra_heads, dim + extra_dims), float("nan"), dtype=values.dtype
    )
    storage[:, :bs, :heads, :dim] = values
    return storage[:, :bs, :heads, :dim], storage


def stale_slots_nan(cache: Any, table: list[int], seq_len: int) -> None:
    """NaN in every slot of ``cache`` the sequence does not use (other blocks, and its last block past seq_len),
    as a GPU's reused blocks hold old values: a masked lane that reads one and multiplies by 0 keeps the NaN."""
    import torch  # lazy: seconds to import; lab 08's tests only

    live = torch.zeros(cache.shape[:2], dtype=torch.bool)
    for pos in range(seq_len):
        live[table[pos // cache.shape[1]], pos % cache.shape[1]] = True
    cache[~live] = float("nan")


def equal_nan(a: Any, b: Any) -> bool:
    """Same dtype, shape and values, NaN equal to NaN."""
    import torch  # lazy: seconds to import; lab 08's tests only

    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and bool(torch.equal(a.isnan(), b.isnan()))
        and bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0)))
    )


def _tile_case() -> Any:
    """A hypothesis strategy drawing one ``load_kv_tile`` call (plain data; see :func:`_run_tile_case`)."""

    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        block_size = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
        seq_len = draw(st.integers(1, 48))
        used = -(-seq_len // block_size)
        num_blocks = used + draw(st.integers(0, 3))
        tile_size = draw(st.sampled_from([1, 2, 4, 8, 16]))
        return {
            "block_size": block_size,
            "num_blocks": num_blocks,
            "table": list(draw(st.permutations(range(num_blocks))))[:used],  # out of order, as a pool hands them
            "pad": draw(st.integers(0, 2)),
            "table_dtype": draw(st.sampled_from(["int64", "int32"])),
            "seq_len": seq_len,
            "tile_start": tile_size * draw(st.integers(0, (seq_len - 1) // tile_size)),  # the last one partial
            "tile_size": tile_size,
            "num_kv_heads": draw(st.integers(1, 3)),
            "head_dim": draw(st.integers(1, 4)),
            "dtype": draw(st.sampled_from(DTYPES)),
            "layout": draw(st.sampled_from(LAYOUTS)),
        }

    return case()


def describe_tile_case(c: dict[str, Any]) -> str:
    table = c["table"] + [GARBAGE] * c["pad"]
    return (
        f"load_kv_tile(cache, block_table={table} ({c['table_dtype']}), tile_start={c['tile_start']}, "
        f"tile_size={c['tile_size']}, seq_len={c['seq_len']})  # block_size {c['block_size']}, a {c['dtype']} cache "
        f"[{c['num_blocks']}, {c['block_size']}, {c['num_kv_heads']}, {c['head_dim']}], {c['layout']}, "
        "stale slots NaN"
    )


def _rows_hint(expected: Any, got: Any, state: Any) -> str | None:
    def has_nan(v: Any) -> bool:
        return isinstance(v, float) and v != v or isinstance(v, list) and any(has_nan(x) for x in v)

    if isinstance(got, list) and isinstance(expected, list) and len(got) == len(expected):
        for e, g in zip(expected, got):
            if has_nan(g) and not has_nan(e):
                return (
                    "a row came back NaN where the reference has numbers: a masked lane read a stale slot (NaN here) "
                    "and NaN * 0 is NaN - select with torch.where(mask, rows, 0) instead of multiplying by the mask, "
                    "and never leave rows of torch.empty unwritten"
                )
    return _hint(expected, got, state)


def _run_tile_case(fn: Any, c: dict[str, Any], rec: Any) -> None:
    """One drawn case: a cache in the case's layout and dtype whose stale slots hold NaN, a padded table of its
    dtype; records the result's contract (types, dtype, shapes), the mask, the rows, and that neither input
    changed."""
    import torch  # lazy: seconds to import; lab 08's tests only

    values = make_cache(c["num_blocks"], c["block_size"], c["num_kv_heads"], c["head_dim"]).to(
        getattr(torch, c["dtype"])
    )
    stale_slots_nan(values, c["table"], c["seq_len"])
    cache, storage = cache_in_layout(values, c["layout"])
    table = c["table"] + [GARBAGE] * c["pad"]
    given_table = torch.tensor(table, dtype=getattr(torch, c["table_dtype"]))
    # the whole storage, padding included: a write past the view's rows is a write into the cache too
    before = snapshot(contracts.LOAD_KV_TILE_MUTATES, cache=storage, block_table=given_table)
    rec.state(
        {
            "block_table": table,
            "seq_len": c["seq_len"],
            "block_size": c["block_size"],
            "tile_start": c["tile_start"],
            "tile_size": c["tile_size"],
            "num_blocks": c["num_blocks"],
        }
    )
    with poisoned_allocations():
        out = fn(cache, given_table, c["tile_start"], c["tile_size"], c["seq_len"])
    observe_contract(rec, contracts.LOAD_KV_TILE, out, cache=cache, tile_size=c["tile_size"])  # types and shapes
    try:
        rows, mask = out
    except (TypeError, ValueError):
        rec.fail(f"load_kv_tile must return a pair (rows, mask); it returned {type(out).__name__}")
    rec.observe("mask", mask, hint="mask[i] is True exactly when tile_start + i < seq_len (a bool per lane)")
    rec.observe("rows", rows, hint=_rows_hint)
    observe_read_only(rec, contracts.LOAD_KV_TILE_MUTATES, before, cache=storage, block_table=given_table)


differential(
    TILE,
    _tile_case(),
    examples=40,
    describe=describe_tile_case,
    draws="block sizes 1-32, out-of-order tables padded with garbage (int32 or int64), the last partial tile, "
    "fp32/fp16/bf16 caches contiguous or padded/strided/transposed, stale slots NaN",
)(_run_tile_case)
