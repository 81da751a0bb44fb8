"""``parallel_sampling="requests"``: an ``n > 1`` prompt as vLLM 0.32's v1 engine runs it (issue 25).

vLLM 0.32 (``vllm/v1/engine/parallel_sampling.py``, ``ParentRequest.get_child_info``) queues n independent
requests ``"{i}_{request_id}"``, each with ``n=1`` and, when seeded, ``seed + i``; they share the prompt
only through the prefix cache. ``tests/twin/test_differential.py::test_n_greater_than_one_schedules_as_vllm``
checks the schedule against real vLLM; these tests check the engine's side on the real SmolLM2.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model

PROMPT = list(range(300, 340))  # 40 tokens: one full 32-token block and a partial one


def _engine(**kw):
    from pagedlab import LLMEngine

    kw.setdefault("block_size", 32)
    kw.setdefault("num_gpu_blocks", 20)
    return LLMEngine(parallel_sampling="requests", **kw)


def _run(engine, n: int = 3, seed: int | None = 11, **sp):
    from pagedlab import SamplingParams

    params = SamplingParams(n=n, temperature=0.9, seed=seed, max_tokens=6, ignore_eos=True, **sp)
    engine.add_request("r", {"prompt_token_ids": PROMPT}, params)
    steps, final = [], None
    while engine.has_unfinished_requests():
        out = engine.step()
        steps.append([(s[0], s[1]) for s in engine.step_stats[-1].scheduled])
        for o in out:
            if o.finished:
                final = o
    return steps, final


def test_n_child_requests_in_vllms_order_with_vllms_ids_and_seeds():
    engine = _engine(enable_prefix_caching=True)
    steps, final = _run(engine)
    # one prefill each, in index order; the second and third hit the first's full block in the same step
    assert steps[0] == [("0_r", 40), ("1_r", 8), ("2_r", 8)]
    assert all(s == [("0_r", 1), ("1_r", 1), ("2_r", 1)] for s in steps[1:]) and len(steps) == 6
    cached = {r.request_id: r.num_cached_tokens for r in engine.finished_requests}
    assert cached == {"0_r": 0, "1_r": 32, "2_r": 32}
    assert final is not None and final.request_id == "r" and [c.index for c in final.outputs] == [0, 1, 2]
    assert all(len(c.token_ids) == 6 and c.finish_reason == "length" for c in final.outputs)
    # child i samples exactly as a lone n=1 request seeded seed + i (vLLM: child_sampling_params.seed = seed + i)
    for i, c in enumerate(final.outputs):
        alone = _engine()
        _, one = _run(alone, n=1, seed=11 + i)
        assert one is not None and c.token_ids == one.outputs[0].token_ids, i
    assert (
        not engine.kv_cache_manager.req_to_blocks
        and not engine.output_processor.groups
        and not engine.output_processor.member_group
    )


def test_each_child_takes_one_seat_and_no_fork_happens():
    from pagedlab import SamplingParams

    engine = _engine(max_num_seqs=2)
    engine.add_request("r", {"prompt_token_ids": PROMPT}, SamplingParams(n=2, temperature=0.9, max_tokens=4))
    engine.step()  # prefix caching off: both prefill the whole prompt, one seat each
    assert engine.step_stats[-1].scheduled == [("0_r", 40, True), ("1_r", 40, True)]
    engine.step()
    assert [r.request_id for r in engine.scheduler.running] == ["0_r", "1_r"]
    assert engine.scheduler._fork_groups == {}  # no fork, no shared block, no copy
    tables = [engine.kv_cache_manager.get_block_ids(r) for r in ("0_r", "1_r")]
    assert not set(tables[0]) & set(tables[1]) and engine.kv_cache_manager.take_pending_copies() == []


def test_more_children_than_seats_or_than_the_pool_holds_at_once_queue_as_in_vllm():
    """vLLM v1's children are independent requests: n above max_num_seqs, or n sequences that do not fit
    in the pool together, wait their turn (a fork group must run together, so ``fork`` refuses both)."""
    from pagedlab import LLMEngine, SamplingParams
    from pagedlab.errors import InvalidRequestError

    engine = _engine(max_num_seqs=2, num_gpu_blocks=2)  # 2 blocks of 32: one 40 + 6 token sequence at a time
    _, final = _run(engine, n=3)
    assert final is not None and [len(c.token_ids) for c in final.outputs] == [6, 6, 6]
    firsts = [next(i for i, s in enumerate(engine.step_stats) if (f"{k}_r", 40, True) in s.scheduled) for k in range(3)]
    assert firsts[0] < firsts[1] < firsts[2]  # one after another
    for n, blocks in ((3, 20), (2, 2)):
        fork = LLMEngine(block_size=32, num_gpu_blocks=blocks, max_num_seqs=2)
        with pytest.raises(InvalidRequestError):
            fork.add_request("r", {"prompt_token_ids": PROMPT}, SamplingParams(n=n, temperature=0.9, max_tokens=6))


def test_aborting_the_prompt_aborts_every_child():
    from pagedlab import SamplingParams

    engine = _engine()
    engine.add_request("r", {"prompt_token_ids": PROMPT}, SamplingParams(n=2, temperature=0.9, seed=1, max_tokens=9))
    engine.step()
    engine.abort_request("r")
    assert not engine.has_unfinished_requests() and not engine.kv_cache_manager.req_to_blocks
    assert {r.request_id: r.get_finished_reason() for r in engine.finished_requests} == {"0_r": "abort", "1_r": "abort"}


def test_fork_stays_the_default():
    from pagedlab import LLMEngine

    engine = LLMEngine(block_size=32, num_gpu_blocks=20)
    assert engine.parallel_sampling == "fork"
    steps, final = _run(engine, n=2)
    assert steps[0] == [("r", 40)] and ("r#1", 1) in steps[1]  # one prefill, then the fork child decodes


def test_a_wrong_mode_is_refused_naming_it():
    from pagedlab import LLMEngine
    from pagedlab.errors import ConfigError

    with pytest.raises(ConfigError, match="parallel_sampling must be 'fork' or 'requests', got 'v1'"):
        LLMEngine(parallel_sampling="v1")
