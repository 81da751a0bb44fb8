"""Learner parts plugged into the real engine: same tokens as the kit, guards naming the component,
the kit's part taking over after a guard trips, and no wrapping at all when only kit parts run."""

from __future__ import annotations

import time

import pytest

from pagedlab.core.block_pool import FreeKVCacheBlockQueue
from pagedlab.core.copy_on_write import CopyOnWrite
from pagedlab.engine.components import SLOTS, Components
from pagedlab.errors import ComponentError
from pagedlab.parts.memory import GuardedFreeQueue
from pagedlab.parts.schedule import LearnerStepScheduler
from pagedlab.sched.scheduler import Scheduler, pick_victim, preempt_and_retry
from tests.components.helpers import (
    PROMPTS,
    kit_tokens,
    run,
    slot_mapping_past_last_block,
    solution,
    solution_components,
    step_without_running_allocation,
    tile_load_unmasked,
)
from tests.robust.helpers import assert_idle, tiny_engine


def test_kit_parts_run_unwrapped():
    eng = tiny_engine()
    assert not eng.components.learner_slots
    assert type(eng.scheduler) is Scheduler and type(eng.kv_cache_manager.cow) is CopyOnWrite
    assert eng.scheduler.pick_victim_fn is pick_victim and eng.scheduler.preempt_retry_fn is preempt_and_retry
    assert type(eng.kv_cache_manager.block_pool.free_block_queue) is FreeKVCacheBlockQueue
    assert eng.model_runner.slot_mapping_fn is None and eng.model_runner.kv_tile_load is None
    assert eng.model_runner.decode_override is None


def test_solution_parts_serve_the_kits_tokens():
    comps = solution_components()
    assert set(comps.learner_slots) == {"free_queue", "slot_mapping", "schedule_step", "pick_victim", "kv_tile_load"}
    eng = tiny_engine(components=comps, max_num_batched_tokens=8)
    assert isinstance(eng.scheduler, LearnerStepScheduler)
    assert isinstance(eng.kv_cache_manager.block_pool.free_block_queue, GuardedFreeQueue)
    assert run(eng) == kit_tokens(max_num_batched_tokens=8)
    assert_idle(eng)


def test_plugged_pick_victim_chooses_under_preemption():
    # 10 blocks of 4 tokens for 4 requests of up to 18 tokens: the kit scheduler must preempt.
    picked = []

    def pick_victim(running, policy):
        picked.append(running[-1].request_id)
        return solution("06.pick_victim")(running, policy)

    eng = tiny_engine(components=Components.kit().plug("pick_victim", pick_victim), num_gpu_blocks=10)
    assert run(eng) == kit_tokens(num_gpu_blocks=10)
    assert picked, "no preemption happened: the test does not exercise the slot"
    assert_idle(eng)


def test_plugged_prefix_lookup_keeps_hits():
    from pagedlab.core.kv_cache_manager import find_longest_cache_hit

    calls = []

    def lookup(hashes, get, num_tokens, block_size):
        hits = find_longest_cache_hit(hashes, get, num_tokens, block_size)
        calls.append(len(hits))
        return hits

    kw = {"enable_prefix_caching": True, "max_num_batched_tokens": 64}
    eng = tiny_engine(components=Components.kit().plug("prefix_lookup", lookup), **kw)
    assert run(eng, PROMPTS + PROMPTS) == run(tiny_engine(**kw), PROMPTS + PROMPTS)
    assert sum(calls) > 0, "no prefix hit: the test does not exercise the slot"


def _trip(comps, **kw):
    """Run the engine until the guard trips; return (engine, error)."""
    eng = tiny_engine(components=comps, **kw)
    with pytest.raises(ComponentError) as info:
        run(eng)
    return eng, info.value


def _assert_recovered(eng, slot, **kw):
    """The engine is idle, the slot holds the kit's part again, and it serves the kit's tokens."""
    assert_idle(eng)
    assert not eng.components.is_yours(slot)
    assert "yours broke" in eng.components.parts[slot].note
    assert run(eng) == kit_tokens(**kw)


def test_schedule_step_without_running_allocation_is_caught_and_kit_takes_over():
    eng, err = _trip(solution_components(schedule_step=step_without_running_allocation))
    assert err.component == "schedule_step" and err.step >= 1
    assert "allocate_slots" in str(err) and "blocks hold only" in err.invariant
    _assert_recovered(eng, "schedule_step")


