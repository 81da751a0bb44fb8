"""Guard cases found by trying the kit as a learner: a part that swallows the time-limit signal, parts that
change what they only read, and numpy integers that check() accepts."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from pagedlab.engine.components import Components
from pagedlab.errors import ComponentError
from pagedlab.kernels.reference import load_kv_tile
from pagedlab.sched.scheduler import pick_victim
from tests.components.helpers import kit_tokens, run, solution
from tests.robust.helpers import tiny_engine


def _trip(comps: Components, **kw: Any) -> ComponentError:
    eng = tiny_engine(components=comps, **kw)
    with pytest.raises(ComponentError) as info:
        run(eng)
    assert run(eng) == kit_tokens(**kw)  # the kit's part took over: the engine serves on
    return info.value


def test_a_part_that_swallows_the_time_limit_is_still_stopped() -> None:
    """A bare ``except:`` inside a loop catches the alarm; the guard then names the overrun."""
    slot_mapping = solution("02.slot_mapping")

    def stubborn(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except:  # noqa: E722 - the learner's mistake under test
                pass
        return slot_mapping(block_table, positions, block_size)

    comps = Components.kit().plug("slot_mapping", stubborn)
    err = _trip(Components(comps.parts, time_limit_s=0.2))
    assert err.component == "slot_mapping" and "over the 0.2 s limit" in err.invariant


def test_a_victim_choice_that_changes_a_request_is_caught() -> None:
    def resets_the_victim(running: list[Any], policy: str) -> Any:
        victim = pick_victim(running, policy)
        victim.num_computed_tokens = 0
        return victim

    err = _trip(Components.kit().plug("pick_victim", resets_the_victim), num_gpu_blocks=10)
    assert err.component == "pick_victim" and "only reads the requests" in err.invariant


def test_a_tile_load_that_writes_the_block_table_is_caught() -> None:
    def scribbles(cache: Any, table: Any, start: int, size: int, seq_len: int) -> Any:
        out = load_kv_tile(cache, table, start, size, seq_len)
        table[0] = table[-1]
        return out

    err = _trip(Components.kit().plug("kv_tile_load", scribbles))
    assert err.component == "kv_tile_load" and "a tile load only reads" in err.invariant


def test_numpy_integer_slots_are_accepted_as_in_check() -> None:
    def numpy_slots(block_table: list[int], positions: list[int], block_size: int) -> list[Any]:
        bt, p = np.asarray(block_table), np.asarray(positions)
        return list(bt[p // block_size] * block_size + p % block_size)

    assert run(tiny_engine(components=Components.kit().plug("slot_mapping", numpy_slots))) == kit_tokens()


def test_a_prefix_lookup_reading_what_the_engine_does_not_hand_it_is_told_what_it_has() -> None:
    """check() hands get_computed_blocks real objects; the engine only what its docstring names: a
    lookup that reads another attribute is told which ones it has (not a bare AttributeError on a
    SimpleNamespace)."""
    from pagedlab.grading.plug import BRIDGES

    reference = solution("07.get_computed_blocks")

    def reads_token_ids(request: Any, block_pool: Any, block_size: int) -> Any:
        assert len(request.all_token_ids) == request.num_tokens
        return reference(request, block_pool, block_size)

    lookup = BRIDGES["07.get_computed_blocks"][1](reads_token_ids)
    err = _trip(Components.kit().plug("prefix_lookup", lookup), enable_prefix_caching=True)
    assert err.component == "prefix_lookup"
    assert "has only block_hashes, num_tokens" in err.invariant and "'all_token_ids'" in err.invariant


def test_a_correct_lab05_step_in_a_pool_too_small_is_told_why() -> None:
    """Lab 05's step (like 04's) assumes every request fits; in a pool that cannot hold them the guard stops
    it, and says the pool is full and what to do, instead of only blaming the step."""
    from tests.components.helpers import solution_components

    eng = tiny_engine(components=solution_components(), num_gpu_blocks=6)
    with pytest.raises(ComponentError) as info:
        run(eng)
    err = info.value
    assert err.component == "schedule_step" and "blocks hold only" in err.invariant
    assert "The pool is full" in err.invariant and "schedule_with_preemption" in err.invariant
