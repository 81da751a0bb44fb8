"""Triton paged prefill/extend attention vs the PyTorch reference.

Each case mixes query lengths 0, 1 and many with context offsets (``seq_len - q_len`` tokens
already cached: an earlier chunk or a prefix-cache hit), over shuffled block tables whose unowned
slots are NaN.
"""

from __future__ import annotations

import pytest
import torch

from pagedlab.kernels import reference
from pagedlab.kernels.decode_attention import paged_decode_attention
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.prefill_attention import paged_prefill_attention
from pagedlab.kernels.testing import PagedCase, assert_close, default_device

DEVICE = default_device()
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def _run(case: PagedCase, q_lens, num_q_heads: int, dtype, seed=1, **kw):
    head_dim = case.key_cache.shape[3]
    cu = PagedCase.cu_seqlens(q_lens)
    q = torch.randn(int(cu[-1]), num_q_heads, head_dim, generator=torch.Generator().manual_seed(seed)).to(dtype)
    q = q.to(DEVICE)
    scale = head_dim**-0.5
    out = paged_prefill_attention(q, case.kv(cu), scale, **kw)
    ref = reference.paged_prefill_attention(q, case.kv(cu, clean=True), scale)
    assert out.shape == q.shape and out.dtype == dtype
    return q, out, ref


# (Hq, Hkv, head_dim, block_size, dtype, seq_lens, q_lens): q_len == seq_len is a fresh prompt,
# q_len < seq_len an extend over cached context, q_len 0 a sequence with nothing scheduled.
MATRIX = [
    pytest.param(9, 3, 64, 16, F32, [5, 40, 100, 17], [5, 17, 1, 0], id="smollm2-9/3-d64-bs16-fp32"),
    pytest.param(9, 3, 64, 16, F16, [16, 33, 31], [16, 33, 15], id="smollm2-9/3-d64-bs16-fp16"),
    pytest.param(32, 8, 128, 32, F16, [20, 40], [20, 3], id="32/8-d128-bs32-fp16"),
    pytest.param(8, 8, 80, 1, F32, [7, 12], [7, 5], id="8/8-d80-bs1-fp32"),
    pytest.param(8, 1, 96, 16, BF16, [30, 9], [13, 9], id="8/1-d96-bs16-bf16"),
    pytest.param(12, 2, 64, 32, F16, [1, 64, 70], [1, 40, 0], id="12/2-d64-bs32-fp16"),
    pytest.param(12, 2, 96, 16, F32, [48, 2], [48, 1], id="12/2-d96-bs16-fp32"),
]


@pytest.mark.parametrize("num_q_heads,num_kv_heads,head_dim,block_size,dtype,seq_lens,q_lens", MATRIX)
def test_prefill_matches_reference(num_q_heads, num_kv_heads, head_dim, block_size, dtype, seq_lens, q_lens):
    case = PagedCase(seq_lens, num_kv_heads, head_dim, block_size, dtype)
    _, out, ref = _run(case, q_lens, num_q_heads, dtype)
    assert_close(out, ref, dtype)


def test_prefill_small_tiles_many_query_blocks():
    # block_m=16 rows with group 4 -> BLOCK_Q = 4 tokens: a 37-token chunk spans 10 programs, and
    # block_n=16 keys per iteration cross the 16-token blocks at odd offsets (context 11).
    case = PagedCase([48, 6], 2, 64, 16, F32, seed=2)
    _, out, ref = _run(case, [37, 6], 8, F32, block_m=16, block_n=16)
    assert_close(out, ref, F32)


def test_chunked_prefill_equals_one_shot():
    # A 45-token prompt in one step, or as chunks of 13 + 20 + 12 with a growing context: the same rows.
    case = PagedCase([45], 3, 64, 16, F32, seed=4)
    q = torch.randn(45, 9, 64, generator=torch.Generator().manual_seed(9)).to(DEVICE)
    full = paged_prefill_attention(q, case.kv(PagedCase.cu_seqlens([45])), 0.125)
    done = 0
    for chunk in (13, 20, 12):
        lens = torch.tensor([done + chunk], dtype=torch.int32, device=DEVICE)
        kv = PagedKV(case.key_cache, case.value_cache, case.block_tables, lens, PagedCase.cu_seqlens([chunk]))
        part = paged_prefill_attention(q[done : done + chunk], kv, 0.125)
        torch.testing.assert_close(part, full[done : done + chunk], atol=1e-6, rtol=1e-6)
        done += chunk


def test_prefill_with_q_len_one_equals_decode():
    case = PagedCase([1, 17, 40], 3, 80, 16, F16, seed=6)
    q, out, _ = _run(case, [1, 1, 1], 9, F16)
    dec = paged_decode_attention(q, case.kv(), 80**-0.5)
    assert_close(out, dec.float(), F16)


def test_block_size_invariance_prefill():
    base = PagedCase([20, 35], 2, 64, 16, F32, seed=8)
    outs = []
    for block_size in (1, 16, 32):
        case = PagedCase([20, 35], 2, 64, block_size, F32, k_seqs=base.k_seqs, v_seqs=base.v_seqs, seed=block_size)
        _, out, ref = _run(case, [20, 11], 4, F32)
        assert_close(out, ref, F32)
        outs.append(out)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2])


def test_all_query_lengths_zero():
    case = PagedCase([4, 9], 1, 64, 16, F32)
    q = torch.empty(0, 2, 64, device=DEVICE)
    out = paged_prefill_attention(q, case.kv(PagedCase.cu_seqlens([0, 0])), 0.125)
    assert out.shape == (0, 2, 64)
