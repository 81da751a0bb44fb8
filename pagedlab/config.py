"""Engine configuration, with vLLM's field names (``vllm/config/cache.py``, ``scheduler.py``).

Defaults are sized for a 2-core CPU laptop serving SmolLM2-135M, not for a GPU:
512 blocks of 16 tokens hold 8,192 tokens of fp32 KV (377 MB for SmolLM2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, get_args

from pagedlab.errors import ConfigError

PrefixCacheKind = Literal["hash", "radix"]  # vLLM's block hash chain / SGLang's radix tree
SchedulingPolicy = Literal["fcfs", "priority"]
PreemptionMode = Literal["recompute", "swap"]  # "swap": vLLM v0 only


def _positive_int(name: str, value, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else ">= 1"
        raise ConfigError(f"{name} must be {bound}, got {value}")


def _flag(name: str, value: object) -> None:
    """Refuse a non-bool flag: ``"no"`` or ``1`` would otherwise be truthy and silently mean True.

    Raises:
        ConfigError: ``value`` is not a bool.
    """
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def _one_of(name: str, value: object, kind: object) -> None:
    """Refuse a value outside the ``Literal`` type ``kind`` (the choices are written once, in the type).

    Raises:
        ConfigError: ``value`` is not one of ``kind``'s choices.
    """
    choices = get_args(kind)
    if value not in choices:
        raise ConfigError(f"{name} must be {' or '.join(map(repr, choices))}, got {value!r}")


def check_seed(seed: object) -> None:
    """Refuse a seed torch's generator cannot take (an int in ``[-2**63, 2**64)``; a bool is not a seed).

    Raises:
        ConfigError: ``seed`` is not an int, or is out of that range.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    if not -(2**63) <= seed < 2**64:
        raise ConfigError(f"seed must be in [-2**63, 2**64), got {seed}")


@dataclass
class CacheConfig:
    """KV-cache layout.

    Attributes:
        block_size: tokens per KV block (vLLM default 16).
        num_gpu_blocks: blocks in the device pool. On CPU the "GPU" pool is simply the main
            KV tensor; the name is kept so code reads like vLLM.
        num_cpu_blocks: blocks in the swap pool used by ``preemption_mode="swap"`` (vLLM v0's
            ``swap_space``, expressed in blocks).
        enable_prefix_caching: reuse full blocks across requests by content hash.
        prefix_cache: ``"hash"`` (vLLM's block hash chain) or ``"radix"`` (SGLang's radix tree).
        hash_seed: seed of the hash chain's root (``NONE_HASH``); ``None`` means random per process.
    """

    block_size: int = 16
    num_gpu_blocks: int = 512
    num_cpu_blocks: int = 0
    enable_prefix_caching: bool = False
    prefix_cache: PrefixCacheKind = "hash"
    hash_seed: int | None = None

    def __post_init__(self) -> None:
        _positive_int("block_size", self.block_size)
        _positive_int("num_gpu_blocks", self.num_gpu_blocks)
        _positive_int("num_cpu_blocks", self.num_cpu_blocks, allow_zero=True)
        _flag("enable_prefix_caching", self.enable_prefix_caching)
        _one_of("prefix_cache", self.prefix_cache, PrefixCacheKind)
        h = self.hash_seed
        if h is not None and (isinstance(h, bool) or not isinstance(h, int)):
            raise ConfigError(f"hash_seed must be an int or None, got {h!r}")


