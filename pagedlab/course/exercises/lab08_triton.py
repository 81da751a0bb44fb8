"""Lab 08 - the K/V tile load of a paged decode kernel, in Triton (Triton-Puzzles style).

* ``08.triton_load_kv_tile`` - a ``@triton.jit`` helper ``triton_load_kv_tile(cache_ptr, block_table_ptr,
  tile_start, seq_len, kv_head, stride_block, stride_slot, stride_head, BLOCK_SIZE, BLOCK_N, HEAD_DIM) ->
  (tile, mask)``: per-lane block-table lookup, masked loads (``other=0.0``) so stale slots never leak.

The kit's kernels take the helper as a ``tl.constexpr`` argument: :func:`probe_tile` stores the
tile the helper loads (so a test sees every lane), :func:`decode_with_tile_loader` runs the kit's
paged decode kernel (``pagedlab.kernels.decode_attention``, its ``load_tile=`` slot) with every K and
V tile loaded through the helper; it is checked against
``pagedlab.kernels.reference.paged_decode_attention`` on caches whose unused slots hold NaN. On CPU everything runs in Triton's interpreter, which reads ``TRITON_INTERPRET=1`` when
triton is first imported (the Makefile, the test runs and the lab's first cell set it); shapes are
tiny so a check takes a few seconds. Failure pictures: ``pagedlab.viz.render_kernel_walk``.
"""

from __future__ import annotations

import linecache
import math
import random
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from pagedlab.course.exercises.lab08 import (
    DTYPES,
    LAYOUTS,
    cache_in_layout,
    equal_nan,
    make_cache,
    stale_slots_nan,
)
from pagedlab.course.exercises.lab08 import _render as render_tile
from pagedlab.grading.differential import differential
from pagedlab.grading.registry import Exercise, register, snippet_object
from pagedlab.grading.triton_mode import use_interpreter_without_gpu
from pagedlab.parts.triton_source import CHECKS, raises_not_implemented, source_findings


def _reference() -> Any:
    """The solution cell's helper, with the interpreter switched on where it must be
    (:func:`use_interpreter_without_gpu`)."""
    use_interpreter_without_gpu()

    return snippet_object("08.triton_load_kv_tile")


TILE = register(
    Exercise(
        "08.triton_load_kv_tile",
        "triton_load_kv_tile",
        "in Triton: load a K/V tile through the block table, masked lanes load 0.0 (stale slots may hold NaN)",
        reference=_reference,
        render=render_tile,
        components=("triton_load_kv_tile", "kernel_triton"),
        needs=("torch", "triton"),
        runs_in_learner_process=True,
    )
)  # a JIT function cannot cross the grader's pipe (instructor guide, section 7)

HEAD_DIM = 4
#: The decode checks run the kit's kernel, whose tiles need a power-of-two head dim >= 16 and 16 lanes.
DECODE_HEAD_DIM, DECODE_BLOCK_N, DECODE_BLOCKS = 16, 16, 24


def _probe_kernel() -> Any:
    """The kit's one-program ``@triton.jit`` probe kernel (defined on first use: importing triton is slow)."""
    global _PROBE
    if _PROBE is None:
        _PROBE = _define_probe_kernel()
    return _PROBE


_PROBE: Any = None


def _define_probe_kernel() -> Any:
    import triton  # lazy: after triton_mode chose the interpreter
    import triton.language as tl  # lazy: after triton_mode chose the interpreter

    @triton.jit
    def probe_kernel(
        tile_ptr,
        mask_ptr,
        cache_ptr,
        table_ptr,
        tile_start,
        seq_len,
        kv_head,
        stride_block,
        stride_slot,
        stride_head,
        LOAD_TILE: tl.constexpr,
        BLOCK_SIZE: tl.constexpr,
        BLOCK_N: tl.constexpr,
        HEAD_DIM: tl.constexpr,
    ):
        tile, mask = LOAD_TILE(
            cache_ptr, table_ptr, tile_start, seq_len, kv_head, stride_block, stride_slot, stride_head,
            BLOCK_SIZE, BLOCK_N, HEAD_DIM,
        )  # fmt: skip
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        tl.store(tile_ptr + offs_n[:, None] * HEAD_DIM + offs_d[None, :], tile)
        tl.store(mask_ptr + offs_n, mask.to(tl.int8))

    return probe_kernel


