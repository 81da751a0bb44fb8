"""pagedlab.kernels.native: the C kernels of the "cpu" path against the torch references.

Every test that calls a kernel needs the built library: it skips only where the machine has no C
compiler at all, and fails (never skips) where a compiler exists but the build failed.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
import torch
import torch.nn.functional as F

from pagedlab.errors import InvalidRequestError, KernelInputError
from pagedlab.kernels import cpu, native, reference, trust
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.reference import load_kv_tile
from pagedlab.kernels.testing import PagedCase
from pagedlab.model.attention import plan_tile_loads, tiled_decode_attention
from pagedlab.model.llama import apply_rope

pytestmark = pytest.mark.no_interpreter_needed
F32 = torch.float32
#: Padding ids written past a sequence's blocks: none may be read (PagedCase's own is 1_000_000).
GARBAGE_IDS = (-1, -(2**31), 2**31 - 1)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library is loaded (even where the user set PAGEDLAB_NATIVE=0); skips only without any C compiler."""
    if native._compiler() is None:
        pytest.skip("no C compiler on this machine (native._compiler() is None)")
    if os.environ.get(native.ENV_NATIVE, "1").strip() == "0":
        monkeypatch.delenv(native.ENV_NATIVE)
        monkeypatch.setattr(native, "_state", {})
    assert native.load() is not None, native.unavailable_reason()


def gen(seed: int) -> torch.Generator:
    """A seeded CPU generator."""
    return torch.Generator().manual_seed(seed)


def decode_inputs(
    lens: list[int], hkv: int, group: int, d: int, bs: int, *, seed: int = 0, packed: bool = False
) -> tuple[torch.Tensor, PagedKV, PagedKV]:
    """``(query, poisoned kv, clean kv)``: NaN in unowned cache rows, garbage ids in the table padding;
    with ``packed`` the query is the Q columns of a ``[S, (Hq + 2 Hkv) D]`` QKV tensor."""
    case = PagedCase(lens, hkv, d, bs, F32, device="cpu", seed=seed)
    table = case.block_tables.clone()
    for s, n in enumerate(lens):  # each row's padding: PagedCase's PAD_ID, then other garbage
        used = -(-n // bs)
        table[s, used + 1 :] = GARBAGE_IDS[s % len(GARBAGE_IDS)]
    hq, n = hkv * group, len(lens)
    if packed:
        q = torch.randn(n, (hq + 2 * hkv) * d, generator=gen(seed + 1))[:, : hq * d].view(n, hq, d)
    else:
        q = torch.randn(n, hq, d, generator=gen(seed + 1))
    kv = PagedKV(case.key_cache, case.value_cache, table, case.seq_lens)
    return q, kv, case.kv(clean=True)


def check_decode(q: torch.Tensor, kv: PagedKV, clean: PagedKV, **kw: int) -> torch.Tensor:
    """The C kernel's output on ``kv``: no NaN, zero rows for ``seq_len == 0``, close to the reference on ``clean``."""
    out = native.paged_decode_attention(q, kv, q.shape[-1] ** -0.5, **kw)
    assert out.shape == q.shape and out.is_contiguous() and not torch.isnan(out).any()
    ref = reference.paged_decode_attention(q, clean, q.shape[-1] ** -0.5)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    for s, n in enumerate(kv.seq_lens.tolist()):
        if n == 0:
            assert torch.equal(out[s], torch.zeros_like(out[s]))
    return out


# --- 1. decode attention ------------------------------------------------------------------------
@pytest.mark.parametrize("bs", [1, 4, 16, 32])
@pytest.mark.parametrize("d", [16, 64, 128])
@pytest.mark.parametrize("group", [1, 3, 4, 2, 5, 6])  # 3 and 4 (with d=64): the specialized paths
def test_decode_equals_the_reference(built: None, group: int, d: int, bs: int) -> None:
    lens = [0, 1, bs, bs + 1, 2 * bs, 2 * bs + 1, 301, 7]
    check_decode(*decode_inputs(lens, 2, group, d, bs, seed=group * d + bs))


def test_decode_takes_the_largest_group_and_a_single_sequence(built: None) -> None:
    check_decode(*decode_inputs([37], 1, native.MAX_GROUP, 64, 16))
    check_decode(*decode_inputs([], 2, 3, 64, 16))  # no sequences: an empty result


def test_decode_of_a_packed_qkv_slice_with_int64_tables_and_any_thread_count(built: None) -> None:
    q, kv, clean = decode_inputs([301, 0, 17, 64, 65, 1], 3, 3, 64, 16, packed=True)
    assert q.stride(0) != q.shape[1] * q.shape[2]
    kv64 = PagedKV(kv.key_cache, kv.value_cache, kv.block_tables.long(), kv.seq_lens.long())
    one = check_decode(q, kv64, clean, num_threads=1)
    assert torch.equal(one, check_decode(q, kv, clean, num_threads=2))  # bitwise: one task per thread
    assert torch.equal(one, native.paged_decode_attention(q, kv, 0.125))  # torch's thread count


# --- 2. decode errors ---------------------------------------------------------------------------
def snapshot(q: torch.Tensor, kv: PagedKV) -> list[torch.Tensor]:
    """Copies of everything a decode call reads (none of it may change)."""
    return [t.clone() for t in (q, kv.key_cache, kv.value_cache, kv.block_tables, kv.seq_lens)]


@pytest.mark.parametrize("column", [0, 2])  # the first block, and the last one in use
@pytest.mark.parametrize("bad", [-1, -(2**31), "num_blocks"])
def test_a_block_id_out_of_range_is_named_by_sequence(built: None, column: int, bad: int | str) -> None:
    q, _, kv = decode_inputs([5, 9, 20], 2, 3, 16, 4)  # sequence 1 reads blocks 0..2 of its row
    kv.block_tables[1, column] = kv.num_blocks if bad == "num_blocks" else bad
    before = snapshot(q, kv)
    with pytest.raises(KernelInputError, match=r"sequence 1: .*outside \[0, \d+\)"):
        native.paged_decode_attention(q, kv, 0.25)
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(q, kv)))


