"""GPU specifications for the roofline cost model.

All numbers are vendor datasheet peaks (dense, no structured sparsity):

* A100 80GB SXM4 - NVIDIA A100 Tensor Core GPU datasheet (2021): HBM2e 2,039 GB/s, BF16 tensor
  312 TFLOP/s, PCIe Gen4 64 GB/s (both directions together, so 32 GB/s each way), 80 GB.
* H100 SXM5 80GB - NVIDIA H100 Tensor Core GPU datasheet (2023): HBM3 3.35 TB/s, BF16 tensor
  1,979 TFLOP/s *with sparsity*, i.e. 989.5 dense; PCIe Gen5 128 GB/s (64 GB/s each way), 80 GB.
* H200 SXM 141GB - NVIDIA H200 Tensor Core GPU datasheet (2024): HBM3e 4.8 TB/s, BF16 as H100
  (989.5 dense), PCIe Gen5 128 GB/s (64 each way), 141 GB.

Memory sizes are what ``nvidia-smi`` reports as total memory (A100 80 GiB = 81,920 MiB, H100
81,559 MiB, H200 143,771 MiB), because that is what ``gpu_memory_utilization`` is a fraction of.
Swaps move KV in one direction at a time, so the cost model uses the per-direction PCIe rate.

Peaks are upper bounds: Vidur's measured Llama-2-7B linear layers reach roughly 55-80% of them
(``tests/sim/test_cost_model.py`` checks the factor).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

MiB = 1 << 20
GB = 10**9
TFLOPS = 10**12


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator (or ``num_gpus`` of them acting as one, see :meth:`times`).

    Attributes:
        name: short name ("A100-80G", "H100", "H200"; "2xH100" after ``times(2)``).
        memory_bytes: device memory in bytes.
        hbm_bandwidth: device-memory bandwidth in bytes/s.
        peak_flops: dense BF16/FP16 tensor-core FLOP/s.
        pcie_bandwidth: host link bandwidth in bytes/s, one direction.
        num_gpus: GPUs aggregated in this spec.
    """

    name: str
    memory_bytes: int
    hbm_bandwidth: float
    peak_flops: float
    pcie_bandwidth: float
    num_gpus: int = 1

    def times(self, n: int) -> GPUSpec:
        """``n`` such GPUs as one ideal tensor-parallel group: memory, bandwidths and FLOP/s add up.

        The all-reduce traffic of real tensor parallelism is ignored, so this is optimistic.
        """
        if n < 1:
            raise ValueError(f"need n >= 1 GPUs, got {n}")
        if n == 1:
            return self
        return replace(
            self,
            name=f"{n}x{self.name}",
            memory_bytes=self.memory_bytes * n,
            hbm_bandwidth=self.hbm_bandwidth * n,
            peak_flops=self.peak_flops * n,
            pcie_bandwidth=self.pcie_bandwidth * n,
            num_gpus=self.num_gpus * n,
        )


A100_80G = GPUSpec("A100-80G", 81_920 * MiB, 2_039 * GB, 312 * TFLOPS, 32 * GB)
H100 = GPUSpec("H100", 81_559 * MiB, 3_350 * GB, 989.5 * TFLOPS, 64 * GB)
H200 = GPUSpec("H200", 143_771 * MiB, 4_800 * GB, 989.5 * TFLOPS, 64 * GB)

GPUS: dict[str, GPUSpec] = {"a100": A100_80G, "a100-80g": A100_80G, "h100": H100, "h200": H200}


def get_gpu(name: str) -> GPUSpec:
    """Look up a GPU by name, case-insensitive; ``"2xH100"`` gives two H100s (see ``GPUSpec.times``).

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    key = name.strip().lower()
    n = 1
    if "x" in key and key.split("x", 1)[0].isdigit():
        count, key = key.split("x", 1)
        n = int(count)
    if key not in GPUS:
        raise KeyError(f"unknown GPU {name!r}; known: A100-80G, H100, H200 (optionally '2xH100' ...)")
    return GPUS[key].times(n)
