"""Host-side checks of paged-attention inputs, run before a kernel is launched.

A GPU kernel that is handed a block id past the end of the cache does not raise: it reads
someone else's memory (a silently wrong answer) or faults much later with an "illegal memory
access" that names no culprit. These functions catch such mistakes on the host, with a message
that says which argument is wrong and how, and raise :class:`pagedlab.errors.KernelInputError`
(a ``ValueError``).

Two kinds of check:

* **metadata checks** (ranks, shapes, dtypes, devices, head size) read only tensor metadata and
  cost nothing; they always run.
* **value checks** read the index tensors: ``seq_lens >= 0``, every block id that a sequence
  actually uses (the first ``ceil(seq_len / block_size)`` entries of its row) lies in
  ``[0, num_blocks)``, ``slot_mapping`` entries are -1 or a valid slot, ``cu_seqlens_q`` is a
  prefix sum. Table entries past a sequence's length are padding and are never read by the
  kernels, so they may hold anything. On CUDA tensors the value checks cost one device sync;
  pass ``check_values=False`` to skip them in a hot loop (validate once per step instead).

Only torch is imported here, so the checks work without Triton installed.
"""

from __future__ import annotations

import torch

from pagedlab.errors import KernelInputError
from pagedlab.kernels.paged_kv import PagedKV

#: Cache and query dtypes the kernels accept.
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: Largest head size: the kernels keep a ``[rows, head_dim]`` fp32 accumulator in registers.
MAX_HEAD_DIM = 256
#: Head sizes must be a multiple of this (every real model's is: 64, 80, 96, 112, 128, 256),
#: so each row of the cache starts 16-byte aligned for fp16 vector loads.
HEAD_DIM_MULTIPLE = 8

_INT_DTYPES = (torch.int32, torch.int64)


def _fail(msg: str) -> None:
    raise KernelInputError(msg)


def _check_int(name: str, t: torch.Tensor, ndim: int) -> None:
    if not isinstance(t, torch.Tensor):
        _fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _INT_DTYPES:
        _fail(f"{name} must be int32 or int64, got {t.dtype}")
    if t.dim() != ndim:
        _fail(f"{name} must have {ndim} dimension(s), got shape {tuple(t.shape)}")


def validate_head_dim(head_dim: int) -> None:
    """Raise unless ``head_dim`` is a multiple of 8 in ``[8, 256]`` (80 and 96 are fine: padded + masked)."""
    if head_dim % HEAD_DIM_MULTIPLE != 0 or not HEAD_DIM_MULTIPLE <= head_dim <= MAX_HEAD_DIM:
        _fail(
            f"head_dim={head_dim} is not supported: it must be a multiple of {HEAD_DIM_MULTIPLE} "
            f"between {HEAD_DIM_MULTIPLE} and {MAX_HEAD_DIM} (non powers of two such as 80 and 96 are fine)"
        )