def test_a_seq_len_beyond_its_table_row_is_named(built: None) -> None:
    q, _, kv = decode_inputs([5, 9, 20], 2, 3, 16, 4)  # rows of 6 entries: 24 tokens fit
    lens = kv.seq_lens.clone()
    lens[2] = 4 * kv.block_tables.shape[1] + 1
    with pytest.raises(
        KernelInputError, match=r"sequence 2: seq_len=25 needs 7 blocks but its block_tables row holds 6"
    ):
        native.paged_decode_attention(q, PagedKV(kv.key_cache, kv.value_cache, kv.block_tables, lens), 0.25)
    lens[2] = 24  # exactly the row: fine
    kv.block_tables[2, 5] = 0
    full = PagedKV(kv.key_cache, kv.value_cache, kv.block_tables, lens)
    check_decode(q, full, full)


def hnd(kv: PagedKV) -> PagedKV:
    """The same cache stored ``[blocks, Hkv, bs, D]`` in memory (a non-contiguous NHD view)."""
    kc, vc = (c.transpose(1, 2).contiguous().transpose(1, 2) for c in (kv.key_cache, kv.value_cache))
    return PagedKV(kc, vc, kv.block_tables, kv.seq_lens)


WRONG_DECODE_INPUTS: dict[str, tuple[Callable[[torch.Tensor, PagedKV], tuple[torch.Tensor, PagedKV]], str]] = {
    "fp16 query": (lambda q, kv: (q.half(), kv), "query must be a 3-D fp32 CPU tensor, got torch.float16"),
    "non-contiguous cache": (lambda q, kv: (q, hnd(kv)), "contiguous key and value caches"),
    "Hq not a multiple of Hkv": (lambda q, kv: (q[:, :5], kv), "got 5 query heads, 2 KV heads"),
    "head_dim mismatch": (lambda q, kv: (torch.randn(2, 6, 32), kv), r"head_dim 32 \(cache 16\)"),
    "group > 16": (lambda q, kv: (torch.randn(2, 34, 16), kv), "got 34 query heads, 2 KV heads"),
    "lens of another batch": (
        lambda q, kv: (q, PagedKV(kv.key_cache, kv.value_cache, kv.block_tables, kv.seq_lens[:1])),
        r"seq_lens \[2\]",
    ),
    "a negative seq_len": (
        lambda q, kv: (q, PagedKV(kv.key_cache, kv.value_cache, kv.block_tables, kv.seq_lens * torch.tensor([1, -1]))),
        r"sequence 1: seq_len=-9 is negative",
    ),
    "a seq_len above the max_seq_len passed": (
        lambda q, kv: (q, kv),
        r"sequence 1: seq_len=9 is above the max_seq_len",
    ),
    "caches in a tuple, not a PagedKV": (
        lambda q, kv: (q, (kv.key_cache, kv.value_cache, kv.block_tables, kv.seq_lens)),  # type: ignore[return-value]
        "kv must be a pagedlab.kernels.paged_kv.PagedKV, got tuple",
    ),
}


@pytest.mark.parametrize("what", WRONG_DECODE_INPUTS)
def test_inputs_the_kernel_cannot_read_are_refused(built: None, what: str) -> None:
    change, message = WRONG_DECODE_INPUTS[what]
    q, kv = change(*decode_inputs([5, 9], 2, 3, 16, 4)[::2])
    with pytest.raises(KernelInputError, match=message):
        native.paged_decode_attention(q, kv, 0.25, max_seq_len=5 if "max_seq_len" in what else None)