def _unwrapped(launch: Callable[[], Any], load_tile: Any) -> Any:
    """Run ``launch()``, unwrapping the interpreter's ``InterpreterError`` so the learner sees their own exception.

    Raises:
        TypeError: ``load_tile`` returned other than two values: unpacking its result into ``(tile, mask)``
            failed outside the learner's code (the interpreter's own message, e.g. "'int' object is not
            iterable" from ``triton/language/core.py``, names neither the helper nor the contract).
        Exception: whatever ``launch()`` raised, unwrapped.
    """

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's NaN warnings inside the interpreter
            return launch()
    except Exception as exc:  # noqa: BLE001 - re-raised, unwrapped
        inner: BaseException = exc
        while type(inner).__name__ == "InterpreterError" and inner.__cause__ is not None:
            inner = inner.__cause__
        if isinstance(inner, TypeError | ValueError) and _failed_unpacking_the_result(inner, load_tile):
            raise TypeError(
                "triton_load_kv_tile must return two values, (tile, mask): `return tile, mask`. Unpacking what "
                f"it returned failed with {type(inner).__name__}: {inner}"
            ) from None
        raise inner from None


def _failed_unpacking_the_result(err: BaseException, load_tile: Any) -> bool:
    """Whether ``err`` arose in a kernel line ``a, b = LOAD_TILE(...)`` with none of ``load_tile``'s own code
    on the traceback: the helper returned, and its result did not unpack into two values."""
    own = getattr(getattr(load_tile, "fn", None), "__code__", None)
    tb, at_call = err.__traceback__, False
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is own:
            return False
        if code.co_name in ("probe_kernel", "_paged_decode_kernel"):
            at_call = "LOAD_TILE(" in linecache.getline(code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return at_call


def _device(load_tile: Any) -> tuple[str, Any]:
    """``("cuda", load_tile)`` when the helper is compiled and a GPU is visible, else ``("cpu", the helper as
    the interpreter runs it)`` (:func:`pagedlab.kernels.runtime.runnable`).

    Raises:
        KernelUnavailableError: this process cannot run Triton on CPU (triton was imported compiled for a GPU,
            before ``TRITON_INTERPRET=1`` was set, and there is no GPU; or Triton is missing). Raised on the
            reference too, so the test's verdict is "cannot be checked here", never a pass or a fail.
    """
    import torch  # lazy: seconds to import; lab 08's tests only

    from pagedlab.kernels.runtime import (  # lazy: torch; lab 08 only
        KernelUnavailableError,
        interpreter_ready,
        is_interpreted,
        runnable,
    )

    if not is_interpreted(load_tile) and torch.cuda.is_available():
        return "cuda", load_tile
    load_tile = runnable(load_tile)
    if is_interpreted(load_tile) and interpreter_ready():
        return "cpu", load_tile
    raise KernelUnavailableError(
        "Triton cannot run triton_load_kv_tile in this process: there is no GPU, and triton was imported before "
        "Triton's interpreter was switched on. Set os.environ['TRITON_INTERPRET'] = '1' before anything imports "
        "triton (the lab's first code cell does), restart the kernel, and run the cells again"
    )


def same_memory_on(t: Any, device: str) -> Any:
    """``t`` on ``device`` with the same strides, over a copy of all the memory it views (the padding of a
    padded cache included); ``t`` itself when it is there already."""
    import torch  # lazy: seconds to import; lab 08's tests only

    if t.device.type == device:
        return t
    memory = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage()).to(device)
    return torch.as_strided(memory, t.shape, t.stride(), t.storage_offset())


