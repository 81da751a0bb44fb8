"""Writing new K/V rows into the paged cache through the slot mapping (vLLM's ``reshape_and_cache``).

Design source: nano-vllm's ``store_kvcache_kernel`` (one program per token, slot -1 skipped) and
vLLM's ``reshape_and_cache_flash``. Written from those designs for teaching, not copied.

The story of the kernel
-----------------------
Each scheduled token has a *slot*, ``block_id * block_size + row``, computed by the block manager
(``slot_mapping``). Program ``t`` copies token ``t``'s ``num_kv_heads * head_dim`` key values and
value values into that slot. The row is handled as one flat vector of ``ROW = Hkv * D`` elements,
which need not be a power of two (SmolLM2: 3 * 64 = 192), while ``tl.arange`` must be: the vector is
padded to ``ROW_P`` and masked. nano-vllm's kernel has no such mask and fails on SmolLM2
("arange's range must be a power of 2"). Each element finds its head and dim (``i // D``,
``i % D``), so any strides work on both sides. Slot -1 (padding tokens) masks the whole store.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from pagedlab.kernels.runtime import launcher, next_power_of_2
from pagedlab.kernels.validate import validate_cache_write_inputs


@triton.jit
def _reshape_and_cache_kernel(
    key_ptr,
    value_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_mapping_ptr,
    stride_k_tok,
    stride_k_head,
    stride_k_dim,
    stride_v_tok,
    stride_v_head,
    stride_v_dim,
    stride_kc_block,
    stride_kc_slot,
    stride_kc_head,
    stride_kc_dim,
    stride_vc_block,
    stride_vc_slot,
    stride_vc_head,
    stride_vc_dim,
    HEAD_DIM: tl.constexpr,
    ROW: tl.constexpr,  # num_kv_heads * head_dim
    ROW_P: tl.constexpr,  # ROW padded to a power of two
    BLOCK_SIZE: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    # Slots are int64 (vLLM's convention); block * stride stays in int64 as well.
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    block = slot // BLOCK_SIZE
    row = slot % BLOCK_SIZE

    offs = tl.arange(0, ROW_P)
    head = offs // HEAD_DIM
    dim = offs % HEAD_DIM
    mask = (offs < ROW) & (slot >= 0)

    k = tl.load(key_ptr + token * stride_k_tok + head * stride_k_head + dim * stride_k_dim, mask=mask)
    v = tl.load(value_ptr + token * stride_v_tok + head * stride_v_head + dim * stride_v_dim, mask=mask)
    tl.store(
        k_cache_ptr + block * stride_kc_block + row * stride_kc_slot + head * stride_kc_head + dim * stride_kc_dim,
        k.to(k_cache_ptr.dtype.element_ty),
        mask=mask,
    )
    tl.store(
        v_cache_ptr + block * stride_vc_block + row * stride_vc_slot + head * stride_vc_head + dim * stride_vc_dim,
        v.to(v_cache_ptr.dtype.element_ty),
        mask=mask,
    )


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    check_values: bool = True,
) -> None:
    """Triton KV write (same contract as ``reference.reshape_and_cache``).

    Args:
        key, value: ``[num_tokens, num_kv_heads, head_dim]``, fp16/bf16/fp32 (cast to the cache dtype).
        key_cache, value_cache: ``[num_blocks, block_size, num_kv_heads, head_dim]``, any strides;
            written in place.
        slot_mapping: int32/int64 ``[num_tokens]``, ``block_id * block_size + row``; -1 skips the token.
        check_values: also check that every slot is -1 or in range (one sync on CUDA).
    Raises:
        KernelInputError: bad shapes, dtypes, devices or slots (before launch).
        KernelUnavailableError: CPU tensors without ``TRITON_INTERPRET=1`` (see ``runtime``).
    """
    validate_cache_write_inputs(key, value, key_cache, value_cache, slot_mapping, check_values=check_values)
    kernel = launcher(_reshape_and_cache_kernel, key)
    num_tokens = key.shape[0]
    if num_tokens == 0:
        return
    num_kv_heads, head_dim = key_cache.shape[2:]
    kernel[(num_tokens,)](
        key,
        value,
        key_cache,
        value_cache,
        slot_mapping,
        *key.stride(),
        *value.stride(),
        *key_cache.stride(),
        *value_cache.stride(),
        HEAD_DIM=head_dim,
        ROW=num_kv_heads * head_dim,
        ROW_P=next_power_of_2(num_kv_heads * head_dim),
        BLOCK_SIZE=key_cache.shape[1],
    )