# --- 1c. prefill / extend attention ------------------------------------------------------------
def prefill_inputs(
    chunks: list[tuple[int, int]], hkv: int, group: int, d: int, bs: int, *, seed: int = 0, packed: bool = False
) -> tuple[torch.Tensor, PagedKV, PagedKV]:
    """``(query, poisoned kv, clean kv)`` of sequences with ``(context, q_len)`` each: NaN in unowned cache rows,
    garbage ids in the table padding; with ``packed`` the query is the Q columns of a packed QKV."""
    lens = [c + q for c, q in chunks]
    case = PagedCase(lens, hkv, d, bs, F32, device="cpu", seed=seed)
    cu = PagedCase.cu_seqlens([q for _, q in chunks])
    table = case.block_tables.clone()
    for s, n in enumerate(lens):
        table[s, -(-n // bs) + 1 :] = GARBAGE_IDS[s % len(GARBAGE_IDS)]
    hq, total = hkv * group, int(cu[-1])
    if packed:
        q = torch.randn(total, (hq + 2 * hkv) * d, generator=gen(seed + 1))[:, : hq * d].view(total, hq, d)
    else:
        q = torch.randn(total, hq, d, generator=gen(seed + 1))
    return q, PagedKV(case.key_cache, case.value_cache, table, case.seq_lens, cu), case.kv(cu, clean=True)


#: (context, q_len) per sequence: no context, a chunk of 1 (an extend of one token), chunks around the kernel's
#: 16-query tiles and 64-key chunks, a sequence with nothing to compute (0, 0) and one with context only (5, 0).
PREFILL_CHUNKS = [(0, 17), (40, 1), (0, 0), (63, 16), (5, 0), (100, 33), (1, 64)]


@pytest.mark.parametrize("bs", [1, 16, 32])
@pytest.mark.parametrize("d", [16, 64])
@pytest.mark.parametrize("group", [1, 3, 4])  # with d=64: the specialized head_dim
def test_prefill_equals_the_reference(built: None, group: int, d: int, bs: int) -> None:
    q, kv, clean = prefill_inputs(PREFILL_CHUNKS, 2, group, d, bs, seed=group * d + bs)
    out = native.paged_prefill_attention(q, kv, d**-0.5)
    assert out.shape == q.shape and out.is_contiguous() and not torch.isnan(out).any()
    torch.testing.assert_close(out, reference.paged_prefill_attention(q, clean, d**-0.5), rtol=1e-5, atol=4e-6)


def test_prefill_of_a_packed_qkv_slice_is_one_result_on_any_thread_count(built: None) -> None:
    q, kv, clean = prefill_inputs([(300, 200), (0, 1), (7, 40)], 3, 3, 64, 16, packed=True)
    assert q.stride(0) != q.shape[1] * q.shape[2]
    one = native.paged_prefill_attention(q, kv, 0.125, num_threads=1)
    torch.testing.assert_close(one, reference.paged_prefill_attention(q, clean, 0.125), rtol=1e-5, atol=4e-6)
    assert torch.equal(one, native.paged_prefill_attention(q, kv, 0.125, num_threads=2))  # items independent
    assert torch.equal(one, cpu.paged_prefill_attention(q, kv, 0.125))  # the "cpu" backend's op: this kernel


def test_prefill_bf16_is_the_fp32_result_rounded_once(built: None) -> None:
    q, kv, _ = prefill_inputs([(70, 20), (0, 5)], 2, 3, 64, 16)
    kv16 = PagedKV(kv.key_cache.bfloat16(), kv.value_cache.bfloat16(), kv.block_tables, kv.seq_lens, kv.cu_seqlens_q)
    q16 = q.bfloat16()
    out16 = native.paged_prefill_attention(q16, kv16, 0.125)
    fp32 = native.paged_prefill_attention(q16.float(), kv16, 0.125)
    assert out16.dtype == torch.bfloat16 and torch.equal(out16, fp32.bfloat16())
    assert not torch.equal(out16, fp32.view(torch.int32).bitwise_and(-65536).view(F32).bfloat16())  # not truncated
    assert torch.equal(cpu.paged_prefill_attention(q16, kv16, 0.125), out16)


def with_prefill(kv: PagedKV, **fields: object) -> PagedKV:
    """``kv`` with some fields replaced."""
    parts = {"key_cache": kv.key_cache, "value_cache": kv.value_cache, "block_tables": kv.block_tables,
             "seq_lens": kv.seq_lens, "cu_seqlens_q": kv.cu_seqlens_q}  # fmt: skip
    return PagedKV(**(parts | fields))  # type: ignore[arg-type]


def bad_block(kv: PagedKV) -> PagedKV:
    table = kv.block_tables.clone()
    table[1, 2] = kv.num_blocks
    return with_prefill(kv, block_tables=table)


WRONG_PREFILL_INPUTS: dict[str, tuple[Callable[[torch.Tensor, PagedKV], tuple[torch.Tensor, PagedKV]], str]] = {
    "no cu_seqlens_q": (lambda q, kv: (q, with_prefill(kv, cu_seqlens_q=None)), "needs PagedKV.cu_seqlens_q"),
    "cu_seqlens_q of another batch": (
        lambda q, kv: (q, with_prefill(kv, cu_seqlens_q=kv.cu_seqlens_q[:2])),
        r"cu_seqlens_q must be \[num_seqs \+ 1\]",
    ),
    "cu_seqlens_q not from 0": (
        lambda q, kv: (q, with_prefill(kv, cu_seqlens_q=torch.tensor([1, 4, 9]))),
        r"cu_seqlens_q must run from 0 to the 9 query rows, never decreasing; got \[1, 4, 9\]",
    ),
    "cu_seqlens_q decreasing": (
        lambda q, kv: (q, with_prefill(kv, cu_seqlens_q=torch.tensor([0, 10, 9]))),
        r"never decreasing; got \[0, 10, 9\]",
    ),
    "cu_seqlens_q short of the rows": (
        lambda q, kv: (torch.cat([q, q[:1]]), kv),
        r"cu_seqlens_q must run from 0 to the 10 query rows",
    ),
    "float cu_seqlens_q": (
        lambda q, kv: (q, with_prefill(kv, cu_seqlens_q=kv.cu_seqlens_q.float())),
        "cu_seqlens_q must hold integers",
    ),
    "q_len above seq_len": (
        lambda q, kv: (q, with_prefill(kv, seq_lens=torch.tensor([4, 4], dtype=torch.int32))),
        r"sequence 1: q_len=5 query tokens but seq_len=4",
    ),
    "a negative seq_len": (
        lambda q, kv: (q, with_prefill(kv, seq_lens=torch.tensor([-1, 20], dtype=torch.int32))),
        r"sequence 0: seq_len=-1 is negative",
    ),
    "a block id out of range": (lambda q, kv: (q, bad_block(kv)), r"sequence 1: .*outside \[0, \d+\)"),
    "a seq_len past its row": (
        lambda q, kv: (q, with_prefill(kv, seq_lens=torch.tensor([4, 4 * kv.block_tables.shape[1] + 1]))),
        r"sequence 1: seq_len=\d+ needs \d+ blocks but its block_tables row holds",
    ),
    "fp16 query": (lambda q, kv: (q.half(), kv), "query must be a 3-D fp32 CPU tensor, got torch.float16"),
    "Hq not a multiple of Hkv": (lambda q, kv: (q[:, :5], kv), "got 5 query heads, 2 KV heads"),
    "heads not contiguous": (lambda q, kv: (q.transpose(1, 2).contiguous().transpose(1, 2), kv), "contiguous heads"),
}


@pytest.mark.parametrize("what", WRONG_PREFILL_INPUTS)
def test_prefill_inputs_the_kernel_cannot_read_are_refused(built: None, what: str) -> None:
    change, message = WRONG_PREFILL_INPUTS[what]
    q, kv = change(*prefill_inputs([(0, 4), (15, 5)], 2, 3, 16, 4)[::2])
    before = [t.clone() for t in (q, kv.key_cache, kv.value_cache)]
    with pytest.raises(KernelInputError, match=message):
        native.paged_prefill_attention(q, kv, 0.25)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, kv.key_cache, kv.value_cache)))


