"""The Gradescope autograder zip, run against a simulated Gradescope layout.

The zip is built once; each test unzips it into ``<tmp>/autograder/source`` (as Gradescope does),
puts a submission in ``<tmp>/autograder/submission`` and runs ``run_autograder`` with the root
and the interpreter overridden (the kit is already installed here, so setup.sh's install is not
run: it is checked for valid bash and pinned versions instead).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pagedlab.grading import registry
from pagedlab.grading.grade import E2EOptions
from pagedlab.grading.gradescope import BundleError, build_bundle
from pagedlab.grading.report import split_points
from tests.grading.gradescope_results import validate_results
from tests.grading.helpers import variant, write_notebook

EXERCISES = ["02.free_queue", "02.slot_mapping"]
SLOT = registry.snippet_source("02.slot_mapping")
QUEUE = registry.snippet_source("02.free_queue")
WRONG_SLOT = variant(
    "02.slot_mapping",
    (
        "block_table[pos // block_size] * block_size + pos % block_size",
        "block_table[pos % block_size] * block_size + pos // block_size",
    ),
)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bundle")
    hidden = root / "hidden"
    hidden.mkdir()
    (hidden / "extra.py").write_text(
        textwrap.dedent("""
        from pagedlab.grading import hidden_test

        @hidden_test("02.slot_mapping", "HIDDEN-TITLE-5151 huge block size")
        def _(fn, rec):
            rec.step("slot_mapping([3, 9], [70, 127], 64)  # HIDDEN-STEP-5151")
            rec.observe("slots HIDDEN-OBS-5151", fn([3, 9], [70, 127], 64))
    """)
    )
    (hidden / "sizes.json").write_text("[64]")  # a data file the tests could read
    (hidden / "__pycache__").mkdir()
    (hidden / "__pycache__" / "extra.cpython-311.pyc").write_bytes(b"junk")
    return build_bundle(root / "autograder.zip", hidden, EXERCISES, timeout=60, memory_mb=1024)


def autograde(bundle: Path, tmp: Path, files: dict[str, Any]) -> dict[str, Any]:
    """Run run_autograder on a submission of ``files`` (name -> cells list, or bytes); return results.json."""
    root = tmp / "autograder"
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    sub = root / "submission"
    sub.mkdir(parents=True)
    for name, content in files.items():
        if isinstance(content, bytes):
            (sub / name).parent.mkdir(parents=True, exist_ok=True)
            (sub / name).write_bytes(content)
        else:
            write_notebook(sub / name, content)
    env = dict(os.environ, PAGEDLAB_AUTOGRADER_ROOT=str(root), PAGEDLAB_AUTOGRADER_PYTHON=sys.executable)
    proc = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((root / "results" / "results.json").read_text())
    assert validate_results(data) == [], data
    total = sum(t["max_score"] for t in data["tests"])
    assert abs(total - sum(registry.get(e).points for e in EXERCISES)) < 1e-9, data["tests"]
    assert "5151" not in (root / "results" / "results.json").read_text()
    return data


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in data["tests"]}


def test_zip_layout_and_setup_script(bundle: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path)
        mode = zf.getinfo("run_autograder").external_attr >> 16
    assert {
        "setup.sh",
        "run_autograder",
        "constraints.txt",
        "pagedlab_autograder.json",
        "hidden_tests/extra.py",
        "hidden_tests/sizes.json",
        "kit/pyproject.toml",
        "kit/pagedlab/grading/grade.py",
    } <= names
    assert mode & 0o111, "run_autograder must be executable"
    assert not any("__pycache__" in n for n in names)
    for script in ("setup.sh", "run_autograder"):
        check = subprocess.run(["bash", "-n", str(tmp_path / script)], capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stderr
    setup = (tmp_path / "setup.sh").read_text()
    assert "-c constraints.txt" in setup and "./kit" in setup and "fetch-model" in setup
    pins = [ln for ln in (tmp_path / "constraints.txt").read_text().splitlines() if ln]
    assert pins and all("==" in ln for ln in pins)
    assert any(ln.startswith("torch==") for ln in pins)
    config = json.loads((tmp_path / "pagedlab_autograder.json").read_text())
    assert config["exercises"] == EXERCISES and config["timeout"] == 60
    assert config["e2e"] == {"enabled": True, "seed": None, "points": 0.0, "prompts": 3, "tokens": 8}


def test_two_notebooks_are_one_learner_and_the_first_duplicate_wins(bundle: Path, tmp_path: Path) -> None:
    # a_lab.ipynb: a wrong slot_mapping; b_lab.ipynb: the queue and a right slot_mapping.
    data = autograde(bundle, tmp_path, {"a_lab.ipynb": [WRONG_SLOT], "b_lab.ipynb": [QUEUE, SLOT]})
    tests = by_name(data)
    assert data["score"] == pytest.approx(1.0 + 0.0, abs=1e-9)  # queue passed; slot_mapping from a_lab, wrong
    assert all(t["score"] == t["max_score"] for n, t in tests.items() if n.startswith("02.free_queue"))
    assert all(t["score"] == 0 for n, t in tests.items() if n.startswith("02.slot_mapping"))
    assert "02.slot_mapping is also in b_lab.ipynb; the one in a_lab.ipynb is graded" in data["output"]
    hidden = [t for t in data["tests"] if t["visibility"] == "after_published"]
    assert [t["name"] for t in hidden] == ["02.slot_mapping: hidden test 1"]
    assert hidden[0]["output"] == "hidden test: failed"


def test_submission_without_a_notebook(bundle: Path, tmp_path: Path) -> None:
    data = autograde(bundle, tmp_path, {})
    assert data["score"] == 0 and "no notebook (.ipynb) in the submission" in data["output"]


def test_non_notebook_file_is_reported_and_the_notebook_graded(bundle: Path, tmp_path: Path) -> None:
    data = autograde(bundle, tmp_path, {"lab.ipynb": [SLOT, QUEUE], "report.pdf": b"%PDF-1.4"})
    assert data["score"] == pytest.approx(2.0)
    assert "report.pdf: not a notebook (.ipynb), skipped" in data["output"]


def test_corrupt_notebook(bundle: Path, tmp_path: Path) -> None:
    data = autograde(bundle, tmp_path, {"lab.ipynb": b"{not json"})
    assert data["score"] == 0 and "lab.ipynb" in data["output"] and "not valid JSON" in data["output"]


def test_split_points_sums_exactly() -> None:
    assert split_points(1.0, 3) == [0.3333, 0.3333, 0.3334]
    assert split_points(2.0, 1) == [2.0]
    for points, n in ((1.0, 7), (3.0, 9), (0.0, 2)):
        assert abs(sum(split_points(points, n)) - points) < 1e-9
    with pytest.raises(ValueError, match="cannot split"):
        split_points(1.0, 0)


def test_validator_rejects_what_gradescope_rejects() -> None:
    good = {
        "score": 1.0,
        "tests": [{"name": "a", "score": 1.0, "max_score": 1.0, "output": "", "visibility": "visible"}],
    }
    assert validate_results(good) == []
    assert validate_results([]) == ["results.json is not a JSON object"]
    bad_vis = json.loads(json.dumps(good))
    bad_vis["tests"][0]["visibility"] = "secret"
    assert "visibility" in validate_results(bad_vis)[0]
    over = json.loads(json.dumps(good))
    over["tests"][0]["score"] = 2.0
    assert "outside" in validate_results(over)[0]
    wrong_total = json.loads(json.dumps(good))
    wrong_total["score"] = 0.5
    assert "not the sum" in validate_results(wrong_total)[0]


def test_bad_bundle_options(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no such folder"):
        build_bundle(tmp_path / "a.zip", hidden_tests=tmp_path / "missing")
    with pytest.raises(BundleError, match="--timeout"):
        build_bundle(tmp_path / "a.zip", timeout=0)
    with pytest.raises(registry.UnknownExerciseError):
        build_bundle(tmp_path / "a.zip", exercises=["99.nope"])
    with pytest.raises(BundleError, match="--e2e-points must be >= 0, got -1"):
        build_bundle(tmp_path / "a.zip", e2e=E2EOptions(points=-1))
    assert not (tmp_path / "a.zip").exists()


def test_the_end_to_end_options_reach_the_grader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gradescope-bundle --no-e2e / --e2e-seed / --e2e-points`` are written into the zip's config and
    every submission is graded with them (as ``pagedlab grade`` takes them)."""
    from pagedlab import cli
    from pagedlab.grading import grade as grade_module
    from pagedlab.grading.gradescope import CONFIG_NAME, run

    out = tmp_path / "ag.zip"
    argv = ["gradescope-bundle", str(out), "--exercises", *EXERCISES, "--e2e-seed", "7", "--e2e-points", "2.5"]
    assert cli.main(argv) == 0
    with zipfile.ZipFile(out) as zf:
        config = json.loads(zf.read(CONFIG_NAME))
    assert config["e2e"] == {"enabled": True, "seed": 7, "points": 2.5, "prompts": 3, "tokens": 8}
    assert cli.main(["gradescope-bundle", str(tmp_path / "b.zip"), "--e2e-points", "-1"]) == 1
    assert "--e2e-points must be >= 0, got -1" in capsys.readouterr().err
    assert not (tmp_path / "b.zip").exists()

    seen: list[Any] = []

    def fake_grade(learners: Any, out: Any, hidden: Any, **kw: Any) -> Any:
        seen.append(kw["e2e"])
        raise RuntimeError("stop here")

    monkeypatch.setattr(grade_module, "grade", fake_grade)
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    write_notebook(root / "submission" / "lab.ipynb", [SLOT])
    for e2e, expected in [
        (config["e2e"], E2EOptions(True, 7, 2.5)),
        ({"enabled": False}, E2EOptions(enabled=False)),
        (None, E2EOptions()),  # a zip built before the option existed: the defaults
    ]:
        cfg = {"exercises": EXERCISES} | ({"e2e": e2e} if e2e is not None else {})
        (root / "source" / CONFIG_NAME).write_text(json.dumps(cfg))
        run(root)
        assert seen.pop() == expected


