"""Issue 23: every wrong version plugged into the engine (tests/grading/plugged.py). A guard names it, or it
serves like the kit's engine and its ``engine:`` line says why; nothing else (different tokens, an exception
that is not a guard's, a stall). The solutions serve every setting like the kit's engine. docs/wrong_versions.md's
engine section is this run's table."""

from __future__ import annotations

import os

import pytest

from pagedlab.grading import registry
from tests.grading.helpers import doc_parts, wrong_versions
from tests.grading.plugged import SETTINGS, Outcome, plug, plugged_table
from tests.grading.test_wrong_versions import DOC

VERSIONS = wrong_versions()
_OUT: dict[tuple[str, str], Outcome] = {}


def _outcome(exercise: str, name: str) -> Outcome:
    if (exercise, name) not in _OUT:
        v = next(v for v in VERSIONS if (v.exercise, v.name) == (exercise, name))
        _OUT[exercise, name] = plug(exercise, registry.snippet_object(exercise, v.source))
    return _OUT[exercise, name]


@pytest.mark.parametrize("eid", sorted(SETTINGS))
def test_the_solution_serves_every_setting_like_the_kit(eid: str) -> None:
    out = plug(eid, registry.snippet_object(eid))
    assert out.kind == "same", f"{eid}: the solution was blamed: {out}"


@pytest.mark.parametrize("v", VERSIONS, ids=[f"{v.exercise}:{v.name}" for v in VERSIONS])
def test_a_plugged_wrong_version_is_named_by_a_guard_or_says_why_not(v) -> None:  # type: ignore[no-untyped-def]
    out = _outcome(v.exercise, v.name)
    assert out.kind in ("guard", "same", "not a part"), f"{v.exercise}/{v.name}: {out}"
    if out.kind == "same":
        assert v.engine, f"{v.exercise}/{v.name} serves like the kit's engine: say why in an 'engine:' line"
    else:
        assert not v.engine, f"{v.exercise}/{v.name}: {out.kind} ({out.text}), drop its 'engine:' line"


def test_docs_engine_section_is_current() -> None:
    table = plugged_table(VERSIONS, [_outcome(v.exercise, v.name) for v in VERSIONS])
    old = DOC.read_text(encoding="utf-8")
    if os.environ.get("PAGEDLAB_REGEN_DOCS"):
        DOC.write_text(doc_parts(old)[0] + "\n" + table, encoding="utf-8")
        old = DOC.read_text(encoding="utf-8")
    assert doc_parts(old)[1] == table, (
        "docs/wrong_versions.md's engine section is stale: run PAGEDLAB_REGEN_DOCS=1 pytest "
        "tests/grading/test_wrong_versions_plugged.py"
    )