# --- 1b. decode attention through a tile-load plan (a learner's lab 08 tile load in the engine) --------
def odd_tile_load(cache: torch.Tensor, table: torch.Tensor, start: int, size: int, seq_len: int):  # type: ignore[no-untyped-def]
    """The solution's tile load, but lanes 3 and 5 of each tile read a zero row (still attending) and lane 6
    is masked although in range: the plan then holds zero-row lanes and holes."""
    rows, mask = load_kv_tile(cache, table, start, size, seq_len)
    rows[[3, 5]] = 0
    mask = mask.clone()
    mask[6] = False
    return rows, mask


@pytest.mark.parametrize("tile_load", [load_kv_tile, odd_tile_load], ids=["solution", "zero rows and holes"])
@pytest.mark.parametrize("group", [1, 3, 5])
def test_lane_attention_equals_the_torch_tiled_path(
    built: None, monkeypatch: pytest.MonkeyPatch, tile_load: Callable[..., object], group: int
) -> None:
    q, kv, clean = decode_inputs([0, 1, 17, 64, 65, 130], 2, group, 16, 4, packed=True)
    plan = plan_tile_loads(tile_load, clean)  # type: ignore[arg-type]
    assert bool((plan.slots[plan.mask] == 0).any()) == (tile_load is odd_tile_load)
    got = tiled_decode_attention(q, clean, 0.25, plan)  # the C kernel: built here
    monkeypatch.setattr(native, "reads", lambda kv, query=None: False)
    want = tiled_decode_attention(q, clean, 0.25, plan)  # the torch code
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert torch.equal(got[0], torch.zeros_like(got[0])) and not torch.isnan(got).any()


def test_a_lane_slot_outside_the_cache_is_named(built: None) -> None:
    q, _, clean = decode_inputs([5, 9], 2, 3, 16, 4)
    plan = plan_tile_loads(load_kv_tile, clean)
    slots = plan.slots.clone()
    slots[1, 2] = clean.num_blocks * clean.block_size + 1  # one past the last slot (+1 encoded)
    with pytest.raises(KernelInputError, match="sequence 1: an attending lane's slot is outside the cache"):
        native.lane_decode_attention(q, clean, 0.25, slots, plan.mask)
    slots[1, 2], mask = -1, plan.mask.clone()
    mask[1, 2] = False  # a masked lane is never read, whatever its slot
    native.lane_decode_attention(q, clean, 0.25, slots, mask)


# Found by this file's first version, fixed since: wrapped int64 values, an empty table row, zero tokens.
@pytest.mark.parametrize("field", ["block id 2**32 + 1", "seq_len 2**32 + 5"])
def test_int64_values_past_int32_are_refused_not_wrapped(built: None, field: str) -> None:
    q, _, kv = decode_inputs([5, 9], 2, 3, 16, 4)
    tables, lens = kv.block_tables.long(), kv.seq_lens.long()
    if field.startswith("block id"):
        tables[1, 0] = 2**32 + 1  # wraps to block 1, a valid id: read silently
    else:
        lens[1] = 2**32 + 5  # wraps to 5: attends to 5 keys
    try:
        native.paged_decode_attention(q, PagedKV(kv.key_cache, kv.value_cache, tables, lens), 0.25)
    except KernelInputError as e:
        assert "sequence 1" in str(e)
    else:
        raise AssertionError("the wrapped value was used")


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.uint8, torch.uint16, torch.uint32, torch.uint64])
def test_tables_and_lengths_of_any_integer_dtype_are_read_as_their_values(built: None, dtype: torch.dtype) -> None:
    """Was: int8/int16 tables refused as 'holding a value outside int32' (the bound 2**31 - 1, cast to int16,
    became -1), uint16/32/64 ones raised torch's NotImplementedError (no comparison for them)."""
    q, _, clean = decode_inputs([5, 9], 2, 3, 16, 4)
    tables, lens = clean.block_tables.clamp(min=0).to(dtype), clean.seq_lens.to(dtype)
    got = native.paged_decode_attention(q, PagedKV(clean.key_cache, clean.value_cache, tables, lens), 0.25)
    torch.testing.assert_close(got, reference.paged_decode_attention(q, clean, 0.25), rtol=1e-5, atol=1e-6)
    if torch.iinfo(dtype).max > 2**31 - 1:  # a value past int32 is refused, not wrapped
        tables[1, 0] = 2**31
        with pytest.raises(KernelInputError, match=r"block_tables of sequence 1 holds a value outside int32"):
            native.paged_decode_attention(q, PagedKV(clean.key_cache, clean.value_cache, tables, lens), 0.25)


def test_an_empty_table_with_tokens_to_read_is_refused(built: None) -> None:
    code = (  # in a child process: the bug was a segmentation fault (a [S, 0] table has row stride 1)
        "import torch\nfrom pagedlab.errors import KernelInputError\nfrom pagedlab.kernels import native\n"
        "from pagedlab.kernels.paged_kv import PagedKV\nkc = torch.zeros(4, 4, 1, 16)\n"
        "kv = PagedKV(kc, kc, torch.zeros(2, 0, dtype=torch.int32), torch.tensor([0, 3], dtype=torch.int32))\n"
        "try:\n    native.paged_decode_attention(torch.zeros(2, 1, 16), kv, 0.25)\n"
        "except KernelInputError as e:\n    print(e)\n"
    )  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0 and "sequence 1" in done.stdout, done.returncode


