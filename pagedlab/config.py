"""Engine configuration, with vLLM's field names (``vllm/config/cache.py``, ``scheduler.py``).

Defaults are sized for a 2-core CPU laptop serving SmolLM2-135M, not for a GPU:
512 blocks of 16 tokens hold 8,192 tokens of fp32 KV (377 MB for SmolLM2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from pagedlab.errors import ConfigError


def _positive_int(name: str, value, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else ">= 1"
        raise ConfigError(f"{name} must be {bound}, got {value}")


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
    prefix_cache: Literal["hash", "radix"] = "hash"
    hash_seed: Optional[int] = None

    def __post_init__(self) -> None:
        _positive_int("block_size", self.block_size)
        _positive_int("num_gpu_blocks", self.num_gpu_blocks)
        _positive_int("num_cpu_blocks", self.num_cpu_blocks, allow_zero=True)
        if self.prefix_cache not in ("hash", "radix"):
            raise ConfigError(f"prefix_cache must be 'hash' or 'radix', got {self.prefix_cache!r}")


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
    """

    max_num_seqs: int = 32
    max_num_batched_tokens: int = 512
    max_model_len: int = 2048
    long_prefill_token_threshold: int = 0
    enable_chunked_prefill: bool = True
    policy: Literal["fcfs", "priority"] = "fcfs"
    preemption_mode: Literal["recompute", "swap"] = "recompute"

    def __post_init__(self) -> None:
        _positive_int("max_num_seqs", self.max_num_seqs)
        _positive_int("max_num_batched_tokens", self.max_num_batched_tokens)
        _positive_int("max_model_len", self.max_model_len)
        _positive_int("long_prefill_token_threshold", self.long_prefill_token_threshold, allow_zero=True)
        if self.policy not in ("fcfs", "priority"):
            raise ConfigError(f"policy must be 'fcfs' or 'priority', got {self.policy!r}")
        if self.preemption_mode not in ("recompute", "swap"):
            raise ConfigError(f"preemption_mode must be 'recompute' or 'swap', got {self.preemption_mode!r}")
