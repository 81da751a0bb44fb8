"""Triton ``reshape_and_cache`` vs the reference: any ``Hkv * D`` width, slot -1 skipped, any strides."""

from __future__ import annotations

import pytest
import torch

from pagedlab.kernels import reference
from pagedlab.kernels.cache_write import reshape_and_cache
from pagedlab.kernels.testing import default_device

DEVICE = default_device()


@pytest.mark.parametrize(
    "num_kv_heads,head_dim,block_size,src_dtype,cache_dtype,slot_dtype",
    [
        pytest.param(3, 64, 16, torch.float16, torch.float16, torch.int64, id="smollm2-192-wide-fp16"),
        pytest.param(2, 80, 1, torch.float32, torch.float32, torch.int32, id="160-wide-bs1-int32-slots"),
        pytest.param(8, 96, 32, torch.float32, torch.float16, torch.int64, id="768-wide-fp32-to-fp16"),
        pytest.param(1, 128, 16, torch.bfloat16, torch.bfloat16, torch.int64, id="128-wide-bf16"),
    ],
)
def test_write_matches_reference(num_kv_heads, head_dim, block_size, src_dtype, cache_dtype, slot_dtype):
    gen = torch.Generator().manual_seed(0)
    num_blocks, num_tokens = 12, 9
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]
    slots[[2, 7]] = -1  # padding tokens: never written
    key = torch.randn(num_tokens, num_kv_heads, head_dim, generator=gen).to(src_dtype)
    value = torch.randn(num_tokens, num_kv_heads, head_dim, generator=gen).to(src_dtype)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    kc = torch.full(shape, 7.0, dtype=cache_dtype)
    vc = torch.full(shape, -7.0, dtype=cache_dtype)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    reference.reshape_and_cache(key, value, kc_ref, vc_ref, slots)
    kc, vc = kc.to(DEVICE), vc.to(DEVICE)
    reshape_and_cache(key.to(DEVICE), value.to(DEVICE), kc, vc, slots.to(slot_dtype).to(DEVICE))
    assert torch.equal(kc.cpu(), kc_ref) and torch.equal(vc.cpu(), vc_ref)


def test_write_into_hnd_cache_and_strided_source():
    gen = torch.Generator().manual_seed(1)
    num_blocks, block_size, num_kv_heads, head_dim = 4, 16, 3, 64
    # Source K/V as a strided slice of a fused qkv projection output; cache stored [blocks, Hkv, bs, D].
    qkv = torch.randn(5, 9 + 3 + 3, head_dim, generator=gen)
    key, value = qkv[:, 9:12], qkv[:, 12:15]
    hnd = torch.zeros(num_blocks, num_kv_heads, block_size, head_dim)
    kc, vc = hnd.clone().transpose(1, 2), hnd.clone().transpose(1, 2)  # NHD-shaped views
    slots = torch.tensor([0, 17, 63, -1, 33])
    kc_ref = torch.zeros(num_blocks, block_size, num_kv_heads, head_dim)
    vc_ref = kc_ref.clone()
    reference.reshape_and_cache(key, value, kc_ref, vc_ref, slots)
    kc_d, vc_d = kc.to(DEVICE), vc.to(DEVICE)
    reshape_and_cache(key.to(DEVICE), value.to(DEVICE), kc_d, vc_d, slots.to(DEVICE))
    assert torch.equal(kc_d.cpu(), kc_ref) and torch.equal(vc_d.cpu(), vc_ref)


def test_write_zero_tokens_is_a_no_op():
    kc = torch.zeros(2, 4, 1, 64, device=DEVICE)
    empty = torch.empty(0, 1, 64, device=DEVICE)
    reshape_and_cache(empty, empty, kc, kc.clone(), torch.empty(0, dtype=torch.int64, device=DEVICE))
    assert torch.count_nonzero(kc) == 0
