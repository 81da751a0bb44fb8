"""Labs 00 and 09 handed in with the rest (issue 22): they are this course's labs without graded exercises, so
`pagedlab grade` says exactly that, and never "Is it from this course?" (the message for a foreign notebook)."""

from __future__ import annotations

import shutil
from pathlib import Path

from pagedlab.grading.grade import E2EOptions, grade
from tests.grading.helpers import variant, write_notebook

ROOT = Path(__file__).resolve().parents[2]
SLOT = variant("02.slot_mapping", ("pos", "position"))  # correct, and not the kit's code


def test_labs_00_and_09_handed_in_are_named_as_this_courses_labs_without_exercises(tmp_path: Path) -> None:
    learner = tmp_path / "subs" / "ada"
    write_notebook(learner / "02_block_pool.ipynb", [SLOT])
    for lab in ("00_welcome.ipynb", "09_engine_and_vllm.ipynb"):
        shutil.copy2(ROOT / "labs" / lab, learner / lab)
    write_notebook(learner / "notes.ipynb", ["x = 1"])  # a notebook of no course: still asked about
    (res,) = grade(
        [tmp_path / "subs"], tmp_path / "out", exercises=["02.slot_mapping"], quiet=True, e2e=E2EOptions(False)
    )
    assert res.score == 1.0, res.messages
    said = "\n".join(res.messages)
    assert "00_welcome.ipynb: lab 00 of this course has no graded exercises; nothing in it to grade" in said, said
    assert "09_engine_and_vllm.ipynb: lab 09 of this course has no graded exercises; nothing in it to grade" in said
    asked = [m for m in res.messages if "Is it from this course?" in m]
    assert len(asked) == 1 and asked[0].startswith("notes.ipynb"), said
    feedback = (tmp_path / "out" / "feedback" / "ada.html").read_text(encoding="utf-8")
    assert "lab 09 of this course has no graded exercises" in feedback
