"""pytest plugin for the nbval run over the solution notebooks: record each notebook's run time.

nbval turns every cell into a test item; this sums their setup/call/teardown durations per
notebook (the kernel start is counted in the first cell's setup) and writes
``tests/artifacts/notebook_times.json``::

    {"budget_s": 60, "notebooks": {"00_welcome.ipynb": {"seconds": 31.2, "cells": 9, "failed": 0,
                                   "over_budget": false, "slowest_cells": {"Cell 3": 17.0, ...},
                                   "measured_at": "..."}}}

Entries of notebooks not run in this session are kept, so a partial run updates the file.
A notebook over the budget is reported in the terminal summary (it does not fail the run:
timing on a shared machine is noisy; the number is evidence for the reviewers).

The labs' timing notes do fail it: a cell whose metadata carries ``"pagedlab": {"up_to_s": N}`` (the "up to N s"
its lab's prose tells the learner) fails when its run takes over N s or, on CI (``CI=true``), under N / 4
(``pagedlab.course.timing_notes``), its message naming both figures. The measured figures go to the same file,
under each notebook's ``"timing_notes"``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pagedlab.course import timing_notes

BUDGET_S = float(os.environ.get("PAGEDLAB_NOTEBOOK_BUDGET_S", "60"))
_OUT = Path(__file__).resolve().parents[1] / "tests" / "artifacts" / "notebook_times.json"
_times: dict = {}
#: notebook -> cell id -> {"up_to_s", "measured_s", "ok"}, for the noted cells that ran
_notes: dict[str, dict] = {}


def _notebook_of(nodeid: str) -> str | None:
    path = nodeid.split("::", 1)[0]
    return Path(path).name if path.endswith(".ipynb") else None


def pytest_runtest_logreport(report):
    nb = _notebook_of(report.nodeid)
    if nb is None:
        return
    for key, value in report.user_properties:
        if key == "timing_note":
            cell_id, entry = value
            _notes.setdefault(nb, {})[cell_id] = entry
    entry = _times.setdefault(nb, {"seconds": 0.0, "cells": 0, "failed": 0, "start": time.time(), "per_cell": {}})
    dur = float(getattr(report, "duration", 0.0) or 0.0)
    entry["seconds"] += dur
    cell = report.nodeid.split("::", 1)[1] if "::" in report.nodeid else report.nodeid
    entry["per_cell"][cell] = entry["per_cell"].get(cell, 0.0) + dur
    if report.when == "call":
        entry["cells"] += 1
    if report.failed:
        entry["failed"] += 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A noted cell whose run passed but does not fit its note fails, its message naming both figures."""
    outcome = yield
    cell = getattr(item, "cell", None)  # nbval's IPyNbCell
    claimed = cell.get("metadata", {}).get("pagedlab", {}).get(timing_notes.KEY) if cell is not None else None
    report = outcome.get_result()
    if claimed is None or call.when != "call" or not report.passed:
        return
    problem = timing_notes.check(claimed, call.duration, too_loose=os.environ.get("CI") == "true")
    cell_id = cell.get("id", item.name)
    entry = {"up_to_s": claimed, "measured_s": round(call.duration, 1), "ok": problem is None}
    # carried by the report (pytest-xdist sends it to the controller, which writes the file)
    report.user_properties.append(("timing_note", (cell_id, entry)))
    if problem:
        report.outcome = "failed"
        report.longrepr = (
            f"TIMING NOTE WRONG: cell {cell_id} {problem}: the lab's prose says 'up to {claimed} s' "
            f"(its metadata's pagedlab.{timing_notes.KEY}); change both, or the cell"
        )


def pytest_sessionfinish(session, exitstatus):
    if not _times or hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller writes it
        return
    try:
        data = json.loads(_OUT.read_text()) if _OUT.exists() else {}
    except ValueError:
        data = {}
    notebooks = data.get("notebooks", {})
    for nb, e in _times.items():
        notebooks[nb] = {
            "seconds": round(e["seconds"], 1),
            "cells": e["cells"],
            "failed": e["failed"],
            "over_budget": e["seconds"] > BUDGET_S,
            "slowest_cells": {k: round(v, 1) for k, v in sorted(e["per_cell"].items(), key=lambda kv: -kv[1])[:3]},
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(e["start"])),
            "timing_notes": _notes.get(nb, {}),
        }
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    _OUT.write_text(json.dumps({"budget_s": BUDGET_S, "notebooks": dict(sorted(notebooks.items()))}, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter):
    if not _times:
        return
    terminalreporter.write_sep("-", f"notebook run times (budget {BUDGET_S:.0f} s; {_OUT.name})")
    for nb, e in sorted(_times.items()):
        flag = "  OVER BUDGET" if e["seconds"] > BUDGET_S else ""
        terminalreporter.write_line(f"{nb:<40} {e['seconds']:6.1f} s  {e['cells']} cells{flag}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The labs' "On real vLLM" cells take their not-installed branch in this run (``PAGEDLAB_LAB_VLLM=off``,
    ``pagedlab.twin.labs``): ``tests/twin/test_lab_cells.py`` runs every lab's workload on real vLLM in one
    vLLM start, where each notebook would start its own. The kernel nbval starts inherits it; set
    ``PAGEDLAB_LAB_VLLM=on`` to run the cells on vLLM here too."""
    if _notebook_of(item.nodeid) is None:
        yield
        return
    before = os.environ.get("PAGEDLAB_LAB_VLLM")
    os.environ.setdefault("PAGEDLAB_LAB_VLLM", "off")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PAGEDLAB_LAB_VLLM", None)
