"""Triton paged decode attention vs the PyTorch reference (interpreted on CPU, native on CUDA).

A covering set rather than the full product: every (Hq, Hkv), head size, block size and dtype of the
issue appears at least once, each seq-len list holds {1, bs-1, bs, bs+1, 2bs-1, longer} where the
case is cheap enough, and every cache slot no sequence owns is NaN (a missing load mask shows up).
"""

from __future__ import annotations

import pytest
import torch

from pagedlab.kernels import reference
from pagedlab.kernels.decode_attention import paged_decode_attention
from pagedlab.kernels.paged_kv import PagedKV
from pagedlab.kernels.testing import PagedCase, assert_close, default_device

DEVICE = default_device()
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def _lens(bs: int, longer: int) -> list:
    return [1, bs - 1, bs, bs + 1, 2 * bs - 1, longer] if bs > 1 else [1, 2, 3, longer]


def _run(case: PagedCase, num_q_heads: int, dtype, seed=1, **kw):
    head_dim = case.key_cache.shape[3]
    q = (
        torch.randn(len(case.seq_lens_list), num_q_heads, head_dim, generator=torch.Generator().manual_seed(seed))
        .to(dtype)
        .to(DEVICE)
    )
    scale = head_dim**-0.5
    out = paged_decode_attention(q, case.kv(), scale, **kw)
    ref = reference.paged_decode_attention(q, case.kv(clean=True), scale)
    assert out.shape == q.shape and out.dtype == dtype
    return out, ref


# (Hq, Hkv, head_dim, block_size, dtype, seq_lens)
MATRIX = [
    pytest.param(9, 3, 64, 16, F32, _lens(16, 100), id="smollm2-9/3-d64-bs16-fp32"),
    pytest.param(9, 3, 64, 16, F16, _lens(16, 100), id="smollm2-9/3-d64-bs16-fp16"),
    pytest.param(9, 3, 80, 32, BF16, [1, 31, 32, 33, 63], id="9/3-d80-bs32-bf16"),
    pytest.param(32, 8, 128, 16, F16, [1, 17, 40], id="llama3-32/8-d128-bs16-fp16"),
    pytest.param(8, 8, 96, 1, F32, _lens(1, 21), id="mha-8/8-d96-bs1-fp32"),
    pytest.param(8, 1, 80, 16, F16, _lens(16, 70), id="mqa-8/1-d80-bs16-fp16"),
    pytest.param(12, 2, 96, 32, F32, [1, 31, 32, 33, 63, 150], id="12/2-d96-bs32-fp32"),
    pytest.param(12, 2, 64, 1, BF16, [1, 5, 9], id="12/2-d64-bs1-bf16"),
    pytest.param(32, 1, 64, 16, F16, [1, 16, 33], id="ratio32-32/1-d64-bs16-fp16"),
]


@pytest.mark.parametrize("num_q_heads,num_kv_heads,head_dim,block_size,dtype,seq_lens", MATRIX)
def test_decode_matches_reference(num_q_heads, num_kv_heads, head_dim, block_size, dtype, seq_lens):
    case = PagedCase(seq_lens, num_kv_heads, head_dim, block_size, dtype)
    out, ref = _run(case, num_q_heads, dtype)
    assert_close(out, ref, dtype)


def test_decode_small_tiles_cross_block_boundaries():
    # BLOCK_N = 16 with block_size 32 and 1: a tile covers half a block, or 16 blocks.
    for block_size in (32, 1):
        case = PagedCase([1, 15, 16, 17, 47], 2, 64, block_size, F32, seed=block_size)
        out, ref = _run(case, 4, F32, block_n=16)
        assert_close(out, ref, F32)


@pytest.mark.parametrize("num_splits,dtype", [(2, F16), (8, F32), (3, BF16)])
def test_split_kv_matches_reference(num_splits, dtype):
    # BLOCK_N = 16: the 1-, 5- and 17-token sequences have fewer tiles (1, 1, 2) than splits, so most of
    # their splits are empty; the 0-length sequence has only empty splits and must give zeros.
    case = PagedCase([1, 5, 17, 0, 64], 3, 64, 16, dtype, seed=num_splits)
    out, ref = _run(case, 9, dtype, num_splits=num_splits, block_n=16)
    assert_close(out, ref, dtype)
    assert torch.count_nonzero(out[3]) == 0


def test_split_kv_equals_single_pass():
    case = PagedCase([3, 40, 77], 2, 64, 16, F32, seed=5)
    one, _ = _run(case, 6, F32, num_splits=1, block_n=16)
    many, _ = _run(case, 6, F32, num_splits=4, block_n=16)
    torch.testing.assert_close(many, one, atol=1e-6, rtol=1e-6)


def test_seq_len_zero_gives_zeros():
    case = PagedCase([0, 5], 1, 64, 16, F32)
    out, ref = _run(case, 2, F32)
    assert torch.count_nonzero(out[0]) == 0
    assert_close(out, ref, F32)


def test_block_size_invariance():
    # The same logical K/V stored with block sizes 1, 16 and 32: bit-identical outputs (same tiles,
    # same arithmetic, only the addresses differ).
    base = PagedCase([1, 15, 33, 70], 3, 64, 16, F16, seed=7)
    outs = []
    for block_size in (1, 16, 32):
        case = PagedCase(
            base.seq_lens_list, 3, 64, block_size, F16, k_seqs=base.k_seqs, v_seqs=base.v_seqs, seed=block_size
        )
        out, ref = _run(case, 9, F16)
        assert_close(out, ref, F16)
        outs.append(out)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2])


def test_hnd_layout_through_strides():
    # [blocks, Hkv, bs, D] in memory, given as an NHD view: only the strides change.
    case = PagedCase([5, 16, 37], 2, 80, 16, F16, layout="HND")
    assert not case.key_cache.is_contiguous()
    out, ref = _run(case, 4, F16)
    assert_close(out, ref, F16)


def test_non_contiguous_query_and_int64_metadata():
    case = PagedCase([9, 30], 2, 64, 16, F32)
    q_big = torch.randn(2, 8, 128, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    q = q_big[:, ::2, :64]  # strided heads, half of each row
    tables, lens = case.block_tables.long(), case.seq_lens.long()
    out = paged_decode_attention(q, PagedKV(case.key_cache, case.value_cache, tables, lens), 0.125)
    ref = reference.paged_decode_attention(
        q, PagedKV(case.clean_key_cache, case.clean_value_cache, tables, lens), 0.125
    )
    assert_close(out, ref, F32)


def test_empty_batch():
    case = PagedCase([3], 1, 64, 16, F32)
    q = torch.empty(0, 2, 64, device=DEVICE)
    out = paged_decode_attention(q, case.kv().select(0, 0), 0.1)
    assert out.shape == (0, 2, 64)