def probe_tile(
    load_tile: Any,
    cache: Any,
    table: Sequence[int] | Any,
    tile_start: int,
    seq_len: int,
    kv_head: int,
    block_n: int,
) -> tuple[Any, Any]:
    """Run ``load_tile`` once in a one-program kernel; returns ``(tile [block_n, HEAD_DIM], mask [block_n])``.

    ``table``: the block ids (made an int32 tensor), or a tensor taken as it is (its dtype kept; a write into
    it shows in the caller's tensor). The cache's strides are passed as they are (a padded or transposed view)."""
    import torch  # lazy: seconds to import; lab 08's tests only

    from pagedlab.kernels.runtime import runnable  # lazy: torch; lab 08 only

    dev, load_tile = _device(load_tile)
    probe = runnable(_probe_kernel())
    tile = torch.full((block_n, cache.shape[-1]), -1.0, dtype=cache.dtype, device=dev)
    mask = torch.full((block_n,), -1, dtype=torch.int8, device=dev)
    given_table = table if isinstance(table, torch.Tensor) else torch.tensor(list(table), dtype=torch.int32)
    bt = given_table.to(dev)
    on_dev = same_memory_on(cache, dev)
    _unwrapped(
        lambda: probe[(1,)](
            tile,
            mask,
            on_dev,
            bt,
            tile_start,
            seq_len,
            kv_head,
            *on_dev.stride()[:3],
            LOAD_TILE=load_tile,
            BLOCK_SIZE=cache.shape[1],
            BLOCK_N=block_n,
            HEAD_DIM=cache.shape[-1],
        ),  # fmt: skip
        load_tile,
    )
    if on_dev is not cache:
        cache.copy_(on_dev.cpu())  # a write into the cache shows in the caller's copy
    if bt is not given_table:
        given_table.copy_(bt.cpu())
    return tile.cpu(), mask.cpu()


def decode_with_tile_loader(load_tile: Any, query: Any, kv: Any, scale: float) -> Any:
    """The kit's Triton decode kernel (``pagedlab.kernels.decode_attention``) with every K and V tile
    loaded by ``load_tile`` (its ``load_tile=`` slot, a ``tl.constexpr``; ``BLOCK_N`` = :data:`DECODE_BLOCK_N`).

    Runs on the GPU when ``load_tile`` is compiled and one is visible, else in the interpreter on CPU
    (tensors are moved there and the result comes back on CPU).

    Args:
        query: ``[num_seqs, num_q_heads, head_dim]`` fp32 (head_dim a power of two >= 16).
        kv: a ``pagedlab.kernels.paged_kv.PagedKV`` (contiguous fp32 caches, block tables, lengths).
    Returns:
        ``[num_seqs, num_q_heads, head_dim]`` fp32.
    Raises:
        KernelInputError: inputs the kernel refuses (see ``paged_decode_attention``).
    """
    from pagedlab.kernels.decode_attention import paged_decode_attention  # lazy: torch; lab 08 only
    from pagedlab.kernels.paged_kv import PagedKV  # lazy: torch; lab 08 only

    dev, load_tile = _device(load_tile)
    on_dev = PagedKV(*(t.to(dev) for t in (kv.key_cache, kv.value_cache, kv.block_tables, kv.seq_lens)))
    q = query.to(dev)
    out = _unwrapped(
        lambda: paged_decode_attention(q, on_dev, scale, block_n=DECODE_BLOCK_N, load_tile=load_tile), load_tile
    )
    return out.cpu()


def tile_cache(num_blocks: int, block_size: int, num_kv_heads: int = 2, head_dim: int = HEAD_DIM) -> Any:
    """A cache whose every element names its place: ``block*1000 + slot*10 + head + (dim+1)/10`` (never 0.0;
    the name is unambiguous for ``head_dim <= 9``)."""
    return make_cache(num_blocks, block_size, num_kv_heads, head_dim) + 0.1


