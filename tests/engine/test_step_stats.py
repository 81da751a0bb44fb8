"""StepStats: per-step prefix-cache counts and queue ids, as the labs use them (issue 14)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model


def test_step_stats_count_prefix_hits_once_and_list_queue_ids(real_prompts):
    from pagedlab import LLMEngine, SamplingParams

    eng = LLMEngine(num_gpu_blocks=64, max_num_seqs=2, enable_prefix_caching=True)
    sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    prompts = [real_prompts[0], real_prompts[0], real_prompts[1]]
    for i, p in enumerate(prompts):
        eng.add_request(f"r{i}", {"prompt_token_ids": p}, sp)
    outs = {}
    while eng.has_unfinished_requests():
        for o in eng.step():
            outs[o.request_id] = o
    stats = eng.step_stats
    assert sum(s.prefix_cache_queries for s in stats) == sum(len(p) for p in prompts), "one query per admission"
    assert sum(s.prefix_cache_hits for s in stats) == sum(o.num_cached_tokens for o in outs.values()) > 0
    assert stats[0].waiting_ids == ["r2"] and stats[0].running_ids == ["r0", "r1"]
    assert stats[-1].running_ids == stats[-1].waiting_ids == stats[-1].swapped_ids == []
    for s in stats:
        assert (len(s.waiting_ids), len(s.running_ids), len(s.swapped_ids)) == (s.waiting, s.running, s.swapped)
        assert s.queues() == {
            "step": s.step,
            "waiting": s.waiting_ids,
            "running": s.running_ids,
            "swapped": s.swapped_ids,
            "preempted": s.preempted,
        }
