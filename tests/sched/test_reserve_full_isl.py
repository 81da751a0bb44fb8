"""``SchedulerConfig.scheduler_reserve_full_isl`` (vLLM 0.32.0, default True,
``vllm/config/scheduler.py:190``): a WAITING or PREEMPTED request is admitted only when blocks for
its whole known sequence fit (``Scheduler.schedule`` passes ``full_sequence_must_fit`` to
``allocate_slots``, ``vllm/v1/core/sched/scheduler.py:1270``), not when only its first chunk does;
False restores the first-chunk rule. Pool: 10 blocks of 4 tokens; budget 8 tokens a step."""

import pytest

from pagedlab.config import SchedulerConfig
from pagedlab.engine.arg_utils import EngineArgs
from pagedlab.errors import ConfigError
from pagedlab.request import RequestStatus
from tests.sched.helpers import make, req, step


def admitted(out):
    return [x.request.request_id for x in out.scheduled]


def a_runs_then_b_arrives(b_prompt, full=True, chunked=True, b_outputs=0, **cfg):
    """a (6 tokens, 2 blocks, its decodes stay in them) runs; then b (``b_prompt`` tokens, plus ``b_outputs`` generated
    before a preemption) waits with 8 blocks free."""
    batched = 8 if chunked else 64
    s, kv = make(
        num_blocks=10,
        bs=4,
        max_num_batched_tokens=batched,
        enable_chunked_prefill=chunked,
        scheduler_reserve_full_isl=full,
        **cfg,
    )
    s.add_request(req("a", 6, max_tokens=50))
    assert admitted(step(s)) == ["a"]
    b = req("b", b_prompt, max_tokens=50)
    s.add_request(b)
    if b_outputs:  # as ``_preempt`` leaves it: generated tokens kept, nothing computed, PREEMPTED
        for _ in range(b_outputs):
            b.append_output_token_ids(7)
        b.status = RequestStatus.PREEMPTED
    return s, kv


@pytest.mark.parametrize(("b_prompt", "admitted_b"), [(32, True), (29, True), (33, False)])
def test_a_waiting_request_is_admitted_only_when_its_whole_prompt_fits(b_prompt, admitted_b):
    s, kv = a_runs_then_b_arrives(b_prompt)  # 8 free blocks hold 32 tokens; b's first chunk is 7
    out = step(s)
    assert ("b" in admitted(out)) is admitted_b
    if not admitted_b:
        assert s.requests["b"].status == RequestStatus.WAITING and kv.get_block_ids("b") == []


def test_the_first_chunk_rule_admits_it_and_preempts_later():
    s, _ = a_runs_then_b_arrives(36, full=False)  # 9 blocks: too many, but its 7-token chunk fits
    assert "b" in admitted(step(s))
    preempted = [p for _ in range(8) for p in step(s).preempted]
    assert preempted  # the pool runs out mid-prefill: what vLLM 0.32.0's default avoids
    s, _ = a_runs_then_b_arrives(36, full=True)
    assert all(step(s).preempted == [] for _ in range(8))


@pytest.mark.parametrize(("b_outputs", "admitted_b"), [(4, True), (5, False)])
def test_a_resumed_preempted_request_needs_its_generated_tokens_too(b_outputs, admitted_b):
    s, _ = a_runs_then_b_arrives(28, b_outputs=b_outputs)  # 28 + 4 = 32 tokens fit; 33 do not
    assert ("b" in admitted(step(s))) is admitted_b
    s, _ = a_runs_then_b_arrives(28, full=False, b_outputs=b_outputs)
    assert "b" in admitted(step(s))


@pytest.mark.parametrize(("b_prompt", "admitted_b"), [(32, True), (33, False)])
def test_without_chunked_prefill_the_chunk_is_the_whole_prompt_and_both_rules_agree(b_prompt, admitted_b):
    for full in (True, False):
        s, _ = a_runs_then_b_arrives(b_prompt, full=full, chunked=False)
        assert ("b" in admitted(step(s))) is admitted_b


@pytest.mark.parametrize(("watermark", "admitted_b"), [(0.18, True), (0.19, False)])
def test_the_watermark_is_kept_free_on_top_of_the_whole_prompt(watermark, admitted_b):
    # b: 7 blocks of 8 free; int(0.18 * 11) = 1 -> 8 <= 8 admits, int(0.19 * 11) = 2 -> 9 > 8 waits
    s, _ = a_runs_then_b_arrives(28, watermark=watermark)
    assert ("b" in admitted(step(s))) is admitted_b
    s, _ = a_runs_then_b_arrives(28, full=False, watermark=watermark)
    assert "b" in admitted(step(s))  # the first chunk's 2 blocks + 2 fit


def test_engine_args_pass_it_under_vllms_name_default_true():
    assert SchedulerConfig().scheduler_reserve_full_isl is True
    assert EngineArgs().engine_kwargs()["scheduler_reserve_full_isl"] is True
    assert EngineArgs(scheduler_reserve_full_isl=False).engine_kwargs()["scheduler_reserve_full_isl"] is False


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_a_non_bool_is_refused_naming_it(bad):
    with pytest.raises(ConfigError, match="scheduler_reserve_full_isl"):
        SchedulerConfig(scheduler_reserve_full_isl=bad)