@pytest.mark.parametrize("op", ["reshape_and_cache", "rms_norm", "rotary_embedding"])
def test_ops_take_zero_tokens(built: None, op: str) -> None:
    e = torch.zeros(0, 2, 16)
    if op == "reshape_and_cache":
        kc = torch.randn(2, 4, 2, 16)
        native.reshape_and_cache(e, e, kc, kc.clone(), torch.zeros(0, dtype=torch.int64))
        return
    out = {
        "rms_norm": lambda: native.rms_norm(e[:, 0], torch.ones(16), 1e-5),
        "rotary_embedding": lambda: native.rotary_embedding(e, torch.ones(0, 16), torch.ones(0, 16)),
    }[op]()
    assert out.shape[0] == 0


# --- 3. reshape_and_cache -----------------------------------------------------------------------
def cache_write_inputs(t: int = 9) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """K and V as views of a packed ``[T, (6 + 2 * 2) * 16]`` QKV, random caches of 8 blocks of 4, slots
    (some -1) in random order."""
    qkv = torch.randn(t, 10 * 16, generator=gen(11))
    key, value = qkv[:, 96:128].view(t, 2, 16), qkv[:, 128:].view(t, 2, 16)
    kc, vc = torch.randn(8, 4, 2, 16, generator=gen(12)), torch.randn(8, 4, 2, 16, generator=gen(13))
    slots = torch.randperm(32, generator=gen(14))[:t]
    slots[[0, 4, t - 1]] = -1
    return key, value, kc, vc, slots


def test_reshape_and_cache_equals_the_reference(built: None) -> None:
    key, value, kc, vc, slots = cache_write_inputs()
    ref_k, ref_v = kc.clone(), vc.clone()
    reference.reshape_and_cache(key, value, ref_k, ref_v, slots)
    native.reshape_and_cache(key, value, kc, vc, slots)
    assert torch.equal(kc, ref_k) and torch.equal(vc, ref_v)


@pytest.mark.parametrize("bad", [32, 10**12, -2])
def test_a_bad_slot_is_named_and_nothing_is_written(built: None, bad: int) -> None:
    key, value, kc, vc, slots = cache_write_inputs()
    slots[6] = bad  # tokens 1-3 and 5 before it have valid slots
    before = (kc.clone(), vc.clone())
    with pytest.raises(KernelInputError, match=rf"slot_mapping\[6\] = {bad} is outside the cache's 32 slots"):
        native.reshape_and_cache(key, value, kc, vc, slots)
    assert torch.equal(kc, before[0]) and torch.equal(vc, before[1])


# --- 4. the layer ops ---------------------------------------------------------------------------
def test_rotary_embedding_is_apply_rope_bit_for_bit(built: None) -> None:
    t, d = 7, 64
    qkv = torch.randn(t, 12 * d, generator=gen(21)) * 30
    x = qkv[:, : 10 * d].view(t, 10, d)  # Q and K heads of a packed QKV: rows 12 * d apart
    angles = torch.rand(t, d, generator=gen(22)) * 1000  # halves differ: a column mix-up shows
    cos, sin = angles.cos(), angles.sin()
    out = native.rotary_embedding(x, cos, sin)
    assert out.is_contiguous() and torch.equal(out, apply_rope(x, cos, sin))


def test_rms_norm_equals_torch_and_float64(built: None) -> None:
    wide = torch.randn(5, 700, generator=gen(23)) * torch.logspace(-3, 3, 5)[:, None]
    x, weight, eps = wide[:, 100:676], torch.randn(576, generator=gen(24)), 1e-5
    out = native.rms_norm(x, weight, eps)
    torch.testing.assert_close(out, F.rms_norm(x, (576,), weight, eps), rtol=1e-5, atol=1e-6)
    x64 = x.double()
    exact = weight.double() * x64 / (x64.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    torch.testing.assert_close(out.double(), exact, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: native.rms_norm(torch.randn(2, 8).half(), torch.ones(8), 1e-5), "float32 or bfloat16"),
        (lambda: native.rms_norm(torch.randn(8), torch.ones(8), 1e-5), "2-D CPU"),
        (lambda: native.rms_norm(torch.randn(2, 8).bfloat16(), torch.ones(8), 1e-5), r"contiguous bf16 \[8\]"),
        (lambda: native.rms_norm(torch.randn(2, 8), torch.ones(7), 1e-5), r"contiguous fp32 \[8\]"),
        (lambda: native.rms_norm(torch.randn(2, 8), torch.ones(8).double(), 1e-5), r"contiguous fp32 \[8\]"),
        (lambda: native.rms_norm(torch.randn(8, 2).T, torch.ones(8), 1e-5), "contiguous rows"),
        (lambda: native.rotary_embedding(torch.randn(2, 3, 7), torch.ones(2, 7), torch.ones(2, 7)), "even head_dim"),
        (lambda: native.rotary_embedding(torch.randn(2, 3, 8), torch.ones(3, 8), torch.ones(2, 8)), r"cos must be"),
        (
            lambda: native.rotary_embedding(torch.randn(2, 3, 8).double(), torch.ones(2, 8), torch.ones(2, 8)),
            "bfloat16",
        ),
        (
            lambda: native.rotary_embedding(torch.randn(2, 3, 8).bfloat16(), torch.ones(2, 8), torch.ones(2, 8)),
            r"cos must be a contiguous bf16",
        ),
        (
            lambda: native.reshape_and_cache(
                torch.randn(2, 1, 4).bfloat16(),
                torch.randn(2, 1, 4).bfloat16(),
                torch.zeros(2, 2, 1, 4),
                torch.zeros(2, 2, 1, 4),
                torch.tensor([0, 1]),
            ),
            "key_cache must be a 4-D bf16",
        ),
    ],
)
def test_bad_layer_op_inputs_are_refused(built: None, call: Callable[[], object], message: str) -> None:
    with pytest.raises(KernelInputError, match=message):
        call()