def test_slot_outside_the_requests_blocks_is_caught(caplog):
    with caplog.at_level("DEBUG", logger="pagedlab"):
        eng, err = _trip(Components.kit().plug("slot_mapping", slot_mapping_past_last_block))
    assert err.component == "slot_mapping" and err.step == 0
    assert "outside the request's blocks" in err.invariant
    # the fallback is said once, under the error itself, not repeated in a log line
    assert err.__notes__ == [
        "This engine now uses the kit's slot_mapping (llm.llm_engine.components says whose part is where)."
    ]
    assert not [r for r in caplog.records if r.levelname != "DEBUG" and err.invariant in r.getMessage()]
    _assert_recovered(eng, "slot_mapping")


def test_slot_in_the_wrong_row_is_caught():
    def swapped_rows(table, positions, bs):
        return [table[p // bs] * bs + (bs - 1 - p % bs) for p in positions]

    _, err = _trip(Components.kit().plug("slot_mapping", swapped_rows))
    assert "not its row" in err.invariant


def test_unmasked_tile_is_caught():
    _, err = _trip(Components.kit().plug("kv_tile_load", tile_load_unmasked))
    assert err.component == "kv_tile_load" and "masked lane" in err.invariant


class RemoveWithoutRelink(FreeKVCacheBlockQueue):
    """remove() clears the block's links but leaves the neighbours pointing at it."""

    def remove(self, block):
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1


class PopleftKeepsLinks(FreeKVCacheBlockQueue):
    """popleft() returns the front block without unlinking it."""

    def popleft(self):
        block = self.fake_free_list_head.next_free_block
        self.fake_free_list_head.next_free_block = block.next_free_block
        block.next_free_block.prev_free_block = self.fake_free_list_head
        self.num_free_blocks -= 1
        return block


def test_free_queue_links_are_guarded_with_a_picture():
    from dataclasses import replace

    from pagedlab.grading.plug import render_component_state

    comps = replace(Components.kit().plug("free_queue", PopleftKeepsLinks), render=render_component_state)
    eng, err = _trip(comps)
    assert err.component == "free_queue" and "links still set" in err.invariant
    assert err.picture.startswith("<svg")
    _assert_recovered(eng, "free_queue")


def test_free_queue_remove_is_guarded():
    # the kit's popleft() calls remove(): a remove that leaves the neighbours' links hands a block out twice
    eng, err = _trip(Components.kit().plug("free_queue", RemoveWithoutRelink))
    assert err.component == "free_queue" and "twice" in err.invariant
    _assert_recovered(eng, "free_queue")


class PrependReversed(FreeKVCacheBlockQueue):
    """prepend_n() puts the blocks at the front one at a time: reversed."""

    def prepend_n(self, blocks):
        for block in blocks:
            super().prepend_n([block])


class PrependKeepsOldFrontPrev(FreeKVCacheBlockQueue):
    """prepend_n() links the new blocks forward but leaves the old front's prev at the head sentinel."""

    def prepend_n(self, blocks):
        if not blocks:
            return
        first = self.fake_free_list_head.next_free_block
        prev = self.fake_free_list_head
        for block in blocks:
            prev.next_free_block, block.prev_free_block, prev = block, prev, block
        prev.next_free_block = first
        self.num_free_blocks += len(blocks)


class PrependUncounted(FreeKVCacheBlockQueue):
    """prepend_n() links the blocks in but does not count them."""

    def prepend_n(self, blocks):
        super().prepend_n(blocks)
        self.num_free_blocks -= len(blocks)


@pytest.mark.parametrize(
    "impl,words",
    [
        (PrependReversed, "did not put them at the front in that order"),
        (PrependKeepsOldFrontPrev, "did not put them at the front in that order"),
        (PrependUncounted, "num_free_blocks went from"),
    ],
)
def test_free_queue_prepend_n_is_guarded(impl, words):
    # the engine frees a finished request's unhashed blocks with prepend_n (vLLM 0.32.0): several at once
    eng, err = _trip(Components.kit().plug("free_queue", impl))
    assert err.component == "free_queue" and words in err.invariant, err.invariant
    _assert_recovered(eng, "free_queue")


@pytest.mark.parametrize(
    "slot,impl,words",
    [
        ("slot_mapping", lambda t, p, bs: 1 // 0, "raised ZeroDivisionError"),
        ("slot_mapping", lambda t, p, bs: {0: 1}, "slot_mapping returned a dict, not a list"),
        ("kv_tile_load", lambda c, t, s, n, L: c, "load_kv_tile returned a Tensor, not a tuple"),
        ("pick_victim", lambda running, policy: running.pop(), "pick_victim changed running"),
        ("pick_victim", lambda running, policy: "r0", "not one of the running requests"),
    ],
)
def test_bad_parts_are_named(slot, impl, words):
    kw = {"num_gpu_blocks": 10} if slot == "pick_victim" else {}
    eng, err = _trip(Components.kit().plug(slot, impl), **kw)
    assert err.component == slot and words in str(err), str(err)
    _assert_recovered(eng, slot, **kw)


def test_a_hanging_part_is_stopped():
    def hang(table, positions, bs):
        while True:
            pass

    comps = Components.kit().plug("slot_mapping", hang)
    from dataclasses import replace

    t0 = time.perf_counter()
    eng, err = _trip(replace(comps, time_limit_s=0.3))
    assert "did not return within 0.3 s" in err.invariant and time.perf_counter() - t0 < 5
    _assert_recovered(eng, "slot_mapping")


def test_plug_refuses_unknown_unplugged_and_missing_parts():
    with pytest.raises(KeyError, match="unknown component slot 'queue'"):
        Components.kit().plug("queue", object())
    assert all(s.plugged for s in SLOTS.values())  # the engine runs every slot's plugged-in part
    with pytest.raises(ValueError, match="got None"):
        Components.kit().plug("slot_mapping", None)
    assert set(Components.kit().parts) == set(SLOTS)


def test_components_must_be_a_components_object():
    from pagedlab.errors import ConfigError

    with pytest.raises(ConfigError, match="components must be a pagedlab.engine.components.Components"):
        tiny_engine(components="mine")


def test_plugged_preempt_retry_serves_the_kits_tokens_under_pressure():
    from pagedlab.request import RequestStatus
    from pagedlab.sched.scheduler import preempt_and_retry

    calls = []

    def mine(request, allocate, choose_victim, preempt):
        calls.append(request.request_id)
        while not allocate():
            preempt(choose_victim())
            if request.status != RequestStatus.RUNNING:
                return False
        return True

    for mode, kw in (("recompute", {}), ("swap", {"num_cpu_blocks": 32})):
        eng = tiny_engine(
            components=Components.kit().plug("preempt_retry", mine), num_gpu_blocks=10, preemption_mode=mode, **kw
        )
        assert run(eng) == kit_tokens(num_gpu_blocks=10, preemption_mode=mode, **kw)
        assert sum(len(s.preempted) for s in eng.step_stats) > 0, f"{mode}: no preemption"
        assert_idle(eng)
    assert calls and preempt_and_retry is Components.kit().parts["preempt_retry"].impl


def _gives_up_after_one_preemption(request, allocate, choose_victim, preempt):
    if not allocate():
        preempt(choose_victim())
    return True


def _preempts_first(request, allocate, choose_victim, preempt):
    if len([1]) and request.num_output_tokens > 0:
        preempt(choose_victim())
    return allocate()


@pytest.mark.parametrize(
    "wrong,words",
    [
        (_gives_up_after_one_preemption, "still runs without its slots"),
        (_preempts_first, "without a failed allocation"),
    ],
)
def test_wrong_preempt_retry_is_caught(wrong, words):
    eng, err = _trip(Components.kit().plug("preempt_retry", wrong), num_gpu_blocks=10)
    assert err.component == "preempt_retry" and words in err.invariant, str(err)
    _assert_recovered(eng, "preempt_retry", num_gpu_blocks=10)


def test_a_hanging_part_is_stopped_under_an_outer_timer():
    """An outer ITIMER_REAL (pytest-timeout's signal method, an enclosing part's limit) keeps running:
    the guard's shorter limit still stops the part, and the outer timer is re-armed with what it had left."""
    import signal

    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda *args: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 60.0)
    try:
        test_a_hanging_part_is_stopped()
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 50.0 < left < 60.0, left
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not fired
