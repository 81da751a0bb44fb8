"""Lab 06's ``schedule_with_preemption`` plugged into the engine's ``schedule_step`` slot
(``PreemptingStep`` run by ``LearnerPreemptingScheduler``): the solution serves the kit's tokens under
forced preemption (recompute and swap, fcfs and priority), and each guard names the broken invariant."""

from __future__ import annotations

import pytest

from pagedlab.engine.components import Components
from pagedlab.errors import ComponentError
from pagedlab.grading import registry
from pagedlab.grading.plug import BRIDGES, components_for
from pagedlab.parts.schedule import LearnerPreemptingScheduler, PreemptingStep
from tests.components.helpers import PROMPTS, kit_tokens, run
from tests.grading.helpers import variant
from tests.robust.helpers import assert_idle, check_engine, tiny_engine

EID = "06.schedule_with_preemption"
#: 4 prompts of 6-12 tokens + 6 generated in blocks of 4 need 17 blocks together: 8 force preemptions.
TIGHT = {"num_gpu_blocks": 8}
SWAP = {"num_gpu_blocks": 8, "preemption_mode": "swap", "num_cpu_blocks": 32}


def _step(*replacements: tuple[str, str]) -> PreemptingStep:
    return PreemptingStep(registry.snippet_object(EID, variant(EID, *replacements)))


def _engine(step: PreemptingStep, **kw):
    return tiny_engine(components=Components.kit().plug("schedule_step", step), **kw)


def _run_checked(eng) -> list[list[int]]:
    """``run`` with the engine's invariants checked after every step."""
    orig = eng.step

    def step():
        out = orig()
        check_engine(eng)
        return out

    eng.step = step
    return run(eng)


def test_the_bridge_puts_lab_06_first_in_the_schedule_step_slot():
    assert BRIDGES[EID][0] == "schedule_step" and list(BRIDGES).index(EID) < list(BRIDGES).index(
        "05.schedule_with_budget"
    )
    comps = components_for({EID: registry.snippet_object(EID), "05.schedule_with_budget": object()})
    assert isinstance(comps.parts["schedule_step"].impl, PreemptingStep) and comps.parts["schedule_step"].note.endswith(
        EID
    )


@pytest.mark.parametrize(
    "kw", [{}, TIGHT, SWAP, {**TIGHT, "policy": "priority"}], ids=["roomy", "recompute", "swap", "priority"]
)
def test_the_solution_serves_the_kits_tokens(kw):
    eng = _engine(PreemptingStep(registry.snippet_object(EID)), **kw)
    assert isinstance(eng.scheduler, LearnerPreemptingScheduler)
    assert _run_checked(eng) == kit_tokens(**kw)
    assert_idle(eng)


@pytest.mark.parametrize("kw", [TIGHT, SWAP], ids=["recompute", "swap"])
def test_forced_preemption_really_preempts_through_the_learners_step(kw):
    eng = _engine(PreemptingStep(registry.snippet_object(EID)), **kw)
    seen: list[str] = []
    orig = eng.scheduler.schedule

    def schedule():
        out = orig()
        seen.extend(out.preempted)
        if kw.get("preemption_mode") == "swap":
            assert not out.preempted or out.blocks_to_swap_out, "a swap-out without block moves"
        return out

    eng.scheduler.schedule = schedule
    assert run(eng) == kit_tokens(**kw)
    assert seen, "nothing was preempted: the test does not exercise preemption"


WRONG = {
    "victim not freed": (
        ("                kv_cache_manager.free(victim)\n", ""),
        "still holds GPU blocks",
        TIGHT,
    ),
    "recompute victim keeps its computed tokens": (
        ("                victim.num_computed_tokens = 0\n", ""),
        "not reset (num_computed_tokens 0)",
        TIGHT,
    ),
    # (admitting after a preemption is blocked by the victim at the head of waiting; swapping in is not)
    "swaps in during a step that preempted": (
        (
            "while not preempted and swapped and len(running) < max_num_seqs",
            "while swapped and len(running) < max_num_seqs",
        ),
        "in a step that preempted",
        {**SWAP, "num_gpu_blocks": 11},
    ),
    "swapped victim not queued": (
        ("                swapped.append(victim)\n", ""),
        "swapped out but not appended to swapped",
        SWAP,
    ),
    "ignores max_num_seqs": (
        ("not swapped and waiting and len(running) < max_num_seqs", "not swapped and waiting"),
        "requests run > max_num_seqs=2",
        {"max_num_seqs": 2},
    ),
    "returns only the schedule (lab 05's shape)": (
        ("    return scheduled, preempted", "    return scheduled"),
        "returned a dict, not a tuple",
        {},
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_step_is_caught_and_the_kit_takes_over(name):
    replacement, invariant, kw = WRONG[name]
    eng = _engine(_step(replacement), **kw)
    with pytest.raises(ComponentError) as info:
        run(eng)
    assert info.value.component == "schedule_step" and invariant in info.value.invariant, info.value
    assert_idle(eng)
    assert not eng.components.is_yours("schedule_step")
    assert run(eng) == kit_tokens(**kw)


def _lab04_step(bridged: bool):
    """Lab 04's solution in the ``schedule_step`` slot: bridged as ``my_engine`` plugs it (not given the budget),
    or wrapped in the slot's own signature (given the budget, and ignoring it)."""
    lab04 = registry.snippet_object("04.schedule_step")
    if bridged:
        return BRIDGES["04.schedule_step"][1](lab04)

    def schedule_step(running, waiting, kv, max_num_seqs, max_num_batched_tokens, long_prefill_token_threshold):
        return lab04(running, waiting, kv, max_num_seqs)

    return schedule_step


@pytest.mark.parametrize("part", ["06", "04"])
def test_a_step_not_given_the_budget_is_not_blamed_for_it(part):
    """Lab 04's and lab 06's steps take no token budget: four prompts prefilled together (36 tokens over a
    16-token max_num_batched_tokens) are no fault of theirs, and they serve the kit's tokens (issue 23)."""
    step = PreemptingStep(registry.snippet_object(EID)) if part == "06" else _lab04_step(bridged=True)
    eng = _engine(step, max_num_batched_tokens=16)
    assert run(eng, PROMPTS) == kit_tokens()
    assert eng.components.is_yours("schedule_step")


def test_a_step_given_the_budget_is_held_to_it():
    eng = _engine(_lab04_step(bridged=False), max_num_batched_tokens=16)
    with pytest.raises(ComponentError, match="token budget exceeded: .* tokens > max_num_batched_tokens=16"):
        run(eng, PROMPTS)
    assert_idle(eng)
