"""``$PAGEDLAB_GRADE_TIME_SCALE``: a factor on each test's time limit, for a grading machine shared by many jobs."""

from __future__ import annotations

import pytest

from pagedlab.grading import driver
from pagedlab.grading.grade import TIME_SCALE_ENV, GradeError, time_scale


def test_unset_is_one_and_a_number_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_SCALE_ENV, raising=False)
    assert time_scale() == 1.0
    monkeypatch.setenv(TIME_SCALE_ENV, " 2.5 ")
    assert time_scale() == 2.5


@pytest.mark.parametrize("bad", ["x", "0.5", "0", "-3", "nan", "inf"])
def test_anything_but_a_number_at_least_one_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, bad)
    with pytest.raises(GradeError, match=TIME_SCALE_ENV):
        time_scale()


def test_the_driver_scales_each_tests_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """_run_one gives a test ``min(RPC_SLACK x its timeout x scale, the job's per-test limit)``."""
    seen: list[float] = []

    class Test:
        timeout = 10.0

    class Exercise:
        runs_in_learner_process = False

    lp = driver.LearnerProcess({"learner_dir": ".", "notebooks": [], "time_scale": 4.0}, {})
    lp.objects = {"x": object()}
    monkeypatch.setattr(lp, "alive", lambda: True)
    monkeypatch.setattr(driver.registry, "get", lambda eid: Exercise())
    monkeypatch.setattr(driver, "run_driver", lambda test, obj, timeout, **kw: seen.append(timeout) or [])
    driver._run_one(lp, "x", Test(), 1000.0)
    assert seen == [driver.RPC_SLACK * 10.0 * 4.0]