# --- 5. availability ----------------------------------------------------------------------------
def test_turned_off_the_cpu_backend_runs_its_torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv(native.ENV_NATIVE, "0")
    assert native.load() is None and "PAGEDLAB_NATIVE" in native.unavailable_reason()
    with pytest.raises(RuntimeError, match="PAGEDLAB_NATIVE"):
        native.rms_norm(torch.randn(2, 8), torch.ones(8), 1e-5)
    q, _, kv = decode_inputs([0, 5, 40, 17], 2, 3, 16, 4)
    assert isinstance(cpu.plan_decode(kv), cpu.DecodePlan)
    torch.testing.assert_close(
        cpu.paged_decode_attention(q, kv, 0.25), reference.paged_decode_attention(q, kv, 0.25), rtol=1e-5, atol=1e-6
    )
    q, _, kv = prefill_inputs(PREFILL_CHUNKS, 2, 3, 16, 4)  # prefill: the torch path too, same results
    with mock.patch.object(native, "paged_prefill_attention", side_effect=AssertionError("the C kernel ran")):
        torch.testing.assert_close(
            cpu.paged_prefill_attention(q, kv, 0.25), reference.paged_prefill_attention(q, kv, 0.25), rtol=1e-5,
            atol=1e-6,
        )  # fmt: skip


def test_without_a_compiler_the_reason_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.delenv(native.ENV_NATIVE, raising=False)
    monkeypatch.setattr(native, "_compiler", lambda: None)
    assert native.load() is None and "no C compiler" in native.unavailable_reason()


