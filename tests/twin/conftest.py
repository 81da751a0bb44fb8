"""Differential tests against real vLLM: one loud skip without it, a failure under CI.

Where vLLM (``make vllm``) is not installed, every test in tests/twin/ but one is deselected and that
one is skipped with the reason (how many tests did not run, and how to install vLLM); the terminal
summary repeats it. Under ``CI=true`` a missing vLLM fails those tests instead: CI installs it
(``.ci/run`` runs ``make vllm``), so a skip there would hide a broken install.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

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


# --- one SmolLM2 LLM per side for the whole session (issue 35's API cases and the output-processing fuzz) ------

#: vLLM's side: one ``LLM`` with ``api_cases.ENGINE`` answers ``api_cases.run_cases``, runs ``api_cases.SCRIPT``,
#: then plays the output fuzz's calls (``output_cases.play``) and its bad calls (``output_cases.refuse``), in
#: that order; the kit's ``smollm_kit_llm`` makes the same calls in the same order.
SMOLLM_PROBE = r"""
import contextlib, importlib.util, io, json, os, runpy, sys, tempfile, time
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
cases, output = load("api_cases", sys.argv[2]), load("output_cases", sys.argv[3])
job = json.load(open(sys.argv[4]))
import psutil, vllm
from vllm import LLM, SamplingParams
from vllm.exceptions import VLLMValidationError
mem = psutil.virtual_memory()
t0 = time.perf_counter()
llm = LLM(model=sys.argv[1], enforce_eager=True, disable_log_stats=True,
          gpu_memory_utilization=min(6 * 2**30, 0.8 * mem.available) / mem.total, **cases.ENGINE)
facts = {"vllm_version": vllm.__version__, "seconds": {"start": time.perf_counter() - t0}}
facts["num_gpu_blocks"] = llm.llm_engine.vllm_config.cache_config.num_gpu_blocks
sched = llm.llm_engine.engine_core.engine_core.scheduler
facts["num_free_blocks"] = sched.kv_cache_manager.block_pool.get_num_free_blocks()
t0 = time.perf_counter()
facts["cases"] = cases.run_cases(llm, SamplingParams, VLLMValidationError)
with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    f.write(cases.SCRIPT)
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    runpy.run_path(f.name, run_name="__main__")
facts["script"] = buf.getvalue()
facts["seconds"]["cases"] = time.perf_counter() - t0
t0 = time.perf_counter()
facts["played"] = output.play(llm, SamplingParams, job["calls"])
facts["seconds"]["played"] = time.perf_counter() - t0
t0 = time.perf_counter()
facts["refused"] = output.refuse(llm, SamplingParams, VLLMValidationError, job["bad_calls"])
facts["seconds"]["refused"] = time.perf_counter() - t0
print("FACTS" + json.dumps(facts))
"""


def smollm_job() -> dict[str, Any]:
    """The output fuzz's calls (``tests/twin/test_output_fuzz.py`` draws them; the same on every run)."""
    from tests.twin.test_output_fuzz import BAD_CALLS, CALLS

    return {"calls": CALLS, "bad_calls": BAD_CALLS}


@pytest.fixture(scope="session")
def smollm_vllm_facts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Everything real vLLM 0.32.0 answered in one process (one SmolLM2 ``LLM``): see ``SMOLLM_PROBE``."""
    from pagedlab.twin.hf_model import hf_model_dir
    from pagedlab.vllm_env import vllm_env
    from pagedlab.vllm_version import VLLM_VERSION, vllm_python
    from tests.twin import api_cases, output_cases

    tmp = tmp_path_factory.mktemp("vllm")
    job = tmp / "job.json"
    job.write_text(json.dumps(smollm_job()))
    env = vllm_env()  # the shared-machine settings (pagedlab.vllm_env); the engine core in this process
    args = [str(hf_model_dir()), api_cases.__file__, output_cases.__file__, str(job)]
    done = subprocess.run(
        [str(vllm_python()), "-I", "-c", SMOLLM_PROBE, *args],
        capture_output=True,
        text=True,
        timeout=1500,
        env=env,
        cwd=tmp,
    )
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("FACTS")]
    assert done.returncode == 0 and line, (done.stdout + done.stderr)[-4000:]
    facts: dict[str, Any] = json.loads(line[0][len("FACTS") :])
    assert facts["vllm_version"] == VLLM_VERSION
    Path(tmp / "facts.json").write_text(json.dumps(facts))
    return facts


@pytest.fixture(scope="session")
def smollm_kit_llm() -> Any:
    from pagedlab import LLM
    from tests.twin import api_cases

    return LLM(**api_cases.ENGINE)


@pytest.fixture(scope="session")
def smollm_kit_facts(smollm_kit_llm: Any) -> dict[str, Any]:
    """The kit's answers to ``api_cases.run_cases``: made first, as on vLLM's side."""
    from pagedlab import SamplingParams
    from pagedlab.exceptions import VLLMValidationError
    from tests.twin import api_cases

    return api_cases.run_cases(smollm_kit_llm, SamplingParams, VLLMValidationError)