@dataclass
class SchedulerConfig:
    """Scheduling limits, as vLLM's ``SchedulerConfig``.

    Attributes:
        max_num_seqs: most requests running at once.
        max_num_batched_tokens: token budget of one step (prefill chunks + decodes).
        max_model_len: longest sequence (prompt + output) in tokens.
        long_prefill_token_threshold: cap on one request's prefill chunk per step; 0 = no cap.
        enable_chunked_prefill: split prompts longer than the remaining budget (vLLM v1: always on).
        policy: ``"fcfs"`` or ``"priority"`` (lower value = more important).
        preemption_mode: ``"recompute"`` (vLLM v1) or ``"swap"`` (vLLM v0 only).
        watermark: fraction of the GPU KV blocks kept free when admitting a WAITING or PREEMPTED
            request while at least one request is running (vLLM 0.32 ``SchedulerConfig.watermark``:
            ``int(watermark * (num_gpu_blocks + 1))`` blocks (vLLM's pool size, null block counted) on top of the request's own); running
            requests' allocations ignore it; 0.0 (the default) disables it; ``0 <= watermark < 1``.
        scheduler_reserve_full_isl: admit a WAITING or PREEMPTED request only when blocks for its
            whole known sequence (prompt, plus tokens generated before a preemption) fit, not only
            its first chunk's (vLLM 0.32.0 ``SchedulerConfig.scheduler_reserve_full_isl``, default
            True, ``vllm/config/scheduler.py:190``); False restores the first-chunk rule.
    """

    max_num_seqs: int = 32
    max_num_batched_tokens: int = 512
    max_model_len: int = 2048
    long_prefill_token_threshold: int = 0
    enable_chunked_prefill: bool = True
    policy: SchedulingPolicy = "fcfs"
    preemption_mode: PreemptionMode = "recompute"
    watermark: float = 0.0
    scheduler_reserve_full_isl: bool = True

    def __post_init__(self) -> None:
        _positive_int("max_num_seqs", self.max_num_seqs)
        _positive_int("max_num_batched_tokens", self.max_num_batched_tokens)
        _positive_int("max_model_len", self.max_model_len)
        _positive_int("long_prefill_token_threshold", self.long_prefill_token_threshold, allow_zero=True)
        _flag("enable_chunked_prefill", self.enable_chunked_prefill)
        _flag("scheduler_reserve_full_isl", self.scheduler_reserve_full_isl)
        _one_of("policy", self.policy, SchedulingPolicy)
        _one_of("preemption_mode", self.preemption_mode, PreemptionMode)
        w = self.watermark
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= w < 1.0:
            raise ConfigError(f"watermark must be a float with 0.0 <= watermark < 1.0, got {w!r}")


def available_memory_bytes(device: str = "cpu") -> int | None:
    """Bytes that can still be allocated on ``device``; None when unknown.

    CUDA: ``torch.cuda.mem_get_info``'s free bytes. CPU: ``MemAvailable`` of ``/proc/meminfo``
    (Linux), else free pages x page size from ``os.sysconf``, else physical memory.
    """
    if device.startswith("cuda"):
        import torch  # lazy: start-up time (torch takes seconds to import)

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            return int(os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, ValueError, OSError):
            continue
    return None


def check_kv_cache_fits(cache_config: CacheConfig, kv_bytes_per_token: int, device: str = "cpu") -> None:
    """Refuse, before allocating, a KV pool (plus swap space) larger than the free memory.

    The device pool takes ``num_gpu_blocks * block_size * kv_bytes_per_token`` bytes on ``device``;
    the swap pool ``num_cpu_blocks * block_size * kv_bytes_per_token`` in host RAM (the same RAM as
    the device pool when ``device`` is the CPU). vLLM sizes its pool from ``gpu_memory_utilization``
    instead; pagedlab takes explicit block counts, so it checks them.

    Args:
        cache_config: block size and block counts.
        kv_bytes_per_token: K and V bytes of one token over all layers (``LlamaConfig.kv_bytes_per_token``).
        device: where the device pool lives.
    Raises:
        ConfigError: a pool does not fit; the message gives the bytes needed and available and the
            largest ``num_gpu_blocks`` (or ``num_cpu_blocks``) that would fit.
    """
    cc = cache_config
    per_block = cc.block_size * kv_bytes_per_token
    if device.startswith("cuda"):
        checks = [(device, cc.num_gpu_blocks, "num_gpu_blocks"), ("cpu", cc.num_cpu_blocks, "num_cpu_blocks")]
    else:
        label = "num_gpu_blocks + num_cpu_blocks" if cc.num_cpu_blocks else "num_gpu_blocks"
        checks = [("cpu", cc.num_gpu_blocks + cc.num_cpu_blocks, label)]
    for where, blocks, knob in checks:
        need = blocks * per_block
        avail = available_memory_bytes(where) if need else None
        if avail is None or need <= avail:
            continue
        fit = avail // per_block
        raise ConfigError(
            f"the KV cache needs {need / 2**30:.2f} GiB on {where} ({knob}={blocks} blocks x block_size "
            f"{cc.block_size} x {kv_bytes_per_token} bytes per token) but only {avail / 2**30:.2f} GiB is "
            f"available. Lower {knob} to at most {fit}, or lower block_size"
        )
