"""Reference hand-ins are flagged by any route (issue 22, item 3): the kit's object itself (use_reference, an import,
a module attribute), a subclass of it, an ``exec`` of the shipped solution file, a pasted copy, a wrapper calling
it; the learner's own code is not. The flag reaches grades.csv, the feedback page, Gradescope's instructor-only
test and ``extra_data``; the points are withheld unless the instructor passes ``--reference-earns-points``."""

from __future__ import annotations

import csv
import html
import json
import types
from pathlib import Path
from typing import Any

import pytest

from pagedlab.grading import registry, use_reference
from pagedlab.grading.grade import E2EOptions, grade
from pagedlab.grading.provenance import FLAG_PREFIX, Provenance, RunWatch
from tests.grading.helpers import variant, write_notebook

IDS = ["02.free_queue", "02.slot_mapping"]
#: The learner's own slot_mapping: the same arithmetic, written with other names.
OWN_SLOT = (
    "# EXERCISE 02.slot_mapping\n"
    "def slot_mapping(block_table, positions, block_size):\n"
    "    out = []\n"
    "    for p in positions:\n"
    "        out.append(block_table[p // block_size] * block_size + p % block_size)\n"
    "    return out\n"
)


def _exec(src: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(src, "<cell>", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def prov() -> Provenance:
    return Provenance(IDS + ["99.not_an_exercise"])


def test_every_route_to_the_reference_is_flagged(prov: Provenance) -> None:
    from pagedlab.core import block_pool

    routes = {
        "use_reference": use_reference("free_queue", namespace={}, quiet=True),
        "module attribute": block_pool.FreeKVCacheBlockQueue,
        "subclass": _exec("from pagedlab.core.block_pool import FreeKVCacheBlockQueue as Q\nclass F(Q): pass")["F"],
        "subclass with a method of its own": _exec(
            "from pagedlab.core.block_pool import FreeKVCacheBlockQueue as Q\n"
            "class F(Q):\n    def popleft(self):\n        return super().popleft()\n"
        )["F"],
        "pasted copy of the library module": _exec(Path(block_pool.__file__).read_text())["FreeKVCacheBlockQueue"],
    }
    for route, obj in routes.items():
        assert prov.check("02.free_queue", obj).startswith(FLAG_PREFIX), route
    slot_routes = {
        "exec of the shipped file": _exec(f"exec(open({str(registry.snippet_path('02.slot_mapping'))!r}).read())")[
            "slot_mapping"
        ],
        "the solution cell pasted": _exec(registry.snippet_source("02.slot_mapping"))["slot_mapping"],
        "a wrapper": _exec(
            "from pagedlab.grading import use_reference\n_ref = use_reference('slot_mapping', namespace={}, quiet=True)\n"
            "def slot_mapping(t, p, b):\n    return _ref(t, p, b)\n"
        )["slot_mapping"],
    }
    for route, obj in slot_routes.items():
        assert prov.check("02.slot_mapping", obj).startswith(FLAG_PREFIX), route


def test_own_code_is_not_flagged(prov: Provenance) -> None:
    assert prov.check("02.slot_mapping", _exec(OWN_SLOT)["slot_mapping"]) == ""
    renamed = variant("02.slot_mapping", ("pos", "position"))  # one local name differs: not the kit's code
    assert prov.check("02.slot_mapping", _exec(renamed)["slot_mapping"]) == ""
    kit = _exec(registry.snippet_source("02.slot_mapping"))["slot_mapping"]  # the same bytecode, other local names
    names = tuple(f"my_{v}" for v in kit.__code__.co_varnames)
    same_ops = types.FunctionType(kit.__code__.replace(co_varnames=names), kit.__globals__)
    assert prov.check("02.slot_mapping", same_ops) == ""
    # a class of its own with one method changed is not the kit's either
    from pagedlab.core import block_pool

    src = (
        Path(block_pool.__file__)
        .read_text()
        .replace("self.num_free_blocks -= 1", "self.num_free_blocks = self.num_free_blocks - 1", 1)
    )
    assert src != Path(block_pool.__file__).read_text()
    own = _exec(src)["FreeKVCacheBlockQueue"]
    assert prov.check("02.free_queue", own) == ""
    # another exercise's reference, or an object that is no function or class
    assert prov.check("02.slot_mapping", block_pool.FreeKVCacheBlockQueue) == ""
    assert prov.check("02.slot_mapping", 42) == "" and prov.check("99.not_an_exercise", len) == ""


def test_the_reference_reached_at_run_time_is_seen_when_its_code_runs(prov: Provenance) -> None:
    """provenance.RunWatch: a function that fetches the reference when called (through a kit function's
    ``__globals__``) passes the static check; its code running is what gives it away, for that exercise only."""
    fetching = _exec(SUBMISSIONS["globals"][0])["slot_mapping"]
    own = _exec(OWN_SLOT)["slot_mapping"]
    assert prov.check("02.slot_mapping", fetching) == ""  # nothing of the reference in the object itself
    watch = RunWatch(prov)
    watch.start()
    try:
        assert own([3, 1], [0, 5], 4) == [12, 5] and watch.ran("02.slot_mapping") == ""
        assert fetching([3, 1], [0, 5], 4) == [12, 5]
        flag = watch.ran("02.slot_mapping")
        assert flag.startswith(FLAG_PREFIX) and "slot_mapping" in flag and "reached at run time" in flag, flag
        assert watch.ran("02.free_queue") == ""  # another exercise's reference did not run
        watch.forget()
        assert watch.ran("02.slot_mapping") == ""
        from pagedlab.core.block_pool import FreeKVCacheBlockQueue, KVCacheBlock

        queue = _exec(SUBMISSIONS["delegating"][0])["FreeKVCacheBlockQueue"]([KVCacheBlock(i) for i in range(3)])
        assert prov.check("02.free_queue", type(queue)) == ""
        assert queue.popleft().block_id == 0 and queue.num_free_blocks == 2
        assert "FreeKVCacheBlockQueue.popleft" in watch.ran("02.free_queue")
        assert isinstance(queue._q, FreeKVCacheBlockQueue)
    finally:
        watch._profiler.disable()


SUBMISSIONS = {
    "attribute": [
        "# EXERCISE 02.free_queue\nimport pagedlab.core.block_pool as bp\nFreeKVCacheBlockQueue = bp.FreeKVCacheBlockQueue"
    ],
    "subclass": [
        "# EXERCISE 02.free_queue\nimport importlib\n"
        "class FreeKVCacheBlockQueue(importlib.import_module('pagedlab.core.' + 'block_pool').FreeKVCacheBlockQueue):\n"
        "    pass"
    ],
    "exec": [
        "# EXERCISE 02.slot_mapping\nimport os, pagedlab.course.exercises as E\n"
        "exec(open(os.path.join(os.path.dirname(E.__file__), 'solutions', '02_slot_mapping.py')).read())"
    ],
    "use_reference": [
        "# EXERCISE 02.slot_mapping\nfrom pagedlab.grading import use_reference\nuse_reference('slot_mapping')"
    ],
    "honest": [OWN_SLOT],
    # an unused import of an installed package with native code (loaded before the filter: issue 34)
    "unused_pandas": [OWN_SLOT.replace("\ndef ", "\nimport pandas\n\ndef ", 1)],
    # reached at run time (provenance.RunWatch): nothing of the reference is in the object handed in
    "globals": [
        "# EXERCISE 02.slot_mapping\nfrom pagedlab.grading import check\n"
        "def slot_mapping(block_table, positions, block_size):\n"
        "    ref = check.__globals__['registry'].get('02.slot_mapping').get_reference()\n"
        "    return ref(block_table, positions, block_size)\n"
    ],
    "delegating": [
        "# EXERCISE 02.free_queue\nfrom pagedlab.grading import check\n"
        "class FreeKVCacheBlockQueue:\n"
        "    def __init__(self, blocks):\n"
        "        kind = check.__globals__['registry'].get('02.free_queue').get_reference()\n"
        "        object.__setattr__(self, '_q', kind(blocks))\n"
        "    def __getattr__(self, name):\n"
        "        return getattr(self._q, name)\n"
        "    def __setattr__(self, name, value):\n"
        "        setattr(self._q, name, value)\n"
    ],
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("prov")
    for name, cells in SUBMISSIONS.items():
        write_notebook(root / "subs" / f"{name}.ipynb", cells)
    out: dict[str, Any] = {}
    for earns in (False, True):
        o = root / f"out-{earns}"
        results = grade([root / "subs"], o, exercises=IDS, quiet=True, e2e=E2EOptions(enabled=False),
                        reference_earns_points=earns)  # fmt: skip
        rows = {r["learner"]: r for r in csv.DictReader((o / "grades.csv").read_text(encoding="utf-8").splitlines())}
        out[earns] = {"results": {r.learner.name: r for r in results}, "rows": rows, "out": o}
    return out


@pytest.mark.parametrize("name,eid", [("attribute", "02.free_queue"), ("subclass", "02.free_queue"),
                                      ("exec", "02.slot_mapping"), ("use_reference", "02.slot_mapping"),
                                      ("globals", "02.slot_mapping"), ("delegating", "02.free_queue")])  # fmt: skip
def test_a_reference_hand_in_is_flagged_everywhere_and_earns_only_if_allowed(
    graded: dict[str, Any], name: str, eid: str
) -> None:
    points = registry.get(eid).points
    for earns in (False, True):
        res, row, out = graded[earns]["results"][name], graded[earns]["rows"][name], graded[earns]["out"]
        er = res.exercises[eid]
        assert er.found and er.reference.startswith(FLAG_PREFIX), (name, er)
        assert all(o.passed for o in er.outcomes), "its tests pass: it is the reference"
        assert er.score == (points if earns else 0.0), (name, earns, er.score)
        assert row["reference"] == eid and FLAG_PREFIX in row["flags"], row
        page = (out / "feedback" / f"{name}.html").read_text(encoding="utf-8")
        assert html.escape(FLAG_PREFIX) in page
        assert ("data-withheld" in page) == (not earns)
        gs = json.loads((out / "gradescope" / name / "results.json").read_text(encoding="utf-8"))
        assert gs["extra_data"]["reference"] == [eid] and FLAG_PREFIX in gs["extra_data"]["flags"][eid][0]
        instructor = [t for t in gs["tests"] if t["visibility"] == "hidden"]
        assert len(instructor) == 1 and FLAG_PREFIX in instructor[0]["output"] and instructor[0]["max_score"] == 0
        assert gs["score"] == pytest.approx(points if earns else 0.0)


def test_own_code_earns_its_points_without_a_flag(graded: dict[str, Any]) -> None:
    res, row = graded[False]["results"]["honest"], graded[False]["rows"]["honest"]
    er = res.exercises["02.slot_mapping"]
    assert er.score == registry.get("02.slot_mapping").points and er.reference == "" and not er.withheld
    assert row["reference"] == "" and FLAG_PREFIX not in row["flags"]


def test_an_unused_import_of_an_installed_native_package_just_works(graded: dict[str, Any]) -> None:
    er = graded[False]["results"]["unused_pandas"].exercises["02.slot_mapping"]
    assert er.error == "" and er.score == registry.get("02.slot_mapping").points, er


def test_an_import_that_cannot_load_names_its_module_and_no_path() -> None:
    from pagedlab.grading.extract import ExerciseCell, Extraction, _short, imported_modules

    e = ImportError(
        "/srv/grader/.venv/lib/python3.11/site-packages/pandas/_libs/pandas_parser.cpython-311-x86_64-linux-gnu.so: "
        "failed to map segment from shared object",
        name="pandas._libs.pandas_parser",
    )
    msg = _short(e, 400)
    assert "'pandas'" in msg and "remove the import" in msg and "/srv" not in msg and "…/pandas_parser" in msg, msg
    assert "/home" not in _short(OSError("cannot open /home/me/x/data.bin: no such file"))
    assert "No module named 'nope'" in _short(ModuleNotFoundError("No module named 'nope'", name="nope"))
    ext = Extraction(
        cells={
            "02.slot_mapping": ExerciseCell("02.slot_mapping", 1, "import pandas.io as p\nfrom . import x\n", "marker")
        },
        other_cells=[
            (0, "%matplotlib inline\nfrom numpy import linalg\nimport os, json\ndef f():\n    import scipy\n")
        ],
    )
    assert imported_modules(ext) == ["json", "numpy", "os", "pandas"]


def test_the_instructor_option_reaches_grade(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``pagedlab grade --reference-earns-points no`` (default yes) and the Gradescope bundle's config."""
    import argparse

    from pagedlab.grading import grade as grade_module
    from pagedlab.grading.gradescope import CONFIG_NAME, build_bundle

    parser = argparse.ArgumentParser()
    grade_module.add_arguments(parser)
    seen: list[bool] = []
    monkeypatch.setattr(grade_module, "grade", lambda *a, **kw: seen.append(kw["reference_earns_points"]))
    for argv, expected in ((["x.ipynb"], True), (["x.ipynb", "--reference-earns-points", "no"], False)):
        (tmp_path / "x.ipynb").write_text("{}")
        monkeypatch.chdir(tmp_path)
        assert grade_module.main(parser.parse_args(argv)) == 0
        assert seen.pop() is expected
    import zipfile

    for earns in (True, False):
        with zipfile.ZipFile(build_bundle(tmp_path / f"{earns}.zip", exercises=IDS, reference_earns_points=earns)) as z:
            assert json.loads(z.read(CONFIG_NAME))["reference_earns_points"] is earns
