"""A roofline cost model for one serving step, and the swap-vs-recompute trade-off.

A step runs the whole model once over a flat batch of sequences. Each sequence ``i`` brings
``n_i`` new tokens (a prefill chunk, or 1 for a decode) after ``c_i`` tokens already in its KV
cache. The roofline says the step takes at least

    time = max(FLOPs / peak FLOP/s, bytes / HBM bandwidth) + overhead

with (L layers, H query heads, d head_dim, P_lin the parameters every token passes through,
P_head the LM head, b bytes per element, kv the KV bytes per token):

    FLOPs = 2 P_lin sum(n_i)                       linear layers (multiply + add per weight)
          + 2 P_head (number of sequences)         logits for each sequence's last token
          + 4 L H d sum(n_i c_i + n_i(n_i+1)/2)    attention: QK^T and PV over the causal keys
    bytes = (P_lin + P_head) b                     every weight is read once per step
          + kv sum(c_i + n_i)                      each sequence reads its keys and values
          + kv sum(n_i)                            and writes the new ones

Activations are not counted (they matter little at these sizes). Decode steps are
bandwidth-bound: a handful of FLOPs per weight byte. Large prefills are compute-bound: the
weights are read once for thousands of tokens. The ridge point is ``peak / bandwidth`` FLOPs per
byte (H100: about 295).

Preempting a request holding ``T`` tokens of KV costs either a swap (out to host memory and
back over PCIe) or a recompute (prefill the ``T`` tokens again):

    swap      = 2 T kv / PCIe bandwidth
    recompute = 2 P T / effective FLOP/s

Both are linear in ``T``, so their ratio ``P PCIe / (kv FLOP/s)`` and the crossover do not depend
on the number of tokens (:func:`recompute_over_swap`). Recompute here counts linear FLOPs only;
its attention FLOPs grow with ``T^2`` and tilt long sequences towards swapping.

The peaks come from ``hardware.py``; real kernels reach a fraction of them, which
``compute_efficiency`` / ``bandwidth_efficiency`` express (1.0 = the pure roofline, a lower bound).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pagedlab.sim.hardware import GPUSpec
from pagedlab.sim.models import ModelSpec


@dataclass(frozen=True)
class StepCost:
    """The roofline of one step.

    Attributes:
        flops: floating-point operations.
        bytes: HBM bytes moved (weights + KV read + KV written).
        compute_time: ``flops / effective FLOP/s`` in seconds.
        memory_time: ``bytes / effective bandwidth`` in seconds.
        time: ``max(compute_time, memory_time) + overhead`` in seconds.
    """

    flops: float
    bytes: float
    compute_time: float
    memory_time: float
    time: float

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``: which roof the step sits under."""
        return "compute" if self.compute_time >= self.memory_time else "memory"

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte."""
        return self.flops / self.bytes if self.bytes else float("inf")


@dataclass(frozen=True)
class CostModel:
    """A model on a GPU, with how close kernels get to the peaks.

    Attributes:
        model: the ``ModelSpec``.
        gpu: the ``GPUSpec`` (use ``GPUSpec.times(n)`` for tensor parallelism).
        compute_efficiency: fraction of peak FLOP/s reached, in (0, 1].
        bandwidth_efficiency: fraction of peak HBM bandwidth reached, in (0, 1].
        step_overhead_s: fixed seconds added to every step (scheduling, kernel launches).
    """

    model: ModelSpec
    gpu: GPUSpec
    compute_efficiency: float = 1.0
    bandwidth_efficiency: float = 1.0
    step_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("compute_efficiency", "bandwidth_efficiency"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {v}")
        if self.step_overhead_s < 0:
            raise ValueError(f"step_overhead_s must be >= 0, got {self.step_overhead_s}")

    @property
    def flops_per_s(self) -> float:
        return self.gpu.peak_flops * self.compute_efficiency

    @property
    def bytes_per_s(self) -> float:
        return self.gpu.hbm_bandwidth * self.bandwidth_efficiency

    def step_cost(self, seqs: Iterable[tuple[int, int]]) -> StepCost:
        """Roofline of a step.

        Args:
            seqs: one ``(num_context_tokens, num_new_tokens)`` pair per scheduled sequence:
                tokens already in its KV cache before the step, and tokens computed now
                (a prefill chunk, or 1 for a decode). An empty batch costs the overhead only.
        Returns:
            A ``StepCost``.
        """
        m = self.model
        new = ctx_read = pairs = num_seqs = 0
        for c, n in seqs:
            if c < 0 or n < 1:
                raise ValueError(f"need context >= 0 and new tokens >= 1, got ({c}, {n})")
            new += n
            ctx_read += c + n
            pairs += n * c + n * (n + 1) // 2
            num_seqs += 1
        if num_seqs == 0:
            return StepCost(0.0, 0.0, 0.0, 0.0, self.step_overhead_s)
        flops = (
            2.0 * m.num_linear_params * new
            + 2.0 * m.lm_head_params * num_seqs
            + 4.0 * m.num_layers * m.num_heads * m.head_dim * pairs
        )
        nbytes = (m.num_linear_params + m.lm_head_params) * m.dtype_bytes + m.kv_bytes_per_token * (ctx_read + new)
        ct, mt = flops / self.flops_per_s, nbytes / self.bytes_per_s
        return StepCost(flops, float(nbytes), ct, mt, max(ct, mt) + self.step_overhead_s)

    def step_time(self, seqs: Iterable[tuple[int, int]]) -> float:
        """Seconds for a step; see :meth:`step_cost`."""
        return self.step_cost(seqs).time

    def decode_step_time(self, context_lens: Sequence[int]) -> float:
        """Seconds for a pure decode step of sequences holding ``context_lens`` tokens each."""
        return self.step_time((c, 1) for c in context_lens)

    def prefill_step_time(self, num_tokens: int) -> float:
        """Seconds to prefill one prompt of ``num_tokens`` from scratch."""
        return self.step_time([(0, num_tokens)])

    # --- linear layers alone (for calibration against Vidur's measured operators) ------------------
    def linear_ops(self) -> Sequence[tuple[str, int, int]]:
        """The matrix multiplications of one layer as ``(vidur_op_name, in_features, out_features)``."""
        m = self.model
        q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
        return [
            ("attn_pre_proj", m.hidden_size, q + 2 * kv),
            ("attn_post_proj", q, m.hidden_size),
            ("mlp_up_proj", m.hidden_size, 2 * m.intermediate_size),
            ("mlp_down_proj", m.intermediate_size, m.hidden_size),
        ]

    def linear_op_time(self, in_features: int, out_features: int, num_tokens: int) -> float:
        """Roofline of ``[num_tokens, in] @ [in, out]``: max(2 T in out / FLOP/s, weight bytes / bandwidth)."""
        flops = 2.0 * num_tokens * in_features * out_features
        nbytes = in_features * out_features * self.model.dtype_bytes
        return max(flops / self.flops_per_s, nbytes / self.bytes_per_s)

    def linear_layer_time(self, num_tokens: int) -> float:
        """Seconds for the four projections of one transformer layer over ``num_tokens`` tokens."""
        return sum(self.linear_op_time(i, o, num_tokens) for _, i, o in self.linear_ops())

    # --- preemption: swap vs recompute ----------------------------------------------------------
    def swap_time(self, num_tokens: int, round_trip: bool = True) -> float:
        """Seconds to move ``num_tokens`` of KV over PCIe (out, and back in if ``round_trip``)."""
        return (2 if round_trip else 1) * num_tokens * self.model.kv_bytes_per_token / self.gpu.pcie_bandwidth

    def recompute_time(self, num_tokens: int) -> float:
        """Seconds to prefill ``num_tokens`` again: ``2 x params x tokens / effective FLOP/s``."""
        return 2.0 * self.model.num_params * num_tokens / self.flops_per_s

    def recompute_over_swap(self) -> float:
        """``recompute_time(T) / swap_time(T)``, the same for every ``T`` (the tokens cancel).

        Below 1 recomputing is cheaper; above 1 swapping is.
        """
        m = self.model
        return (m.num_params * self.gpu.pcie_bandwidth) / (m.kv_bytes_per_token * self.flops_per_s)

    def crossover_flops_per_s(self) -> float:
        """Effective FLOP/s at which recompute and swap cost the same: ``P x PCIe / kv``."""
        return self.model.num_params * self.gpu.pcie_bandwidth / self.model.kv_bytes_per_token


def ridge_point(gpu: GPUSpec) -> float:
    """FLOPs per HBM byte at which ``gpu``'s two roofs meet (peak FLOP/s / bandwidth): a step of lower
    arithmetic intensity is memory-bound, one above it compute-bound."""
    return gpu.peak_flops / gpu.hbm_bandwidth


def decode_intensity(model: ModelSpec, gpu: GPUSpec, batch_sizes: Sequence[int], context_len: int) -> list[dict]:
    """Why batching is the lever: the roofline of a pure decode step of ``b`` sequences of
    ``context_len`` cached tokens, for each ``b`` in ``batch_sizes``.

    A decode step reads every weight once (``2 * params`` bytes in 16 bits) and does ``2 * params`` FLOPs
    per sequence, so its arithmetic intensity is about ``b`` FLOPs per byte while the weights dominate the
    bytes: the step time barely grows with ``b`` and tokens/s grows almost ``b``-fold. Each sequence also
    reads its own KV cache, which caps the intensity (the weights are shared, the KV is not), so a decode
    step stays under the GPU's :func:`ridge_point`: memory-bound at any batch size.

    Returns:
        One dict per batch size: ``batch``, ``intensity`` (FLOP/byte), ``bound`` (``"memory"`` or
        ``"compute"``), ``step_ms``, ``tokens_per_s``.
    """
    cm = CostModel(model, gpu)
    out = []
    for b in batch_sizes:
        if b < 1:
            raise ValueError(f"batch sizes must be >= 1, got {b}")
        c = cm.step_cost([(context_len, 1)] * b)
        out.append(
            {
                "batch": b,
                "intensity": c.arithmetic_intensity,
                "bound": c.bound,
                "step_ms": 1000 * c.time,
                "tokens_per_s": b / c.time,
            }
        )
    return out


def num_gpu_blocks(model: ModelSpec, gpu: GPUSpec, block_size: int = 16, gpu_memory_utilization: float = 0.9) -> int:
    """KV blocks that fit next to the weights: ``(memory x utilization - weights) / (block_size x kv)``.

    As vLLM's profiling run, minus activation memory (ignored here).

    Raises:
        ValueError: the weights do not fit in ``memory x utilization`` (use ``gpu.times(n)``).
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    free = gpu.memory_bytes * gpu_memory_utilization - model.weight_bytes
    blocks = int(free // (block_size * model.kv_bytes_per_token))
    if blocks < 1:
        raise ValueError(
            f"{model.name} weights ({model.weight_bytes / 1e9:.1f} GB) leave no room for KV on "
            f"{gpu.name} at gpu_memory_utilization={gpu_memory_utilization}; use more GPUs "
            f"(e.g. get_gpu('2x{gpu.name}'))"
        )
    return blocks
