import pytest


@pytest.fixture(scope="module")
def small_llm():
    """One small kit LLM per module (pool of 64 blocks, 256-token context)."""
    from pagedlab import LLM

    return LLM(num_gpu_blocks=64, max_model_len=256)