def test_run_autograder_runs_the_installed_kit_not_a_planted_one(bundle: Path, tmp_path: Path) -> None:
    """``run_autograder`` starts Python isolated (``-I``): a ``pagedlab`` package in the folder it is run from or on
    ``$PYTHONPATH`` (a submission could bring one) is not what runs; the installed kit writes results.json."""
    from pagedlab.grading.gradescope import CONFIG_NAME

    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    write_notebook(root / "submission" / "lab.ipynb", [SLOT])
    config = json.loads((root / "source" / CONFIG_NAME).read_text())
    (root / "source" / CONFIG_NAME).write_text(json.dumps(config | {"timeout": -1}))  # fails at once, still writes
    marker = tmp_path / "planted-ran"
    for where in (root, tmp_path / "path"):
        (where / "pagedlab").mkdir(parents=True)
        (where / "pagedlab" / "__init__.py").write_text(
            f"open({str(marker)!r}, 'a').write({str(where)!r} + '\\n')\nraise SystemExit(7)\n"
        )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PAGEDLAB_AUTOGRADER_ROOT": str(root), "PAGEDLAB_AUTOGRADER_PYTHON": sys.executable}
    env["PYTHONPATH"] = str(tmp_path / "path")
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert not marker.exists(), f"a planted pagedlab ran from: {marker.read_text()}"
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((root / "results" / "results.json").read_text())
    assert validate_results(data) == [] and data["output"].startswith("the autograder failed (GradeError: --timeout")


