"""``max_tokens=None`` reaching the scheduler means "up to ``max_model_len``" (vLLM's meaning).

The engine resolves ``None`` before queueing (``LLMEngine.resolve_max_tokens``); a scheduler driven
directly (labs, tests) must still stop such a request at the model length instead of failing.
"""

from __future__ import annotations

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request, RequestStatus
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import Scheduler


def test_max_tokens_none_runs_to_max_model_len_and_frees_its_blocks() -> None:
    max_len, bs, blocks = 12, 4, 8
    kv = KVCacheManager(block_size=bs, num_gpu_blocks=blocks, max_model_len=max_len)
    s = Scheduler(SchedulerConfig(max_model_len=max_len), CacheConfig(block_size=bs, num_gpu_blocks=blocks), kv)
    r = Request("r", [1, 2, 3, 4, 5], SamplingParams(max_tokens=None, ignore_eos=True, stop_token_ids=[9]))
    assert r.max_tokens is None
    s.add_request(r)
    for _ in range(50):
        if not s.has_unfinished_requests():
            break
        out = s.schedule()
        s.update_from_output(out, {x.request.request_id: 7 for x in out.scheduled if x.samples})
    assert not s.has_unfinished_requests()
    assert r.status == RequestStatus.FINISHED_LENGTH_CAPPED and r.get_finished_reason() == "length"
    assert r.num_tokens == max_len and r.output_token_ids == [7] * (max_len - 5)
    assert r.stop_reason is None
    assert kv.block_pool.get_num_free_blocks() == blocks
