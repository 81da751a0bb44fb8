"""Lab 09's capstone on the solutions' parts: every run equals HF transformers, the forced preemption
runs really preempt, and a part that breaks the engine fails its rows with the component named."""

from __future__ import annotations

import pytest

from pagedlab.course.capstone import INVARIANCE, capstone
from pagedlab.grading import registry
from pagedlab.grading.checking import check
from tests.components.helpers import SOLUTION_SLOTS, slot_mapping_past_last_block, solution

pytestmark = pytest.mark.model


#: Exercises that fill one slot together (lab 03: fork_cow, lab 07: radix).
SHARED_SLOTS = {
    "03.fork": "fork_cow",
    "03.append_token": "fork_cow",
    "07.match_prefix": "radix",
    "07.insert": "radix",
    "07.evict": "radix",
}


def _solutions_namespace() -> dict:
    ns = {}
    for eid in [*SOLUTION_SLOTS, *SHARED_SLOTS]:
        obj = solution(eid)
        assert check(obj, eid, show=False).passed
        ns[registry.get(eid).name] = obj
    return ns


def test_capstone_on_the_solutions_matches_hf_everywhere():
    report = capstone(namespace=_solutions_namespace(), show=False)
    assert report.passed, report.text()
    assert [r.check for r in report.rows] == [name for name, _, _ in INVARIANCE]
    assert set(report.rows[0].yours) == set(SOLUTION_SLOTS.values()) | {"fork_cow"}  # caching off: no radix
    radix_row = next(r for r in report.rows if r.check == "prefix caching radix")
    assert {"radix", "fork_cow"} <= set(radix_row.yours)
    assert all(r.preempted > 0 for r in report.rows if "preemption" in r.check)
    assert report.kit_seconds > 0 and report.yours_seconds > 0


def test_capstone_with_every_exercise_marks_every_part_as_yours():
    """Issue 10's "done when": every exercise of labs 02-08 that is a part of the engine (the solutions),
    all runs equal to HF, every slot the learner's (lab 06's step covering the victim choice and the
    retry loop), and the Triton tile load in a row of its own on the Triton kernel."""
    from pagedlab.engine.components import SLOTS
    from pagedlab.grading.plug import BRIDGES

    ns = {}
    for eid in BRIDGES:
        obj = solution(eid)
        assert check(obj, eid, show=False).passed
        ns[registry.get(eid).name] = obj
    report = capstone(namespace=ns, show=False)
    assert report.passed, report.text()
    assert report.components.learner_slots == list(SLOTS)
    assert all(line.split()[1] == "yours" for line in report.components.table().splitlines()[1:])
    cpu_rows, triton_row = report.rows[:-1], report.rows[-1]
    assert [r.check for r in cpu_rows] == [name for name, _, _ in INVARIANCE]
    assert triton_row.check.startswith("Triton kernel") and triton_row.same_as_hf
    assert "triton_tile_load" in triton_row.yours
    not_cpu = {"triton_tile_load"}
    for r in cpu_rows:  # each row lists the parts of yours that run in it
        idle = {"prefix_lookup", "radix"}  # caching off
        if r.check == "prefix caching hash":
            idle = {"radix", "schedule_step", "preempt_retry"}  # the kit's step looks hits up
        if r.check == "prefix caching radix":
            idle = {"prefix_lookup", "schedule_step", "preempt_retry"}
        assert set(r.yours) == set(SLOTS) - not_cpu - idle, (r.check, r.yours)
    assert all(r.preempted > 0 for r in report.rows if "preemption" in r.check)


def test_a_part_that_breaks_the_engine_fails_the_capstone(monkeypatch):
    ns = _solutions_namespace()
    ns["slot_mapping"] = slot_mapping_past_last_block
    from pagedlab.grading import checking

    checking.record_result("02.slot_mapping", slot_mapping_past_last_block, True)  # as if it had slipped past
    report = capstone(namespace=ns, show=False)
    assert not report.passed
    assert all(not r.same_as_hf and "your slot_mapping broke the engine" in r.note for r in report.rows)
