"""Gradescope: build an autograder zip, and grade one submission the way Gradescope runs it.

::

    pagedlab gradescope-bundle autograder.zip [--hidden-tests DIR] [--exercises ID ...]
                               [--timeout S] [--memory MB] [--no-e2e] [--e2e-seed N] [--e2e-points P]
                               [--points ID=P|FILE.toml] [--scoring all-or-nothing|partial]

The zip (upload it as a Gradescope "Autograder" configuration) holds:

* ``setup.sh`` - Gradescope runs it once, as root from ``/autograder/source``, when it builds the image: a
  virtual environment in ``/autograder/venv``, the kit installed from ``kit/`` (its source, ``labs/`` and
  ``data/`` included) with ``[triton]`` and every dependency pinned by ``constraints.txt`` (the kit's
  ``requirements.lock``), torch's CPU build, ``pagedlab fetch-model`` into ``/autograder/pagedlab-cache``, then
  :func:`prepare` (``--prepare``): the model converted and the end-to-end plan computed once
  (``source/e2e_plan.json``), so that no submission's run does either;
* ``run_autograder`` - Gradescope runs it for each submission: ``python -I -m
  pagedlab.grading.gradescope --root /autograder`` (``PAGEDLAB_AUTOGRADER_ROOT`` overrides the root of both
  scripts, ``PAGEDLAB_AUTOGRADER_PYTHON`` the interpreter: the tests use both);
* ``hidden_tests/`` - the instructor's hidden-tests folder (only in the zip; never shown to learners);
* ``pagedlab_autograder.json`` - the exercises graded, their points and scoring rule (``--points``,
  ``--scoring``: as ``pagedlab grade`` takes them), the time and memory limits, the end-to-end
  test's settings (``pagedlab grade``'s ``--no-e2e``, ``--e2e-seed``, ``--e2e-points``).

Grading a submission (:func:`run`): the WHOLE ``<root>/submission`` folder is ONE learner - every
notebook in it, at any depth, is that learner's work (several labs in several notebooks). An
exercise found in two notebooks is graded from the first notebook (in path order) where its cell
runs, and the feedback says which. ``<root>/results/results.json`` is always written and always
valid, whatever the submission holds (nothing, a PDF, a corrupt notebook, code that crashes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pagedlab
from pagedlab import __version__
from pagedlab.errors import PagedLabError
from pagedlab.grading import registry

if TYPE_CHECKING:
    from pagedlab.grading.e2e import E2EPlan
    from pagedlab.grading.grade import E2EOptions

__all__ = [
    "CONFIG_NAME",
    "ROOT_ENV",
    "BundleError",
    "add_arguments",
    "build_bundle",
    "main",
    "prepare",
    "run",
]

CONFIG_NAME = "pagedlab_autograder.json"
#: The end-to-end plan (prompts and the kit's reference tokens), computed once by ``setup.sh``.
PLAN_NAME = "e2e_plan.json"
#: The image's model cache (``$PAGEDLAB_CACHE_DIR`` of both scripts), under the root.
CACHE_NAME = "pagedlab-cache"
#: Environment variable overriding the autograder root (default ``/autograder``).
ROOT_ENV = "PAGEDLAB_AUTOGRADER_ROOT"
#: Files and folders of the kit's source tree that ``pip install`` needs.
_KIT_FILES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "setup.cfg")
_KIT_DIRS = ("pagedlab", "kernels", "data", "labs")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, from /autograder/source, when it builds the autograder image.
# Installs pagedlab {version}[triton] with every dependency pinned (constraints.txt), fetches the model,
# converts it, and computes the end-to-end test's reference tokens, so that no submission's run does.
# PAGEDLAB_AUTOGRADER_ROOT (default /autograder), PAGEDLAB_PYTHON (python3), PAGEDLAB_TORCH_INDEX (torch's
# CPU wheel index; empty: none) and PAGEDLAB_PIP_CACHE=1 (keep pip's cache) are for testing the image.
set -euo pipefail
cd "$(dirname "$0")"
ROOT="${{PAGEDLAB_AUTOGRADER_ROOT:-/autograder}}"
PY="${{PAGEDLAB_PYTHON:-python3}}"
TORCH_INDEX="${{PAGEDLAB_TORCH_INDEX-https://download.pytorch.org/whl/cpu}}"
export PAGEDLAB_CACHE_DIR="$ROOT/{cache}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pagedlab needs Python >= 3.11: choose a newer base image")'
if ! "$PY" -m venv --help >/dev/null 2>&1; then apt-get update && apt-get install -y python3-venv; fi
"$PY" -m venv "$ROOT/venv"
pip_args=(-c constraints.txt)
if [ -z "${{PAGEDLAB_PIP_CACHE:-}}" ]; then pip_args+=(--no-cache-dir); fi
if [ -n "$TORCH_INDEX" ]; then pip_args+=(--extra-index-url "$TORCH_INDEX"); fi
"$ROOT/venv/bin/python" -m pip install --disable-pip-version-check "${{pip_args[@]}}" "./kit[triton]"
"$ROOT/venv/bin/pagedlab" fetch-model --no-progress
"$ROOT/venv/bin/python" -I -m pagedlab.grading.gradescope --prepare --root "$ROOT"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission; it always writes $ROOT/results/results.json.
set -uo pipefail
ROOT="${{PAGEDLAB_AUTOGRADER_ROOT:-/autograder}}"
PY="${{PAGEDLAB_AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
export PAGEDLAB_CACHE_DIR="${{PAGEDLAB_CACHE_DIR:-$ROOT/{cache}}}"
exec "$PY" -I -m pagedlab.grading.gradescope --root "$ROOT"
"""


