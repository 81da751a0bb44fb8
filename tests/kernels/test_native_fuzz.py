"""Fuzzing every C entry point of pagedlab.kernels.native (hypothesis) against the torch references.

Each case is drawn around a valid input and then, often, broken in one way a caller could break it (a tensor
on another device, another dtype or rank, a float or bool table, a block id or slot out of range, a length
past its table row or below 0, a block_size of 0, a max_seq_len near 2**62, a thread count of 0, -5 or
2**32 + 1). Whatever is drawn, the wrapper returns the reference's result or raises KernelInputError; never a
crash, a wrong answer or a silent truncation.

Every op's test runs once per way of breaking its input (and once unbroken): ``PAGEDLAB_FUZZ_EXAMPLES`` valid
cases per op (default 200) and a fortieth as many (at least 3) per break, so each break is drawn whatever
hypothesis favours: 56 breaks, 1,280 cases in all by default (200 valid + 5 per break per op). The same cases run
in a library built with AddressSanitizer and UBSan (``make asan``; ``test_native_asan.py`` in CI), where a
read or write out of bounds that happens not to crash here is reported.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pagedlab.errors import KernelInputError
from pagedlab.kernels import native, reference
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.model.attention import TilePlan, tiled_decode_attention
from pagedlab.model.llama import apply_rope

pytestmark = pytest.mark.no_interpreter_needed
EXAMPLES = int(os.environ.get("PAGEDLAB_FUZZ_EXAMPLES", "200"))
FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
#: Thread counts a caller may pass, and ones it may not (0, negative, past c_int, above the limit, a bool, a float).
THREADS_OK, THREADS_BAD = (
    [None, 1, 2, 3],
    {"0": 0, "-5": -5, "2**32+1": 2**32 + 1, "4097": 4097, "True": True, "2.0": 2.0},
)


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    """The library is loaded; skips only without any C compiler (as test_native.py)."""
    if native._compiler() is None:
        pytest.skip("no C compiler on this machine (native._compiler() is None)")
    with mock.patch.dict(os.environ, {native.ENV_NATIVE: "1"}), mock.patch.object(native, "_state", {}):
        assert native.load() is not None, native.unavailable_reason()
        yield


def meta(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the 'meta' device: a tensor of another device than the CPU, without a GPU (no memory at all)."""
    return t.to("meta")


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def outcome(call: Any) -> torch.Tensor | KernelInputError:
    """``call()``'s result, or the KernelInputError it raised (any other exception fails the test)."""
    try:
        return call()
    except KernelInputError as e:
        return e


