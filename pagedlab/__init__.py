"""pagedlab: a course kit on KV-cache memory management in LLM serving engines.

The offline API mirrors vLLM's::

    from pagedlab import LLM, SamplingParams
    llm = LLM(block_size=16, num_gpu_blocks=256)
    out = llm.chat([{"role": "user", "content": "What is the capital of France?"}],
                   SamplingParams(temperature=0, max_tokens=32))
    print(out[0].outputs[0].text)
"""

import os

# OpenMP threads that spin while they wait for each other make torch's CPU matmuls 10-20x
# slower as soon as another process (the browser, a second kernel, a test) wants a core;
# measured on a 2-core machine: 83 s spinning vs 3.9 s passive for the same work. This only
# takes effect if pagedlab is imported before torch, so the Makefile exports it too.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

from pagedlab.errors import ConfigError, InvalidRequestError, ModelFileCorruptError, ModelNotFoundError, PagedLabError
from pagedlab.outputs import CompletionOutput, RequestOutput
from pagedlab.sampling_params import SamplingParams


def __getattr__(name):
    # The engine pulls in torch and transformers: import it only when asked for.
    if name == "LLM":
        from pagedlab.engine.llm import LLM  # lazy: start-up time (the engine imports torch)

        return LLM
    if name == "LLMEngine":
        from pagedlab.engine.llm_engine import LLMEngine  # lazy: start-up time (the engine imports torch)

        return LLMEngine
    raise AttributeError(f"module 'pagedlab' has no attribute {name!r}")


__all__ = [
    "LLM",
    "LLMEngine",
    "SamplingParams",
    "RequestOutput",
    "CompletionOutput",
    "PagedLabError",
    "ConfigError",
    "InvalidRequestError",
    "ModelNotFoundError",
    "ModelFileCorruptError",
]
