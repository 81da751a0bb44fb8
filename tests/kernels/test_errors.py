"""Bad input is refused on the host, before any launch, with a KernelInputError that names the problem."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from pagedlab.errors import KernelInputError, PagedLabError
from pagedlab.kernels import validate_decode_inputs
from pagedlab.kernels.cache_write import reshape_and_cache
from pagedlab.kernels.decode_attention import paged_decode_attention
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.prefill_attention import paged_prefill_attention
from pagedlab.kernels.runtime import KernelUnavailableError, launcher
from pagedlab.kernels.testing import PagedCase, default_device

DEVICE = default_device()


@pytest.fixture
def case():
    # 2 sequences of 20 and 5 tokens, block size 16: rows use 2 and 1 table entries.
    return PagedCase([20, 5], 2, 64, 16, torch.float32)


def _decode(case, q=None, tables=None, lens=None, **kw):
    q = torch.zeros(2, 4, 64, device=DEVICE) if q is None else q
    tables = case.block_tables if tables is None else tables
    kv = PagedKV(case.key_cache, case.value_cache, tables, case.seq_lens if lens is None else lens)
    return paged_decode_attention(q, kv, 0.125, **kw)


def test_error_type_is_a_value_error():
    assert issubclass(KernelInputError, ValueError) and issubclass(KernelInputError, PagedLabError)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda c: dict(q=torch.zeros(2, 4, 64, dtype=torch.float16, device=DEVICE)), "dtype"),
        (lambda c: dict(q=torch.zeros(2, 3, 64, device=DEVICE)), "multiple of num_kv_heads"),
        (lambda c: dict(q=torch.zeros(2, 4, 32, device=DEVICE)), "head_dim"),
        (lambda c: dict(q=torch.zeros(3, 4, 64, device=DEVICE)), "seq_lens has 2 entries but there are 3"),
        (lambda c: dict(lens=torch.tensor([20, -1], dtype=torch.int32, device=DEVICE)), ">= 0"),
        (lambda c: dict(lens=torch.tensor([20, 60], dtype=torch.int32, device=DEVICE)), "capacity"),  # 3 x 16
        (lambda c: dict(lens=c.seq_lens.float()), "int32 or int64"),
        (lambda c: dict(tables=c.block_tables[:, 0]), "dimension"),
    ],
)
def test_decode_rejects(case, mutate, match):
    with pytest.raises(KernelInputError, match=match):
        _decode(case, **mutate(case))


def test_block_id_out_of_range_only_where_used(case):
    tables = case.block_tables.clone()
    tables[0, 2] = -5  # past ceil(20 / 16) = 2 entries: padding, never read
    tables[1, 1:] = 10**9
    _decode(case, tables=tables)  # fine
    tables[0, 1] = case.num_blocks  # second block of the 20-token sequence: really used
    with pytest.raises(KernelInputError, match=rf"block id\(s\) \[{case.num_blocks}\]"):
        _decode(case, tables=tables)
    tables[0, 1] = -1
    with pytest.raises(KernelInputError, match="outside"):
        _decode(case, tables=tables)


def test_value_checks_can_be_skipped(case):
    lens = torch.tensor([20, -3], dtype=torch.int32, device=DEVICE)
    q = torch.zeros(2, 4, 64, device=DEVICE)
    args = (q, PagedKV(case.key_cache, case.value_cache, case.block_tables, lens), 0.125)
    with pytest.raises(KernelInputError):
        validate_decode_inputs(*args)
    validate_decode_inputs(*args, check_values=False)  # metadata only: nothing read on the host


@pytest.mark.parametrize("head_dim", [20, 264])
def test_unsupported_head_dim(head_dim):
    kc = torch.zeros(2, 16, 1, head_dim, device=DEVICE)
    with pytest.raises(KernelInputError, match=f"head_dim={head_dim} is not supported"):
        table, lens = (
            torch.zeros(1, 1, dtype=torch.int32, device=DEVICE),
            torch.ones(1, dtype=torch.int32, device=DEVICE),
        )
        paged_decode_attention(torch.zeros(1, 1, head_dim, device=DEVICE), PagedKV(kc, kc, table, lens), 0.1)


def test_cache_pair_mismatch(case):
    with pytest.raises(KernelInputError, match="differ in dtype"):
        kv = PagedKV(case.key_cache, case.value_cache.half(), case.block_tables, case.seq_lens)
        paged_decode_attention(torch.zeros(2, 4, 64, device=DEVICE), kv, 0.1)
    with pytest.raises(KernelInputError, match="differ in shape"):
        kv = PagedKV(case.key_cache, case.value_cache[:-1], case.block_tables, case.seq_lens)
        paged_decode_attention(torch.zeros(2, 4, 64, device=DEVICE), kv, 0.1)


@pytest.mark.parametrize(
    "cu,num_tokens,match",
    [
        ([1, 3, 5], 5, "start at 0"),
        ([0, 3, 4], 5, "end at the number of query tokens"),
        ([0, 6, 5], 5, "must not decrease"),
        ([0, 0, 6], 6, "more query tokens than its seq_len"),  # second sequence: 6 queries, seq_len 5
        ([0, 5], 5, "seq_lens has 2 entries but there are 1"),
    ],
)
def test_prefill_rejects_bad_cu_seqlens(case, cu, num_tokens, match):
    q = torch.zeros(num_tokens, 4, 64, device=DEVICE)
    with pytest.raises(KernelInputError, match=match):
        paged_prefill_attention(q, case.kv(torch.tensor(cu, dtype=torch.int32, device=DEVICE)), 0.1)


def test_attention_ops_reject_loose_arguments_and_a_prefill_without_cu_seqlens(case):
    q = torch.zeros(2, 4, 64, device=DEVICE)
    with pytest.raises(KernelInputError, match="kv must be a pagedlab.kernels.paged_kv.PagedKV, got tuple"):
        paged_decode_attention(q, (case.key_cache, case.value_cache, case.block_tables, case.seq_lens), 0.1)
    with pytest.raises(KernelInputError, match="prefill attention needs PagedKV.cu_seqlens_q"):
        paged_prefill_attention(q, case.kv(), 0.1)


@pytest.mark.parametrize("slot,match", [(64, "outside"), (-2, "outside")])
def test_cache_write_rejects_bad_slots(slot, match):
    kc = torch.zeros(4, 16, 2, 64, device=DEVICE)  # 64 slots
    k = torch.zeros(2, 2, 64, device=DEVICE)
    with pytest.raises(KernelInputError, match=match):
        reshape_and_cache(k, k, kc, kc.clone(), torch.tensor([0, slot], device=DEVICE))


def test_cache_write_rejects_shape_mismatch():
    kc = torch.zeros(4, 16, 2, 64, device=DEVICE)
    with pytest.raises(KernelInputError, match="do not match"):
        reshape_and_cache(
            torch.zeros(2, 3, 64, device=DEVICE),
            torch.zeros(2, 3, 64, device=DEVICE),
            kc,
            kc.clone(),
            torch.tensor([0, 1], device=DEVICE),
        )
    with pytest.raises(KernelInputError, match="slot_mapping has 1 entries for 2 tokens"):
        k = torch.zeros(2, 2, 64, device=DEVICE)
        reshape_and_cache(k, k, kc, kc.clone(), torch.tensor([0], device=DEVICE))


def test_cache_write_rejects_a_key_value_pair_that_disagrees():
    kc = torch.zeros(4, 16, 2, 64, device=DEVICE)
    k, slots = torch.zeros(2, 2, 64, device=DEVICE), torch.tensor([0, 1], device=DEVICE)
    with pytest.raises(KernelInputError, match=r"key \(2, 2, 64\) and value \(3, 2, 64\) differ in shape"):
        reshape_and_cache(k, torch.zeros(3, 2, 64, device=DEVICE), kc, kc.clone(), slots)
    with pytest.raises(
        KernelInputError, match=r"value must be \[num_tokens, num_kv_heads, head_dim\], got shape \(2, 128\)"
    ):
        reshape_and_cache(k, torch.zeros(2, 128, device=DEVICE), kc, kc.clone(), slots)
    with pytest.raises(KernelInputError, match="value dtype torch.int64 is not supported"):
        reshape_and_cache(k, torch.zeros(2, 2, 64, dtype=torch.int64, device=DEVICE), kc, kc.clone(), slots)
    assert torch.count_nonzero(kc) == 0  # refused before anything was written


def test_launch_options_rejected(case):
    with pytest.raises(ValueError, match="num_splits"):
        _decode(case, num_splits=0)
    with pytest.raises(ValueError, match="block_n"):
        _decode(case, block_n=8)  # tl.dot needs K >= 16 on NVIDIA


@pytest.mark.no_interpreter_needed
def test_launcher_explains_missing_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(KernelUnavailableError, match="TRITON_INTERPRET=1"):
        launcher(object(), torch.zeros(1))  # a compiled (not interpreted) kernel, CPU tensor
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(KernelUnavailableError, match="imported before it was set"):
        launcher(object(), torch.zeros(1))
    with pytest.raises(KernelUnavailableError, match="not on meta"):
        launcher(object(), torch.zeros(1, device="meta"))


@pytest.mark.no_interpreter_needed
def test_cpu_without_interpreter_fails_clearly_in_a_fresh_process():
    # The real thing, not a stub: a fresh Python without TRITON_INTERPRET; then the variable set too late.
    script = textwrap.dedent("""
        import os, sys, torch
        import pagedlab.kernels, pagedlab.kernels.reference
        print("triton imported by pagedlab.kernels:", "triton" in sys.modules)   # must stay lazy
        from pagedlab.kernels import ops
        from pagedlab.kernels.testing import PagedCase
        c = PagedCase([3], 1, 64, 16, torch.float32, device="cpu")
        for attempt in ("off", "late"):
            if attempt == "late":
                os.environ["TRITON_INTERPRET"] = "1"      # after triton was imported: too late
            try:
                ops.paged_decode_attention(torch.zeros(1, 1, 64), c.kv(), 0.1)
            except ops.KernelUnavailableError as exc:
                print(attempt, "KernelUnavailableError:", exc)
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    first, *lines = proc.stdout.splitlines()
    assert first.endswith("False"), proc.stdout
    assert len(lines) == 2, proc.stdout + proc.stderr
    assert lines[0].startswith("off KernelUnavailableError") and "the interpreter is off" in lines[0]
    assert lines[1].startswith("late KernelUnavailableError") and "imported before it was set" in lines[1]


@pytest.mark.no_interpreter_needed
def test_backend_dispatch():
    from pagedlab.kernels import backends, reference, triton_paged_decode_attention

    assert backends.get_backend("torch").paged_decode_attention is reference.paged_decode_attention
    assert backends.get_backend("triton").paged_decode_attention is triton_paged_decode_attention
    assert backends.default_backend("cpu") == "cpu"
    with pytest.raises(ValueError, match="unknown attention backend"):
        backends.get_backend("flash")
