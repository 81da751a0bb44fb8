"""Differential tests against real vLLM: one loud skip without it, a failure under CI.

Where vLLM (``make vllm``) is not installed, every test in tests/twin/ but one is deselected and that
one is skipped with the reason (how many tests did not run, and how to install vLLM); the terminal
summary repeats it. Under ``CI=true`` a missing vLLM fails those tests instead: CI installs it
(``.ci/run`` runs ``make vllm``), so a skip there would hide a broken install.
"""

from __future__ import annotations

import os

import pytest

from pagedlab.twin import vllm_status

_HERE = os.path.dirname(__file__)
_STATE: dict[str, str] = {}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    twin = [it for it in items if str(it.path).startswith(_HERE + os.sep)]
    if not twin:
        return
    ok, why = vllm_status()
    if ok:
        return
    if _in_ci():
        for it in twin:
            it.add_marker(pytest.mark.vllm_required(why))
        _STATE["fail"] = why
        return
    keep, drop = twin[0], twin[1:]
    reason = f"real vLLM not installed, {len(twin)} differential tests not run: {why}"
    keep.add_marker(pytest.mark.skip(reason=reason))
    _STATE["skip"] = reason
    if drop:
        config.hook.pytest_deselected(items=drop)
        dropped = {id(it) for it in drop}
        items[:] = [it for it in items if id(it) not in dropped]


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("vllm_required")
    if marker is not None:
        pytest.fail(f"CI=true but real vLLM is not usable ({marker.args[0]}); CI must run `make vllm` first")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if "skip" in _STATE:
        terminalreporter.write_line(f"tests/twin SKIPPED: {_STATE['skip']}", yellow=True, bold=True)
    if "fail" in _STATE:
        terminalreporter.write_line(f"tests/twin FAILED: vLLM missing under CI: {_STATE['fail']}", red=True, bold=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "vllm_required(why): real vLLM is missing under CI (fails the test)")
