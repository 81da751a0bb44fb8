"""Two learner folders given on the command line that hold notebooks of the same name: each notebook is a
learner of its own (the documented layout), and the second is renamed ``name-2``; the grader now says so
and how to grade each folder as one learner (found by trying the kit as an instructor: ``pagedlab grade
subs/alice subs/bob`` reported four learners, two named ``02_block_pool`` and ``02_block_pool-2``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagedlab.grading.grade import E2EOptions, grade
from tests.grading.helpers import stub_source, write_notebook


def _subs(root: Path) -> None:
    for learner in ("alice", "bob"):
        write_notebook(root / learner / "02_block_pool.ipynb", [stub_source("02.slot_mapping")])


def test_same_named_notebooks_of_two_folders_are_named_apart_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _subs(tmp_path / "subs")
    subs = tmp_path / "subs"
    results = grade([subs / "alice", subs / "bob"], tmp_path / "out", exercises=["02.slot_mapping"],
                    e2e=E2EOptions(enabled=False))  # fmt: skip
    assert [r.learner.name for r in results] == ["02_block_pool", "02_block_pool-2"]
    said = capsys.readouterr().out
    assert said.count("warning: two submissions are named") == 1, said
    assert f"{subs / 'bob' / '02_block_pool.ipynb'} is reported as '02_block_pool-2'" in said, said
    assert "give the folder that contains it" in said


def test_the_parent_folder_grades_each_folder_as_one_learner_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _subs(tmp_path / "subs")
    results = grade([tmp_path / "subs"], tmp_path / "out", exercises=["02.slot_mapping"], e2e=E2EOptions(enabled=False))
    assert [r.learner.name for r in results] == ["alice", "bob"]
    assert "warning" not in capsys.readouterr().out


def test_a_learner_whose_own_name_ends_in_a_number_is_no_clash(tmp_path: Path) -> None:
    from pagedlab.grading.grade import discover, name_clashes

    for name in ("lab", "lab-2"):
        write_notebook(tmp_path / "subs" / f"{name}.ipynb", [stub_source("02.slot_mapping")])
    learners = discover([tmp_path / "subs"])
    assert sorted(lr.name for lr in learners) == ["lab", "lab-2"] and name_clashes(learners) == []


def test_a_learner_given_as_it_is_keeps_its_name_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Gradescope entry point builds ``Learner("submission", <its folder>)``: no clash to report."""
    from pagedlab.grading.grade import Learner

    nb = write_notebook(tmp_path / "upload" / "02_block_pool.ipynb", [stub_source("02.slot_mapping")])
    given = Learner("zoe", str(tmp_path / "upload"), [nb])
    results = grade([given], tmp_path / "out", exercises=["02.slot_mapping"], e2e=E2EOptions(enabled=False))
    assert [r.learner.name for r in results] == ["zoe"]
    assert "warning" not in capsys.readouterr().out