def fuzz(cases: Callable[[str], st.SearchStrategy[Any]], bad: str, check: Callable[[Any], None]) -> None:
    """Run ``check`` on cases drawn from ``cases(bad)``: :data:`EXAMPLES` valid ones (``bad == ""``), else a
    fortieth as many (at least 3); a drawn case its break does not fit (no sequence to break) is discarded."""

    @settings(FUZZ, max_examples=EXAMPLES if not bad else max(3, EXAMPLES // 40))
    @given(cases(bad))
    def run(case: Any) -> None:
        assume(case is not None)
        check(case)

    run()


def refused(got: object, bad: str) -> None:
    assert isinstance(got, KernelInputError), f"{bad}: accepted"


def returned(got: object) -> torch.Tensor:
    assert isinstance(got, torch.Tensor), f"refused a valid input: {got}"
    return got


# --- decode attention through the block table --------------------------------------------------------
@dataclass(frozen=True)
class DecodeCase:
    query: torch.Tensor
    kv: PagedKV
    kwargs: dict[str, Any]
    bad: str  # "" when the wrapper must return the reference's result, else what is wrong


DECODE_BREAKS = [
    "block id just past", "block id far", "seq_len past its row", "negative seq_len", "max_seq_len below a length", "max_seq_len 2**62",
    "float table", "bool lens", "float lens", "5-D cache", "block_size 0", "meta query", "meta cache",
    "meta table", "meta lens", "3-D table", "query heads not contiguous", "max_seq_len float",
    *(f"threads {name}" for name in THREADS_BAD),
]  # fmt: skip


@st.composite
def decode_cases(draw: st.DrawFn, bad: str) -> DecodeCase | None:
    hkv, group = draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 3, 4, 5, native.MAX_GROUP]))
    d, bs = draw(st.sampled_from([1, 2, 8, 16, 64])), draw(st.integers(1, 9))
    lens = draw(st.lists(st.integers(0, 40), max_size=6))
    width = max([-(-n // bs) for n in lens], default=0) + draw(st.integers(0, 2))
    num_blocks = draw(st.integers(1, 14))
    ids = st.integers(0, num_blocks - 1)
    table = torch.tensor(draw(st.lists(st.lists(ids, min_size=width, max_size=width), min_size=len(lens),
                                       max_size=len(lens))), dtype=torch.int64).reshape(len(lens), width)  # fmt: skip
    for s, n in enumerate(lens):  # the padding past a row's blocks is never read: garbage
        table[s, -(-n // bs) :] = draw(st.sampled_from([-1, -(2**31), 2**31 - 1, num_blocks]))
    seed = draw(st.integers(0, 2**16))
    cache = randn(num_blocks, bs, hkv, d, seed=seed)
    kv = PagedKV(cache, randn(*cache.shape, seed=seed + 1), table.to(draw(st.sampled_from([torch.int32, torch.int64]))),
                 torch.tensor(lens, dtype=draw(st.sampled_from([torch.int32, torch.int64]))))  # fmt: skip
    query = randn(len(lens), hkv * group, d, seed=seed + 2)
    kwargs: dict[str, Any] = {"num_threads": draw(st.sampled_from(THREADS_OK))}
    if draw(st.booleans()):  # an upper bound the caller knows: exact, or far above (sizes the buffers)
        kwargs["max_seq_len"] = max(lens, default=0) + draw(st.sampled_from([0, 1, 10**6]))
    return broken_decode(draw, DecodeCase(query, kv, kwargs, bad))


def broken_decode(draw: st.DrawFn, case: DecodeCase) -> DecodeCase | None:  # noqa: C901 - one branch per break
    """``case`` broken as ``case.bad`` says (None where its shapes leave no room)."""
    q, kv, kw, bad = case.query, case.kv, dict(case.kwargs), case.bad
    lens, table = kv.seq_lens.clone(), kv.block_tables.clone()
    live = [s for s, n in enumerate(lens.tolist()) if n > 0]
    if bad in ("block id just past", "block id far", "seq_len past its row", "max_seq_len below a length") and not live:
        return None
    if bad == "":
        pass
    elif bad.startswith("block id"):  # just past the cache (the likeliest slip, read silently), or far off
        s = draw(st.sampled_from(live))
        col = draw(st.integers(0, -(-int(lens[s]) // kv.block_size) - 1))
        far = [-1, 2**31 - 1, -(2**31)]
        table[s, col] = kv.num_blocks if bad == "block id just past" else draw(st.sampled_from(far))
    elif bad == "seq_len past its row":
        lens[draw(st.sampled_from(live))] = table.shape[1] * kv.block_size + draw(st.integers(1, 2 * kv.block_size))
    elif bad == "negative seq_len" and len(lens):
        lens[draw(st.integers(0, len(lens) - 1))] = draw(st.sampled_from([-1, -(2**31)]))
    elif bad == "max_seq_len below a length":
        kw["max_seq_len"] = int(lens.max()) - 1
    elif bad == "max_seq_len 2**62":
        kw["max_seq_len"] = 2**62 + draw(st.integers(-4, 4))
    elif bad == "max_seq_len float":
        kw["max_seq_len"] = float(max(lens.tolist(), default=0))
    elif bad == "float table":
        table = table.float() + 0.9
    elif bad == "bool lens":
        lens = lens > 0
    elif bad == "float lens":
        lens = lens.float()
    elif bad == "5-D cache":  # [blocks, bs, Hkv, D, 2]: read with a 4-D row stride it gave wrong answers
        kv = replace(
            kv,
            **{
                name: torch.stack([c, -c], -1)
                for name, c in (("key_cache", kv.key_cache), ("value_cache", kv.value_cache))
            },
        )
    elif bad == "block_size 0":
        kv = replace(kv, key_cache=kv.key_cache[:, :0], value_cache=kv.value_cache[:, :0])
    elif bad.startswith("threads "):
        kw["num_threads"] = THREADS_BAD[bad.removeprefix("threads ")]
    elif bad == "meta query":
        q = meta(q)
    elif bad == "meta cache":
        kv = replace(kv, **{draw(st.sampled_from(["key_cache", "value_cache"])): meta(kv.key_cache)})
    elif bad == "meta table":
        table = meta(table)
    elif bad == "meta lens":
        lens = meta(lens)
    elif bad == "3-D table":
        table = table[:, :, None]
    elif bad == "query heads not contiguous" and q.shape[0] and q.shape[1] > 1 and q.shape[2] > 1:
        q = q.transpose(1, 2).contiguous().transpose(1, 2)
    else:
        return None
    return DecodeCase(q, PagedKV(kv.key_cache, kv.value_cache, table, lens), kw, bad)


def check_decode(case: DecodeCase) -> None:
    got = outcome(lambda: native.paged_decode_attention(case.query, case.kv, 0.3, **case.kwargs))
    if case.bad:
        return refused(got, case.bad)
    want = reference.paged_decode_attention(case.query, case.kv, 0.3)
    torch.testing.assert_close(returned(got), want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("bad", ["", *DECODE_BREAKS])
def test_fuzz_paged_decode_attention(bad: str) -> None:
    fuzz(decode_cases, bad, check_decode)


# --- the same kernels on a bfloat16 cache ---------------------------------------------------------------
#: The breaks drawn again with the caches in bf16 (the checks before the call do not depend on the dtype).
BF16_DECODE_BREAKS = ["block id just past", "seq_len past its row", "negative seq_len", "meta cache", "5-D cache",
                      "mixed dtypes"]  # fmt: skip


def bf16_caches(kv: PagedKV) -> PagedKV:
    """``kv`` with both caches rounded to bf16 (what an engine with ``dtype="bfloat16"`` holds)."""
    return replace(kv, key_cache=kv.key_cache.bfloat16(), value_cache=kv.value_cache.bfloat16())


def upcast(kv: PagedKV) -> PagedKV:
    """``kv``'s bf16 caches as fp32: the very values the kernel reads (bf16 -> fp32 is exact)."""
    return replace(kv, key_cache=kv.key_cache.float(), value_cache=kv.value_cache.float())


def check_decode_bf16(case: DecodeCase) -> None:
    """bf16 caches against the fp32 reference on the same values: the fp32 tolerance (rtol 1e-5, atol 2e-6),
    since the kernel converts each row exactly and sums in fp32; a bf16 query gives a bf16 result within one
    bf16 rounding (rtol 2**-7) of the reference's on that query."""
    kv = bf16_caches(case.kv)
    if case.bad == "mixed dtypes":
        kv = replace(kv, value_cache=case.kv.value_cache)
    got = outcome(lambda: native.paged_decode_attention(case.query, kv, 0.3, **case.kwargs))
    if case.bad:
        return refused(got, case.bad)
    # atol 4e-6: fp32 sums in another order than the reference's (CI drew a 2.1e-6 difference on a 2.6e-3 output)
    torch.testing.assert_close(
        returned(got), reference.paged_decode_attention(case.query, upcast(kv), 0.3), rtol=1e-5, atol=4e-6
    )
    q16 = case.query.bfloat16()
    got16 = returned(outcome(lambda: native.paged_decode_attention(q16, kv, 0.3, **case.kwargs)))
    assert got16.dtype == torch.bfloat16
    want16 = reference.paged_decode_attention(q16.float(), upcast(kv), 0.3)
    torch.testing.assert_close(got16.float(), want16, rtol=2**-7, atol=1e-5)
    # All bf16 (paged_decode_attention_bf16: the kernel reads the bf16 query and rounds its own output): the
    # very bits of the fp32 call on the same values, rounded once, as the engine's .float() / .to() around it gave.
    fp32_then_round = returned(outcome(lambda: native.paged_decode_attention(q16.float(), kv, 0.3, **case.kwargs)))
    assert torch.equal(got16, fp32_then_round.bfloat16())


@pytest.mark.parametrize("bad", ["", *BF16_DECODE_BREAKS])
def test_fuzz_paged_decode_attention_bf16_cache(bad: str) -> None:
    if bad == "mixed dtypes":  # a valid case whose value cache stays fp32 (check_decode_bf16 leaves it so)
        fuzz(lambda b: decode_cases("").map(lambda c: c and replace(c, bad=b)), bad, check_decode_bf16)
    else:
        fuzz(decode_cases, bad, check_decode_bf16)


# --- prefill / extend attention (many causal queries per sequence) ---------------------------------------
PREFILL_BREAKS = [
    "block id just past", "block id far", "seq_len past its row", "negative seq_len", "q_len above seq_len",
    "cu_seqlens_q from 1", "cu_seqlens_q decreasing", "cu_seqlens_q short of the rows", "cu_seqlens_q missing",
    "cu_seqlens_q one short", "float cu_seqlens_q", "meta query", "meta cache", "query heads not contiguous",
    "5-D cache", "threads 0",
]  # fmt: skip


@dataclass(frozen=True)
class PrefillCase:
    query: torch.Tensor
    kv: PagedKV
    threads: int | None
    bad: str


@st.composite
def prefill_cases(draw: st.DrawFn, bad: str) -> PrefillCase | None:  # noqa: C901 - one branch per break
    """Sequences of ``ctx`` cached tokens (0 included) and a chunk of ``q_len`` new ones (0 and 1 included), their
    blocks scattered over a cache in a random order (no two sequences share one), garbage ids past each row's
    blocks; the query either its own tensor or the Q columns of a packed QKV."""
    hkv, group = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    d, bs = draw(st.sampled_from([8, 16, 64])), draw(st.sampled_from([1, 2, 3, 5, 8, 16, 32]))
    chunks = draw(st.lists(st.tuples(st.sampled_from([0, 0, 1, 2, 7, 31, 64, 90]), st.sampled_from([0, 1, 1, 3, 16, 17, 40])),
                           max_size=4))  # fmt: skip
    lens = [ctx + q for ctx, q in chunks]
    used = [-(-n // bs) for n in lens]
    width = max(used, default=0) + draw(st.integers(0, 2))
    num_blocks = sum(used) + draw(st.integers(1, 3))
    order = draw(st.permutations(range(num_blocks)))
    table = torch.full((len(lens), width), draw(st.sampled_from([-1, 2**31 - 1, num_blocks])), dtype=torch.int64)
    at = 0
    for s, u in enumerate(used):
        table[s, :u] = torch.tensor(order[at : at + u], dtype=torch.int64)
        at += u
    seed = draw(st.integers(0, 2**16))
    cache = randn(num_blocks, bs, hkv, d, seed=seed)
    cu = torch.tensor([0, *torch.tensor([q for _, q in chunks], dtype=torch.int64).cumsum(0).tolist()])
    kv = PagedKV(cache, randn(*cache.shape, seed=seed + 1), table.to(draw(st.sampled_from([torch.int32, torch.int64]))),
                 torch.tensor(lens, dtype=torch.int32), cu.to(draw(st.sampled_from([torch.int32, torch.int64]))))  # fmt: skip
    total, hq = int(cu[-1]), hkv * group
    if draw(st.booleans()):  # the Q columns of a packed [T, (Hq + 2 Hkv) D] QKV: a row stride past the heads
        query = randn(total, (hq + 2 * hkv) * d, seed=seed + 2)[:, : hq * d].view(total, hq, d)
    else:
        query = randn(total, hq, d, seed=seed + 2)
    threads = draw(st.sampled_from(THREADS_OK))
    live = [s for s, n in enumerate(lens) if n > 0]
    asked = [s for s, (_, q) in enumerate(chunks) if q > 0]
    lens_t, cu_t = kv.seq_lens.clone(), kv.cu_seqlens_q
    if bad == "":
        pass
    elif bad.startswith("block id") and live:
        s = draw(st.sampled_from(live))
        table[s, draw(st.integers(0, used[s] - 1))] = num_blocks if bad == "block id just past" else -1
        kv = replace(kv, block_tables=table)
    elif bad == "seq_len past its row" and live:
        lens_t[draw(st.sampled_from(live))] = width * bs + draw(st.integers(1, bs))
        kv = replace(kv, seq_lens=lens_t)
    elif bad == "negative seq_len" and lens:
        lens_t[draw(st.integers(0, len(lens) - 1))] = -1
        kv = replace(kv, seq_lens=lens_t)
    elif bad == "q_len above seq_len" and asked:
        s = draw(st.sampled_from(asked))
        lens_t[s] = chunks[s][1] - 1
        kv = replace(kv, seq_lens=lens_t)
    elif bad == "cu_seqlens_q from 1" and total:
        kv = replace(kv, cu_seqlens_q=cu + 1)
    elif bad == "cu_seqlens_q decreasing" and len(lens) > 1:  # an inner boundary past the next one
        j, bent = draw(st.integers(1, len(lens) - 1)), cu.clone()
        bent[j] = bent[j + 1] + 1
        kv = replace(kv, cu_seqlens_q=bent)
    elif bad == "cu_seqlens_q short of the rows" and total:
        query = torch.cat([query.contiguous(), query[:1].contiguous()])
    elif bad == "cu_seqlens_q missing":
        kv = replace(kv, cu_seqlens_q=None)
    elif bad == "cu_seqlens_q one short" and lens:
        kv = replace(kv, cu_seqlens_q=cu[:-1])
    elif bad == "float cu_seqlens_q":
        kv = replace(kv, cu_seqlens_q=cu_t.float())
    elif bad == "meta query":
        query = meta(query)
    elif bad == "meta cache":
        kv = replace(kv, value_cache=meta(kv.value_cache))
    elif bad == "query heads not contiguous" and total and hq > 1 and d > 1:
        query = query.transpose(1, 2).contiguous().transpose(1, 2)
    elif bad == "5-D cache":
        kv = replace(kv, key_cache=torch.stack([cache, -cache], -1), value_cache=kv.value_cache[..., None])
    elif bad == "threads 0":
        threads = 0
    else:
        return None
    return PrefillCase(query, kv, threads, bad)


def check_prefill(case: PrefillCase) -> None:
    """fp32: the reference's result (rtol 1e-5, atol 4e-6: fp32 sums in another order, an online softmax)."""
    got = outcome(lambda: native.paged_prefill_attention(case.query, case.kv, 0.3, num_threads=case.threads))
    if case.bad:
        return refused(got, case.bad)
    out = returned(got)
    assert out.shape == case.query.shape and out.is_contiguous() and out.dtype == torch.float32
    torch.testing.assert_close(out, reference.paged_prefill_attention(case.query, case.kv, 0.3), rtol=1e-5, atol=4e-6)


@pytest.mark.parametrize("bad", ["", *PREFILL_BREAKS])
def test_fuzz_paged_prefill_attention(bad: str) -> None:
    fuzz(prefill_cases, bad, check_prefill)


def check_prefill_bf16(case: PrefillCase) -> None:
    """bf16 caches: the fp32 reference on the same values at the fp32 tolerance (each row converted exactly,
    every sum fp32); a bf16 query and output (``paged_prefill_attention_bf16``): the very bits of the kernel's fp32
    output on the same values rounded once to nearest (ties to even), as torch's ``.bfloat16()`` rounds it; so
    within half a bf16 ulp of the reference's fp32 output, give or take the fp32 tolerance."""
    kv = bf16_caches(case.kv)
    call = native.paged_prefill_attention
    got = outcome(lambda: call(case.query, kv, 0.3, num_threads=case.threads))
    if case.bad:
        return refused(got, case.bad)
    want = reference.paged_prefill_attention(case.query, upcast(kv), 0.3)
    torch.testing.assert_close(returned(got), want, rtol=1e-5, atol=4e-6)
    q16 = case.query.bfloat16()
    got16 = returned(outcome(lambda: call(q16, kv, 0.3, num_threads=case.threads)))
    assert got16.dtype == torch.bfloat16 and got16.shape == q16.shape
    fp32 = returned(outcome(lambda: call(q16.float(), kv, 0.3, num_threads=case.threads)))
    assert torch.equal(got16, fp32.bfloat16())
    want16 = reference.paged_prefill_attention(q16.float(), upcast(kv), 0.3)
    torch.testing.assert_close(got16.float(), want16, rtol=2**-8, atol=1e-5)


@pytest.mark.parametrize("bad", ["", "block id just past", "q_len above seq_len", "meta cache", "5-D cache"])
def test_fuzz_paged_prefill_attention_bf16_cache(bad: str) -> None:
    fuzz(prefill_cases, bad, check_prefill_bf16)


# --- decode attention through a tile-load plan's lanes -------------------------------------------------
LANE_BREAKS = ["slot just past", "slot far", "negative seq_len", "3-D slots", "int32 slots", "meta slots", "meta mask", "meta lens",
               "float lens", "5-D cache"]  # fmt: skip


LaneCase = tuple[torch.Tensor, PagedKV, torch.Tensor, torch.Tensor, str]


@st.composite
def lane_cases(draw: st.DrawFn, bad: str) -> LaneCase | None:
    hkv, group, d = draw(st.integers(1, 2)), draw(st.sampled_from([1, 3, 4])), draw(st.sampled_from([2, 16, 64]))
    num_blocks, bs, s, lanes = (
        draw(st.integers(1, 6)),
        draw(st.integers(1, 5)),
        draw(st.integers(0, 5)),
        draw(st.integers(0, 20)),
    )
    num_slots, seed = num_blocks * bs, draw(st.integers(0, 2**16))
    slots = torch.tensor(draw(st.lists(st.integers(0, num_slots), min_size=s * lanes, max_size=s * lanes)),
                         dtype=torch.int64).reshape(s, lanes)  # fmt: skip
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=s * lanes, max_size=s * lanes)), dtype=torch.bool)
    mask = mask.reshape(s, lanes)
    slots[~mask] = torch.tensor(draw(st.sampled_from([0, -5, num_slots + 1, 2**40])))  # never read
    lens = torch.tensor(draw(st.lists(st.integers(0, 3), min_size=s, max_size=s)), dtype=torch.int64)
    cache = randn(num_blocks, bs, hkv, d, seed=seed)
    kv = PagedKV(cache, randn(*cache.shape, seed=seed + 1), torch.zeros(s, 1, dtype=torch.int32), lens)
    query = randn(s, hkv * group, d, seed=seed + 2)
    attending = [(i, j) for i, j in mask.nonzero().tolist() if lens[i] > 0]
    if bad == "":
        pass
    elif bad.startswith("slot") and attending:  # one past the last slot (+1 encoded), or far off
        far = draw(st.sampled_from([-1, 2**40]))
        slots[draw(st.sampled_from(attending))] = num_slots + 1 if bad == "slot just past" else far
    elif bad == "negative seq_len" and s:
        kv = replace(kv, seq_lens=lens.index_fill(0, torch.tensor([draw(st.integers(0, s - 1))]), -1))
    elif bad == "3-D slots":  # read as 2-D, it named no problem
        slots, mask = slots[..., None], mask[..., None]
    elif bad == "int32 slots":
        slots = slots.int()
    elif bad in ("meta slots", "meta mask"):
        slots, mask = (meta(slots), mask) if bad == "meta slots" else (slots, meta(mask))
    elif bad in ("meta lens", "float lens"):
        kv = replace(kv, seq_lens=meta(lens) if bad == "meta lens" else lens.float())
    elif bad == "5-D cache":
        kv = replace(kv, key_cache=torch.stack([cache, -cache], -1), value_cache=kv.value_cache[..., None])
    else:
        return None
    return query, kv, slots, mask, bad


def lane_reference(query: torch.Tensor, kv: PagedKV, slots: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The torch tiled path (masked lanes' slots zeroed: torch indexes them), a zero row where no lane attends."""
    with mock.patch.object(native, "reads", return_value=False):
        ref = tiled_decode_attention(query, kv, 0.3, TilePlan(slots.masked_fill(~mask, 0), mask))
    return ref.masked_fill(~mask.any(1)[:, None, None], 0.0)


def check_lanes(case: LaneCase) -> None:
    query, kv, slots, mask, bad = case
    got = outcome(lambda: native.lane_decode_attention(query, kv, 0.3, slots, mask))
    if bad:
        return refused(got, bad)
    torch.testing.assert_close(returned(got), lane_reference(query, kv, slots, mask), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("bad", ["", *LANE_BREAKS])
def test_fuzz_lane_decode_attention(bad: str) -> None:
    fuzz(lane_cases, bad, check_lanes)


def check_lanes_bf16(case: LaneCase) -> None:
    """The lanes' kernel on bf16 caches against the torch path on the same values (tolerances as
    :func:`check_decode_bf16`)."""
    query, kv, slots, mask, bad = case
    kv16 = bf16_caches(kv)
    got = outcome(lambda: native.lane_decode_attention(query, kv16, 0.3, slots, mask))
    if bad:
        return refused(got, bad)
    want = lane_reference(query, upcast(kv16), slots, mask)
    torch.testing.assert_close(returned(got), want, rtol=1e-5, atol=2e-6)
    got16 = returned(outcome(lambda: native.lane_decode_attention(query.bfloat16(), kv16, 0.3, slots, mask)))
    want16 = lane_reference(query.bfloat16().float(), upcast(kv16), slots, mask)
    assert got16.dtype == torch.bfloat16
    torch.testing.assert_close(got16.float(), want16, rtol=2**-7, atol=1e-5)


@pytest.mark.parametrize("bad", ["", "slot just past", "negative seq_len", "5-D cache"])
def test_fuzz_lane_decode_attention_bf16_cache(bad: str) -> None:
    fuzz(lane_cases, bad, check_lanes_bf16)


# --- the cache write ------------------------------------------------------------------------------------
CACHE_BREAKS = ["slot just past", "slot far", "int32 slots", "meta slots", "meta cache", "meta key", "5-D cache", "3-D cache",
                "2-D key", "slots [T, 1]"]  # fmt: skip
CacheCase = tuple[list[torch.Tensor], str]


@st.composite
def cache_write_cases(draw: st.DrawFn, bad: str) -> CacheCase | None:
    hkv, d, num_blocks, bs = (draw(st.integers(1, 3)), draw(st.integers(1, 20)), draw(st.integers(1, 6)),
                              draw(st.integers(1, 5)))  # fmt: skip
    num_slots = num_blocks * bs
    slots = torch.tensor(draw(st.lists(st.integers(-1, num_slots - 1), max_size=10, unique=True)), dtype=torch.int64)
    t, seed = len(slots), draw(st.integers(0, 2**16))
    qkv = randn(t, (3 * hkv + draw(st.integers(0, 3))) * d, seed=seed)  # K, V: column slices of a packed row
    key, value = qkv[:, : hkv * d].view(t, hkv, d), qkv[:, hkv * d : 2 * hkv * d].view(t, hkv, d)
    kc, vc = randn(num_blocks, bs, hkv, d, seed=seed + 1), randn(num_blocks, bs, hkv, d, seed=seed + 2)
    args = [key, value, kc, vc, slots]
    if bad == "":
        pass
    elif bad.startswith("slot") and t:  # the first slot past the cache, or far off
        row, far = torch.tensor([draw(st.integers(0, t - 1))]), draw(st.sampled_from([-2, 2**62]))
        args[4] = slots.index_fill(0, row, num_slots if bad == "slot just past" else far)
    elif bad in ("int32 slots", "meta slots", "slots [T, 1]"):
        args[4] = slots.int() if bad == "int32 slots" else meta(slots) if bad == "meta slots" else slots[:, None]
    elif bad in ("meta cache", "meta key"):
        i = draw(st.sampled_from([2, 3] if bad == "meta cache" else [0, 1]))
        args[i] = meta(args[i])
    elif bad in ("5-D cache", "3-D cache"):
        args[2], args[3] = (kc[:, :, None], vc[:, :, None]) if bad == "5-D cache" else (kc[:, 0], vc[:, 0])
    elif bad == "2-D key":
        args[0] = key.reshape(t, hkv * d)
    else:
        return None
    return args, bad


def check_cache_write(case: CacheCase) -> None:
    args, bad = case
    before = [a.clone() if a.device.type == "cpu" else a for a in args[2:4]]
    got = outcome(lambda: native.reshape_and_cache(*args))  # type: ignore[func-returns-value]
    if bad:
        refused(got, bad)
        assert all(a.device.type == "meta" or torch.equal(a, b) for a, b in zip(args[2:4], before)), "written"
        return
    assert not isinstance(got, KernelInputError), f"refused a valid input: {got}"
    reference.reshape_and_cache(args[0], args[1], *before, args[4])
    assert torch.equal(args[2], before[0]) and torch.equal(args[3], before[1])
    # The same in bf16 (a bf16 engine's K/V and caches): the rows copied as they are, the rest untouched.
    k16, v16, kc16, vc16 = (a.bfloat16() for a in args[:4])
    want_k, want_v = kc16.clone(), vc16.clone()
    native.reshape_and_cache(k16, v16, kc16, vc16, args[4])
    reference.reshape_and_cache(k16, v16, want_k, want_v, args[4])
    assert torch.equal(kc16, want_k) and torch.equal(vc16, want_v)


@pytest.mark.parametrize("bad", ["", *CACHE_BREAKS])
def test_fuzz_reshape_and_cache(bad: str) -> None:
    fuzz(cache_write_cases, bad, check_cache_write)


# --- RMSNorm and RoPE ------------------------------------------------------------------------------------
NORM_BREAKS = ["meta x", "meta weight", "3-D x", "weight [1, hidden]", "eps True", "eps str"]
NormCase = tuple[torch.Tensor, torch.Tensor, Any, str]


@st.composite
def rms_norm_cases(draw: st.DrawFn, bad: str) -> NormCase:
    t, hidden, pad = draw(st.integers(0, 6)), draw(st.integers(1, 80)), draw(st.integers(0, 5))
    seed = draw(st.integers(0, 2**16))
    x, weight = randn(t, hidden + pad, seed=seed)[:, pad:], randn(hidden, seed=seed + 1)  # rows a stride apart
    eps: Any = draw(st.sampled_from([1e-5, 1e-6, 1]))
    if bad == "meta x":
        x = meta(x)
    elif bad == "meta weight":
        weight = meta(weight)
    elif bad == "3-D x":
        x = x[None]
    elif bad == "weight [1, hidden]":
        weight = weight[None]
    elif bad.startswith("eps"):
        eps = True if bad == "eps True" else "1e-5"
    return x, weight, eps, bad


def check_rms_norm(case: NormCase) -> None:
    x, weight, eps, bad = case
    got = outcome(lambda: native.rms_norm(x, weight, eps))
    if bad:
        return refused(got, bad)
    torch.testing.assert_close(returned(got), F.rms_norm(x, x.shape[1:], weight, eps), rtol=1e-5, atol=1e-6)
    # bf16: HF LlamaRMSNorm's bf16 arithmetic (fp32 mean of squares, the scaled row rounded, then the weight's
    # product rounded), to one bf16 rounding: the fp32 sum runs in another order, which may flip a rounding.
    x16, w16 = x.bfloat16(), weight.bfloat16()
    got16 = native.rms_norm(x16, w16, eps)
    want16 = w16 * (x16.float() * torch.rsqrt(x16.float().pow(2).mean(-1, keepdim=True) + eps)).bfloat16()
    assert got16.dtype == torch.bfloat16
    torch.testing.assert_close(got16.float(), want16.float(), rtol=2**-7, atol=0)
    # ... and that flip is rare (an fp32 sum's last bit must move a product across a bf16 rounding boundary:
    # ~1e-5 per element): a kernel rounding once where HF rounds twice differs on about a quarter of them.
    assert int((got16 != want16).sum()) <= 1, f"{int((got16 != want16).sum())} of {got16.numel()} differ"


@pytest.mark.parametrize("bad", ["", *NORM_BREAKS])
def test_fuzz_rms_norm(bad: str) -> None:
    fuzz(rms_norm_cases, bad, check_rms_norm)


ROPE_BREAKS = ["meta x", "meta cos", "meta sin", "odd head_dim", "2-D x", "cos [t, d, 1]"]
RopeCase = tuple[torch.Tensor, torch.Tensor, torch.Tensor, str]


@st.composite
def rope_cases(draw: st.DrawFn, bad: str) -> RopeCase:
    t, heads, d, extra = (
        draw(st.integers(0, 5)),
        draw(st.integers(1, 4)),
        2 * draw(st.integers(1, 40)),
        draw(st.integers(0, 3)),
    )
    seed = draw(st.integers(0, 2**16))
    x = randn(t, (heads + extra) * d, seed=seed)[:, : heads * d].view(t, heads, d)  # a packed QKV's heads
    angles = torch.rand(t, d, generator=torch.Generator().manual_seed(seed + 1)) * 100
    cos, sin = angles.cos(), angles.sin()
    if bad == "meta x":
        x = meta(x)
    elif bad in ("meta cos", "meta sin"):
        cos, sin = (meta(cos), sin) if bad == "meta cos" else (cos, meta(sin))
    elif bad == "odd head_dim":
        x, cos, sin = x[..., 1:], cos[:, 1:].contiguous(), sin[:, 1:].contiguous()
    elif bad == "2-D x":
        x = x.reshape(t, heads * d)
    elif bad == "cos [t, d, 1]":
        cos = cos[..., None]
    return x, cos, sin, bad


def check_rope(case: RopeCase) -> None:
    x, cos, sin, bad = case
    got = outcome(lambda: native.rotary_embedding(x, cos, sin))
    if bad:
        return refused(got, bad)
    assert torch.equal(returned(got), apply_rope(x, cos, sin))
    # bf16 (x, cos, sin): each product and the sum rounded where torch's bf16 ops round: bit for bit.
    x16, cos16, sin16 = x.bfloat16(), cos.bfloat16(), sin.bfloat16()
    got16 = native.rotary_embedding(x16, cos16, sin16)
    assert got16.dtype == torch.bfloat16 and torch.equal(got16, apply_rope(x16, cos16, sin16))


@pytest.mark.parametrize("bad", ["", *ROPE_BREAKS])
def test_fuzz_rotary_embedding(bad: str) -> None:
    fuzz(rope_cases, bad, check_rope)
