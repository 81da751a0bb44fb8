"""Lab 09's GPU-scale arithmetic: how big the KV pool is, and what moves in a disaggregated deployment.

* :func:`memory_budget` sizes the KV pool the way vLLM 0.32.0's GPU worker does
  (``Worker.determine_available_memory`` in ``vllm/v1/worker/gpu_worker.py``, ``request_memory`` in
  ``vllm/v1/worker/utils.py``, ``get_kv_cache_config_from_groups`` in ``vllm/v1/core/kv_cache_utils.py``)::

      requested  = ceil(total memory x gpu_memory_utilization)
      KV bytes   = requested - (weights + activation peak + non-torch memory [+ CUDA graphs])
      num_blocks = KV bytes // (block_size x kv_bytes_per_token)        (all layers' pages of one block)
      headroom   = total - requested                                      (left to other processes)

  vLLM measures the activation peak in a profiling run; :func:`activation_peak_estimate` is a
  rough lower bound from the shapes, for a GPU this lab does not have.
* :func:`kv_transfer` is prefill/decode disaggregation's cost: a prefill instance computes a
  prompt's KV and a decode instance receives it (vLLM 0.32.0: a KV connector,
  ``vllm/distributed/kv_transfer/kv_connector/v1/``, configured by ``KVTransferConfig``, e.g. the
  NIXL connector). What moves is the KV of every prompt token in every layer,
  ``prompt_len x kv_bytes_per_token`` bytes, plus the first sampled token; the transfer time at a
  link's bandwidth is set against the prefill's own roofline time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pagedlab.sim.cost_model import CostModel
from pagedlab.sim.hardware import GB, GPUSpec
from pagedlab.sim.models import ModelSpec

__all__ = ["LINKS", "MemoryBudget", "activation_peak_estimate", "kv_transfer", "memory_budget"]

#: One-direction bandwidths (bytes/s) of the links a KV transfer can take, from the specifications:
#: NVLink 4 (H100 SXM: 900 GB/s both directions together), PCIe Gen5 x16 (64 GB/s each way, as
#: ``hardware.H100.pcie_bandwidth``), InfiniBand NDR (400 Gb/s per port) and 100 Gb Ethernet.
LINKS: dict[str, float] = {
    "NVLink 4 (450 GB/s)": 450 * GB,
    "PCIe Gen5 x16 (64 GB/s)": 64 * GB,
    "InfiniBand NDR 400 Gb/s (50 GB/s)": 50 * GB,
    "100 GbE (12.5 GB/s)": 12.5 * GB,
}


@dataclass(frozen=True)
class MemoryBudget:
    """Where one GPU's memory goes (bytes), as vLLM 0.32.0 sizes its KV pool."""

    total: int
    requested: int  #: ceil(total x gpu_memory_utilization)
    weights: int
    activation_peak: int
    non_torch: int
    kv: int  #: requested - weights - activation_peak - non_torch
    block_bytes: int  #: block_size x kv_bytes_per_token (one block of every layer)
    num_blocks: int
    block_size: int

    @property
    def headroom(self) -> int:
        """Memory vLLM leaves to other processes on the GPU: ``total - requested``."""
        return self.total - self.requested

    @property
    def kv_tokens(self) -> int:
        return self.num_blocks * self.block_size


def memory_budget(
    model: ModelSpec,
    gpu: GPUSpec,
    gpu_memory_utilization: float = 0.92,
    activation_peak_bytes: int = 0,
    non_torch_bytes: int = 0,
    block_size: int = 16,
) -> MemoryBudget:
    """The KV pool vLLM 0.32.0 would allocate for ``model`` on ``gpu`` (see the module docstring);
    ``gpu_memory_utilization`` defaults to vLLM 0.32.0's default, 0.92 (``CacheConfig``).

    Raises:
        ValueError: utilization outside (0, 1], or nothing left for KV (vLLM refuses to start).
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    requested = math.ceil(gpu.memory_bytes * gpu_memory_utilization)
    kv = requested - model.weight_bytes - activation_peak_bytes - non_torch_bytes
    block_bytes = block_size * model.kv_bytes_per_token
    if kv < block_bytes:
        raise ValueError(
            f"{model.name} on {gpu.name} at gpu_memory_utilization={gpu_memory_utilization}: "
            f"{requested / 2**30:.1f} GiB requested, {(requested - kv) / 2**30:.1f} GiB taken before the KV cache, "
            "no room for one block"
        )
    return MemoryBudget(
        total=gpu.memory_bytes,
        requested=requested,
        weights=model.weight_bytes,
        activation_peak=activation_peak_bytes,
        non_torch=non_torch_bytes,
        kv=kv,
        block_bytes=block_bytes,
        num_blocks=kv // block_bytes,
        block_size=block_size,
    )


def activation_peak_estimate(model: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """A rough lower bound on the profiling run's activation peak (bytes): one layer's largest live
    tensors for ``max_num_batched_tokens`` tokens (residual and normed hidden states, the MLP's
    gate-and-up output and its product: ``T x (2 hidden + 3 intermediate)`` elements) plus the
    sampler's fp32 logits for ``max_num_seqs`` sequences. vLLM measures the real peak."""
    layer = max_num_batched_tokens * (2 * model.hidden_size + 3 * model.intermediate_size) * model.dtype_bytes
    logits = max_num_seqs * model.vocab_size * 4
    return layer + logits


def kv_transfer(model: ModelSpec, gpu: GPUSpec, prompt_len: int, link_bytes_per_s: float) -> dict[str, float]:
    """Prefill/decode disaggregation for one request: the KV to move and the time it takes.

    Returns:
        ``kv_bytes`` (``prompt_len x kv_bytes_per_token``), ``transfer_s`` (at ``link_bytes_per_s``),
        ``prefill_s`` (the prompt's prefill on ``gpu``, roofline: a lower bound) and
        ``transfer_over_prefill``.
    """
    if prompt_len < 1 or link_bytes_per_s <= 0:
        raise ValueError(f"need prompt_len >= 1 and a positive bandwidth, got {prompt_len=}, {link_bytes_per_s=}")
    kv_bytes = prompt_len * model.kv_bytes_per_token
    transfer = kv_bytes / link_bytes_per_s
    prefill = CostModel(model, gpu).prefill_step_time(prompt_len)
    return {
        "kv_bytes": float(kv_bytes),
        "transfer_s": transfer,
        "prefill_s": prefill,
        "transfer_over_prefill": transfer / prefill,
    }