class BundleError(PagedLabError, ValueError):
    """The autograder zip cannot be built (no kit source tree, a bad option)."""


# --- building the zip ---------------------------------------------------------------------------------
def _kit_root() -> Path:
    """The source tree of the running kit (the folder holding ``pyproject.toml``).

    Raises:
        BundleError: the kit was installed from a wheel, without its source tree.
    """
    root = Path(pagedlab.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        raise BundleError(f"no pyproject.toml next to {root / 'pagedlab'}: build the bundle from a clone of the kit")
    return root


def _add_tree(zf: zipfile.ZipFile, src: Path, arc: str) -> None:
    """Add ``src`` (file or folder, caches and hidden files skipped) to the zip as ``arc``."""
    if src.is_file():
        zf.write(src, arc)
        return
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_file() and not any(
            part.startswith(".") or part == "__pycache__" or part.endswith(".egg-info") for part in rel.parts
        ):
            zf.write(p, f"{arc}/{rel.as_posix()}")


def _script(zf: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o100755 << 16  # an executable file
    zf.writestr(info, text)


def _pinned(lock: Path) -> str:
    """The lock file's ``name==version`` lines (comments dropped); every line must be pinned.

    Raises:
        BundleError: a requirement line without ``==``.
    """
    lines = [ln.split("#", 1)[0].strip() for ln in lock.read_text(encoding="utf-8").splitlines()]
    reqs = [ln for ln in lines if ln]
    loose = [r for r in reqs if "==" not in r]
    if loose:
        raise BundleError(f"{lock}: not pinned with '==': {', '.join(loose)}")
    return "\n".join(reqs) + "\n"


def build_bundle(
    out_zip: Any,
    hidden_tests: Any | None = None,
    exercises: list[str] | None = None,
    timeout: float = 300.0,
    memory_mb: int = 4096,
    e2e: E2EOptions | None = None,
    reference_earns_points: bool = True,
    points: Mapping[str, float] | None = None,
    scoring: str | None = None,
) -> Path:
    """Write the Gradescope autograder zip (see the module docstring); return its path.

    Args:
        out_zip: the zip to write (its folder is created).
        hidden_tests: folder of hidden-test ``*.py`` files, copied into the zip.
        exercises: ids graded (default: every exercise of the course); their points are the total.
        timeout: wall-clock seconds for one submission.
        memory_mb: memory limit of the learner's process.
        e2e: the end-to-end test's settings, as ``pagedlab grade`` takes them (default: on, a random
            seed per submission, 0 points).
        reference_earns_points: an exercise handed in as the kit's own implementation earns its points
            (the default; False: 0 points). Flagged either way.
        points: exercise id -> points (``--points``, :func:`pagedlab.grading.points.parse_points`); the
            others keep the registry's (1).
        scoring: ``--scoring`` (default ``all-or-nothing``, :mod:`pagedlab.grading.points`).

    Raises:
        BundleError: a bad option, a missing folder, or no kit source tree.
        registry.UnknownExerciseError: an unknown exercise id.
    """
    from pagedlab.grading.grade import E2EOptions  # lazy: off the top, so run() catches its import failure
    from pagedlab.grading.points import PointsError, parse_scoring  # lazy: run() catches its import failure

    try:
        scoring = parse_scoring(scoring)
    except PointsError as e:
        raise BundleError(str(e)) from e
    if timeout <= 0 or memory_mb < 128:
        raise BundleError("--timeout must be > 0 and --memory >= 128 (MB)")
    e2e = e2e if e2e is not None else E2EOptions()
    if e2e.points < 0:
        raise BundleError(f"--e2e-points must be >= 0, got {e2e.points:g}")
    hidden = Path(hidden_tests) if hidden_tests else None
    if hidden is not None and not hidden.is_dir():
        raise BundleError(f"--hidden-tests {hidden_tests}: no such folder")
    ids = [registry.get(e).id for e in exercises] if exercises else [ex.id for ex in registry.all_exercises()]
    root = _kit_root()
    out = Path(out_zip)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = {
        "exercises": ids,
        "timeout": timeout,
        "memory_mb": memory_mb,
        "e2e": asdict(e2e),
        "reference_earns_points": reference_earns_points,
        "points": {eid: float(p) for eid, p in (points or {}).items()},
        "scoring": scoring,
        "pagedlab": __version__,
    }
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        _script(zf, "setup.sh", SETUP_SH.format(version=__version__, cache=CACHE_NAME))
        _script(zf, "run_autograder", RUN_AUTOGRADER.format(cache=CACHE_NAME))
        zf.writestr("constraints.txt", _pinned(root / "requirements.lock"))
        zf.writestr(CONFIG_NAME, json.dumps(config, indent=1) + "\n")
        for name in _KIT_FILES + _KIT_DIRS:
            if (root / name).exists():
                _add_tree(zf, root / name, f"kit/{name}")
        if hidden is not None:  # the whole folder: its tests may read data files next to them
            _add_tree(zf, hidden, "hidden_tests")
    return out


# --- grading one submission -----------------------------------------------------------------------------
def _config(source: Path) -> dict[str, Any]:
    path = source / CONFIG_NAME
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return data if isinstance(data, dict) else {}


def _failure_results(message: str, exercises: list[str], points: Mapping[str, float] | None = None) -> dict[str, Any]:
    """A valid results.json giving 0 for every exercise (worth ``points``, else the registry's), with
    ``message`` for the learner."""
    from pagedlab.grading.points import points_of  # lazy: off the top, so run() catches its import failure

    tests = []
    for eid in exercises:
        try:
            worth = points_of(eid, points)
        except registry.UnknownExerciseError:
            continue
        tests.append(
            {
                "name": eid,
                "score": 0.0,
                "max_score": worth,
                "status": "failed",
                "output": message,
                "visibility": "visible",
            }
        )
    return {"score": 0.0, "output": message, "stdout_visibility": "hidden", "tests": tests}


def prepare(root: Any | None = None) -> str:
    """What ``setup.sh`` runs once, when Gradescope builds the image: convert the model and compute the
    end-to-end plan (prompts and the kit's reference tokens) into ``<root>/source/e2e_plan.json``, so that
    no submission's run does either. A zip whose settings leave the seed random draws it here, once per
    image (every submission of the image is served the same prompts; learners never see the tokens).
    Returns one line saying what was done.

    Raises:
        PagedLabError: the model is not cached (``pagedlab fetch-model`` first) or cannot be read.
    """
    from pagedlab.grading import e2e  # lazy: off the top, so run() catches its import failure
    from pagedlab.grading.grade import E2EOptions  # lazy: off the top, so run() catches its import failure
    from pagedlab.grading.triton_mode import use_interpreter_without_gpu  # lazy: run() catches its import failure
    from pagedlab.model.loader import load_model  # lazy: start-up time (torch)

    base = _root(root)
    config = _config(base / "source")
    # first: the conversion below imports triton (through torch), and the triton configuration's reference
    # needs the interpreter switched on before that, as grade() does
    use_interpreter_without_gpu()
    load_model(None, tokenizer_only=True)  # converts the GGUF into the image's cache
    opts = E2EOptions(**config.get("e2e", {}))
    if not opts.enabled:
        return "model converted; end-to-end test off"
    seed = opts.seed if opts.seed is not None else secrets.randbelow(2**31)
    e2e_plan = e2e.plan(seed, opts.prompts, opts.tokens)
    data = {"options": dataclasses.asdict(opts), "plan": e2e_plan.to_json()}
    (base / "source" / PLAN_NAME).write_text(json.dumps(data), encoding="utf-8")
    return f"model converted; {e2e_plan.describe()}"


def _stored_plan(source: Path, opts: E2EOptions) -> E2EPlan | None:
    """The plan ``setup.sh`` computed (:func:`prepare`), when it is there and made for ``opts`` and this
    model file; None otherwise (a zip built before it existed: :func:`grade` computes one)."""
    from pagedlab.grading.e2e import E2EPlan  # lazy: off the top, so run() catches its import failure
    from pagedlab.model.fetch import default_cache_dir  # lazy: off the top, so run() catches its import failure

    try:
        data = json.loads((source / PLAN_NAME).read_text(encoding="utf-8"))
        plan = E2EPlan.from_json(data["plan"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    wanted = dataclasses.asdict(opts)
    stored = data.get("options", {})
    if any(stored.get(k) != wanted[k] for k in ("prompts", "tokens")) or opts.seed not in (None, stored.get("seed")):
        return None
    if not Path(plan.model).is_file():
        return None
    return dataclasses.replace(plan, cache_dir=str(default_cache_dir()))


def _student_id(metadata: Path) -> str:
    """The submitters' Gradescope user ids (``users[].id`` of ``submission_metadata.json``; a group: all of them,
    joined by spaces), or "" when the file is missing, unreadable or holds none - said in one line on stderr
    (Gradescope shows it to the instructor in the autograder output), never silently."""
    try:
        users = json.loads(metadata.read_text(encoding="utf-8")).get("users") or []
        ids = " ".join(str(u["id"]) for u in users if isinstance(u, dict) and u.get("id") is not None)
        why = "" if ids else "it names no users[].id"
    except (OSError, ValueError, AttributeError, TypeError) as e:
        ids, why = "", f"{type(e).__name__}: {e}"
    if why:
        print(f"pagedlab: no student id from {metadata} ({why}); the student_id field stays empty", file=sys.stderr)
    return ids


def _grade_submission(root: Path, config: dict[str, Any], exercises: list[str]) -> dict[str, Any]:
    """Grade ``root/submission`` as one learner; return its Gradescope dict."""
    from pagedlab.grading import report  # lazy: off the top, so run() catches its import failure
    from pagedlab.grading.grade import E2EOptions, Learner, grade  # lazy: run() catches its import failure
    from pagedlab.grading.points import DEFAULT_SCORING  # lazy: off the top, so run() catches its import failure
    from pagedlab.grading.submissions import _notebooks_under  # lazy: off the top, so run() catches its import failure

    sub = root / "submission"
    learner = Learner("submission", str(sub), student_id=_student_id(root / "submission_metadata.json"))
    if sub.is_dir():
        learner.notebooks = _notebooks_under(sub, learner.problems)
    if not learner.notebooks:
        learner.problems.append("no notebook (.ipynb) in the submission: upload your lab notebook(s)")
    hidden = root / "source" / "hidden_tests"
    opts = E2EOptions(**config.get("e2e", {}))
    stored = _stored_plan(root / "source", opts) if opts.enabled else None
    with tempfile.TemporaryDirectory(prefix="pagedlab-gradescope-") as tmp:
        results = grade(
            [learner],
            tmp,
            hidden if hidden.is_dir() else None,
            timeout=float(config.get("timeout", 300.0)),
            memory_mb=int(config.get("memory_mb", 4096)),
            exercises=exercises,
            quiet=True,
            e2e=opts,
            e2e_plan=stored,
            reference_earns_points=bool(config.get("reference_earns_points", True)),
            points=config.get("points") or None,
            scoring=str(config.get("scoring") or DEFAULT_SCORING),
        )
    data = report.gradescope_dict(results[0])
    if opts.enabled:
        data["extra_data"]["e2e_plan"] = (
            f"computed when the image was built (seed {stored.seed})" if stored else "computed in this run"
        )
    return data


def _root(root: Any | None) -> Path:
    return Path(root or os.environ.get(ROOT_ENV) or "/autograder")


def run(root: Any | None = None) -> Path:
    """Grade ``<root>/submission`` and write ``<root>/results/results.json``; return that path.

    ``root`` defaults to ``$PAGEDLAB_AUTOGRADER_ROOT`` or ``/autograder``. Never raises for a bad
    submission or a failure of the grader: the results then say what happened, with 0 points.
    """
    base = _root(root)
    config = _config(base / "source")
    exercises = [str(e) for e in config.get("exercises") or [ex.id for ex in registry.all_exercises()]]
    try:
        data = _grade_submission(base, config, exercises)
    except Exception as e:  # noqa: BLE001 - Gradescope must get a results.json in every case
        data = _failure_results(
            f"the autograder failed ({type(e).__name__}: {e}); please tell the instructor",
            exercises,
            config.get("points") or None,
        )
    # lazy: report stays off the module top (run()'s try imported it first)
    from pagedlab.grading.report import write_text_atomic

    out = base / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(data, indent=1, ensure_ascii=False))  # escaped, never half-written
    return out


# --- CLI --------------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``pagedlab gradescope-bundle`` options."""
    # lazy: grader modules stay off the module top: run() catches their import failure
    from pagedlab.grading.grade import add_e2e_arguments, add_limit_arguments, add_reference_argument
    from pagedlab.grading.points import add_points_argument, add_scoring_argument  # lazy: as above

    parser.add_argument("out", metavar="OUT.zip", help="the autograder zip to write")
    parser.add_argument("--hidden-tests", metavar="DIR", default=None, help="folder of hidden-test files to include")
    parser.add_argument(
        "--exercises",
        metavar="ID",
        nargs="+",
        default=None,
        help="exercise ids graded (default: every exercise of the course)",
    )
    add_limit_arguments(parser, 300.0, 4096, "submission")
    add_points_argument(parser)
    add_scoring_argument(parser)
    add_e2e_arguments(parser)
    add_reference_argument(parser)


def main(args: argparse.Namespace) -> int:
    """Build the zip; print where it is."""
    from pagedlab.grading.grade import GradeError, e2e_options  # lazy: off the top, so run() catches its import failure
    from pagedlab.grading.points import PointsError, parse_points  # lazy: run() catches its import failure

    try:
        e2e = e2e_options(args)
    except GradeError as e:
        raise BundleError(str(e)) from e
    try:
        out = build_bundle(
            args.out,
            args.hidden_tests,
            args.exercises,
            args.timeout,
            args.memory,
            e2e,
            args.reference_earns_points == "yes",
            parse_points(args.points),
            args.scoring,
        )
    except (registry.UnknownExerciseError, PointsError) as e:
        raise BundleError(str(e)) from e
    print(f"wrote {out}: upload it as the assignment's autograder on Gradescope")
    return 0


def _run_main(argv: list[str]) -> int:
    """``python -m pagedlab.grading.gradescope --root DIR`` (what ``run_autograder`` calls)."""
    parser = argparse.ArgumentParser(prog="python -m pagedlab.grading.gradescope")
    parser.add_argument("--root", default=None, help=f"autograder root (default: ${ROOT_ENV} or /autograder)")
    parser.add_argument(
        "--prepare", action="store_true", help="build-time step of setup.sh: convert the model, compute the e2e plan"
    )
    args = parser.parse_args(argv)
    if args.prepare:
        print(f"pagedlab autograder image: {prepare(args.root)}")
        return 0
    path = run(args.root)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover - run by run_autograder
    sys.exit(_run_main(sys.argv[1:]))