def test_a_failing_autograder_still_writes_valid_results(tmp_path: Path) -> None:
    from pagedlab.grading.gradescope import CONFIG_NAME, run

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    write_notebook(root / "submission" / "lab.ipynb", [SLOT])
    (root / "source" / CONFIG_NAME).write_text(json.dumps({"exercises": EXERCISES, "timeout": -1}))
    data = json.loads(run(root).read_text())
    assert validate_results(data) == [] and data["score"] == 0
    assert [t["name"] for t in data["tests"]] == EXERCISES and sum(t["max_score"] for t in data["tests"]) == 2.0
    assert data["output"].startswith("the autograder failed (GradeError: --timeout must be > 0")
    assert all(t["output"] == data["output"] for t in data["tests"])


def test_per_exercise_points_reach_the_bundle_and_every_results_json(tmp_path: Path) -> None:
    """``--points`` in the bundle: its config holds them, a graded submission's tests sum to them (the right
    answer earns all of its exercise's points, the wrong one none), and so does a failed run's results.json."""
    from pagedlab.grading.gradescope import CONFIG_NAME, run
    from pagedlab.grading.points import parse_points

    points = parse_points(["02.free_queue=3,02.slot_mapping=2.5"])
    zpath = build_bundle(tmp_path / "pts.zip", None, EXERCISES, timeout=60, memory_mb=1024, points=points)
    with zipfile.ZipFile(zpath) as zf:
        assert json.loads(zf.read(CONFIG_NAME))["points"] == {"02.free_queue": 3.0, "02.slot_mapping": 2.5}
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zpath) as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    write_notebook(root / "submission" / "lab.ipynb", [SLOT])  # slot mapping right, no free queue
    env = dict(os.environ, PAGEDLAB_AUTOGRADER_ROOT=str(root), PAGEDLAB_AUTOGRADER_PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((root / "results" / "results.json").read_text())
    assert validate_results(data) == [], data
    worth: dict[str, float] = {}
    for t in data["tests"]:
        eid = next((e for e in EXERCISES if t["name"].startswith(e)), None)
        if eid is not None:
            worth[eid] = worth.get(eid, 0.0) + t["max_score"]
    assert worth == pytest.approx({"02.free_queue": 3.0, "02.slot_mapping": 2.5}), data["tests"]
    assert data["score"] == pytest.approx(2.5), data["tests"]

    cfg = json.loads((root / "source" / CONFIG_NAME).read_text())
    (root / "source" / CONFIG_NAME).write_text(json.dumps({**cfg, "timeout": -1}))
    failed = json.loads(run(root).read_text())
    assert validate_results(failed) == [] and failed["score"] == 0
    assert {t["name"]: t["max_score"] for t in failed["tests"]} == {"02.free_queue": 3.0, "02.slot_mapping": 2.5}


#: 02.free_queue, handed in with an exercise cell that, when it loads, tries three ways to leave behind a process that
#: outlives the run (issue 22: libc's ``system()`` through ``ctypes.CDLL(None)``, a double ``fork`` with ``setsid``,
#: ``subprocess.Popen`` in a new session). Each such process touches ``<marks>/<route>-started``, waits until
#: run_autograder has returned (the test then creates ``run-over``), and rewrites its results.json: every test passed
#: (1 -> 2 points) and the hidden test's source pasted into the output; it then touches ``<marks>/<route>-rewrote``. The queue itself raises with what each route got, so results.json says it.
DETACHED = r"""# EXERCISE 02.free_queue
import os, sys

_FORGE = '''
import json, os, time
def _forge(route, results=@RESULTS@, hidden=@HIDDEN@, marks=@MARKS@, over=@OVER@):
    os.closerange(3, 1024)  # hold none of the learner process's pipes
    try:
        os.setsid()  # out of the driver's process group
    except OSError:
        pass  # already a session leader
    open(os.path.join(marks, route + "-started"), "w").close()
    for _ in range(6000):  # until run_autograder has returned (the test says so), at most 10 minutes
        if os.path.exists(over):
            break
        time.sleep(0.1)
    else:
        return
    data = json.load(open(results))
    for t in data["tests"]:
        t["score"] = t["max_score"]
    data["score"] = sum(t["score"] for t in data["tests"])
    data["output"] = "FORGED by " + route + ": " + open(hidden).read()
    with open(results, "w") as f:
        json.dump(data, f)
    open(os.path.join(marks, route + "-rewrote"), "w").close()
'''
_DONE = exec(_FORGE)  # assignments, not bare calls: they run whichever top-level statements a grader keeps


def _attempt(route, start):
    try:
        return f"{route}: {start()}"
    except BaseException as e:
        return f"{route}: denied {type(e).__name__}"


def _system():
    import ctypes

    os.environ["PAGEDLAB_FORGE"] = _FORGE + "\n_forge('system')"
    cmd = f'("{sys.executable}" -c "$PAGEDLAB_FORGE" </dev/null >/dev/null 2>&1 &)'
    return f"returned {ctypes.CDLL(None).system(cmd.encode())}"


def _fork():
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                _forge("fork")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return "returned 0"


def _popen():
    import subprocess  # its native part (_posixsubprocess) may be refused to load: that is one of the denials

    code = _FORGE + "\n_forge('popen')"
    out = subprocess.DEVNULL
    subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdin=out, stdout=out, stderr=out)
    return "returned 0"


_GOT = [_attempt(route, start) for route, start in (("system", _system), ("fork", _fork), ("popen", _popen))]


class FreeKVCacheBlockQueue:
    def __init__(self, *args, **kwargs):
        raise ValueError("ROUTES " + "; ".join(_GOT))
"""


def test_a_process_a_submission_leaves_behind_cannot_rewrite_results_json(bundle: Path, tmp_path: Path) -> None:
    """Issue 22 on the Gradescope route: a submission whose exercise cell starts a detached process (``system()``
    through ``ctypes.CDLL(None)``, double ``fork`` + ``setsid``, ``Popen`` in a new session) that waits for
    run_autograder to write results.json and then rewrites it (2 points, the hidden test's source in the output).
    results.json must stay what run_autograder wrote: 1 point (slot_mapping), no hidden text; and no such process
    starts at all (the guard, seccomp and Landlock each refuse it; the grader kills what would escape them)."""
    root, marks = tmp_path / "autograder", tmp_path / "marks"
    marks.mkdir()
    results = root / "results" / "results.json"
    cell = (
        DETACHED.replace("@RESULTS@", repr(str(results)))
        .replace("@HIDDEN@", repr(str(root / "source" / "hidden_tests" / "extra.py")))
        .replace("@MARKS@", repr(str(marks)))
        .replace("@OVER@", repr(str(tmp_path / "run-over")))
    )
    try:
        data = autograde(bundle, tmp_path, {"lab.ipynb": [SLOT, cell]})  # results.json as run_autograder left it
        written = results.read_text()
    finally:
        (tmp_path / "run-over").touch()  # a forger rewrites results.json as soon as it sees this, and ends
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and not list(marks.glob("*-rewrote")):
        time.sleep(0.1)
    time.sleep(0.2)
    rewrote = sorted(p.name for p in marks.glob("*-rewrote"))
    after = results.read_text()
    assert rewrote == [] and after == written, f"rewritten after the run ({rewrote}): {after[:400]}"
    assert data["score"] == pytest.approx(1.0), data["tests"]  # slot_mapping's point, not the queue's
    started = sorted(p.name for p in marks.iterdir())
    assert started == [], f"a process outside the learner's was started: {started}"
    said = "\n".join(t["output"] for t in data["tests"] if t["name"].startswith("02.free_queue"))
    assert "ROUTES system: " in said, said  # the cell ran: each route was tried
    for route in ("system", "fork", "popen"):
        got = said.split(f"{route}: ", 1)[1].split(";", 1)[0].split("\n", 1)[0]
        assert got.startswith("denied ") or got not in ("returned 0", ""), (route, got, said)
