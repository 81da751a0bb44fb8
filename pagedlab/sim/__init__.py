"""Trace replay: real request traces through the real scheduler, at GPU scale or on the CPU engine.

* ``traces``     - load the Azure 2023 / Mooncake FAST'25 traces, scale them, synthesise prompts
* ``hardware``   - A100-80G, H100, H200 datasheet numbers
* ``models``     - Llama-2-7B, LLaMA-13B, Llama-2/3-70B, LLaMA-3-8B, SmolLM2-135M shapes
* ``cost_model`` - roofline step time; swap vs recompute; KV blocks per GPU
* ``simulator``  - ``simulate``: the real ``Scheduler`` + ``KVCacheManager`` on a cost-model clock
* ``replay``     - ``replay_on_engine`` (real SmolLM2 engine) and the ``pagedlab replay`` command
* ``metrics``    - per-request / per-step records, summary, ``format_table``
* ``plots``      - TTFT/TPOT CDFs and KV usage figures (matplotlib)

Nothing here imports torch; the engine is imported only by ``replay_on_engine``.
"""

from pagedlab.sim.cost_model import CostModel, StepCost, decode_intensity, num_gpu_blocks, ridge_point
from pagedlab.sim.hardware import A100_80G, H100, H200, GPUSpec, get_gpu
from pagedlab.sim.metrics import ReplayResult, RequestRecord, StepRecord, format_table, summarize
from pagedlab.sim.models import (
    LLAMA_2_7B,
    LLAMA_2_70B,
    LLAMA_3_8B,
    LLAMA_3_70B,
    LLAMA_13B,
    SMOLLM2_135M,
    ModelSpec,
    get_model,
)
from pagedlab.sim.replay import replay_on_engine
from pagedlab.sim.simulator import compare, gpu_cache_config, simulate
from pagedlab.sim.traces import (
    TraceRequest,
    duration,
    load_azure,
    load_mooncake,
    load_trace,
    prefix_hit_ceiling,
    scale_for_cpu,
    synthesize_prompts,
)

__all__ = [
    "TraceRequest",
    "load_azure",
    "load_mooncake",
    "load_trace",
    "duration",
    "prefix_hit_ceiling",
    "scale_for_cpu",
    "synthesize_prompts",
    "GPUSpec",
    "A100_80G",
    "H100",
    "H200",
    "get_gpu",
    "ModelSpec",
    "LLAMA_2_7B",
    "LLAMA_13B",
    "LLAMA_2_70B",
    "LLAMA_3_70B",
    "LLAMA_3_8B",
    "SMOLLM2_135M",
    "get_model",
    "CostModel",
    "decode_intensity",
    "ridge_point",
    "StepCost",
    "num_gpu_blocks",
    "simulate",
    "gpu_cache_config",
    "compare",
    "ReplayResult",
    "RequestRecord",
    "StepRecord",
    "format_table",
    "summarize",
    "replay_on_engine",
]
