"""The Gradescope autograder image, built and run as Gradescope does (issue 22, item 1).

One test, on purpose (a venv install is the slow part): build the zip, unpack it into ``<tmp>/autograder/source``,
run its ``setup.sh`` as Gradescope does when it builds the image (``bash setup.sh`` from the source folder; a
fresh venv, the kit installed from the zip's ``kit/`` with ``[triton]`` and every pin of ``constraints.txt``, the
model fetched and converted, the end-to-end reference computed), then, for three submissions, copy
``run_autograder`` to the root and run it from there as Gradescope does, and check each ``results.json`` against
Gradescope's autograder specification: the course solutions earn every point of every exercise (the Triton one
included) and the end-to-end test; a blank lab earns 0; a lab with one exercise done earns that exercise.

The only departures from Gradescope: the root is ``$PAGEDLAB_AUTOGRADER_ROOT`` (a temp folder, not
``/autograder``), the interpreter of the venv is this one's base Python (``PAGEDLAB_PYTHON``), pip keeps its cache
(``PAGEDLAB_PIP_CACHE=1``: the machine's wheels are reused, so the install takes minutes, not a download), and the
model file is copied into the image's cache from this machine's (``fetch-model`` then verifies it, as it does
after a download). Every other setting comes from the environment pip itself reads (``PIP_FIND_LINKS``, pip.conf).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest

from pagedlab.grading import registry
from pagedlab.grading.grade import E2EOptions
from pagedlab.grading.gradescope import CACHE_NAME, PLAN_NAME, build_bundle
from pagedlab.model.fetch import model_path
from tests.grading.gradescope_results import validate_results

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.gradescope, pytest.mark.model, pytest.mark.timeout(1800)]

#: Gradescope's results.json keys (autograder specification, "Output format") and each test's keys.
TOP_KEYS = {"score", "execution_time", "output", "output_format", "visibility", "stdout_visibility", "extra_data"}
TEST_KEYS = {"score", "max_score", "status", "name", "number", "output", "output_format", "tags", "visibility"}


def _env(root: Path) -> dict[str, str]:
    """This environment without this checkout's venv or Python paths, with the root overridden."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PAGEDLAB_CACHE_DIR", "PAGEDLAB_AUTOGRADER_PYTHON"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env["PAGEDLAB_AUTOGRADER_ROOT"] = str(root)
    # a CI machine shared by many jobs: a test calling the learner's code hundreds of times across the process
    # boundary waits for the scheduler at each call (07.insert's random test ran past 30 s at a load of 20 on 2
    # cores); each test's limit x4, the submission's total (the bundle's timeout) unchanged
    env.setdefault("PAGEDLAB_GRADE_TIME_SCALE", "4")
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``cmd`` in a session of its own; on a timeout its whole process group is killed (pip included)."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{cmd[-1]} did not finish in {timeout:g} s; its output ends:\n{out[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def _local_torch_wheel(env: dict[str, str]) -> bool:
    """pip's ``PIP_FIND_LINKS`` holds torch's CPU wheel: torch's own index need not be asked (no network)."""
    dirs = [Path(d) for d in env.get("PIP_FIND_LINKS", "").split() if d and not d.startswith("http")]
    return any(any(d.glob("torch-*+cpu-*.whl")) for d in dirs if d.is_dir())


def _schema_problems(data: dict[str, Any]) -> list[str]:
    """validate_results plus the specification's key names (a misspelt key is silently ignored there)."""
    problems = validate_results(data)
    problems += [f"unknown top-level key {k!r}" for k in set(data) - TOP_KEYS - {"tests"}]
    for i, t in enumerate(data.get("tests", [])):
        problems += [f"tests[{i}]: unknown key {k!r}" for k in set(t) - TEST_KEYS]
        if t.get("status") not in (None, "passed", "failed"):
            problems.append(f"tests[{i}].status {t.get('status')!r}")
    if not isinstance(data.get("extra_data", {}), dict):
        problems.append("extra_data is not an object")
    return problems


def _lab_with(lab: str, solved: set[str]) -> nbformat.NotebookNode:
    """``labs/<lab>`` (the learner's blank notebook) with the exercise cells of ``solved`` filled in."""
    nb = nbformat.read(str(ROOT / "labs" / lab), as_version=4)
    for cell in nb.cells:
        first = cell.source.split("\n", 1)[0].strip() if cell.cell_type == "code" else ""
        eid = first.removeprefix("# EXERCISE ").strip() if first.startswith("# EXERCISE ") else ""
        if eid in solved:
            cell.source = registry.snippet_source(eid)
            solved = solved - {eid}
    assert not solved, f"no exercise cell for {solved} in labs/{lab}"
    return nb


def _autograde(root: Path, notebooks: dict[str, Any], env: dict[str, str]) -> tuple[dict[str, Any], float, str]:
    """One submission as Gradescope runs it: a fresh submission/ and results/, ``/autograder/run_autograder``
    run from the root. Returns (results.json, seconds, stdout)."""
    for d in ("submission", "results"):
        shutil.rmtree(root / d, ignore_errors=True)
        (root / d).mkdir()
    for name, nb in notebooks.items():
        if isinstance(nb, Path):
            shutil.copyfile(nb, root / "submission" / name)
        else:
            nbformat.write(nb, str(root / "submission" / name))
    start = time.monotonic()
    proc = _run([str(root / "run_autograder")], root, env, 900)
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-4000:]
    data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert _schema_problems(data) == [], data
    return data, seconds, proc.stdout


