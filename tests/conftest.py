"""Suite-wide settings: the scheduler checks its postconditions after every step in tests."""

import os

import torch

os.environ.setdefault("PAGEDLAB_CHECK_INVARIANTS", "1")
# How this process runs Triton is decided when triton is first imported (pagedlab.kernels.runtime): on a machine
# without a GPU, interpreted, whichever test module imports it first (at collection, or through torch._dynamo).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


# --- one marker per lab: `pytest -m lab06` (declared in pyproject.toml) -------------------------------
import re  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

#: Test files (or folders, ending in "/") that belong to a lab as a whole, relative to the repository.
LAB_PATHS: dict[str, tuple[str, ...]] = {
    "tests/analysis/test_lab02.py": ("lab02",),
    "tests/analysis/test_lab03.py": ("lab03",),
    "tests/analysis/test_lab04.py": ("lab04",),
    "tests/analysis/test_contiguous_sharing.py": ("lab01", "lab03"),
    "tests/core/test_block_pool.py": ("lab02",),
    "tests/core/test_fork_swap.py": ("lab03", "lab06"),
    "tests/core/test_hashing.py": ("lab07",),
    "tests/core/test_prefix_cache.py": ("lab07",),
    "tests/core/test_radix_cache.py": ("lab07",),
    "tests/sched/": ("lab04", "lab05", "lab06"),
    "tests/kernels/": ("lab08",),
    "tests/engine/": ("lab09",),
    "tests/compat/": ("lab09",),
}
#: Words in a test's id that say which lab's part it exercises (a slot name, an exercise's topic).
LAB_KEYWORDS: dict[str, tuple[str, ...]] = {
    "lab01": ("fragmentation", "contiguous"),
    "lab02": ("free_queue", "slot_mapping", "block_pool"),
    "lab03": ("fork_cow", "copy_on_write", "append_token"),
    "lab04": ("schedule_step", "continuous_batching"),
    "lab05": ("budget", "chunk"),
    "lab06": ("preempt", "pick_victim", "swap"),
    "lab07": ("prefix", "radix", "match_prefix"),
    "lab08": ("tile_load", "triton"),
    "lab09": ("capstone", "my_engine"),
}
#: An exercise id in a test's id ("06.pick_victim") names its lab.
_EXERCISE_ID = re.compile(r"(?<![\d.])0(\d)\.[a-z]")


def lab_markers(rel_path: str, nodeid: str) -> set[str]:
    """The lab markers of the test ``nodeid`` in the file ``rel_path`` (relative to the repository)."""
    labs = {lab for path, lab_names in LAB_PATHS.items() if rel_path.startswith(path) for lab in lab_names}
    m = re.match(r"solutions/0(\d)_", rel_path)
    if m:
        labs.add(f"lab0{m.group(1)}")
    name = nodeid.lower()
    labs |= {lab for lab, words in LAB_KEYWORDS.items() if any(w in name for w in words)}
    labs |= {f"lab0{d}" for d in _EXERCISE_ID.findall(nodeid)}
    return labs - {"lab00"}


#: Folders whose tests one ``make test`` worker runs together (pytest-xdist): tests/twin/'s files share one
#: session fixture (a real vLLM run of SmolLM2), which two workers would each start.
SHARED_GROUPS: dict[str, str] = {"tests/twin/": "tests/twin"}


def xdist_group(rel_path: str) -> str:
    """The group of a test in ``rel_path``: its file (its module fixtures set up once; a notebook's cells run in
    order in one kernel), or its folder's in :data:`SHARED_GROUPS`. A ``make test`` worker takes a whole group."""
    return next((g for prefix, g in SHARED_GROUPS.items() if rel_path.startswith(prefix)), rel_path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scheduler for ``make test``: a worker takes a whole :func:`xdist_group`, the next one goes to
    whichever worker is free. (``--dist loadgroup``'s marks do not reach the scheduler under pytest 9.2, whose
    nodes no longer read the ``_nodeid`` pytest-xdist 3.8.0 rewrites; this is its ``loadfile`` with the twin
    folder as one scope.)"""
    from xdist.scheduler import LoadScopeScheduling  # lazy: pytest-xdist is imported only when its workers run

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid.split("::", 1)[0])

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        try:
            rel = item.path.relative_to(root).as_posix()
        except ValueError:
            continue
        for lab in sorted(lab_markers(rel, item.nodeid)):
            item.add_marker(getattr(pytest.mark, lab))
    # the course site's browser test last: `make test` builds the site in the background meanwhile
    items.sort(key=lambda item: item.path.name == "test_site_browser.py")


# --- CI's wall-clock budget -----------------------------------------------------------------------------
# CI stops a run at 90 minutes and then lands nothing. `.ci/run` exports PAGEDLAB_CI_DEADLINE (epoch
# seconds, a few minutes before that limit); a test that would start after it is skipped with the reason,
# and the summary names every test not run, so a run that needed it says so loudly instead of dying.
_DEADLINE_SKIPPED: list[str] = []


def _ci_deadline() -> float | None:
    raw = os.environ.get("PAGEDLAB_CI_DEADLINE", "").strip()
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    import time

    deadline = _ci_deadline()
    if deadline is not None and time.time() > deadline:
        _DEADLINE_SKIPPED.append(item.nodeid)
        pytest.skip("CI time budget spent (PAGEDLAB_CI_DEADLINE): not run so that the rest of the run can land")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _DEADLINE_SKIPPED:
        terminalreporter.write_line(
            f"CI TIME BUDGET SPENT: {len(_DEADLINE_SKIPPED)} test(s) NOT RUN, first {_DEADLINE_SKIPPED[0]}",
            red=True,
            bold=True,
        )


@pytest.fixture(scope="session")
def kit_wheel(tmp_path_factory: pytest.TempPathFactory):
    """The kit's wheel, built once per session from a clean copy of this checkout (tests/_kitwheel.py)."""
    from tests._kitwheel import build_wheel

    return build_wheel(tmp_path_factory.mktemp("kit-wheel"))
