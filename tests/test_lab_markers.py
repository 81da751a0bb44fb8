"""The lab markers (tests/conftest.py): `pytest -m lab06` selects lab 06's tests, guards and notebook."""

from tests.conftest import lab_markers


def test_a_lab_is_found_by_path_keyword_exercise_id_and_notebook() -> None:
    assert lab_markers("tests/sched/test_scheduler.py", "tests/sched/test_scheduler.py::test_x") >= {"lab04", "lab06"}
    assert lab_markers("tests/components/test_components.py", "t::test_a_pick_victim_guard") == {"lab06"}
    assert lab_markers("tests/grading/test_exercises.py", "t::test_reference_passes[07.insert]") == {"lab07"}
    assert lab_markers("solutions/06_preemption.ipynb", "solutions/06_preemption.ipynb::Cell 3") == {"lab06"}
    assert lab_markers("solutions/00_welcome.ipynb", "solutions/00_welcome.ipynb::Cell 0") == set()
    assert lab_markers("tests/test_cli.py", "tests/test_cli.py::test_version[1.02.3]") == set()