def test_the_autograder_image_builds_and_grades(tmp_path: Path) -> None:
    if not model_path().is_file():
        pytest.skip("the model is not cached here (`pagedlab fetch-model`): the image's fetch step would download it")
    root = tmp_path / "autograder"
    # the course solutions are the kit's own code: flagged as reference hand-ins, and here allowed to earn points
    bundle = build_bundle(
        tmp_path / "autograder.zip", e2e=E2EOptions(points=1.0), timeout=420, reference_earns_points=True
    )
    with zipfile.ZipFile(bundle) as zf:  # as unzip does: with the files' modes (run_autograder is executable)
        zf.extractall(root / "source")
        for info in zf.infolist():
            if info.external_attr >> 16:
                (root / "source" / info.filename).chmod((info.external_attr >> 16) & 0o777)
    (root / CACHE_NAME).mkdir()
    shutil.copy2(model_path(), root / CACHE_NAME / model_path().name)
    env = _env(root)

    # --- the image build (Gradescope: `bash setup.sh` as root, in /autograder/source) ---
    base_python = getattr(sys, "_base_executable", sys.executable)
    start = time.monotonic()
    build_env = dict(env, PAGEDLAB_PYTHON=base_python, PAGEDLAB_PIP_CACHE="1")
    if _local_torch_wheel(env):
        build_env["PAGEDLAB_TORCH_INDEX"] = ""  # the same torch CPU wheel, from the local folder pip is given
    built = _run(["bash", "setup.sh"], root / "source", build_env, 900)
    build_s = time.monotonic() - start
    log = built.stdout
    steps = [ln for ln in log.splitlines() if "%|" not in ln]  # progress bars left out
    print(f"--- setup.sh ({build_s:.0f} s), last lines ---\n" + "\n".join(steps[-12:]))
    assert built.returncode == 0, log[-6000:]
    assert "pagedlab autograder image: model converted; end-to-end:" in log
    assert "not run: triton kernel" not in log, log[-3000:]  # the plan holds the triton configuration's reference
    py = root / "venv" / "bin" / "python"
    where = subprocess.run(
        [
            str(py),
            "-I",
            "-c",
            "import pagedlab, triton, pagedlab.data as d; print(pagedlab.__file__, d.labs_directory())",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(root / "venv") in where and str(ROOT) not in where, where
    assert (root / "source" / PLAN_NAME).is_file()
    converted = sorted(p.name for p in (root / CACHE_NAME / "converted").iterdir())
    assert converted, "setup.sh did not convert the model"
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")  # as Gradescope does

    points = {ex.id: ex.points for ex in registry.all_exercises()}
    timings: dict[str, float] = {}

    # --- the course solutions: every point of every exercise, and the end-to-end test ---
    solutions = {p.name: p for p in sorted((ROOT / "solutions").glob("*.ipynb"))}
    data, timings["solutions"], _ = _autograde(root, solutions, env)
    earned: dict[str, float] = {}
    for t in data["tests"]:
        earned[t["name"].split(":")[0]] = earned.get(t["name"].split(":")[0], 0.0) + t["score"]
    short = {eid: earned.get(eid, 0.0) for eid in points if abs(earned.get(eid, 0.0) - points[eid]) > 1e-6}
    assert not short, (short, data["output"])
    assert abs(data["score"] - (sum(points.values()) + 1.0)) < 1e-6, data
    e2e = next(t for t in data["tests"] if t["name"].startswith("end-to-end"))
    assert e2e["score"] == 1.0 and "triton kernel" in e2e["output"], e2e
    assert "Is it from this course" not in data["output"], data["output"]
    assert "00_welcome.ipynb: lab 00 of this course has no graded exercises" in data["output"]
    assert data["extra_data"]["reference"] == sorted(points), data["extra_data"]  # the instructor sees it
    instructor = [t for t in data["tests"] if t["visibility"] == "hidden"]
    assert len(instructor) == 1 and "08.triton_load_kv_tile: hands in the kit's reference" in instructor[0]["output"]
    assert data["extra_data"]["e2e"].startswith("end-to-end: 3 prompts identical"), data["extra_data"]
    # the run used the image's plan and its converted model: no new conversion, no reference served again
    assert sorted(p.name for p in (root / CACHE_NAME / "converted").iterdir()) == converted
    seed = json.loads((root / "source" / PLAN_NAME).read_text())["plan"]["seed"]
    assert data["extra_data"]["e2e_plan"] == f"computed when the image was built (seed {seed})", data["extra_data"]

    # --- a blank lab: 0 ---
    data, timings["blank"], _ = _autograde(root, {"02_block_pool.ipynb": _lab_with("02_block_pool.ipynb", set())}, env)
    assert data["score"] == 0 and all(t["score"] == 0 for t in data["tests"]), data

    # --- one exercise of the lab done: its points (and the end-to-end test, where that part is plugged) ---
    partial = _lab_with("02_block_pool.ipynb", {"02.free_queue"})
    data, timings["partial"], _ = _autograde(root, {"02_block_pool.ipynb": partial}, env)
    got = {n: t["score"] for n, t in ((t["name"], t) for t in data["tests"])}
    assert abs(sum(s for n, s in got.items() if n.startswith("02.free_queue")) - points["02.free_queue"]) < 1e-6
    assert all(s == 0 for n, s in got.items() if n.startswith("02.slot_mapping")), got
    assert abs(data["score"] - (points["02.free_queue"] + 1.0)) < 1e-6, data
    print(f"image build {build_s:.0f} s; run_autograder: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
