"""vLLM 0.32's KV watermark (``SchedulerConfig.watermark``): admitting a WAITING or PREEMPTED request
needs ``int(watermark * num_blocks)`` blocks free on top of its own, but only while some request is
running (``allocate_slots(..., has_scheduled_reqs=bool(self.running))``,
``vllm/v1/core/kv_cache_manager.py``); running requests' allocations ignore it. vLLM's ``num_blocks``
counts its null block: the kit's 10 usable blocks are vLLM's 11 (``num_gpu_blocks_override=11``)."""

import math

import pytest

from pagedlab.config import SchedulerConfig
from pagedlab.engine.arg_utils import EngineArgs
from pagedlab.errors import ConfigError
from pagedlab.request import RequestStatus
from tests.sched.helpers import make, req, step


def admitted(out):
    return [x.request.request_id for x in out.scheduled]


def two_requests(watermark, b_prompt):
    """a (8 tokens = 2 blocks of 4) and b (``b_prompt`` tokens) arrive together on 10 blocks."""
    s, kv = make(num_blocks=10, bs=4, watermark=watermark)
    s.add_request(req("a", 8, max_tokens=8))
    s.add_request(req("b", b_prompt, max_tokens=8))
    return s, kv


def test_a_waiting_request_that_fits_is_held_back_by_the_watermark_while_another_runs():
    # b needs 7 blocks, 8 are free once a is in: admitted without a watermark ...
    s, _ = two_requests(0.0, 28)
    assert admitted(step(s)) == ["a", "b"]
    # ... but 7 + int(0.2 * 11) = 9 > 8 with watermark=0.2: b waits behind the running a
    s, _ = two_requests(0.2, 28)
    assert admitted(step(s)) == ["a"]
    assert s.requests["b"].status == RequestStatus.WAITING


def test_the_watermark_is_not_applied_when_nothing_is_running():
    # b alone needs 9 of 10 blocks: 9 + 2 > 10, but with nothing running vLLM skips the watermark
    s, _ = make(num_blocks=10, bs=4, watermark=0.2)
    s.add_request(req("b", 36, max_tokens=2))
    assert admitted(step(s)) == ["b"]


def test_the_held_back_request_is_admitted_once_the_runner_finishes():
    s, _ = two_requests(0.2, 28)
    outs = [step(s) for _ in range(9)]  # a: 8 tokens, one step of prefill + 7 decodes; then b alone
    assert all("b" not in admitted(o) for o in outs[:8])
    assert admitted(outs[8]) == ["b"] and "a" not in s.requests


def test_a_running_requests_decode_ignores_the_watermark():
    # a fills 8 of 10 blocks; its 33rd token needs a 9th: 1 + 2 > 2 free if the watermark applied
    s, kv = make(num_blocks=10, bs=4, watermark=0.2)
    s.add_request(req("a", 32, max_tokens=4))
    step(s)
    out = step(s)
    assert out.preempted == [] and [(x.request.request_id, x.num_tokens) for x in out.scheduled] == [("a", 1)]
    assert len(kv.get_block_ids("a")) == 9


@pytest.mark.parametrize(("watermark", "b_admitted"), [(0.27, True), (0.28, False)])
def test_the_watermark_is_int_of_fraction_times_blocks(watermark, b_admitted):
    # b needs 6 blocks, 8 free: int(0.27 * 11) = 2 -> 6 + 2 <= 8 admits (round/ceil would give 3);
    # int(0.28 * 11) = 3 -> 9 > 8 holds it back (counting 10 blocks, not vLLM's 11, would give 2)
    s, _ = two_requests(watermark, 24)
    assert ("b" in admitted(step(s))) is b_admitted


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, math.nan, True, "0.1", None])
def test_a_watermark_outside_0_1_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="watermark"):
        SchedulerConfig(watermark=bad)
    with pytest.raises(ConfigError, match="watermark"):
        SchedulerConfig(watermark=bad)


def test_engine_args_pass_the_watermark_under_vllms_name():
    assert EngineArgs(watermark=0.1).engine_kwargs()["watermark"] == 0.1
    assert EngineArgs().engine_kwargs()["watermark"] == 0.0