def _check_float_pair(a: tuple[str, torch.Tensor], b: tuple[str, torch.Tensor], layout: str) -> None:
    """Both named tensors have ``layout``'s rank and a supported dtype, and the same shape."""
    for name, t in (a, b):
        if not isinstance(t, torch.Tensor):
            _fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != layout.count(",") + 1:
            _fail(f"{name} must be {layout}, got shape {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            _fail(f"{name} dtype {t.dtype} is not supported; use one of {SUPPORTED_DTYPES}")
    if a[1].shape != b[1].shape:
        _fail(f"{a[0]} {tuple(a[1].shape)} and {b[0]} {tuple(b[1].shape)} differ in shape")


def validate_kv_cache(key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
    """Check a K/V cache pair: ``[num_blocks, block_size, num_kv_heads, head_dim]``, same shape and dtype.

    Any strides are accepted (the kernels take them as arguments), so an HND cache viewed as NHD
    with ``permute`` works too.
    """
    _check_float_pair(
        ("key_cache", key_cache), ("value_cache", value_cache), "[num_blocks, block_size, num_kv_heads, head_dim]"
    )
    if key_cache.dtype != value_cache.dtype:
        _fail(f"key_cache ({key_cache.dtype}) and value_cache ({value_cache.dtype}) differ in dtype")
    if key_cache.device != value_cache.device:
        _fail(f"key_cache is on {key_cache.device} but value_cache is on {value_cache.device}")
    validate_head_dim(key_cache.shape[3])


def _check_query(query: torch.Tensor, key_cache: torch.Tensor) -> None:
    if not isinstance(query, torch.Tensor) or query.dim() != 3:
        _fail(
            f"query must be [tokens, num_q_heads, head_dim], got "
            f"{tuple(query.shape) if isinstance(query, torch.Tensor) else type(query).__name__}"
        )
    num_q_heads, head_dim = query.shape[1:]
    num_kv_heads = key_cache.shape[2]
    if head_dim != key_cache.shape[3]:
        _fail(f"query head_dim {head_dim} != cache head_dim {key_cache.shape[3]}")
    if num_kv_heads == 0 or num_q_heads % num_kv_heads != 0:
        _fail(f"num_q_heads={num_q_heads} is not a multiple of num_kv_heads={num_kv_heads} (GQA needs whole groups)")
    if query.dtype != key_cache.dtype:
        _fail(f"query dtype {query.dtype} != cache dtype {key_cache.dtype}; cast one of them")
    if query.device != key_cache.device:
        _fail(f"query is on {query.device} but the cache is on {key_cache.device}")


def _check_scale(scale: float) -> None:
    try:
        s = float(scale)
    except (TypeError, ValueError):
        _fail(f"scale must be a float, got {scale!r}")
    if not (s == s and abs(s) != float("inf")):
        _fail(f"scale must be finite, got {scale!r}")


def _check_table(
    block_tables: torch.Tensor, seq_lens: torch.Tensor, num_seqs: int, key_cache: torch.Tensor, check_values: bool
) -> None:
    _check_int("block_tables", block_tables, 2)
    _check_int("seq_lens", seq_lens, 1)
    if seq_lens.shape[0] != num_seqs:
        _fail(f"seq_lens has {seq_lens.shape[0]} entries but there are {num_seqs} sequences")
    if block_tables.shape[0] != num_seqs:
        _fail(f"block_tables has {block_tables.shape[0]} rows but there are {num_seqs} sequences")
    for name, t in (("block_tables", block_tables), ("seq_lens", seq_lens)):
        if t.device != key_cache.device:
            _fail(f"{name} is on {t.device} but the cache is on {key_cache.device}")
    if not check_values or num_seqs == 0:
        return
    num_blocks, block_size = key_cache.shape[:2]
    lens = seq_lens.to(torch.int64)
    if bool((lens < 0).any()):
        _fail(f"seq_lens must be >= 0, got {seq_lens.tolist()}")
    capacity = block_tables.shape[1] * block_size
    if bool((lens > capacity).any()):
        _fail(
            f"a seq_len exceeds the block table's capacity: max seq_len {int(lens.max())} > "
            f"{block_tables.shape[1]} blocks x block_size {block_size}"
        )
    # Only the entries a sequence reads are checked: the rest of its row is padding.
    used = (
        torch.arange(block_tables.shape[1], device=lens.device)[None, :]
        < ((lens + block_size - 1) // block_size)[:, None]
    )
    ids = block_tables[used]
    if ids.numel() and bool(((ids < 0) | (ids >= num_blocks)).any()):
        bad = ids[(ids < 0) | (ids >= num_blocks)]
        _fail(
            f"block_tables holds block id(s) {bad[:8].tolist()} outside [0, {num_blocks}) within the "
            f"first ceil(seq_len / block_size) entries of a row"
        )


def validate_cache_write_inputs(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    check_values: bool = True,
) -> None:
    """Check the arguments of ``reshape_and_cache``.

    ``key``/``value`` are ``[num_tokens, num_kv_heads, head_dim]`` of any supported float dtype
    (converted to the cache dtype on store); ``slot_mapping`` is int ``[num_tokens]`` with entries
    -1 (skip) or in ``[0, num_blocks * block_size)``.

    Raises:
        KernelInputError: on the first inconsistency found.
    """
    validate_kv_cache(key_cache, value_cache)
    _check_float_pair(("key", key), ("value", value), "[num_tokens, num_kv_heads, head_dim]")
    if key.shape[1:] != key_cache.shape[2:]:
        _fail(
            f"key rows {tuple(key.shape[1:])} do not match the cache's [num_kv_heads, head_dim] "
            f"{tuple(key_cache.shape[2:])}"
        )
    for name, t in (("key", key), ("value", value)):
        if t.device != key_cache.device:
            _fail(f"{name} is on {t.device} but the cache is on {key_cache.device}")
    _check_int("slot_mapping", slot_mapping, 1)
    if slot_mapping.shape[0] != key.shape[0]:
        _fail(f"slot_mapping has {slot_mapping.shape[0]} entries for {key.shape[0]} tokens")
    if slot_mapping.device != key_cache.device:
        _fail(f"slot_mapping is on {slot_mapping.device} but the cache is on {key_cache.device}")
    if check_values and slot_mapping.numel():
        num_slots = key_cache.shape[0] * key_cache.shape[1]
        bad = (slot_mapping < -1) | (slot_mapping >= num_slots)
        if bool(bad.any()):
            _fail(
                f"slot_mapping holds slot(s) {slot_mapping[bad][:8].tolist()} outside [0, {num_slots}) "
                f"(-1 marks a skipped token)"
            )


def _check_paged_kv(kv: PagedKV) -> None:
    """Raise unless ``kv`` is a :class:`PagedKV` whose cache pair is well-formed."""
    if not isinstance(kv, PagedKV):
        _fail(f"kv must be a pagedlab.kernels.paged_kv.PagedKV, got {type(kv).__name__}")
    validate_kv_cache(kv.key_cache, kv.value_cache)


def validate_decode_inputs(query: torch.Tensor, kv: PagedKV, scale: float, *, check_values: bool = True) -> None:
    """Check the arguments of ``paged_decode_attention(query, kv, scale)`` (one query token per sequence).

    Raises:
        KernelInputError: ``kv`` not a :class:`PagedKV`, mismatched shapes/dtypes/devices, unsupported
            head size, ``Hq % Hkv != 0``, negative ``seq_lens``, a length beyond the table, or a used
            block id out of range.
    """
    _check_paged_kv(kv)
    _check_query(query, kv.key_cache)
    _check_scale(scale)
    _check_table(kv.block_tables, kv.seq_lens, query.shape[0], kv.key_cache, check_values)


def validate_prefill_inputs(query: torch.Tensor, kv: PagedKV, scale: float, *, check_values: bool = True) -> None:
    """Check the arguments of ``paged_prefill_attention(query, kv, scale)`` (varlen queries, ``q_len`` may be 0).

    Besides the decode checks: ``kv.cu_seqlens_q`` is set, ``[num_seqs + 1]``, starts at 0, never
    decreases, ends at ``query.shape[0]``, and every ``q_len <= seq_len``.

    Raises:
        KernelInputError: on the first inconsistency found.
    """
    _check_paged_kv(kv)
    _check_query(query, kv.key_cache)
    _check_scale(scale)
    cu_seqlens_q = kv.prefill_cu_seqlens()
    _check_int("cu_seqlens_q", cu_seqlens_q, 1)
    num_seqs = cu_seqlens_q.shape[0] - 1
    if num_seqs < 0:
        _fail("cu_seqlens_q must have num_seqs + 1 >= 1 entries")
    if cu_seqlens_q.device != kv.key_cache.device:
        _fail(f"cu_seqlens_q is on {cu_seqlens_q.device} but the cache is on {kv.key_cache.device}")
    _check_table(kv.block_tables, kv.seq_lens, num_seqs, kv.key_cache, check_values)
    if not check_values:
        return
    cu = cu_seqlens_q.to(torch.int64)
    if int(cu[0]) != 0 or int(cu[-1]) != query.shape[0]:
        _fail(
            f"cu_seqlens_q must start at 0 and end at the number of query tokens {query.shape[0]}, "
            f"got {cu_seqlens_q.tolist()}"
        )
    q_lens = cu[1:] - cu[:-1]
    if bool((q_lens < 0).any()):
        _fail(f"cu_seqlens_q must not decrease, got {cu_seqlens_q.tolist()}")
    if bool((q_lens > kv.seq_lens.to(torch.int64)).any()):
        _fail(
            f"a sequence has more query tokens than its seq_len: q_lens {q_lens.tolist()}, "
            f"seq_lens {kv.seq_lens.tolist()}"
        )
