"""The test oracle for Gradescope's ``results.json``: what the autograder specification asks of the file
``pagedlab.grading.gradescope.run`` writes (only tests call it, so it lives with them)."""

from __future__ import annotations

from typing import Any

__all__ = ["validate_results"]

_VISIBILITIES = {"visible", "hidden", "after_due_date", "after_published"}


def validate_results(data: Any) -> list[str]:  # noqa: C901 - one check per results.json field
    """Problems of a Gradescope ``results.json`` (empty: valid).

    Checks (Gradescope autograder specification, 2024): a ``tests`` list whose entries have a
    string ``name``, numeric ``score`` and ``max_score`` (0 <= score <= max_score), a string
    ``output``, a known ``visibility``; a numeric total ``score`` equal to the sum of the tests'
    scores; the tests' max_scores summing to ``expected_total`` is the caller's check.
    """
    if not isinstance(data, dict):
        return ["results.json is not a JSON object"]
    problems: list[str] = []
    tests = data.get("tests")
    if not isinstance(tests, list):
        return ["no 'tests' list"]
    for i, t in enumerate(tests):
        if not isinstance(t, dict):
            problems.append(f"tests[{i}] is not an object")
            continue
        for key, kind in (("name", str), ("output", str), ("score", (int, float)), ("max_score", (int, float))):
            if not isinstance(t.get(key), kind) or isinstance(t.get(key), bool):
                problems.append(f"tests[{i}].{key} missing or of the wrong type")
        if t.get("visibility") not in _VISIBILITIES:
            problems.append(f"tests[{i}].visibility {t.get('visibility')!r} is not one of {sorted(_VISIBILITIES)}")
        if not problems and not 0 <= t["score"] <= t["max_score"]:
            problems.append(f"tests[{i}]: score {t['score']} outside [0, {t['max_score']}]")
    score = data.get("score")
    if not isinstance(score, (int, float)) or isinstance(score, bool):
        problems.append("no numeric total 'score'")
    elif not problems and abs(score - sum(t["score"] for t in tests)) > 1e-6:
        problems.append(f"score {score} is not the sum of the tests' scores")
    if data.get("stdout_visibility", "hidden") not in _VISIBILITIES:
        problems.append("bad stdout_visibility")
    return problems