def stale_cache(
    num_blocks: int,
    block_size: int,
    tables: Sequence[Sequence[int]],
    seq_lens: Sequence[int],
    num_kv_heads: int = 2,
    head_dim: int = HEAD_DIM,
) -> Any:
    """:func:`tile_cache` values in the slots the sequences use, NaN in every other slot."""
    import torch  # lazy: seconds to import; lab 08's tests only

    cache = tile_cache(num_blocks, block_size, num_kv_heads, head_dim)
    live = torch.zeros(num_blocks, block_size, dtype=torch.bool)
    for table, n in zip(tables, seq_lens):
        for pos in range(n):
            live[table[pos // block_size], pos % block_size] = True
    cache[~live] = float("nan")
    return cache


def _where(v: float) -> str:
    """What a :func:`tile_cache` value says about where it was read."""
    if math.isnan(v):
        return "a stale slot (NaN)"
    if v == 0.0:
        return "0.0"
    return f"block {int(v // 1000)} slot {int(v % 1000 // 10)} head {int(round(v - 0.1) % 10)}"


def _lane_hint(table: Sequence[int], tile_start: int, seq_len: int, kv_head: int, bs: int) -> Any:
    def hint(expected: Any, got: Any, state: Any) -> str | None:
        if not isinstance(got, list) or len(got) != len(expected):
            return f"return a tile of shape [BLOCK_N, HEAD_DIM] = [{len(expected)}, {HEAD_DIM}]"
        i = next((j for j, (e, g) in enumerate(zip(expected, got)) if str(e) != str(g)), 0)
        pos, v = tile_start + i, got[i][0] if isinstance(got[i], list) and got[i] else float("nan")
        head = f"lane {i} (position {pos}) loaded {_where(v)}"
        if pos >= seq_len:
            return (
                f"{head}, but position {pos} >= seq_len {seq_len}: masked lanes must load 0.0 - pass the mask and "
                "other=0.0 to the tl.load of the cache (a stale slot may hold NaN, and 0 * NaN is NaN)"
            )
        want_b, want_r = table[pos // bs], pos % bs
        head += f"; it should read block {want_b} (block_table[{pos} // {bs}]) slot {want_r} head {kv_head}"
        if math.isnan(v) or v == 0.0:
            return head + ": use the block id the table gives for this position, and mask only lanes past seq_len"
        b, r, h = int(v // 1000), int(v % 1000 // 10), int(round(v - 0.1) % 10)
        if h != kv_head:
            return head + ": add kv_head * stride_head to the address"
        if (b, r) == (table[i // bs], i % bs) and tile_start:
            return head + ": lane i handles position tile_start + i, not i"
        if b == pos // bs and b != want_b:
            return head + ": look the physical block up in the block table - block_table_ptr + pos // BLOCK_SIZE"
        if b * bs + r == want_b * bs + pos:
            return head + ": the slot inside the block is pos % BLOCK_SIZE (times stride_slot)"
        return head

    return hint


def _probe_case(
    fn: Any, rec: Any, cache: Any, table: list[int], seq_len: int, tile_start: int, block_n: int, kv_head: int = 0
) -> None:
    bs = cache.shape[1]
    rec.step(
        f"triton_load_kv_tile(block_table={table}, tile_start={tile_start}, seq_len={seq_len}, "
        f"kv_head={kv_head}, BLOCK_SIZE={bs}, BLOCK_N={block_n})"
    )
    rec.state(
        {
            "block_table": list(table),
            "seq_len": seq_len,
            "block_size": bs,
            "tile_start": tile_start,
            "tile_size": block_n,
            "num_blocks": cache.shape[0],
        }
    )
    given = cache.clone()
    tile, mask = probe_tile(fn, given, table, tile_start, seq_len, kv_head, block_n)
    rec.observe(
        "mask per lane",
        [bool(m) for m in mask.tolist()],
        hint=f"mask[i] is True exactly when tile_start + i < seq_len (here {tile_start} + i < {seq_len})",
    )
    rec.observe(
        "tile [BLOCK_N, HEAD_DIM] (value = block*1000 + slot*10 + head + (dim+1)/10)",
        [[round(x, 4) for x in row] for row in tile.tolist()],
        hint=_lane_hint(table, tile_start, seq_len, kv_head, bs),
    )
    rec.observe(
        "cache after the call (unchanged)",
        bool(torch_equal_nan(given, cache)),
        hint="loading a tile only reads: never tl.store into the cache",
    )


def torch_equal_nan(a: Any, b: Any) -> bool:
    """``a == b`` elementwise with NaN equal to NaN."""
    import torch  # lazy: seconds to import; lab 08's tests only

    return bool(torch.equal(torch.nan_to_num(a, nan=-7.0), torch.nan_to_num(b, nan=-7.0)))


@TILE.test("a tile inside one block: each lane finds its block in the table")
def _(fn: Any, rec: Any) -> None:
    cache = tile_cache(6, 4)
    _probe_case(fn, rec, cache, [3, 1], 8, 0, 4)
    _probe_case(fn, rec, cache, [3, 1], 8, 4, 4)


@TILE.test("a tile across blocks, in block-table order")
def _(fn: Any, rec: Any) -> None:
    cache = tile_cache(8, 2)
    _probe_case(fn, rec, cache, [5, 0, 7], 6, 0, 4)
    _probe_case(fn, rec, cache, [5, 0, 7], 6, 2, 4)


@TILE.test("the last tile: lanes past seq_len load 0.0, even where the cache holds NaN")
def _(fn: Any, rec: Any) -> None:
    cache = stale_cache(8, 4, [[6, 2]], [5])
    _probe_case(fn, rec, cache, [6, 2], 5, 4, 4)
    _probe_case(fn, rec, cache, [6, 2, 3], 5, 0, 8)  # a stale table entry (3) past the sequence


@TILE.test("each KV head reads its own rows")
def _(fn: Any, rec: Any) -> None:
    cache = tile_cache(6, 4)
    _probe_case(fn, rec, cache, [4, 2], 7, 0, 8, kv_head=1)


def _decode_case(fn: Any, rec: Any, seq_lens: list[int], bs: int, seed: int) -> None:
    import torch  # lazy: seconds to import; lab 08's tests only

    from pagedlab.kernels.paged_kv import PagedKV  # lazy: torch; lab 08 only
    from pagedlab.kernels.reference import paged_decode_attention  # lazy: torch; lab 08 only

    rng = random.Random(seed)
    nblocks = [-(-n // bs) for n in seq_lens]
    ids = rng.sample(range(1, DECODE_BLOCKS), sum(nblocks))
    tables = [ids[sum(nblocks[:i]) : sum(nblocks[: i + 1])] for i in range(len(seq_lens))]
    width = max(nblocks)
    padded = [t + [rng.randrange(DECODE_BLOCKS)] * (width - len(t)) for t in tables]  # stale entries past each sequence
    gen = torch.Generator().manual_seed(seed)
    k = stale_cache(DECODE_BLOCKS, bs, tables, seq_lens, head_dim=DECODE_HEAD_DIM)
    v = stale_cache(DECODE_BLOCKS, bs, tables, seq_lens, head_dim=DECODE_HEAD_DIM)
    live = ~torch.isnan(k)
    k[live] = torch.randn(int(live.sum()), generator=gen)
    v[live] = torch.randn(int(live.sum()), generator=gen)
    q = torch.randn(len(seq_lens), 4, DECODE_HEAD_DIM, generator=gen)
    bt, lens = torch.tensor(padded, dtype=torch.int32), torch.tensor(seq_lens, dtype=torch.int32)
    rec.step(
        f"the kit's decode kernel with your tile load: seq_lens={seq_lens}, block_size={bs}, "
        f"BLOCK_N={DECODE_BLOCK_N}, head_dim={DECODE_HEAD_DIM}, block tables {padded} (unused slots and stale "
        "table entries hold NaN)"
    )
    rec.state(
        {
            "block_table": list(padded[0]),
            "seq_len": seq_lens[0],
            "block_size": bs,
            "tile_start": 0,
            "tile_size": DECODE_BLOCK_N,
            "num_blocks": DECODE_BLOCKS,
        }
    )
    out = decode_with_tile_loader(fn, q, PagedKV(k, v, bt, lens), DECODE_HEAD_DIM**-0.5)
    want = paged_decode_attention(q, PagedKV(torch.nan_to_num(k), torch.nan_to_num(v), bt, lens), DECODE_HEAD_DIM**-0.5)
    rec.observe(
        "NaN in the output",
        int(torch.isnan(out).sum()),
        hint="a NaN from a stale slot leaked: load 0.0 on masked lanes (mask= and other=0.0 on the K/V load)",
    )
    err = float((out - want).abs().max())
    rec.observe(
        "output equals the PyTorch reference (max abs error <= 1e-5)",
        err <= 1e-5,
        hint=f"max abs error {err:.3g}: compare the tile of the failing sequence with the picture",
    )


@TILE.test("the decode kernel with your tile load equals the PyTorch reference (NaN in unused slots)")
def _(fn: Any, rec: Any) -> None:
    _decode_case(fn, rec, [37, 3, 20], 4, 1)  # 3, 1 and 2 tiles of 16 lanes, a partial last block
    _decode_case(fn, rec, [33, 1], 2, 2)


@TILE.test("what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids")
def _(fn: Any, rec: Any) -> None:

    if raises_not_implemented(fn):
        raise NotImplementedError("triton_load_kv_tile is not written yet")
    rec.step(
        "reading triton_load_kv_tile's code: on a GPU these mistakes fault, leak undefined values or overflow; "
        "the interpreter's runs above cannot show them"
    )
    for name, ok in source_findings(fn).items():
        rec.observe(name, ok, hint=CHECKS[name])


# --- the differential test: random cases against the reference, whole state compared -------------------------
def _triton_case() -> Any:
    """A hypothesis strategy drawing one probe of the helper (plain data; see :func:`_run_triton_case`)."""

    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        block_size = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
        seq_len = draw(st.integers(1, 40))
        used = -(-seq_len // block_size)
        num_blocks = used + draw(st.integers(0, 2))
        block_n = draw(st.sampled_from([2, 4, 8, 16]))
        num_kv_heads = draw(st.integers(1, 3))
        return {
            "block_size": block_size,
            "num_blocks": num_blocks,
            "table": list(draw(st.permutations(range(num_blocks))))[:used],  # out of order, as a pool hands them
            "pad": draw(st.integers(0, 2)),
            "table_dtype": draw(st.sampled_from(["int32", "int64"])),
            "seq_len": seq_len,
            "tile_start": block_n * draw(st.integers(0, (seq_len - 1) // block_n)),  # up to the last, partial one
            "block_n": block_n,
            "num_kv_heads": num_kv_heads,
            "kv_head": draw(st.integers(0, num_kv_heads - 1)),
            "head_dim": draw(st.sampled_from([2, 4, 8])),
            "dtype": draw(st.sampled_from(DTYPES)),
            "layout": draw(st.sampled_from(LAYOUTS)),
        }

    return case()


#: NaN elements on each side of a case's cache: a wrong address lands there (and reads NaN), never outside the
#: process's memory (the interpreter reads any address it is given: a stray read could end the process).
GUARD = 1 << 16


def guarded(cache: Any, storage: Any) -> tuple[Any, Any]:
    """``(cache, storage)`` moved into the middle of a buffer with :data:`GUARD` NaN elements on each side."""
    import torch  # lazy: seconds to import; lab 08's tests only

    buffer = torch.full((2 * GUARD + storage.numel(),), float("nan"), dtype=storage.dtype)
    inner = buffer[GUARD : GUARD + storage.numel()].view(storage.shape)
    inner.copy_(storage)
    return torch.as_strided(buffer, cache.shape, cache.stride(), GUARD + cache.storage_offset()), inner


def padded_table(c: dict[str, Any]) -> list[int]:
    """The case's table, then ``pad`` stale entries, then as many more as every lane of the tile could index (the
    engine pads a batch's tables to the longest one): a lane that reads the table unmasked finds a stale block
    (NaN), never memory past the table. Stale entries are blocks the sequence does not use, else block 0."""
    used = len(c["table"])
    spare = [b for b in range(c["num_blocks"]) if b not in c["table"]] or [0]
    lanes = -(-(c["tile_start"] + c["block_n"]) // c["block_size"])
    return c["table"] + [spare[i % len(spare)] for i in range(max(c["pad"], lanes - used))]


def describe_triton_case(c: dict[str, Any]) -> str:
    table = padded_table(c)
    return (
        f"triton_load_kv_tile(block_table={table} ({c['table_dtype']}), tile_start={c['tile_start']}, "
        f"seq_len={c['seq_len']}, kv_head={c['kv_head']}, BLOCK_SIZE={c['block_size']}, BLOCK_N={c['block_n']}, "
        f"HEAD_DIM={c['head_dim']})  # a {c['dtype']} cache [{c['num_blocks']}, {c['block_size']}, "
        f"{c['num_kv_heads']}, {c['head_dim']}], {c['layout']}, stale slots NaN"
    )


#: The hint of a tile that differs in a drawn case. One text for every case: what the case shows (a padded or
#: transposed cache, a tile starting inside a block) is in its description, and the case ``check()`` shows is
#: the smallest hypothesis finds within a time budget, so a hint that depended on it would change with the
#: machine's speed.
CASE_HINT = (
    "lane i reads position pos = tile_start + i: block block_table[pos // BLOCK_SIZE], slot pos % BLOCK_SIZE, head "
    "kv_head, at block * stride_block + slot * stride_slot + kv_head * stride_head. Use the strides you are given "
    "(the cache may be padded or transposed), never sizes; and a tile may start inside a block"
)


def _run_triton_case(fn: Any, c: dict[str, Any], rec: Any) -> None:
    """One drawn case: a cache in the case's layout and dtype whose stale slots (and padding) hold NaN, a padded
    table of its dtype; records the mask and tile per lane, and that neither input changed."""
    import torch  # lazy: seconds to import; lab 08's tests only

    values = tile_cache(c["num_blocks"], c["block_size"], c["num_kv_heads"], c["head_dim"]).to(
        getattr(torch, c["dtype"])
    )
    stale_slots_nan(values, c["table"], c["seq_len"])
    cache, storage = guarded(*cache_in_layout(values, c["layout"]))
    table = padded_table(c)
    given_table = torch.tensor(table, dtype=getattr(torch, c["table_dtype"]))
    before = storage.clone()
    rec.state(
        {
            "block_table": table,
            "seq_len": c["seq_len"],
            "block_size": c["block_size"],
            "tile_start": c["tile_start"],
            "tile_size": c["block_n"],
            "num_blocks": c["num_blocks"],
        }
    )
    tile, mask = probe_tile(fn, cache, given_table, c["tile_start"], c["seq_len"], c["kv_head"], c["block_n"])
    rec.observe(
        "mask per lane",
        [bool(m) for m in mask.tolist()],
        hint="mask[i] is True exactly when tile_start + i < seq_len",
    )
    rec.observe(
        "tile [BLOCK_N, HEAD_DIM] (value = block*1000 + slot*10 + head + (dim+1)/10, rounded to the cache's dtype)",
        [[round(x, 4) for x in row] for row in tile.float().tolist()],
        hint=CASE_HINT,
    )
    rec.observe(
        "cache (all of its memory, padding included) and block table after the call (unchanged)",
        equal_nan(storage, before)
        and given_table.tolist() == table
        and str(given_table.dtype) == f"torch.{c['table_dtype']}",
        hint="loading a tile only reads: never tl.store into the cache or the block table",
    )


differential(
    TILE,
    _triton_case(),
    examples=40,
    describe=describe_triton_case,
    draws="block sizes 1-32 with 2-16 lane tiles (tiles starting inside a block), out-of-order tables padded with "
    "garbage (int32 or int64), the last partial tile, fp32/fp16/bf16 caches contiguous or padded/strided/transposed, "
    "every KV head, stale slots NaN",
)(_run_triton_case)