def test_a_failing_compiler_gives_none_and_names_the_failed_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cc = tmp_path / "broken-cc"
    cc.write_text("#!/bin/sh\necho 'broken-cc: cannot compile' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.delenv(native.ENV_NATIVE, raising=False)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("PAGEDLAB_CACHE_DIR", str(tmp_path))
    assert native.load() is None
    why = native.unavailable_reason()
    assert why.startswith("the C kernel did not build") and "broken-cc: cannot compile" in why
    assert not list((tmp_path / "native").glob("*.so"))


def test_a_fresh_cache_dir_builds_once_and_a_new_process_reuses_it(
    built: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.delenv(native.ENV_NATIVE, raising=False)
    monkeypatch.setenv("PAGEDLAB_CACHE_DIR", str(tmp_path))
    lib = native.load()
    assert lib is not None, native.unavailable_reason()
    so = Path(lib._name)  # the library and its checksum only: no temporary left behind
    assert so.parent == tmp_path / "native" and so.suffix == ".so"
    assert sorted(p.name for p in so.parent.iterdir()) == [so.name, so.name + ".sha256"]
    mtime = so.stat().st_mtime_ns
    code = "from pagedlab.kernels import native; print(native.load()._name)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == so and so.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in so.parent.iterdir()) == [so.name, so.name + ".sha256"]


def test_a_read_only_cache_uses_its_built_library_or_builds_in_the_temp_folder(
    built: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocked = tmp_path / "a-file"  # "<a file>/native" can never be created: unwritable even for root
    blocked.write_text("")
    fallback = tmp_path / "tmp" / "native"
    monkeypatch.setattr(native, "library_dirs", lambda: [blocked / "native", fallback])
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.delenv(native.ENV_NATIVE, raising=False)
    lib = native.load()
    assert lib is not None, native.unavailable_reason()
    assert Path(lib._name).parent == fallback and sorted(p.suffix for p in fallback.iterdir()) == [".sha256", ".so"]
    shared = tmp_path / "shared"  # an administrator's read-only cache that holds a built library
    shared.mkdir()
    for f in fallback.iterdir():
        (shared / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(native, "library_dirs", lambda: [shared, tmp_path / "other"])
    monkeypatch.setattr(native, "_state", {})
    assert Path(native.load()._name).parent == shared and not (tmp_path / "other").exists()
    monkeypatch.setattr(native, "library_dirs", lambda: [blocked / "native", blocked / "again"])
    monkeypatch.setattr(native, "_state", {})
    assert native.load() is None and "no folder to build in" in native.unavailable_reason()


# --- 5b. only a library this user or root built, unchanged, is ever loaded (issue 26) ----------------------
@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    """``(own, shared)``: the ``native/`` folders of an empty cache of this user's and of the per-user temp
    folder (the system temp directory moved under ``tmp_path``); nothing loaded yet."""
    if native._compiler() is None:
        pytest.skip("no C compiler on this machine (native._compiler() is None)")
    monkeypatch.setattr(native, "_state", {})
    for name in (native.ENV_NATIVE, native.ENV_SANITIZE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAGEDLAB_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # for child processes
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    own, shared = native.library_dirs()
    assert own == tmp_path / "cache" / "native"
    assert shared == tmp_path / "tmp" / f"pagedlab-{os.getuid()}" / "native"  # the name anyone can predict
    return own, shared


def test_an_empty_own_cache_is_built_in_before_a_copy_left_in_the_temp_folder_is_used(
    fresh: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared-cache recipe (instructor guide): the administrator's ``pagedlab generate`` must build into
    ``$PAGEDLAB_CACHE_DIR/native`` even when an earlier run left a library in their temp folder."""
    own, shared = fresh
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setattr(native, "library_dirs", lambda: [blocked / "native", shared])
    assert Path(native.load()._name).parent == shared  # an earlier run, its cache not writable then
    monkeypatch.setattr(native, "library_dirs", lambda: [own, shared])
    monkeypatch.setattr(native, "_state", {})
    lib = native.load()
    assert lib is not None and Path(lib._name).parent == own, native.unavailable_reason()
    assert sorted(p.suffix for p in own.iterdir()) == [".sha256", ".so"]


def planted_library(folder: Path, marker: Path) -> list[Path]:
    """A library whose loading creates ``marker``, under every name the kit looks for in ``folder``, each
    with a correct checksum beside it (anyone can compute one)."""
    compiler = native._compiler()
    assert compiler is not None
    folder.mkdir(parents=True, exist_ok=True)
    source = folder.parent / "planted.c"
    source.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {{ '
                      f'FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')  # fmt: skip
    paths = [native.library_path(compiler, flags, folder) for flags in native._FLAG_SETS]
    for path in paths:
        subprocess.run([compiler, "-shared", "-fPIC", "-o", str(path), str(source)], check=True, timeout=120)
        trust.write_checksum(path)
    return paths


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="simulating another user takes root")
@pytest.mark.parametrize("how", ["folder writable by all", "folder of another uid", "parent folder of another uid"])
def test_a_library_planted_in_the_shared_temp_folder_is_never_loaded(
    fresh: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    own, shared = fresh
    marker = tmp_path / "planted-code-ran"
    planted = planted_library(shared, marker)
    if how == "folder writable by all":  # e.g. made by a umask-0 process; the files even look like ours
        shared.chmod(0o777)
    else:  # another user made the folder first: the name is predictable
        os.chown(shared if how == "folder of another uid" else shared.parent, 4242, 4242)
    with caplog.at_level(logging.WARNING, logger="pagedlab.kernels.native"):
        lib = native.load()
    assert not marker.exists(), "the planted library's code ran"
    assert lib is not None and Path(lib._name).parent == own, native.unavailable_reason()  # built in the own cache
    assert not caplog.records  # the own cache comes first and was built in: the temp folder was not even read
    own_lib = Path(lib._name)  # now the own cache is not there to build in: the planted copy is looked at, refused
    monkeypatch.setattr(native, "library_dirs", lambda: [tmp_path / "a-file" / "native", shared])
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(native, "_state", {})
    with caplog.at_level(logging.WARNING, logger="pagedlab.kernels.native"):
        assert native.load() is None
    assert not marker.exists(), "the planted library's code ran"
    (line,) = [r.getMessage() for r in caplog.records]
    assert str(planted[0]) in line and ("uid 4242" in line or "written by other users" in line)
    assert "\n" not in line and own_lib.exists()


def test_the_temp_folder_is_made_private_and_one_made_by_another_user_is_not_used(
    fresh: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    own, shared = fresh
    blocked = tmp_path / "a-file"  # "<a file>/native" can never be created: unwritable even for root
    blocked.write_text("")
    monkeypatch.setattr(native, "library_dirs", lambda: [blocked / "native", shared])
    lib = native.load()
    assert lib is not None and Path(lib._name).parent == shared
    for folder in (shared, shared.parent):
        st = folder.stat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.getuid(), 0o700), folder
    if os.getuid() != 0:
        return
    shutil.rmtree(shared.parent)
    shared.mkdir(parents=True)
    os.chown(shared.parent, 4242, 4242)  # made first by another user
    monkeypatch.setattr(native, "_state", {})
    with caplog.at_level(logging.WARNING, logger="pagedlab.kernels.native"):
        assert native.load() is None
    why = native.unavailable_reason()
    assert "no folder to build in" in why and "belongs to uid 4242" in why and not list(shared.iterdir())


@pytest.fixture(scope="module")
def library_built() -> Path:
    """This machine's library as the kit builds it in the user's cache (once: the tests copy it)."""
    if native._compiler() is None:
        pytest.skip("no C compiler on this machine (native._compiler() is None)")
    with mock.patch.dict(os.environ, {native.ENV_NATIVE: "1"}), mock.patch.object(native, "_state", {}):
        lib = native.load()
        assert lib is not None, native.unavailable_reason()
        return Path(lib._name)


def damaged_copy(built: Path, own: Path, damage: str) -> tuple[Path, bytes]:
    """``(path, good bytes)``: the library ``built`` copied into ``own`` under the name the kit looks for, its
    checksum beside it, then damaged as ``damage`` says (an interrupted copy, a changed byte, an old cache
    without checksums)."""
    so, good = own / built.name, built.read_bytes()
    own.mkdir(parents=True)
    so.write_bytes(good[: len(good) // 2] if damage == "truncated" else good)
    trust.write_checksum(so)
    if damage == "truncated":  # after the checksum: the library was cut short after it was written
        so.write_bytes(good)
        trust.write_checksum(so)
        so.write_bytes(good[: len(good) // 2])
    elif damage == "one byte changed":
        so.write_bytes(good[:-100] + bytes([good[-100] ^ 1]) + good[-99:])
    elif damage == "checksum missing":
        so.with_name(so.name + ".sha256").unlink()
    return so, good


def test_a_truncated_library_is_rebuilt_with_one_line_never_a_signal(
    library_built: Path, fresh: tuple[Path, Path]
) -> None:
    so, good = damaged_copy(library_built, fresh[0], "truncated")
    code = "from pagedlab.kernels import native\nlib = native.load()\nprint(lib._name if lib else native.unavailable_reason())"
    # A child process: loading the truncated library killed the process with SIGBUS.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == str(so) and so.read_bytes() == good  # rebuilt in place: the same bytes
    (line,) = done.stderr.strip().splitlines()
    assert line == f"pagedlab: C kernels: not loading {so}: does not match its checksum ({len(good) // 2} bytes: " \
                   f"truncated or changed); using {so}"  # fmt: skip


@pytest.mark.parametrize("damage", ["one byte changed", "checksum missing"])
def test_a_changed_library_or_one_without_its_checksum_is_rebuilt(
    library_built: Path, fresh: tuple[Path, Path], caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    so, good = damaged_copy(library_built, fresh[0], damage)
    with caplog.at_level(logging.WARNING, logger="pagedlab.kernels.native"):
        lib = native.load()
    assert lib is not None and Path(lib._name) == so and so.read_bytes() == good, native.unavailable_reason()
    (line,) = [r.getMessage() for r in caplog.records]
    reason = "does not match its checksum" if damage == "one byte changed" else f"{so.name}.sha256 is missing"
    assert line.startswith(f"pagedlab: C kernels: not loading {so}: {reason}")


def test_a_library_of_another_build_lacking_the_symbols_is_rebuilt_without_running_any_of_its_code(
    fresh: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its symbols are read from the file (ELF) before it is opened: its constructor never runs. Was: loaded,
    found wanting and closed again, its constructor run (before that: AttributeError out of load())."""
    own, _ = fresh
    compiler = native._compiler()
    assert compiler is not None
    own.mkdir(parents=True)
    marker = tmp_path / "foreign-code-ran"
    source = own.parent / "foreign.c"
    source.write_text(f'#include <stdio.h>\nint foreign(void) {{ return 1; }}\n__attribute__((constructor)) static '
                      f'void ran(void) {{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')  # fmt: skip
    path = native.library_path(compiler, native._FLAG_SETS[0], own)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(path), str(source)], check=True, timeout=120)
    trust.write_checksum(path)  # a genuine library of this user's, of another build: only its symbols differ
    assert trust.elf_symbols(path.read_bytes()) is None or "foreign" in trust.elf_symbols(path.read_bytes())
    with caplog.at_level(logging.WARNING, logger="pagedlab.kernels.native"):
        lib = native.load()
    assert lib is not None and Path(lib._name) == path, native.unavailable_reason()
    assert not hasattr(lib, "foreign") and hasattr(lib, "paged_decode_attention_f32")
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"{path}: another build" in line and "paged_decode_attention_f32" in line
    if sys.platform == "linux":  # an ELF library: refused before dlopen
        assert not marker.exists(), "the foreign library was loaded: its constructor ran"
        assert "it lacks paged_decode_attention_f32, lane_decode_attention_f32" in line


def test_elf_symbols_reads_the_dynamic_symbols_and_refuses_a_cut_table(library_built: Path) -> None:
    data = library_built.read_bytes()
    if data[:4] != b"\x7fELF":
        pytest.skip("not an ELF platform")
    assert set(native._SIGNATURES) <= trust.elf_symbols(data)  # type: ignore[operator]
    assert "malloc" not in trust.elf_symbols(data)  # type: ignore[operator]  # used, not defined: undefined
    assert trust.elf_symbols(b"#!/bin/sh\n") is None
    for cut in (20, 64, len(data) // 2):
        with pytest.raises(ValueError, match="unreadable ELF tables|outside the file"):
            trust.elf_symbols(data[:cut])


def test_the_library_name_hashes_the_cpu_so_mixed_nodes_never_share_one(
    built: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = native._compiler()
    assert compiler is not None
    here = native.library_path(compiler, ["-march=native"])
    assert "flags" in native._cpu_model() or "Features" in native._cpu_model() or sys.platform != "linux"
    monkeypatch.setattr(native, "_cpu_model", lambda: "model name : the same\nflags : without avx512f")
    other = native.library_path(compiler, ["-march=native"])
    assert other != here and other.parent == here.parent
    assert native.library_path(compiler, ["-fopenmp-simd"]) != other  # and the flags


# --- 6. the engine ------------------------------------------------------------------------------
def engine_tokens(reject: bool) -> dict[str, list[int]]:
    """Greedy tokens of 7 prompts on the "cpu" backend; with ``reject``, an out-of-vocabulary request is refused
    between steps."""
    from pagedlab import LLMEngine, SamplingParams
    from tests.kernels.test_engine_triton import tiny_llama

    g = gen(1)
    prompts = [torch.randint(0, 97, (n,), generator=g).tolist() for n in (1, 3, 4, 5, 9, 23, 40)]
    eng = LLMEngine(tiny_llama(), attention_backend="cpu", block_size=4, num_gpu_blocks=64, max_model_len=128,
                    max_num_batched_tokens=16)  # fmt: skip
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    outs = []
    for i, p in enumerate(prompts):
        eng.add_request(str(i), {"prompt_token_ids": p}, params)
        if reject and i == 3:
            outs += eng.step()
            with pytest.raises(InvalidRequestError, match="outside the vocabulary"):
                eng.add_request("bad", {"prompt_token_ids": [5, 97]}, params)
    while eng.has_unfinished_requests():
        outs += eng.step()
    done = {o.request_id: list(o.outputs[0].token_ids) for o in outs if o.finished}
    assert eng.model_runner.backend == "cpu" and sorted(done) == sorted(map(str, range(len(prompts))))
    return done


def counting(f: Callable[..., torch.Tensor], calls: list[str]) -> Callable[..., torch.Tensor]:
    """``f``, appending its name to ``calls`` on each call."""

    def wrapped(*args: object, **kw: object) -> torch.Tensor:
        calls.append(f.__name__)
        return f(*args, **kw)

    return wrapped


def test_engine_tokens_equal_with_the_c_kernels_on_and_off(built: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    names = {"paged_decode_attention", "paged_prefill_attention", "reshape_and_cache", "rms_norm", "rotary_embedding"}
    for name in names:
        monkeypatch.setattr(native, name, counting(getattr(native, name), calls))
    on = engine_tokens(reject=True)
    assert set(calls) == names
    monkeypatch.setattr(native, "_state", {"lib": None, "why": "off for this test"})  # every caller: torch
    calls.clear()
    off = engine_tokens(reject=False)
    assert calls == [] and on == off and all(len(t) == 6 for t in on.values())
