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


def test_the_end_to_end_limits_scale_and_the_triton_configuration_has_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each configuration gets the run's limit (already scaled by grade); the Triton one its own ``limit_s``
    times the scale (its interpreter's first call traces every kernel: over 30 s in a CI run)."""
    from pagedlab.grading import e2e, e2e_driver

    seen: dict[str, float] = {}

    class Server:
        def serve(self, eids, prompt_ids, max_tokens, kwargs, limit):
            seen[kwargs["name"]] = limit
            return {"tokens": [[1] * max_tokens for _ in prompt_ids], "table": "", "error": None}

    configs = [
        {"name": "default", "engine_kwargs": {"name": "default"}, "reference": [[1, 1]]},
        {
            "name": "triton kernel",
            "engine_kwargs": {"name": "triton kernel"},
            "reference": [[1, 1]],
            "limit_s": e2e.E2E_TRITON_LIMIT_S,
        },
    ]
    job = {"prompt_ids": [[5, 6]], "max_tokens": 2, "configs": configs, "time_scale": 2.0}
    monkeypatch.setattr(e2e_driver, "slots_of", lambda eids: {"triton_tile_load": "08.triton_load_kv_tile"})
    lines = e2e_driver.run_e2e(Server(), ["08.triton_load_kv_tile"], job, 60.0)
    assert [line["config"] for line in lines] == ["default", "triton kernel"]
    assert seen == {"default": 60.0, "triton kernel": 2.0 * e2e.E2E_TRITON_LIMIT_S}
    assert e2e.E2E_TRITON_LIMIT_S > e2e.E2E_CONFIG_LIMIT_S
    assert e2e.E2E_ALLOWANCE_S >= e2e.E2E_TRITON_LIMIT_S + 2 * e2e.E2E_CONFIG_LIMIT_S  # the run's time covers it


def test_start_learner_scales_the_end_to_end_limit_and_allowance(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import json
    import shutil
    import subprocess
    from pathlib import Path

    from pagedlab.grading import grade, supervisor
    from pagedlab.grading.e2e import E2E_ALLOWANCE_S, E2E_CONFIG_LIMIT_S

    monkeypatch.setenv(TIME_SCALE_ENV, "3")
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **kw: None)
    nb = tmp_path / "a.ipynb"
    nb.write_text("{}")
    run = supervisor.start_learner(grade.Learner("a", str(nb), [nb]), None, None, 100.0, 3072, e2e_job={"configs": []})
    run.log.close()
    job = json.loads((Path(run.workdir) / "job.json").read_text())
    assert job["e2e"]["limit"] == 3 * E2E_CONFIG_LIMIT_S and job["e2e"]["time_scale"] == 3.0
    assert job["cpu_s"] == int(100.0 + 3 * E2E_ALLOWANCE_S) + 2
    shutil.rmtree(run.workdir)
