"""Driving a scheduler without a model: a fake "model" samples token 7 for every request that
reaches the end of its sequence (vLLM v1 shape, engines.md §1.5)."""

from pagedlab.config import CacheConfig, SchedulerConfig
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import Scheduler


def make(num_blocks=64, bs=4, cpu=0, cls=Scheduler, parts=None, **sched):
    """A scheduler over a fresh KV-cache manager; ``parts``: its ``pick_victim_fn`` / ``preempt_retry_fn``."""
    kv = KVCacheManager(block_size=bs, num_gpu_blocks=num_blocks, max_model_len=512, num_cpu_blocks=cpu)
    s = cls(
        SchedulerConfig(max_model_len=512, **sched),
        CacheConfig(block_size=bs, num_gpu_blocks=num_blocks, num_cpu_blocks=cpu),
        kv,
        **(parts or {}),
    )
    return s, kv


def req(rid, n_prompt, max_tokens=4, arrival=0.0, priority=0):
    return Request(
        rid,
        list(range(1, n_prompt + 1)),
        SamplingParams(max_tokens=max_tokens, ignore_eos=True),
        arrival_time=arrival,
        priority=priority,
    )


def step(s):
    out = s.schedule()
    sampled = {x.request.request_id: 7 for x in out.scheduled if x.samples}
    s.update_from_output(out, sampled)
    return out


def run_to_end(s, limit=10_000):
    outs = []
    for _ in range(limit):
        if not s.has_unfinished_requests():
            return outs
        outs.append(step(s))
    raise AssertionError("scheduler did not finish: livelock")


def out_of_pool(kv):
    return kv.num_free_blocks
