"""The differential test's machinery (pagedlab/grading/differential.py), on a toy exercise of its own:
the same cases on every run and in every process, a mistake only unpicked inputs show is caught, the case
check() shows is the smallest hypothesis shrinks to, and the reference's own failures never count."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import strategies as st

from pagedlab.grading import differential as diff_mod
from pagedlab.grading import registry, runner
from pagedlab.grading.checking import check
from pagedlab.grading.differential import TITLE, differential, run_alone
from pagedlab.grading.registry import Exercise


def reference_slots(table: list[int], positions: list[int], block_size: int) -> list[int]:
    return [table[p // block_size] * block_size + p % block_size for p in positions]


def _case() -> Any:
    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        block_size = draw(st.sampled_from([1, 2, 4, 16]))
        n = draw(st.integers(1, 8))
        table = draw(st.lists(st.integers(0, 127), min_size=n, max_size=n, unique=True))
        positions = draw(st.lists(st.integers(0, n * block_size - 1), max_size=8))
        return {"table": table, "positions": positions, "block_size": block_size}

    return case()


def _run(fn: Any, case: dict[str, Any], rec: Any) -> None:
    table, positions = list(case["table"]), list(case["positions"])
    rec.step(f"toy_slots({table}, {positions}, {case['block_size']})")
    rec.observe("slots", fn(table, positions, case["block_size"]), hint="slot = table[p // bs] * bs + p % bs")
    rec.observe("positions after the call", positions)


@pytest.fixture
def toy() -> Iterator[Exercise]:
    """A registered exercise '99.toy_slots' whose only test is a differential one (removed afterwards)."""
    ex = registry.register(Exercise("99.toy_slots", "toy_slots", "toy", reference=lambda: reference_slots))
    differential(ex, _case(), examples=60)(_run)
    yield ex
    registry._REGISTRY.pop(ex.id, None)
    registry._reference_cache.pop(ex.id, None)
    diff_mod._BY_EXERCISE.pop(ex.id, None)
    for key in [k for k in runner._ref_cache if k[0] == ex.id]:
        del runner._ref_cache[key]


def _wrong_above(limit: int) -> Any:
    def toy_slots(table: list[int], positions: list[int], block_size: int) -> list[int]:
        return [table[p // block_size] * block_size + p % block_size if p < limit else 0 for p in positions]

    return toy_slots


def test_the_cases_are_the_same_in_another_process(toy: Exercise) -> None:
    """Seeded from the exercise id, database off: a fresh interpreter draws exactly the same cases."""
    here = diff_mod.find(toy.id).cases()  # type: ignore[union-attr]
    code = (
        "import json, sys; sys.path.insert(0, '.');"
        "from tests.grading import test_differential as t;"
        "from pagedlab.grading import registry; from pagedlab.grading.differential import differential;"
        "from pagedlab.grading.registry import Exercise;"
        "ex = registry.register(Exercise('99.toy_slots', 'toy_slots', 'toy', reference=lambda: t.reference_slots));"
        "d = differential(ex, t._case(), examples=60)(t._run);"
        "print(json.dumps(d.cases()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == here
    assert len(here) == 60 and len({json.dumps(c, sort_keys=True) for c in here}) == 60
    assert any(not c["positions"] for c in here), "the empty case is drawn"


def test_the_reference_passes_and_a_mistake_on_unpicked_inputs_fails(toy: Exercise) -> None:
    assert check(reference_slots, toy.id, show=False).passed
    res = check(_wrong_above(20), toy.id, show=False)
    assert not res.passed
    first = res.first_failure
    assert first is not None and first.title == TITLE and first.status == "failed"


def test_check_shows_the_smallest_failing_case(toy: Exercise) -> None:
    """The unshrunk failure is some random case; check() shows the one hypothesis shrinks to: one position,
    the first one the mistake gets wrong, in the smallest table that holds it."""
    wrong = _wrong_above(20)
    raw = run_alone(toy, wrong)
    assert raw.status == "failed" and raw.message.startswith("in case "), raw.message
    first = check(wrong, toy.id, show=False).first_failure
    assert first is not None
    assert first.extra["case"]["positions"] == [20], first.message
    assert len(first.extra["case"]["table"]) == 20 // first.extra["case"]["block_size"] + 1, first.message
    lines = first.message.splitlines()
    assert lines[0].startswith("the smallest failing case found")
    assert lines[1].startswith("in the case: {")
    assert "expected" in first.message and "got" in first.message
    assert "hint: slot = table[p // bs] * bs + p % bs" in first.message


def test_a_changed_input_is_part_of_the_state_compared(toy: Exercise) -> None:
    def toy_slots(table: list[int], positions: list[int], block_size: int) -> list[int]:
        out = [table[p // block_size] * block_size + p % block_size for p in positions]
        positions.sort()
        return out

    first = check(toy_slots, toy.id, show=False).first_failure
    assert first is not None and "positions after the call" in first.message


def test_the_verdict_does_not_depend_on_what_ran_before(toy: Exercise) -> None:
    wrong = _wrong_above(20)
    a = check(wrong, toy.id, show=False).first_failure
    check(reference_slots, toy.id, show=False)
    b = check(wrong, toy.id, show=False).first_failure
    assert a is not None and b is not None and a.message == b.message


def test_a_case_the_reference_fails_on_is_the_instructors_problem(toy: Exercise) -> None:
    """A strategy drawing a case the reference cannot run is a broken test ('internal'), never the learner's
    failure, and shrinking does not blame the learner for it."""

    def picky_reference(table: list[int], positions: list[int], block_size: int) -> list[int]:
        if len(positions) > 3:
            raise RuntimeError("the reference cannot run this case")
        return reference_slots(table, positions, block_size)

    registry._reference_cache[toy.id] = picky_reference
    res = check(reference_slots, toy.id, show=False)
    assert res.first_failure is not None and res.first_failure.status == "internal"
    assert diff_mod.smallest_failure(toy, reference_slots) is None


def test_an_exercise_gets_one_differential_test(toy: Exercise) -> None:
    with pytest.raises(ValueError, match="has a differential test already"):
        differential(toy, _case())(_run)
